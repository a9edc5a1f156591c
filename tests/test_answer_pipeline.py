"""The answer pipeline (ctxbench.scoring.pipeline and its filters): each registered filter on real answer strings, the declared
chain, a track's extra filters, errors, and the fingerprint that makes ``score`` rerun when a filter changes. The
kinds of replies (reasoning blocks, chat tokens, labels) are also run through every matcher in
tests/test_tricky_inputs_replies.py."""

from __future__ import annotations

import dataclasses

import pytest

from ctxbench.core.errors import InputError
from ctxbench.scoring import filters
from ctxbench.scoring.filters import AnswerContext, filter_names, get_filter, register_filter
from ctxbench.scoring.pipeline import DEFAULT_FILTERS, AnswerChain, answer_chain, chain_for, score_reply

CTX = AnswerContext()


def run(name: str, text: str, reasoning: str | None = None) -> str:
    return get_filter(name).fn(text, AnswerContext(reasoning))


def test_default_chain_is_declared_in_order():
    assert DEFAULT_FILTERS == ("strip_format_chars", "drop_reasoning_field", "strip_reasoning",
                               "strip_chat_tokens", "cut_repetition", "final_answer", "last_statement",
                               "drop_ruled_out", "tidy")
    assert set(DEFAULT_FILTERS) | {"first_line", "fold_width", "strip_trailing_period"} <= set(filter_names())


@pytest.mark.parametrize("text,out", [
    # DeepSeek-R1 / Qwen3 with the block in the reply
    ("<think>\nThe table lists 42 flights... no, 17.\n</think>\n\nThere were 17 flights.", "There were 17 flights."),
    # R1-style template: the opening tag was in the prompt
    ("The table lists 42 flights... no, 17.\n</think>\n\n17", "17"),
    # unterminated: the output budget ran out inside the block
    ("<think>The table lists 42 flights and", ""),
    ("Intro.<think>42?", "Intro."),
    ("<thinking>a</thinking>b<reasoning>c</reasoning>d", "b d"),
    ("◁think▷42◁/think▷17", "17"),
    ("[THINK]42[/THINK]17", "17"),
    ("<seed:think>42</seed:think>17", "17"),
    ("<|begin_of_thought|>42<|end_of_thought|>17", "17"),
    ("<|START_THINKING|>42<|END_THINKING|>17", "17"),
    ("<|channel|>analysis<|message|>42<|end|><|start|>assistant<|channel|>final<|message|>17<|return|>", "17<|return|>"),
    ("analysisWe need the count. 42?assistantfinal17", "17"),
    ("Here's my thought process: 42?\nHere's my response: 17", "17"),
    ("No reasoning here: 17", "No reasoning here: 17"),
    # <|end|> alone is an end of turn (Phi-3), not the end of reasoning
    ("Answer: 61<|end|>", "Answer: 61<|end|>"),
])
def test_strip_reasoning(text, out):
    assert run("strip_reasoning", text) == out


def test_drop_reasoning_field():
    assert run("drop_reasoning_field", "I count 42.\n\nThere were 17.", "I count 42.") == "There were 17."
    assert run("drop_reasoning_field", "There were 17.", "I count 42.") == "There were 17."
    assert run("drop_reasoning_field", "There were 17.", None) == "There were 17."
    # a short reasoning that is the answer itself stays; one the reply starts with and goes on from goes
    assert run("drop_reasoning_field", "17", "17") == "17"
    assert run("drop_reasoning_field", "42?\n17", "42?") == "17"
    assert run("drop_reasoning_field", "It is 17.", "17") == "It is 17."


@pytest.mark.parametrize("text,out", [
    ("Answer: 61<|eot_id|>", "Answer: 61"),
    ("61<|im_end|>\n<|im_start|>user\nAnd 42?<|im_end|>", "61"),
    ("<|im_start|>assistant\n61<|im_end|>", "61"),
    ("<|start_header_id|>assistant<|end_header_id|>\n\n61<|eot_id|>", "61"),
    ("<start_of_turn>model\n61<end_of_turn>\n<start_of_turn>user\n42", "61"),
    ("61</s>[INST] 42 [/INST]", "61"),
    ("61<｜end▁of▁sentence｜>", "61"),
    ("<s> 61 <|endoftext|>", "61"),
    ("<|im_end|>61", "61"),                 # an end token before any text ends nothing
    ("61<|some_new_token|> flights", "61 flights"),
])
def test_strip_chat_tokens(text, out):
    assert run("strip_chat_tokens", text) == out


