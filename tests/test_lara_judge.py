"""LaRA's own judging prompt (issue 15 item 4; LaRA section 3.4 and appendix C) registered as judge prompt ``lara``
beside the row judge: prompts by task type, verdicts read from the judge's reply, the repair prompt, unscored
verdicts, matcher names, κ of both judges and the fallback matchers against human labels, and the judge-prompt
registry a track adds to.

The LaRA build is imported from a small hand-made LaRA directory (one query file per task type); the responses are
written by hand (reasoning drafts included) and the judges answer from tests/fakeserver.py with scripted replies:
what a judge following each prompt would say about each answer. Every verdict and score below is worked out by
hand from those replies; the fallback matchers' scores from the reference and answer tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.analysis.agreement import judge_agreement
from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.run.score import score_build
from ctxbench.scoring.judge_base import CANDIDATE_IS_DATA
from ctxbench.scoring.judge import (
    JUDGE_SYSTEM,
    JudgePrompt,
    is_judge_matcher,
    judge_matcher,
    parse_judge_matcher,
)
from ctxbench.scoring.registry import judge_prompt, judge_prompt_names, judge_prompt_track
from ctxbench.core.storage import to_table, write_parquet
from ctxbench.core.track import Stage, Track, check_track, get_track
from ctxbench.tracks.lara import import_lara
from ctxbench.tracks.lara.judge import GENERAL, HALLUCINATION, SYSTEM, read_verdict
from fakeserver import FakeOpenAIServer, message_text

JUDGE = "openai/judge"
LARA = judge_matcher("lara", JUDGE)

# key: (query file, question, reference answer, the model's reply, its extracted answer, the LaRA judge's reply
#       (a list: first reply, reply to the repair prompt), the row judge's verdict, human label)
CASES = {
    # LaRA section 2.2's example: clearly correct, yet token F1 only 0.29
    "L1": ("32k_book_location", "Who was convicted of murdering Kiran's younger brother?", "Allyson Kalia",
           "<think>Perhaps it was the cousin.</think>Allyson Kalia is convicted of the murder of Kiran's younger "
           "brother, Rosetta.",
           "Allyson Kalia is convicted of the murder of Kiran's younger brother, Rosetta.",
           ["True"], "exact", "correct"),
    "L2": ("32k_financial_location", "What was the company's net loss in 2023?", "$2,576,340.",
           "Answer: $2,576,000", "$2,576,000", ["False."], "none", "incorrect"),
    "R1": ("32k_financial_reasoning", "By how much did total revenue grow from 2022 to 2023?", "$1.2 million",
           "Revenue grew by about 1.2 million dollars.", "Revenue grew by about 1.2 million dollars.",
           ["**True**"], "partial", "correct"),
    # a reasoning judge: its draft mentions "True", its verdict is False
    "R2": ("32k_book_reasoning", "Why did Mary leave the village?", "To look for her missing father.",
           "<think>She loved the baker.</think>\nAnswer: She wanted to marry the baker.",
           "She wanted to marry the baker.",
           ["<think>The ground truth says she left to find her father; True would be wrong.</think>\nFalse"],
           "none", "incorrect"),
    "C1": ("32k_paper_comp", "Which of the two papers reports the higher BLEU score on WMT14 English-German?",
           "The second paper (41.0 against 38.2).", "The second paper, with 41.0 BLEU.",
           "The second paper, with 41.0 BLEU.", ["Yes"], "exact", "correct"),
    # no verdict at first; the repair prompt gets one
    "C2": ("32k_paper_comp", "Which of the two papers uses more training data?", "The first paper.",
           "The second paper.", "The second paper.", ["The AI assistant named the other paper.", "False"],
           "none", "incorrect"),
    "H1": ("32k_book_hallu", "What was the name of Mary's horse?",
           "The name of Mary's horse is not mentioned in the provided context.",
           "The text does not mention the horse's name.", "The text does not mention the horse's name.",
           ["Verdict: True"], "exact", "correct"),
    # never a verdict, also after the repair prompt: counted, not scored
    "H2": ("32k_financial_hallu", "How many employees did the company have in Brazil?",
           "The number of employees in Brazil is not mentioned in the provided context.",
           "The company had 412 employees in Brazil.", "The company had 412 employees in Brazil.",
           ["I cannot tell without the document.", "I cannot tell without the document."], "none", "incorrect"),
    # cut inside its reasoning: no answer, so no judge call; 0 with null_answer for both judges
    "E": ("32k_book_location", "What colour was the carriage?", "Green",
          "<think>The carriage was described as", "", [], "none", "incorrect"),
}
SKILL = {"location": "location", "reasoning": "reasoning", "comp": "comparison", "hallu": "hallucination"}
CORPUS = {"book": "novel.txt", "financial": "statement.txt", "paper": "papers.md"}
DRAFTS = ["Perhaps it was the cousin", "She loved the baker", "The carriage was described"]

# hand-worked: the LaRA judge's score (None: unscored) and the row judge's, per case
LARA_SCORE = {"L1": 1.0, "L2": 0.0, "R1": 1.0, "R2": 0.0, "C1": 1.0, "C2": 0.0, "H1": 1.0, "H2": None, "E": 0.0}
ROW_SCORE = {"L1": 1.0, "L2": 0.0, "R1": 0.5, "R2": 0.0, "C1": 1.0, "C2": 0.0, "H1": 1.0, "H2": 0.0, "E": 0.0}


def _lara_dir(d: Path) -> Path:
    """A LaRA dataset directory holding the questions of CASES (one corpus file per context type)."""
    for ctype, name in CORPUS.items():
        (d / "corpora" / "32k" / ctype).mkdir(parents=True)
        (d / "corpora" / "32k" / ctype / name).write_text(f"A {ctype} text of a few sentences. " * 20,
                                                          encoding="utf-8")
    (d / "queries").mkdir()
    lines: dict[str, list[str]] = {}
    for qfile, q, ref, *_ in CASES.values():
        ctype = qfile.split("_")[1]
        lines.setdefault(qfile, []).append(json.dumps({"file": CORPUS[ctype], "question": q, "answer": ref}))
    for qfile, ls in lines.items():
        (d / "queries" / f"{qfile}.jsonl").write_text("\n".join(ls) + "\n", encoding="utf-8")
    return d


def _build(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The imported build with one hand-written response per case; returns (build, case → instance id)."""
    out = tmp_path / "build"
    import_lara(_lara_dir(tmp_path / "lara"), out)
    inst = pq.read_table(out / "instances.parquet", columns=["instance_id", "question", "skill"]).to_pylist()
    by_q = {i["question"]: i for i in inst}
    ids = {}
    rows = []
    for n, (case, (qfile, q, *_rest)) in enumerate(CASES.items()):
        i = by_q[q]
        assert i["skill"] == SKILL[qfile.split("_")[2]]
        ids[case] = i["instance_id"]
        rows.append({"request_key": f"k{n}", "instance_id": i["instance_id"], "model": "m", "mode": "lc",
                     "sample": 0, "prompt_variant": "cot", "response": CASES[case][3], "cached": False,
                     "status": "ok", "retries": 0})
    write_parquet(to_table("responses", rows), out / "responses.parquet")
    return out, ids


