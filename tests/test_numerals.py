"""The needles matcher ``substring``: numbers in Arabic, Chinese and English forms (the one number reader), digit
boundaries, traditional/simplified and width folding, on hand-worked replies (each through the needles answer
pipeline first, as ``score`` does). Every expected verdict below was worked out by reading the reply, not by
running the code."""

from __future__ import annotations

import pytest

from ctxbench.scoring.normalize import fold
from ctxbench.scoring.numbers import read_numbers
from ctxbench.scoring.pipeline import answer_chain, score_reply
from ctxbench.scoring.registry import matcher, matchers_for
from ctxbench.tracks.needles.scoring import expected_found, substring_match

answer_text = answer_chain()


def inst(gold, accepted=None):
    return {"benchmark": "needles", "gold": [[gold]], "accepted_answers": accepted}


def match(reply, gold, accepted=None):
    (sc,) = score_reply(reply, inst(gold, accepted))
    return sc.result


def ok(reply, gold, accepted=None) -> bool:
    return match(reply, gold, accepted).score == 1.0


def values(text):
    return [n.value for n in read_numbers(fold(text), chinese=True, english=True)]


# -- extraction of numeral spans -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("十", [10]), ("二十", [20]), ("一百零五", [105]), ("兩", [2]), ("两", [2]), ("廿", [20]), ("廿一", [21]),
    ("卅一", [31]), ("六十一", [61]), ("一千九百六十一", [1961]), ("一九六一", [1961]), ("二○二四", [2024]),
    ("十萬", [100000]), ("兩千", [2000]), ("一百一", [110]),
    ("1,961", [1961]), ("61,1961", [61.1961]), ("61，961", [61, 961]), ("六十一，九百六十一", [61, 961]), ("１９６１", [1961]), ("61.5", [61.5]), ("3万", [30000]),
    ("sixty-one", [61]), ("sixty one", [61]), ("Sixty-One", [61]), ("one hundred and five", [105]),
    ("nineteen sixty-one", [1961]), ("twenty", [20]),
    # three numbers in one sentence, each read whole
    ("卒年六十一，生於1130年，著書twenty卷", [61, 1130, 20]),
])
def test_spans(text, expected):
    assert values(text) == expected


@pytest.mark.parametrize("text", ["百姓", "萬物", "千古", "someone", "lonely", "often", "B61", "壹拾", "千萬"])
def test_words_with_numeral_characters_are_not_numbers(text):
    # unit characters alone, number words inside longer words, a code after a letter, financial forms
    assert values(text) == []


def test_a_run_cn2an_rejects_is_split_from_the_left():
    # 三十五六 ("thirty-five or -six"): 三十五 = 35, then 六 = 6
    assert values("年三十五六") == [35, 6]


@pytest.mark.parametrize("text,expected", [
    ("卒年六十有一", [61]), ("年七十又三", [73]), ("二十有五", [25]), ("一百有五", [105]), ("三百有六十六日", [366]),
    ("十有十", [10, 10]),      # 十 is not below the unit 十: two numbers
    ("有一子", [1]),
])
def test_classical_you_joins_tens_and_units(text, expected):
    assert values(text) == expected


def test_classical_age_matches():
    assert ok("魏了翁卒，年六十有一", 61) and ok("年六十有一", "六十一")
    assert not ok("年六十有一", 60) and not ok("年六十有一", 1)


def test_a_long_run_of_numerals_is_read_whole():
    vals = values("三十五六" * 200)   # 800 numeral characters, no valid whole: read piece by piece, none lost
    assert len(vals) >= 200 and 35 in vals


def test_surname_lu_is_not_six():
    # 陸 (financial 6) is a surname here: only 九 is a numeral
    assert values("陸九淵") == [9]


def test_fold_traditional_width_case():
    assert fold("陸九淵ＡＢ，萬物") == "陆九渊ab, 万物"


# -- numeric gold ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [
    "61", "六十一", "卒年六十一歲。", "他享年61岁", "He died at sixty-one.", "He died at sixty one.", "Sixty-One",
    "６１", "答案：六十一", "He was 61-year-old", "the 61st year", "61.",
])
def test_sixty_one_in_every_form(reply):
    for gold in (61, "61", "六十一", "sixty-one"):
        assert ok(reply, gold), (reply, gold)


@pytest.mark.parametrize("reply", [
    "1961", "他卒於1961年", "1,961", "161", "一百六十一", "一九六一", "61.5", "B61", "sixty", "one", "six",
    "nineteen sixty-one", "六十", "六十二", "十六", "sixteen",
])
def test_sixty_one_not_inside_other_numbers(reply):
    assert not ok(reply, 61), reply