@pytest.mark.parametrize("text,out", [
    ("Let me think.\nAnswer: 12 maybe\nno.\nAnswer: 15", "15"),
    ("Reasoning...\n**Answer:** 42", "42"),
    ("Reasoning...\n**Final Answer**: 42", "42"),
    ("### Final answer: 42", "42"),
    ("推理……\n答案：浦城", "浦城"),
    ("推理……\n答：浦城", "浦城"),
    ("计算后\n最终答案：61", "61"),
    ("step 1\n#### 42", "42"),
    ("I think the answer: 7 flights", "7 flights"),
    ("So the final answer is 42.", "42."),
    ("答案是魏国", "魏国"),
    ("<answer>17</answer>", "17"),
    ("<answer>17", "17"),
    ("<output>17</output>", "17"),
    ("[BEGIN FINAL RESPONSE]17[END FINAL RESPONSE]", "17"),
    ("We get \\boxed{\\frac{1}{2}} and finally \\boxed{42}.", "42"),
    ("just 7", "just 7"),
    ("Thinking...\nAnswer:", ""),
])
def test_final_answer(text, out):
    assert run("final_answer", text) == out


@pytest.mark.parametrize("text,out", [
    ("**42**", "42"),
    ("`42`", "42"),
    ("$9{,}500$", "9{,}500"),
    ("\\boxed{61}", "61"),
    ("\\text{Beijing}", "Beijing"),
    ("\\(42\\)", "42"),
    ("$3 and $5", "$3 and $5"),           # prices, not a math span
    ("  - UA  1545\n\n  - AA 1141  \n", "- UA 1545\n\n- AA 1141"),
    ("e\u0301", "\u00e9"),                # NFC
])
def test_tidy(text, out):
    assert run("tidy", text) == out


def test_optional_filters():
    assert run("first_line", "\n  17 flights\nbecause 42") == "17 flights"
    assert run("fold_width", "ＡＢＣ１２３：") == "ABC123:"
    assert run("strip_trailing_period", "Beijing.") == "Beijing"


def test_chain_trace_and_empty_input():
    c = answer_chain()
    steps = c.trace("<think>42</think>Answer: 17<|eot_id|>")
    assert [n for n, _ in steps] == ["input", *DEFAULT_FILTERS]
    assert dict(steps)["strip_reasoning"] == "Answer: 17<|eot_id|>"
    assert steps[-1] == ("tidy", "17")
    assert c(None) == "" and c("") == "" and c("   ") == ""


def test_a_tracks_filters_follow_the_default_chain(monkeypatch):
    from ctxbench.scoring import pipeline as registry  # where chain_for looks the track's filters up

    monkeypatch.setattr(registry, "answer_filters", lambda b: ("first_line",) if b == "holobench" else ())
    c = chain_for("holobench")
    assert c.names == DEFAULT_FILTERS + ("first_line",)
    assert c("Answer: UA 1545\nand AA 1141") == "UA 1545"
    (sc,) = score_reply("Answer: UA 1545\nand AA 1141", {"benchmark": "holobench", "gold": [["UA", 1545],
                                                                                           ["AA", 1141]]})
    assert sc.answer == "UA 1545" and sc.result.rows == [1.0, 0.0]
    monkeypatch.setattr(registry, "answer_filters", lambda b: ("no_such_filter",))
    with pytest.raises(InputError, match="track holobench: answer_filters: unknown answer filter 'no_such_filter'"):
        chain_for("holobench")


def test_unknown_filter_and_name_clash():
    with pytest.raises(InputError, match="unknown answer filter 'nope'; registered: .*tidy"):
        AnswerChain(("nope",))
    with pytest.raises(ValueError, match="already registered"):
        register_filter("tidy")(lambda text, ctx: text)


def test_fingerprint_changes_with_a_filters_version(monkeypatch):
    before = dict(answer_chain().fingerprint())
    v = get_filter("tidy").version
    assert [n for n, _ in answer_chain().fingerprint()] == list(DEFAULT_FILTERS) and before["tidy"].startswith(f"{v}:")
    monkeypatch.setitem(filters._FILTERS, "tidy", dataclasses.replace(get_filter("tidy"), version=f"{v}.1"))
    after = dict(answer_chain().fingerprint())
    assert after["tidy"].startswith(f"{v}.1:") and after["tidy"] != before["tidy"]
    assert {k: v for k, v in after.items() if k != "tidy"} == {k: v for k, v in before.items() if k != "tidy"}
