"""row_match and the answer normalisers on real-looking model replies (each reply through the holobench answer
pipeline first, as ``score`` does)."""

from __future__ import annotations

import pytest

from ctxbench.scoring.matchers import MatchResult
from ctxbench.scoring.normalize import normalize_text
from ctxbench.scoring.numbers import Number, number_matches, read_number, read_numbers
from ctxbench.scoring.pipeline import answer_chain, score_reply

extract_answer = answer_chain()


def row_match(reply, gold) -> MatchResult:
    (sc,) = score_reply(reply, {"benchmark": "holobench", "gold": gold})
    assert sc.matcher == "row_match"
    return sc.result


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def score(response, gold):
    return row_match(response, gold).score


# -- numbers -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [
    "Answer: 1,234",
    "There were 1,234 flights in total.\nAnswer: 1,234 flights",
    "Answer: 1 234",
    "Answer: 1234.",
    "答案：１，２３４",
])
def test_thousands_separators(reply):
    assert score(reply, [[1234]]) == 1.0


def test_thousands_separator_does_not_make_a_different_number():
    assert score("Answer: 1,234", [[234]]) == 0.0
    assert score("Answer: 1,234", [[1]]) == 0.0


@pytest.mark.parametrize("reply,gold", [
    ("Answer: 3.50", 3.5),
    ("Answer: $3.50", 3.5),
    ("Answer: 3.5", 3.5),
    ("Answer: 12.00", 12),
    ("The average delay is 14.27 minutes.\nAnswer: 14.27", 14.2667),  # rounded to the answer's own 2 places
])
def test_decimals_and_trailing_zeros(reply, gold):
    assert score(reply, [[gold]]) == 1.0


def test_wrong_decimals_do_not_match():
    assert score("Answer: 3.6", [[3.5]]) == 0.0
    assert score("Answer: 4", [[3.5]]) == 0.0       # an integer is not a rounding of 3.5
    assert score("Answer: 14.3", [[14.2]]) == 0.0


@pytest.mark.parametrize("reply", ["Answer: 45%", "Answer: 45 %", "About 45% of flights were late.\nAnswer: 45%"])
def test_percentages(reply):
    assert score(reply, [[45]]) == 1.0


@pytest.mark.parametrize("reply", ["Answer: 2012", "Answer: 12.5", "Answer: 112", "Answer: 120", "Answer: 1,120",
                                   "Answer: UA12", "Answer: -12"])
def test_a_number_never_matches_inside_a_longer_number(reply):
    assert score(reply, [[12]]) == 0.0


@pytest.mark.parametrize("reply", ["Answer: 12", "Answer: 12.", "Answer: (12)", "Answer: 12 flights",
                                   "The count is 12, not 2012.\nAnswer: 12"])
def test_the_number_itself_matches(reply):
    assert score(reply, [[12]]) == 1.0


def test_read_numbers_and_read_number():
    assert [(n.value, n.decimals, n.percent) for n in read_numbers("1,234.50 and 7%")] == [(1234.5, 2, False),
                                                                                          (7.0, 0, True)]
    assert [(n.value, n.decimals) for n in read_numbers("in 2012 and 12.5")] == [(2012.0, 0), (12.5, 1)]
    assert read_number("1,234.50").value == 1234.5 and read_number("45%").value == 45.0
    assert read_number("abc") is None and read_number("61 years") is None
    assert number_matches(1234.0, [Number(0, 4, 1234.0)])
    assert not number_matches(0.5, [Number(0, 1, 1.0)])


# -- Chinese punctuation, full-width forms ---------------------------------------------------------------------------

def test_full_width_digits_and_chinese_punctuation():
    assert score("答案：１２３。", [[123]]) == 1.0
    assert score("答案：123。", [[123]]) == 1.0
    assert score("答案：１２３。", [[23]]) == 0.0


def test_chinese_list_with_chinese_comma():
    assert score("北京，上海", [["北京"], ["上海"]]) == 1.0
    assert score("答案：北京、上海。", [["北京"], ["上海"]]) == 1.0
    assert score("北京，上海", [["北京"], ["广州"]]) == 0.5


def test_normalize_text_cjk_and_full_width():
    assert normalize_text("北京，上海。") == "北京 上海"
    assert normalize_text("ＡＢＣ　Ｄｅｆ") == "abc def"
    assert normalize_text("（纽约）") == "纽约"