def _case_of(user: str) -> str:
    return next(c for c, v in CASES.items() if f"\n{v[1]}\n" in user or f"Question: {v[1]}\n" in user)


def _judges(body: dict) -> str:
    """The fake judges: the LaRA judge replies CASES' scripted replies (the second one to the repair prompt), the
    row judge its JSON verdict."""
    msgs = body["messages"]
    user = message_text(msgs[1]["content"])
    case = _case_of(user)
    if msgs[0]["content"] == JUDGE_SYSTEM:
        return json.dumps({"verdicts": [CASES[case][6]]})
    assert msgs[0]["content"] == SYSTEM, msgs[0]
    replies = CASES[case][5]
    return replies[0] if len(msgs) == 2 else replies[-1]


def _lara_calls(srv) -> list[dict]:
    return [b for b in srv.requests if b["messages"][0]["content"] == SYSTEM]


@pytest.fixture
def scored(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    build, ids = _build(tmp_path)
    with FakeOpenAIServer(answer_fn=_judges) as srv:
        s = score_build(build, judge=JUDGE, judge_base_url=srv.base_url, judge_prompts=["rows", "lara"])
        yield build, ids, s, srv


def test_the_lara_judge_scores_by_task_type(scored):
    build, ids, s, srv = scored
    rows = pq.read_table(build / "scores.parquet").to_pylist()
    case_of = {v: k for k, v in ids.items()}
    lara = {case_of[r["instance_id"]]: r for r in rows if r["matcher"] == LARA}
    assert {c: r["score"] for c, r in lara.items()} == {c: v for c, v in LARA_SCORE.items() if v is not None}
    assert {case_of[r["instance_id"]]: r["score"] for r in rows if r["matcher"] == f"judge:{JUDGE}"} == ROW_SCORE
    # the verdict and whether it came from the repair prompt are stored; the empty answer is null_answer
    assert {c: json.loads(r["detail"]) for c, r in lara.items() if c in ("L1", "C2", "E")} == {
        "L1": {"verdict": "correct", "repaired": False}, "C2": {"verdict": "incorrect", "repaired": True},
        "E": {"verdict": None, "repaired": False}}
    assert json.loads(lara["E"]["tags"]) == ["null_answer"]
    assert all(r["extracted_answer"] == CASES[c][4] for c, r in lara.items())
    # 8 answers judged by each prompt (E has none); LaRA: C2 repaired, H2 unreadable after the repair prompt
    assert s.judges == {f"judge:{JUDGE}": {"judged": 8, "unparseable_verdicts": 0, "repaired_verdicts": 0,
                                           "judge_failed": 0},
                        LARA: {"judged": 8, "unparseable_verdicts": 1, "repaired_verdicts": 1, "judge_failed": 0}}
    assert (s.judged, s.unparseable_verdicts, s.repaired_verdicts) == (16, 1, 1)
    un = pq.read_table(build / "judge_unscored.parquet").to_pylist()
    assert [(case_of[r["instance_id"]], r["matcher"], r["judge"], r["reason"], r["reply"]) for r in un] == [
        ("H2", LARA, JUDGE, "unparseable verdict", "I cannot tell without the document.")]


def test_the_prompt_follows_the_task_type_and_holds_only_the_extracted_answer(scored):
    _, _, _, srv = scored
    calls = _lara_calls(srv)
    firsts = [b for b in calls if len(b["messages"]) == 2]
    assert sorted(_case_of(message_text(b["messages"][1]["content"])) for b in firsts) == \
        ["C1", "C2", "H1", "H2", "L1", "L2", "R1", "R2"]
    for b in firsts:
        user = message_text(b["messages"][1]["content"])
        case = _case_of(user)
        _, q, ref, _, answer, *_ = CASES[case]
        task = HALLUCINATION if case.startswith("H") else GENERAL
        # the answer fenced as data (issue 30: a quoted verdict is never the judge's)
        assert user == (f"{task}\n\n[Question]\n{q}\n\n[Ground-truth answer]\n{ref}\n\n[AI assistant's answer]\n"
                        f"```candidate\n{answer}\n```\n{CANDIDATE_IS_DATA}\n\nYour judgment (True or False):")
        assert not any(d in user for d in DRAFTS) and "<think>" not in user
        assert b["temperature"] == 0.0 and "response_format" not in b
    # the hallucination prompt only for hallucination questions, and it asks about hallucinating
    assert "hallucinated" in HALLUCINATION and "hallucinat" not in GENERAL
    # the repair prompt follows the unreadable reply, once per case (C2, H2): 8 + 2 LaRA calls
    repairs = [b for b in calls if len(b["messages"]) == 4]
    assert len(calls) == 10 and sorted(_case_of(message_text(b["messages"][1]["content"])) for b in repairs) == \
        ["C2", "H2"]
    assert all(b["messages"][2]["role"] == "assistant" and "one word only" in b["messages"][3]["content"]
               for b in repairs)


def test_a_second_scoring_asks_no_judge_again(scored):
    build, _, s, srv = scored
    n = srv.count
    s2 = score_build(build, judge=JUDGE, judge_base_url=srv.base_url, judge_prompts=["rows", "lara"])
    assert srv.count == n and s2.rows == s.rows and s2.judges == s.judges
    # the default prompt alone: scores and unscored verdicts are rewritten whole, without the LaRA judge's
    s3 = score_build(build, judge=JUDGE, judge_base_url=srv.base_url)
    assert srv.count == n and list(s3.judges) == [f"judge:{JUDGE}"]
    assert LARA not in {r["matcher"] for r in pq.read_table(build / "scores.parquet").to_pylist()}
    assert not (build / "judge_unscored.parquet").exists()


def _labels(build: Path, ids: dict[str, str], path: Path) -> Path:
    resp = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
    path.write_text("".join(json.dumps({"instance_id": ids[c], "request_key": resp[ids[c]]["request_key"],
                                        "verdict": v[7]}) + "\n" for c, v in CASES.items()), encoding="utf-8")
    return path


def test_kappa_compares_both_judges_and_the_fallback_matchers(scored, tmp_path):
    build, ids, _, _ = scored
    labels = _labels(build, ids, tmp_path / "labels.jsonl")
    rows, counts = judge_agreement(build, labels)
    by = {r["matcher"]: r for r in rows}
    assert counts == {"labels": 9, "unmatched": 0}
    assert {m: by[m]["kind"] for m in by} == {f"judge:{JUDGE}": "judge", LARA: "judge", "lara_fallback": "fallback",
                                              "f1": "fallback", "containment": "fallback"}
    # human: correct L1 R1 C1 H1, incorrect L2 R2 C2 H2 E.
    # judge-lara (H2 unscored, 8 pairs): agrees everywhere: tp 4, tn 4, kappa 1
    assert (by[LARA]["n"], by[LARA]["tp"], by[LARA]["tn"], by[LARA]["fp"], by[LARA]["fn"]) == (8, 4, 4, 0, 0)
    assert by[LARA]["kappa"] == pytest.approx(1.0)
    # row judge at threshold 1: R1 is "partial" (0.5): tp 3, fn 1, tn 5; P_o = 8/9, P_e = (4*3 + 5*6)/81,
    # kappa = (72 - 42) / (81 - 42) = 10/13
    rj = by[f"judge:{JUDGE}"]
    assert (rj["n"], rj["tp"], rj["fn"], rj["fp"], rj["tn"]) == (9, 3, 1, 0, 5)
    assert rj["kappa"] == pytest.approx(10 / 13)
    # lara_fallback: containment of the reference's content tokens, refusal for hallucination:
    # L1 {allyson, kalia} 2/2 = 1; R1 {1.2, million} 2/2 = 1; H1 a refusal = 1; C1 {second, paper, 41, against,
    # 38.2} 3/5 = 0.6; the rest 0 -> the same table as the row judge's, 10/13
    fb = by["lara_fallback"]
    assert (fb["tp"], fb["fn"], fb["fp"], fb["tn"]) == (3, 1, 0, 5) and fb["kappa"] == pytest.approx(10 / 13)
    # containment: H1 "the name of mary's horse is not mentioned in the provided context" is not contained in
    # "the text does not mention the horse's name": tp 2 (L1, R1), fn 2, tn 5; P_e = (4*2 + 5*7)/81,
    # kappa = (63 - 43) / (81 - 43) = 10/19
    assert by["containment"]["kappa"] == pytest.approx(10 / 19)
    # token F1 is 1 for no answer (L1's: 2 of its 12 tokens, P = 1/6, R = 1, F1 = 2/7 = 0.29, as LaRA section 2.2
    # reports): P_o = P_e = 5/9, kappa 0
    assert by["f1"]["tp"] == 0 and by["f1"]["kappa"] == pytest.approx(0.0)
    r = CliRunner().invoke(app, ["kappa", "--build", str(build), "--labels", str(labels)])
    assert r.exit_code == 0, r.output
    assert LARA in r.output and "fallback" in r.output and "0.769" in r.output and "0.526" in r.output


def test_read_verdict():
    cases = {"True": True, "False.": False, "**TRUE**": True, "Yes": True, "no": False, "Correct": True,
             "Incorrect.": False, "Verdict: True": True, "Judgment: **False**": False,
             "The answer matches the ground truth. True": True, "The answer is not correct. False": False,
             "<think>It is True that Paris...</think>\nFalse": False, "False<|im_end|>": False,
             "not true": None, "True or False": None, "I am not sure.": None, "": None, None: None,
             "<think>True</think>": None}
    assert {k: read_verdict(k) for k in cases} == cases


def test_cli_judge_prompts(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    build, _ = _build(tmp_path)
    runner = CliRunner()
    with FakeOpenAIServer(answer_fn=_judges) as srv:
        r = runner.invoke(app, ["score", "--build", str(build), "--judge", JUDGE, "--judge-base-url",
                                srv.base_url, "--judge-prompt", "rows", "--judge-prompt", "lara"])
        assert r.exit_code == 0, r.output
        assert f"{LARA}: 8 judged, 1 unparseable" in " ".join(r.output.split())
        assert f"judge:{JUDGE}: 8 judged, 0 unparseable" in " ".join(r.output.split())
        r = runner.invoke(app, ["score", "--build", str(build), "--judge", JUDGE, "--judge-base-url",
                                srv.base_url, "--judge-prompt", "larra"])
        assert r.exit_code == 2 and "unknown judge prompt 'larra'" in r.output and "lara" in r.output
        r = runner.invoke(app, ["score", "--build", str(build), "--judge-prompt", "lara"])
        assert r.exit_code == 2 and "--judge MODEL" in r.output
    r = runner.invoke(app, ["tracks"])
    assert "judge prompts: lara" in r.output
    # LaRA's matchers only approximate its own judge: each is labelled a fallback
    assert "matchers: lara_fallback (fallback), f1 (fallback), containment (fallback)" in r.output
    assert "matchers: row_match (primary first)" in r.output


def test_a_track_prompt_judges_its_own_instances_only(tmp_path, monkeypatch):
    from test_evaluate import make_build

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = make_build(tmp_path / "hb", n=2)
    write_parquet(to_table("responses", [
        {"request_key": f"k{i}", "instance_id": f"inst-0{i}", "model": "m", "mode": "lc", "sample": 0,
         "prompt_variant": "cot", "response": "Answer: 1", "cached": False, "status": "ok", "retries": 0}
        for i in range(2)]), b / "responses.parquet")
    with pytest.raises(InputError, match=r"judge prompt 'lara' belongs to track lara .* instances of holobench"):
        score_build(b, judge=JUDGE, judge_base_url="http://127.0.0.1:9/v1", judge_prompts=["lara"])


# ---------------------------------------------------------------------------------------- the registry

class Strict(JudgePrompt):
    """A track's own prompt (test): correct only when the answer repeats the gold's first value exactly."""

    name = "strict"
    version = "1"

    def messages(self, instance, answer):
        return [{"role": "user", "content": f"STRICT gold={instance['gold'][0][0]} answer={answer}"}]

    def parse(self, reply, instance):
        return reply if reply in ("same", "different") else None

    def score(self, verdict, instance):
        return 1.0 if verdict == "same" else 0.0

    def repair(self, instance, reply):
        return "same or different?"


STRICT = Strict()


def test_a_track_adds_a_judge_prompt(tmp_path, monkeypatch):
    from test_evaluate import CODES, make_build

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    hb = type(get_track("holobench"))
    monkeypatch.setattr(hb, "judge_prompts", {"strict": f"{__name__}:STRICT"})
    assert judge_prompt_names() == ["rows", "lara", "strict"] and judge_prompt_track("strict") == "holobench"
    assert judge_prompt("strict") is STRICT and judge_prompt_track("rows") is None
    b = make_build(tmp_path / "hb", n=2)
    replies = {0: f"Answer: {CODES[0]}", 1: "Answer: 12"}
    write_parquet(to_table("responses", [
        {"request_key": f"k{i}", "instance_id": f"inst-0{i}", "model": "m", "mode": "lc", "sample": 0,
         "prompt_variant": "cot", "response": replies[i], "cached": False, "status": "ok", "retries": 0}
        for i in range(2)]), b / "responses.parquet")

    def judge(body):
        text = message_text(body["messages"][-1]["content"])
        gold, answer = text.removeprefix("STRICT gold=").split(" answer=")
        return "same" if gold == answer else "different"

    with FakeOpenAIServer(answer_fn=judge) as srv:
        s = score_build(b, judge=JUDGE, judge_base_url=srv.base_url, judge_prompts=["strict"])
    got = {r["instance_id"]: r["score"] for r in pq.read_table(b / "scores.parquet").to_pylist()
           if r["matcher"] == f"judge-strict:{JUDGE}"}
    assert got == {"inst-00": 1.0, "inst-01": 0.0} and list(s.judges) == [f"judge-strict:{JUDGE}"]
    # a prompt registered under a name that is not a lower-case identifier is refused when the track is checked
    monkeypatch.setattr(hb, "judge_prompts", {"Strict Judge": f"{__name__}:STRICT"})
    with pytest.raises(InputError, match="judge prompt name 'Strict Judge'"):
        check_track(get_track("holobench"))
    # a reference that is no JudgePrompt of that name
    monkeypatch.setattr(hb, "judge_prompts", {"strict": f"{__name__}:test_read_verdict"})
    with pytest.raises(InputError, match="is not a JudgePrompt named 'strict'"):
        judge_prompt("strict")


def test_judge_matcher_names():
    assert judge_matcher("rows", "gpt-4o") == "judge:gpt-4o" and judge_matcher("lara", "gpt-4o") == "judge-lara:gpt-4o"
    assert parse_judge_matcher("judge-lara:openai/gpt-4o") == ("lara", "openai/gpt-4o")
    assert parse_judge_matcher("judge:openai/gpt-4o") == ("rows", "openai/gpt-4o")
    assert not is_judge_matcher("lara_fallback") and not is_judge_matcher("judgement")
    assert is_judge_matcher("judge-lara:m") and is_judge_matcher("judge:m")


def test_track_declaration_check_of_judge_prompts():
    from pydantic import BaseModel

    class C(BaseModel):
        pass

    t = type("T", (Track,), {"name": "t_judge", "Config": C, "matchers": {"m": "a.b:c"},
                             "stages": (Stage("s", lambda: None),), "judge_prompts": {"mine": "no_colon"}})()
    with pytest.raises(InputError, match="not a 'module:function' reference"):
        check_track(t)
