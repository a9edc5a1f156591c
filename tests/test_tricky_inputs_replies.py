"""tests/data/tricky_inputs.yaml, sections ``replies`` and ``numbers`` (issue 13 items 4-6, issue 12 item 4): every
reply through the answer pipeline, then EVERY matcher of every built-in track and every judge prompt (the row
judge's, those the built-in tracks register, e.g. LaRA's, and the needles failure judge's); every text through the
one number reader. Expected values are worked out by hand in the data file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ctxbench.scoring.judge import judge_messages
from ctxbench.scoring.numbers import read_numbers
from ctxbench.scoring.judge_base import fenced_candidate
from ctxbench.scoring.pipeline import answer_chain, score_reply
from ctxbench.scoring.registry import answer_filters, judge_prompt, judge_prompt_names, judge_prompt_track, matchers_for
from ctxbench.core.track import BUILTIN, tracks
from ctxbench.tracks.needles.analysis import judge_failure_messages

DATA = yaml.safe_load((Path(__file__).parent / "data" / "tricky_inputs.yaml").read_text(encoding="utf-8"))
REPLIES = DATA["replies"]
NUMBERS = DATA["numbers"]
# every matcher of every built-in track (a track registered by another test's plugin is not built in)
MATCHERS = [(t.name, m) for t in tracks() if type(t).__module__ in BUILTIN for m in matchers_for(t.name)]
BUILTIN_NAMES = {t.name for t in tracks() if type(t).__module__ in BUILTIN}
CHAT_TOKEN_MARKS = ("<|", "|>", "</s>", "<think", "</think", "<end_of_turn>", "｜>", "◁think")


def test_sections_are_filled_and_cover_every_matcher():
    assert len(REPLIES) >= 100 and len(NUMBERS) >= 100
    assert {b for b, _ in MATCHERS} == {"holobench", "scitrek", "needles", "lara"} and len(MATCHERS) == 7
    for e in REPLIES:
        assert {"reply", "gold", "answer", "scores"} <= set(e), e
        # every matcher has an expected score (its own key, its track's, or `all`)
        assert all(_expected(e, b, m) is not None for b, m in MATCHERS), e


def _expected(e: dict, bench: str, name: str) -> float | None:
    s = e["scores"]
    for key in (f"{bench}/{name}", bench, "all"):
        if key in s:
            return float(s[key])
    return None


def _instance(e: dict, bench: str) -> dict:
    g = e["gold"]
    gold = g if isinstance(g, list) and g and isinstance(g[0], list) else [[g]]
    return {"instance_id": "x", "benchmark": bench, "gold": gold, "question": e.get("question", "How many?"),
            "sql": e.get("sql", "SELECT x FROM t"), "skill": e.get("skill", "location"),
            "accepted_answers": e.get("accepted"), "needle_id": None, "variant": "real"}


def _id(e: dict) -> str:
    return repr(e["reply"])[:60] + f" | gold={e['gold']!r}"[:30]


@pytest.mark.parametrize("e", REPLIES, ids=[_id(e) for e in REPLIES])
def test_reply_through_the_pipeline_and_every_matcher(e):
    chain = answer_chain()
    assert chain(e["reply"], e.get("reasoning")) == e["answer"]
    got, want = {}, {}
    for bench, name in MATCHERS:
        (sc,) = score_reply(e["reply"], _instance(e, bench), e.get("reasoning"), names=[name])
        # what is stored is exactly what was scored; tracks whose papers score the whole reply (needles, LaRA:
        # `-last_statement`) keep a reply without a final-answer marker whole (`answer_whole` where it differs)
        whole = "-last_statement" in answer_filters(bench)
        assert sc.answer == (e.get("answer_whole", e["answer"]) if whole else e["answer"])
        got[f"{bench}/{name}"] = round(sc.result.score, 6)
        want[f"{bench}/{name}"] = round(_expected(e, bench, name), 6)
        assert 0.0 <= sc.result.score <= 1.0
        if not sc.answer:
            assert sc.result.score == 0.0 and set(sc.result.tags) <= {"null_answer", "cut_off"}
    assert got == want


@pytest.mark.parametrize("e", REPLIES, ids=[_id(e) for e in REPLIES])
def test_judge_prompts_see_the_answer_and_no_draft(e):
    answer = answer_chain()(e["reply"], e.get("reasoning"))
    gold = _instance(e, "holobench")["gold"]
    prompts = [judge_messages("How many?", gold, answer)[-1]["content"],
               judge_failure_messages("How many?", _instance(e, "needles"), {}, answer)[-1]["content"]]
    # every registered judge prompt (the row judge again, LaRA's), on an instance of the track that registers it
    prompts += [judge_prompt(n).messages(_instance(e, judge_prompt_track(n) or "holobench"), answer)[-1]["content"]
                for n in judge_prompt_names() if n == "rows" or judge_prompt_track(n) in BUILTIN_NAMES]
    for p in prompts:
        graded = fenced_candidate(p)                  # every judge prompt fences the answer as data (issue 30)
        assert graded == answer
        for draft in e.get("draft") or []:
            assert draft not in p, (draft, p)
        if e["reply"] != answer:
            assert not any(t in graded for t in CHAT_TOKEN_MARKS), graded


@pytest.mark.parametrize("e", NUMBERS, ids=[repr(e["text"]) for e in NUMBERS])
def test_number_reading(e):
    nums = read_numbers(e["text"], chinese=bool(e.get("chinese")), english=bool(e.get("english")))
    assert [n.value for n in nums] == [float(v) for v in e["numbers"]]
    if "percent" in e:
        assert [n.percent for n in nums] == e["percent"]
    for n in nums:   # offsets are characters of the text given
        assert 0 <= n.start < n.end <= len(e["text"])