def test_year_forms():
    for reply in ("1961", "1,961", "一九六一年", "一千九百六十一年", "nineteen sixty-one", "(1900-1961)"):
        assert ok(reply, 1961), reply
    assert not ok("19610", 1961)
    assert not ok("961", 1961)


def test_ten_and_twenty():
    assert ok("十", 10) and ok("十歲而孤", 10) and ok("ten", 10)
    assert not ok("二十", 10)      # 20, not 10
    assert not ok("十一", 10)      # 11
    assert ok("廿", 20) and ok("二十", 20) and ok("twenty", 20)
    assert not ok("廿一", 20)


def test_one_hundred_and_five():
    for reply in ("一百零五", "105", "one hundred and five", "one hundred five", "壽一百零五歲"):
        assert ok(reply, 105), reply
    assert not ok("一百五", 105)   # 一百五 is 150
    assert ok("一百五", 150)
    assert not ok("1050", 105)


def test_liang_is_two():
    assert ok("子兩人", 2) and ok("子两人", 2) and ok("two sons", 2)
    assert not ok("子十二人", 2)


def test_float_gold():
    assert ok("about 61.5", 61.5)
    assert not ok("about 61", 61.5)


# -- text gold -------------------------------------------------------------------------------------------------------

def test_traditional_and_simplified_are_one():
    assert ok("他是浦城人", "浦城")
    assert ok("其籍貫為建陽", "建阳")          # gold simplified, reply traditional
    assert ok("其籍贯为建阳", "建陽")          # gold traditional, reply simplified
    assert not ok("他是建安人", "建陽")


def test_text_gold_is_never_converted_to_numbers():
    # gold with numeral characters used as words: compared as text, not as 10000 / 1
    assert ok("萬物皆備於我", "萬物")
    assert ok("万物", "萬物")
    assert not ok("10000物", "萬物")
    assert ok("學者須一心向道", "一心")


def test_latin_text_is_matched_as_whole_words_case_and_width_folded():
    assert ok("He came from PUCHENG county.", "Pucheng")
    assert ok("He came from Ｐｕｃｈｅｎｇ.", "pucheng")
    assert not ok("He came from Puchengxi.", "Pucheng")


def test_text_with_a_numeral_inside():
    assert ok("卒年61歲", "六十一歲")
    assert ok("卒年六十一歲", "61歲")
    assert not ok("卒年一百六十一歲", "61歲")
    assert not ok("卒年161歲", "六十一歲")
    assert ok("he died aged sixty-one years", "61 years")
    assert not ok("he died aged 161 years", "61 years")


def test_accepted_answers_count():
    assert ok("字元晦", "仲晦", accepted=["元晦"])
    assert ok("字元晦", "仲晦", accepted=[["元晦"]])
    assert not ok("字晦庵", "仲晦", accepted=["元晦"])


# -- what is scored --------------------------------------------------------------------------------------------------

def test_final_answer_line_is_scored():
    # the reply weighs 62 and settles on 61: only the final line counts
    reply = "The text says he died at 62? No, re-reading: sixty-one.\nAnswer: 61"
    assert answer_text(reply) == "61"
    assert ok(reply, 61)
    assert not ok("I first thought 61.\nAnswer: 62", 61)
    assert answer_text("推理……\n答案：浦城") == "浦城"
    assert answer_text("**Answer:** 浦城") == "浦城"


def test_inline_think_block_is_not_scored():
    assert answer_text("<think>maybe 61? or 62</think>\nHe died at 62.") == "He died at 62."
    assert not ok("<think>maybe 61? or 62</think>\nHe died at 62.", 61)
    assert ok("<think>maybe 62?</think>六十一", 61)
    # reasoning that never closed (cut by the output budget): no answer
    r = match("<think>he died at 61 per the text, so", 61)
    assert r.score == 0.0 and r.tags == ["null_answer"]


def test_empty_reply_is_null_answer():
    r = match(None, 61)
    assert r.score == 0.0 and r.tags == ["null_answer"]
    assert match("   ", 61).tags == ["null_answer"]
    assert substring_match("", inst(61)).tags == ["null_answer"]


def test_expected_found_on_none_and_bool():
    assert not expected_found(None, "None")
    assert expected_found(True, "1")


def test_registered_for_needles():
    assert matchers_for("needles") == ["substring"]
    assert matcher("substring") is substring_match and matcher("substring", "needles") is substring_match
    assert matchers_for("holobench") == ["row_match"]