def test_number_inside_chinese_sentence():
    assert score("答案是123。", [[123]]) == 1.0


def test_chinese_list_joined_with_he():
    assert score("答案：北京和上海", [["北京"], ["上海"]]) == 1.0


# -- text folding ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", ["Answer: JFK", "Answer: jfk", "Answer:   Jfk  .", "Answer: **JFK**",
                                   "Answer: the airport is\n\tJFK"])
def test_case_and_whitespace_folding(reply):
    assert score(reply, [["JFK"]]) == 1.0


def test_multiword_text_values():
    assert score("Answer: united   AIR lines, inc.", [["United Air Lines Inc."]]) == 1.0
    assert score("Answer: new york", [["New York City"]]) == 0.0
    assert score("Answer: JFKX", [["JFK"]]) == 0.0  # whole words only


def test_numeric_string_gold_matches_number():
    assert score("Answer: 2,013", [["2013"]]) == 1.0
    assert score("Answer: 20130", [["2013"]]) == 0.0


# -- rows --------------------------------------------------------------------------------------------------------------

def test_partial_row_scores_half():
    m = row_match("Answer: The carrier is UA.", [["UA", 1545]])
    assert m.score == 0.5 and m.rows == [0.5] and "wrong_attribute" in m.tags
    m = row_match("Answer: UA 1545", [["UA", 1545]])
    assert m.score == 1.0 and m.rows == [1.0] and m.tags == []


def test_list_answers_score_the_mean_over_rows():
    gold = [["UA", 1545], ["AA", 1141], ["B6", 725]]
    m = row_match("Answer: UA 1545; AA 1141", gold)
    assert m.rows == [1.0, 1.0, 0.0] and m.score == pytest.approx(2 / 3) and "partial_list" in m.tags
    m = row_match("Answer: UA 1545; AA; B6 725", gold)
    assert m.rows == [1.0, 0.5, 1.0] and m.score == pytest.approx(2.5 / 3)


def test_null_gold_value():
    assert score("Answer: unknown", [[None]]) == 1.0
    assert score("Answer: None", [[None]]) == 1.0
    assert score("Answer: 5", [[None]]) == 0.0


def test_null_words_are_whole_words():
    assert score("Answer: London airport", [[None]]) == 0.0


# -- chain-of-thought extraction and empty answers ------------------------------------------------------------------

def test_cot_uses_text_after_last_answer_line():
    reply = ("Let me think step by step.\nAnswer: 12 is what the first sentence suggests, but\n"
             "the second sentence corrects it.\nAnswer: 15")
    assert extract_answer(reply) == "15"
    assert score(reply, [[15]]) == 1.0
    assert score(reply, [[12]]) == 0.0


def test_cot_reasoning_numbers_do_not_count():
    reply = "The document lists 1,234 flights by UA and 980 by AA.\nSo the smaller one is AA.\nFinal answer: AA"
    assert extract_answer(reply) == "AA"
    assert score(reply, [["AA", 980]]) == 0.5


def test_bold_answer_line_and_inline_answer():
    assert extract_answer("Reasoning...\n**Answer:** 42") == "42"
    assert score("Reasoning...\n**Answer:** 42", [[42]]) == 1.0
    assert extract_answer("I think the answer: 7 flights") == "7 flights"
    assert extract_answer("  just 7  ") == "just 7"


@pytest.mark.parametrize("reply", ["", None, "   ", "Thinking...\nAnswer:", "Answer:   \n"])
def test_empty_response_is_null_answer(reply):
    m = row_match(reply, [[1], [2]])
    assert m.score == 0.0 and m.tags == ["null_answer"] and m.rows == [0.0, 0.0]


def test_list_markers_and_dates_are_not_answers():
    # real SmolLM2 replies that once scored 1.0 against the gold [[4]]
    assert row_match("1. 200\n2. 398\n3. 456\n4. 720\n5. 820", [[4]]).score == 0.0
    assert row_match("The flights arrived on 2013-01-04 and 2013-02-11.", [[4]]).score == 0.0
    assert row_match("It left at 4:30.", [[4]]).score == 0.0
    assert row_match("There are 4 of them.\nAnswer: 4", [[4]]).score == 1.0
    assert row_match("1. Delta 12\n2. United 7", [["Delta", 12], ["United", 7]]).score == 1.0
