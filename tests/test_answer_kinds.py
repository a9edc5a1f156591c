"""Issue 21 (answer pipeline and matcher kinds 1, 3, 4, 5, 6, 10, 11, 12) and issue 26 item 1 (step numbers,
enumerators, the last statement, degenerate repetition, ``scores.details``): every example of the issues with its
right value, worked out by hand, and other members of each kind, on every track's matchers and the judges."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxbench.run.score import score_build
from ctxbench.scoring.judge import judge_text, parse_verdicts
from ctxbench.scoring.lists import split_list
from ctxbench.scoring.numbers import number_matches, read_numbers
from ctxbench.scoring.extract import drop_ruled_out_values, last_statement
from ctxbench.scoring.filters import finish_kind
from ctxbench.scoring.pipeline import answer_chain, chain_for, score_reply
from ctxbench.scoring.strip import repetition_start
from ctxbench.core.storage import to_table, write_parquet
from ctxbench.tracks.lara.judge import LARA_JUDGE, read_verdict


def inst(bench: str, gold, **kw) -> dict:
    return {"instance_id": "i1", "benchmark": bench, "gold": gold, "question": kw.pop("question", "How many?"),
            "sql": kw.pop("sql", "SELECT x FROM t"), "skill": kw.pop("skill", "location"),
            "accepted_answers": kw.pop("accepted", None), "needle_id": None, "variant": "real", **kw}


def score(reply, bench, gold, matcher=None, **kw):
    """(score, tags, answer) of the track's primary matcher (or ``matcher``)."""
    fin, status, reasoning = kw.pop("finish_reason", None), kw.pop("status", "ok"), kw.pop("reasoning", None)
    (sc,) = score_reply(reply, inst(bench, gold, **kw), reasoning, names=[matcher] if matcher else None,
                        finish_reason=fin, status=status)[:1]
    return sc.result.score, sc.result.tags, sc.answer


ALL = [("holobench", "row_match"), ("scitrek", "exact_match"), ("scitrek", "f1"), ("needles", "substring"),
       ("lara", "lara_fallback"), ("lara", "f1"), ("lara", "containment")]


# -- kind 1: a reply the output budget ended earns nothing -----------------------------------------------------------

DARIUS = "Let me look at the ships. …The Darius II scored 96 points… but first I should check whether"


@pytest.mark.parametrize("finish", ["length", "max_tokens", "MAX_TOKENS", "max_output_tokens"])
def test_a_reply_cut_by_the_budget_earns_no_credit_from_values_it_quotes(finish):
    # the example scored row_match 1.0 for gold 96; every spelling of the budget's finish reason
    for bench, m in ALL:
        s, tags, ans = score(DARIUS, bench, [[96]], m, finish_reason=finish)
        assert (s, ans) == (0.0, "") and "cut_off" in tags, (bench, m)


def test_status_cut_off_earns_nothing_even_with_an_answer_line():
    for bench, m in ALL:
        s, tags, _ = score("Answer: 96", bench, [[96]], m, status="cut_off")
        assert s == 0.0 and tags == ["cut_off"], (bench, m)


def test_a_finished_answer_line_before_the_budget_ran_out_still_counts():
    reply = "The Darius II scored 96 points.\nAnswer: 96\nLet me double-check the other ships, starting with"
    assert score(reply, "holobench", [[96]], finish_reason="length")[:2] == (1.0, [])
    assert score("Answer: 96\n\nLet me double-check the", "holobench", [[96]], finish_reason="length")[0] == 1.0
    # the answer line itself was cut: no finished answer
    assert score("Thinking…\nAnswer: Toyota, Hon", "holobench", [["Toyota"]], finish_reason="length")[0] == 0.0
    # an answer block the budget closed is finished, one it did not close is not
    assert score("<answer>96</answer> and then", "holobench", [[96]], finish_reason="length")[0] == 1.0
    assert score("<answer>96 and", "holobench", [[96]], finish_reason="length")[0] == 0.0


def test_a_reply_stopped_in_mid_sentence_without_a_finish_reason_is_cut_off():
    # old builds store no finish reason: a reply without an answer line whose last word ends no sentence
    s, tags, _ = score(DARIUS, "holobench", [[96]])
    assert s == 0.0 and "cut_off" in tags
    # a model that ended its turn: the same text is its (unfinished-looking) answer, read as it is
    assert score("The Darius II scored 96 points.", "holobench", [[96]], finish_reason="stop")[0] == 1.0


def test_finish_kind_spellings():
    assert [finish_kind(f) for f in ("length", "LENGTH", "max_tokens", "MAX_TOKENS", "max_output_tokens", "stop",
                                     "end_turn", "STOP", "eos", "stop_sequence", None, "", "content_filter")] == \
        ["length"] * 5 + ["stop"] * 5 + [None] * 3


# -- kind 3: the answer only in the reasoning field ------------------------------------------------------------------

@pytest.mark.parametrize("content", [None, "", "  \n", "\u200b"])
def test_the_answer_is_taken_from_the_reasoning_field_when_content_is_empty(content):
    reasoning = "The table lists 17 flights to Oslo and 42 to Bergen.\nAnswer: 42"
    for bench, m in ALL[:4]:
        s, tags, ans = score(content, bench, [[42]], m, reasoning=reasoning, finish_reason="stop")
        assert (s, ans) == (1.0, "42") and "answer_from_reasoning" in tags, (bench, m)
    # Anthropic's end_turn and Gemini's STOP are finished replies too; the last statement rule applies
    s, tags, ans = score(content, "holobench", [[42]], reasoning="17 went to Oslo. So 42 flights went to Bergen.",
                         finish_reason="end_turn")
    assert (s, ans) == (1.0, "So 42 flights went to Bergen.") and "answer_from_reasoning" in tags


def test_reasoning_field_answer_needs_a_finished_reply():
    r = "17 went to Oslo. So 42 flights went to Bergen."
    # the budget ended the reasoning: no answer, cut off
    s, tags, _ = score(None, "holobench", [[42]], reasoning=r + " Now", finish_reason="length")
    assert s == 0.0 and "cut_off" in tags
    # finish reason unknown (an old build): only a reasoning that marks its final answer
    assert score(None, "holobench", [[42]], reasoning=r)[0] == 0.0
    assert score(None, "holobench", [[42]], reasoning=r + "\nAnswer: 42")[0] == 1.0


# -- kind 4: values the reply rules out ------------------------------------------------------------------------------

@pytest.mark.parametrize("reply,asserted,ruled_out", [
    ("Answer: 17 (not 42)", 17, 42),
    ("Answer: 17, not 42", 17, 42),
    ("Answer: 17 rather than 42", 17, 42),
    ("Answer: 17 instead of 42.", 17, 42),
    ("Answer: 17 as opposed to 42", 17, 42),
    ("Answer: 17 [but not 42]", 17, 42),
    ("The answer is 17 — not 42.", 17, 42),
    ("答案：六十（而非七十三）", 60, 73),
    ("答案：六十，不是七十三", 60, 73),
    ("答案：不是七十三，而是六十", 60, 73),
    ("答案：六十，并非七十三", 60, 73),
    ("答案：六十，而不是七十三。", 60, 73),
])
def test_a_value_ruled_out_never_earns_credit(reply, asserted, ruled_out):
    # Chinese numerals are read by the needles track (the others read Arabic numerals and number words)
    for bench, m in ALL[:4] if asserted != 60 else [("needles", "substring")]:
        assert score(reply, bench, [[ruled_out]], m)[0] == 0.0, (bench, m)
        assert score(reply, bench, [[asserted]], m)[0] == 1.0, (bench, m)


def test_text_after_the_final_answer_is_not_the_answer():
    for reply in ("Answer: 17\n\nThe table also lists 42 flights.", "Answer: 17\nExplanation: 42 were cancelled.",
                  "Answer: 17. Not 42.", "**Answer:** 17\n\n**Note:** the 42 flights of 2012 are left out."):
        assert score(reply, "holobench", [[42]])[0] == 0.0, reply
        assert score(reply, "holobench", [[17]])[0] == 1.0, reply
    # the list under a label alone on its line is the answer
    assert score("Answer:\n\n- Toyota\n- Honda\n\nThese two.", "holobench", [["Toyota"], ["Honda"]])[0] == 1.0


def test_ruled_out_text_and_what_is_kept():
    assert drop_ruled_out_values("Toyota, Honda, excluding Ford") == "Toyota, Honda"
    assert drop_ruled_out_values("all years except 2019") == "all years"
    # a refusal is a statement, not a value ruled out; "is not" inside a sentence is no cue
    assert drop_ruled_out_values("Not mentioned in the text.") == "Not mentioned in the text."
    assert drop_ruled_out_values("The document does not mention it") == "The document does not mention it"
    assert drop_ruled_out_values("Why Attention Is Not Enough") == "Why Attention Is Not Enough"
    s, tags, _ = score("The text does not mention the price.", "lara", [["Not mentioned."]], skill="hallucination")
    assert s == 1.0 and tags == []


# -- kind 5: lists joined by words -----------------------------------------------------------------------------------

def test_lists_joined_by_words_score_like_commas():
    g = [["John Smith"], ["Jane Doe"]]
    for m in ("exact_match", "f1"):
        assert score("Answer: John Smith and Jane Doe", "scitrek", g, m)[0] == 1.0
        assert score("Answer: John Smith & Jane Doe", "scitrek", g, m)[0] == 1.0
    abc = [["A"], ["B"], ["C"]]
    for reply in ("Answer: A, B and C", "Answer: A, B, and C", "Answer: A; B and C", "Answer: A、B和C",
                  "Answer:\n- A\n- B\n- C", "Answer:\n1. A\n2. B\n3. C", "Answer: [A, B, and C]"):
        assert score(reply, "scitrek", abc, "f1")[0] == 1.0, reply
        assert score(reply, "scitrek", abc, "exact_match")[0] == 1.0, reply


def test_a_name_holding_and_stays_whole_when_the_gold_has_it():
    g = [["Procter and Gamble"], ["Apple"]]
    assert score("Answer: Procter and Gamble, Apple", "scitrek", g, "exact_match")[0] == 1.0
    assert score("Answer: Apple and Procter and Gamble", "scitrek", g, "exact_match")[0] == 1.0
    g = [["Johnson & Johnson"], ["Pfizer"]]
    assert score("Answer: Johnson & Johnson and Pfizer", "scitrek", g, "f1")[0] == 1.0
    # without that gold the name is two items: P = 1/3 for the one gold item Pfizer, R = 1, F1 = 0.5
    assert score("Answer: Johnson & Johnson and Pfizer", "scitrek", [["Pfizer"]], "f1")[0] == pytest.approx(0.5)


def test_the_one_list_splitter():
    assert split_list("A, B and C") == split_list("A, B, and C") == ["A", "B", "C"]
    assert split_list("1,234 and 5") == ["1,234", "5"]
    assert split_list("one hundred and five") == ["one hundred and five"]
    assert split_list("魏国、蜀国与吴国") == ["魏国", "蜀国", "吴国"]
    assert split_list("参与者和和平") == ["参与者", "和平"]
    assert split_list("Anderson, Sandy") == ["Anderson", "Sandy"]
    # row_match's details name the items: the Toyota row is stated by its item, Honda only by its name
    (sc,) = score_reply("Answer: Toyota Corolla (25000) and Honda Civic",
                        inst("holobench", [["Toyota Corolla", 25000], ["Honda Civic", 22000]]))
    assert sc.result.score == 0.75
    assert sc.result.details == [{"gold": ["Toyota Corolla", 25000], "credit": 1.0, "text": "Toyota Corolla (25000)"},
                                 {"gold": ["Honda Civic", 22000], "credit": 0.5, "text": "Honda Civic"}]


# -- kind 6: a reasoning model as judge ------------------------------------------------------------------------------

def test_a_reasoning_judge_reply_parses():
    assert parse_verdicts('<think>The format is {"verdicts": [...]}</think>{"verdicts": ["exact"]}', 1) == ["exact"]
    assert parse_verdicts('The format is {"verdicts": [...]}.\n</think>\n{"verdicts": ["partial", "none"]}', 2) == \
        ["partial", "none"]
    assert parse_verdicts('```json\n{"verdicts": ["Exact Match", "No Match"]}\n```', 2) == ["exact", "none"]
    assert parse_verdicts('◁think▷{"verdicts": ["none"]}◁/think▷{"verdicts": ["exact"]}<|im_end|>', 1) == ["exact"]
    assert parse_verdicts('<think>{"verdicts": ["exact"]}', 1) is None   # the budget ended the reasoning
    # the verdict only in the reasoning field (content empty)
    assert judge_text("", '{"verdicts": ["exact"]}') == '{"verdicts": ["exact"]}'
    lara = inst("lara", [["Paris"]])
    assert LARA_JUDGE.parse("<think>Is it True or False? The gold says Paris.</think>True", lara) == "correct"
    assert LARA_JUDGE.parse("<thinking>maybe True</thinking>\n**Verdict:** False", lara) == "incorrect"


# -- kind 10: invisible characters -----------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", ["Answer: 61\u200b", "Answer: 6\u200b1", "Answer: 6\u00ad1", "\ufeffAnswer: 61",
                                   "Answer: \u200e61\u200f", "Answer: 6\u20601"])
def test_format_characters_are_removed_before_every_matcher(reply):
    for bench, m in ALL[:4]:
        assert score(reply, bench, [[61]], m)[0] == 1.0, (bench, m)
    assert score(reply, "needles", [["六十一"]])[0] == 1.0


# -- kind 11: Chinese decimals, negatives and fractions --------------------------------------------------------------

def test_chinese_decimals_negatives_and_fractions_are_one_number():
    def vals(t):
        return [n.value for n in read_numbers(t, chinese=True)]

    assert vals("三点五") == [3.5] and vals("三点一四") == [3.14] and vals("一百点零五") == [100.05]
    assert vals("负十二") == [-12] and vals("零下十二度") == [-12] and vals("负三点五") == [-3.5] and vals("负12") == [-12]
    assert vals("千分之五") == [0.005] and vals("十分之三") == [0.3] and vals("二分之一点五") == [0.75]
    assert vals("三分之一") == [pytest.approx(1 / 3)] and vals("百分之四十五") == [45]
    assert vals("下午三点五分") == [3, 5]          # a time, not 3.5
    assert number_matches(0.3333, read_numbers("三分之一", chinese=True))


@pytest.mark.parametrize("answer,gold,right", [
    ("答案：三点五", "三", 0), ("答案：三点五", 3.5, 1), ("答案：三点五", "3.5", 1),
    ("答案：负十二", "十二", 0), ("答案：负十二", -12, 1), ("答案：零下十二度", "十二", 0), ("答案：零下十二度", -12, 1),
    ("答案：三分之一", "三", 0), ("答案：三分之一", "一", 0), ("答案：三分之一", 0.3333, 1),
])
def test_needles_and_rows_read_chinese_numbers_whole(answer, gold, right):
    assert score(answer, "needles", [[gold]])[0] == right
    assert score(answer.replace("答案：", "Answer: "), "needles", [[gold]])[0] == right


# -- kind 12: a judge prompt's polarity ------------------------------------------------------------------------------

def test_the_hallucination_prompt_reads_no_as_correct():
    h, g = {"skill": "hallucination"}, {"skill": "comparison"}
    assert read_verdict("No, the assistant did not hallucinate.", h) is True
    assert read_verdict("The assistant did not hallucinate.", h) is True
    assert read_verdict("No hallucination: the answer says it is not mentioned.", h) is True
    assert read_verdict("Yes, the assistant hallucinated.", h) is False
    assert read_verdict("The assistant hallucinated an answer.", h) is False
    assert read_verdict("True", h) is True and read_verdict("False", h) is False
    # the general prompt asks whether the answer is correct: No is incorrect
    assert read_verdict("No, the answer is wrong.", g) is False and read_verdict("Yes.", g) is True
    assert LARA_JUDGE.parse("No, the assistant did not hallucinate.", inst("lara", [["x"]], skill="hallucination")) \
        == "correct"


# -- issue 26 item 1: enumerators, step numbers, the last statement, repetition --------------------------------------

def test_step_numbers_and_enumerators_are_never_the_answer():
    steps = "Step 1: find the red cars. Step 3: count them. Step 5: there are 4 red cars."
    assert score(steps, "holobench", [[4]])[0] == 1.0
    for g in ([[1]], [[3]], [[5]], [["Corolla", 5]]):
        assert score(steps, "holobench", g)[0] == 0.0, g
    assert score("Answer: Step 2 gives 7", "holobench", [[2]])[0] == 0.0
    assert score("第一步：找出红色的车。第三步：共有四辆。", "needles", [["三"]])[0] == 0.0
    assert score("第一步：找出红色的车。第三步：共有四辆。", "needles", [["四"]])[0] == 1.0
    # list numbering is no value: "1. 2013-1-13: …" holds no 1 and no 13
    assert score("1. 2013-1-13: the Darius II", "holobench", [[1]])[0] == 0.0
    assert score("1. 2013-1-13: the Darius II", "holobench", [[13]])[0] == 0.0


def test_without_an_answer_line_the_answer_is_what_the_last_sentence_asserts():
    reply = "The table lists 42 flights in 2013. After removing the duplicates, there are 17 flights."
    assert score(reply, "holobench", [[17]])[0] == 1.0
    assert score(reply, "holobench", [[42]])[0] == 0.0
    assert last_statement("The cars are:\n\n- Toyota\n- Honda\n\nI hope this helps!") == "- Toyota\n- Honda"
    assert last_statement("Dr. Smith met J. Doe on the 4th. The answer is 3.5 m.") == "The answer is 3.5 m."
    # needles and LaRA score the whole reply, as their papers do
    assert score(reply, "needles", [[42]])[0] == 1.0


def test_a_degenerate_repetition_is_tagged_and_its_junk_earns_nothing():
    junk = "Let me list the dates.\n" + "1. 2013-1-13: the Darius II scored 96 points\n" * 20
    s, tags, ans = score(junk, "holobench", [[96], ["Darius II"], [2013]])
    assert s == 0.0 and "degenerate_repetition" in tags and "96" not in ans
    # numbered copies are copies; the budget ending the reply makes it cut off too
    numbered = "".join(f"{i}. 2013-1-13: the Darius II scored 96 points\n" for i in range(1, 30))
    assert repetition_start(numbered) is not None
    s, tags, _ = score(numbered, "holobench", [[96]], finish_reason="length")
    assert s == 0.0 and "cut_off" in tags
    # an answer line repeated keeps one copy; a short list of equal items is no repetition
    s, tags, _ = score("Answer: 42\n" * 12, "holobench", [[42]])
    assert s == 1.0 and "degenerate_repetition" in tags
    assert repetition_start("Answer:\n- Toyota\n- Toyota\n- Toyota\n- Toyota") is None


# -- scores.details through score ------------------------------------------------------------------------------------

def _build(tmp_path, responses: list[dict]):
    b = tmp_path / "b"
    b.mkdir()
    rows = [{"instance_id": "h1", "benchmark": "holobench", "source_id": "db", "question": "Which ship?",
             "gold": json.dumps([["Darius II", 96]]), "context": "…", "tokenizer": "t", "target_tokens": 100,
             "context_tokens": 90, "context_format": "text", "query_types": "[]", "evidence_spans": "[]",
             "build_hash": "x"}]
    write_parquet(to_table("instances", rows), b / "instances.parquet")
    base = {"instance_id": "h1", "model": "m", "mode": "lc", "prompt_variant": "cot", "cached": False, "retries": 0,
            "reasoning": None}
    full = [{**base, **r} for r in responses]
    pq.write_table(pa.Table.from_pylist(full), b / "responses.parquet")
    return b


def test_score_writes_details_and_counts_cut_off_and_reasoning_answers(tmp_path):
    b = _build(tmp_path, [
        {"request_key": "k0", "sample": 0, "status": "ok", "response": "Answer: Darius II, 96", "finish_reason": "stop"},
        {"request_key": "k1", "sample": 1, "status": "ok", "response": DARIUS, "finish_reason": "length"},
        {"request_key": "k2", "sample": 2, "status": "cut_off", "response": DARIUS, "finish_reason": "length"},
        {"request_key": "k3", "sample": 3, "status": "ok", "response": None, "finish_reason": "stop",
         "reasoning": "The Darius II scored 96 points.\nAnswer: Darius II"},
    ])
    s = score_build(b)
    assert (s.cut_off, s.answer_from_reasoning, s.no_answer) == (2, 1, 0)
    got = {r["request_key"]: r for r in pq.read_table(b / "scores.parquet").to_pylist()}
    assert got["k0"]["score"] == 1.0 and json.loads(got["k0"]["details"]) == [
        {"gold": ["Darius II", 96], "credit": 1.0, "text": "Darius II | 96"}]
    for k in ("k1", "k2"):
        assert got[k]["score"] == 0.0 and json.loads(got[k]["tags"]) == ["cut_off"]
        assert json.loads(got[k]["details"]) == [{"gold": ["Darius II", 96], "credit": 0.0, "text": None}]
    assert got["k3"]["score"] == 0.5 and "answer_from_reasoning" in json.loads(got["k3"]["tags"])
    assert json.loads(got["k3"]["details"])[0]["text"] == "Darius II"


def test_the_browser_shows_details_messages_and_the_finish_reason(tmp_path):
    from ctxbench.report.browser import browser_data

    b = _build(tmp_path, [
        {"request_key": "k0", "sample": 0, "status": "ok", "response": "Answer: 96", "finish_reason": "stop"},
        {"request_key": "k1", "sample": 1, "status": "cut_off", "response": DARIUS, "finish_reason": "MAX_TOKENS"}])
    score_build(b)
    data, _ = browser_data(b, tmp_path / "report")
    a0, a1 = data["answers"]
    assert a0["details"]["row_match"] == [{"gold": ["Darius II", 96], "credit": 0.5, "text": "96"}]
    assert (a0["finish_reason"], a0["cut_off"], a1["finish_reason"], a1["cut_off"]) == ("stop", False, "MAX_TOKENS",
                                                                                       True)
    p = data["prompts"][a0["prompt"]]
    # the exact template parts evaluate sends (assets/prompts/default.yaml, cot), the context left out
    assert p["system"] == "You answer questions using only the information in the document you are given."
    assert p["before"].startswith("Below is a document.") and p["before"].endswith("<document>\n")
    assert p["after"].startswith("\n</document>\n\nQuestion: Which ship?")
    assert 'Finish with a final line of the form "Answer: <your answer>".' in p["after"]


def test_old_builds_without_finish_reason_still_browse(tmp_path):
    from ctxbench.report.browser import browser_data

    b = _build(tmp_path, [{"request_key": "k0", "sample": 0, "status": "ok", "response": "Answer: 96"}])
    score_build(b)
    (a,) = browser_data(b, tmp_path / "r")[0]["answers"]
    assert a["finish_reason"] is None and a["cut_off"] is False


def test_every_track_chain_is_current():
    # the tracks that score the whole reply drop only last_statement from the default chain
    assert "last_statement" not in chain_for("needles").names and "last_statement" not in chain_for("lara").names
    assert chain_for("holobench").names == answer_chain().names


def test_removing_a_filter_the_default_chain_lacks_is_an_error():
    from ctxbench.core.errors import InputError

    with pytest.raises(InputError, match="not in the default chain"):
        answer_chain(("-first_line",))
    assert "last_statement" not in answer_chain(("-last_statement", "first_line")).names


def test_a_reasoning_judge_scores_and_a_cut_off_reply_is_never_sent_to_it(tmp_path):
    from fakeserver import FakeOpenAIServer

    def judge(body: dict) -> str:   # a reasoning model as judge: its draft quotes the format first
        return '<think>The format is {"verdicts": [...]}, one per row.</think>{"verdicts": ["exact"]}'

    b = _build(tmp_path, [
        {"request_key": "k0", "sample": 0, "status": "ok", "response": "Answer: Darius II, 96", "finish_reason": "stop"},
        {"request_key": "k1", "sample": 1, "status": "ok", "response": DARIUS, "finish_reason": "length"}])
    with FakeOpenAIServer(answer_fn=judge) as srv:
        s = score_build(b, judge="openai/judge", judge_base_url=srv.base_url)
        assert len(srv.requests) == 1                     # the cut-off reply is not judged
    assert (s.judged, s.unparseable_verdicts, s.cut_off) == (1, 0, 1)
    got = {(r["request_key"], r["matcher"]): r for r in pq.read_table(b / "scores.parquet").to_pylist()}
    j0, j1 = got[("k0", "judge:openai/judge")], got[("k1", "judge:openai/judge")]
    assert j0["score"] == 1.0 and json.loads(j0["details"]) == [
        {"gold": ["Darius II", 96], "credit": 1.0, "text": "Darius II, 96"}]
    assert j1["score"] == 0.0 and json.loads(j1["tags"]) == ["cut_off"]


def test_the_needles_failure_judge_reads_a_reasoning_judge_too():
    from ctxbench.tracks.needles.analysis import parse_failure_mode

    reply = '<think>The reply format is {"mode": "..."}; it looks like fabrication.</think>{"mode": "subject_substitution"}'
    assert parse_failure_mode(reply) == "subject_substitution"
    assert parse_failure_mode('```json\n{"mode": "fabrication"}\n```') == "fabrication"
    assert parse_failure_mode("", '{"mode": "fabrication"}') == "fabrication"
    assert parse_failure_mode('{"mode": "no such mode"}') is None
