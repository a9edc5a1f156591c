"""Answer filters, steps 0–3b of the default chain (:mod:`ctxbench.scoring.pipeline`): what around the answer is not
the answer. ``strip_format_chars`` (invisible format characters), ``drop_reasoning_field`` (the reasoning field
repeated in the reply), ``strip_reasoning`` (inline reasoning blocks of every known delimiter), ``strip_chat_tokens``
(chat special tokens, the turn a server generated after the end-of-turn token) and ``cut_repetition`` (a reply that
degenerates into repetition, :func:`repetition_start`)."""

from __future__ import annotations

import re

from ctxbench.scoring.extract import ANSWER_BLOCKS, LABEL_INLINE, LABEL_LINE, SENT_BREAK
from ctxbench.scoring.filters import AnswerContext, finish_kind, register_filter, strip_invisible

__all__ = ["cut_repetition", "drop_reasoning_field", "repetition_start", "strip_chat_tokens", "strip_format_chars",
           "strip_reasoning"]


# -- 0. invisible characters -----------------------------------------------------------------------------------------

@register_filter("strip_format_chars")
def strip_format_chars(text: str, ctx: AnswerContext) -> str:
    """Remove invisible format characters (Unicode category Cf, soft hyphen): :func:`strip_invisible`."""
    return strip_invisible(text)


# -- 1. the reasoning field repeated in the reply ---------------------------------------------------------------------

@register_filter("drop_reasoning_field")
def drop_reasoning_field(text: str, ctx: AnswerContext) -> str:
    """Remove the response's separate reasoning field where the visible reply repeats it (a reasoning of fewer than
    20 characters only when the reply starts with it and goes on: a short reasoning may equal the answer)."""
    r = (ctx.reasoning or "").strip()
    t = text.strip()
    if not r or r not in t or (len(r) < 20 and not (t.startswith(r) and len(t) > len(r))):
        return text
    i = t.find(r)
    return (t[:i] + t[i + len(r):]).strip()


# -- 2. inline reasoning ---------------------------------------------------------------------------------------------

def _tag(name: str) -> tuple[str, str]:
    return rf"<{name}(?:\s[^>]*)?>", rf"</{name}\s*>"


# (opening, closing, whether a closing tag alone ends reasoning begun in the prompt) of reasoning blocks; each is
# removed with its content. gpt-oss' <|end|> also ends ordinary turns (Phi-3), so it never ends reasoning alone.
_REASONING_BLOCKS: list[tuple[str, str, bool]] = [
    *((*_tag(t), True) for t in ("think", "thinking", "thought", "thoughts", "reasoning", "reflection",
                                 "scratchpad", "seed:think", "inner_monologue")),
    (r"◁think▷", r"◁/think▷", True),
    (r"\[THINK\]", r"\[/THINK\]", True),
    (r"<\|begin_of_thought\|>", r"<\|end_of_thought\|>", True),
    (r"<\|START_THINKING\|>", r"<\|END_THINKING\|>", True),
    (r"<\|channel\|>\s*(?:analysis|commentary)\b[^<]*<\|message\|>", r"<\|end\|>", False),
]
_BLOCK_RES = [(re.compile(o, re.IGNORECASE), re.compile(c, re.IGNORECASE), alone)
              for o, c, alone in _REASONING_BLOCKS]
_HARMONY_FINAL = re.compile(r"<\|channel\|>\s*final\b[^<]*<\|message\|>", re.IGNORECASE)
_HARMONY_BARE = re.compile(r"^\s*analysis.*?assistantfinal", re.DOTALL)
_GRANITE = re.compile(r"^\s*Here(?: is|'s|’s) my thought process:.*?(?:Here(?: is|'s|’s) my response:|\Z)",
                      re.IGNORECASE | re.DOTALL)


def _strip_blocks(text: str, open_re: re.Pattern, close_re: re.Pattern, close_alone: bool) -> str:
    # opening and closing tags in order, nesting counted (<think><think>…</think>…</think> is one block): a block
    # runs from an opening tag at depth 0 to the closing tag that brings the depth back to 0; one that never closes
    # (cut by the output budget) runs to the end of the reply, so the reply has no answer; a closing tag at depth 0
    # before any answer (reasoning opened by the chat template) ends reasoning that began at the start of the reply
    marks = sorted([(m.start(), m.end(), 1) for m in open_re.finditer(text)]
                   + [(m.start(), m.end(), -1) for m in close_re.finditer(text)])
    out, pos, depth = [], 0, 0
    for s, e, kind in marks:
        if s < pos:
            continue
        if kind == 1:
            if depth == 0:
                out.append(text[pos:s])
            depth += 1
            pos = e
        elif depth > 0:
            depth -= 1
            pos = e
            if depth == 0:
                out.append(" ")
        elif close_alone and not ("".join(out) + text[pos:s]).strip(" \t\r\n*_`#>"):
            out, pos = [], e  # a closing tag alone, no answer before it: reasoning begun in the prompt
        elif close_alone and not any(k == 1 and ms < s for ms, _, k in marks):
            out, pos = [], e  # no opening tag before it: everything before the closing tag was reasoning
        elif close_alone:
            out.append(text[pos:s])  # a stray closing tag after an answer: the tag alone is dropped
            pos = e
        # (a closing mark that also ends ordinary turns, gpt-oss' <|end|>, stays for the chat-token step)
    if depth > 0:
        return "".join(out).rstrip()
    out.append(text[pos:])
    return "".join(out)


@register_filter("strip_reasoning", version="2")
def strip_reasoning(text: str, ctx: AnswerContext) -> str:
    """Remove inline reasoning blocks (closed, unterminated, or opened by the chat template)."""
    m = None
    for m in _HARMONY_FINAL.finditer(text):
        pass
    if m is not None:
        text = text[m.end():]
    text = _HARMONY_BARE.sub("", text, count=1)
    text = _GRANITE.sub("", text, count=1)
    for o, c, alone in _BLOCK_RES:
        text = _strip_blocks(text, o, c, alone)
    return text.strip()


# -- 3. chat special tokens ------------------------------------------------------------------------------------------

_END_TOKENS = re.compile(
    r"<\|(?:eot_id|eom_id|end_of_text|im_end|endoftext|end|return|call|end_of_turn|endofturn|EOT|END_OF_TURN_TOKEN|"
    r"END_RESPONSE|end_of_sentence|end_of_solution)\|>|<｜end▁of▁sentence｜>|</s>|<eos>|<end_of_turn>|<\|eos\|>",
    re.IGNORECASE)
_ROLE_HEADER = re.compile(
    r"^(?:\s*(?:<\|im_start\|>\s*assistant\b|<\|start_header_id\|>\s*assistant\s*<\|end_header_id\|>|"
    r"<start_of_turn>\s*model\b|<\|assistant\|>|<｜Assistant｜>|<\|start\|>\s*assistant\b|<\|CHATBOT_TOKEN\|>|"
    r"<\|START_RESPONSE\|>|<\|begin_of_text\|>|<s>|<bos>|\[/INST\]))+", re.IGNORECASE)
_ANY_TOKEN = re.compile(r"<\|[A-Za-z_][\w.:-]{0,40}\|>|<｜[^｜<>\n]{1,40}｜>|</?s>|<(?:eos|bos|pad|unk|mask)>|"
                        r"<(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>", re.IGNORECASE)


# what opens another turn: a server that ignored the stop token generated the next (user's) turn after it
_NEXT_TURN = re.compile(r"\s*(?:<\|im_start\|>|<\|start_header_id\|>|<start_of_turn>|\[INST\]|<\|user\|>|<\|start\|>|"
                        r"<｜User｜>|<\|START_OF_TURN_TOKEN\|>|<s>\s*\[INST\])", re.IGNORECASE)
_ANSWER_OPENS = re.compile(r"(?:<answer(?:\s[^>]*)?>|<response(?:\s[^>]*)?>|<output(?:\s[^>]*)?>|"
                           r"<final_answer(?:\s[^>]*)?>|<\|begin_of_solution\|>|\[BEGIN FINAL RESPONSE\])\s*$",
                           re.IGNORECASE)


def _awaits_answer(prefix: str) -> bool:
    """Whether the text before a special token holds no answer yet: nothing but markup, or it ends with a
    final-answer label (``Answer:``, ``**Final answer:**``, ``The answer is``, ``答案：``) or an opening answer
    block (``<answer>``): the answer is still to come after the token."""
    if _ANSWER_OPENS.search(prefix):
        return True
    p = re.sub(r"[\s*_`]+$", "", _ANY_TOKEN.sub("", prefix))
    if not re.search(r"\w", p):
        return True
    for rx in (LABEL_LINE, LABEL_INLINE):
        last = None
        for last in rx.finditer(p):
            pass
        if last is not None and not p[last.end():].strip(" \t*_`:："):
            return True
    return False


@register_filter("strip_chat_tokens", version="2")
def strip_chat_tokens(text: str, ctx: AnswerContext) -> str:
    """End the reply at its first end-of-turn token that follows an answer (or that another turn follows); drop
    role headers and other special tokens (an end-of-turn token before the answer, e.g. ``Answer: <|endoftext|>
    1003``, is a stray token, not the end of the turn)."""
    text = _ROLE_HEADER.sub("", text)
    for m in _END_TOKENS.finditer(text):
        if _NEXT_TURN.match(text, m.end()) or not _awaits_answer(text[:m.start()]):
            text = text[:m.start()]
            break
    return _ANY_TOKEN.sub("", text).strip()


# -- 4d. degenerate repetition --------------------------------------------------------------------------------------

_UNIT_MARKER = re.compile(r"^\s*(?:[-*•·]|\(?\d{1,3}[.)、]|\[\d{1,3}\])\s*")


def _units(text: str) -> list[tuple[int, int]]:
    """Spans of the text's units for repetition: lines, and sentences within a line."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        start = pos
        for m in SENT_BREAK.finditer(line):
            if line[start - pos:m.end()].strip():
                spans.append((start, pos + m.end()))
            start = pos + m.end()
        if text[start:pos + len(line)].strip():
            spans.append((start, pos + len(line)))
        pos += len(line)
    return spans


def repetition_start(text: str, cut: bool = False) -> tuple[int, int] | None:
    """Where a reply that degenerates into repetition starts repeating: ``(start of the first copy, end of the
    first copy)`` in characters, or None. A block of 1–8 units (lines or sentences, compared with list markers and
    spacing ignored, so ``1. 2013-1-13: x`` / ``2. 2013-1-13: x`` are copies) that ends the reply at least 4 times
    in a row over at least 240 characters, or 8 times, or 3 times when the output budget ended the reply (``cut``);
    the last copy may be unfinished."""
    spans = _units(text)
    keys = [" ".join(_UNIT_MARKER.sub("", text[a:b]).split()).casefold() for a, b in spans]
    n = len(keys)
    best: tuple[int, int] | None = None
    for p in range(1, 9):
        if n < 3 * p:
            break
        m = n
        if keys[n - 1] != keys[n - 1 - p] and keys[n - 1 - p].startswith(keys[n - 1]):
            m = n - 1                                    # the last copy is unfinished
        j = m - p
        while j - p >= 0 and keys[j - p:j] == keys[j:j + p]:
            j -= p
        copies = (m - j) // p
        if copies < 2 or not any(keys[j:j + p]):
            continue
        chars = spans[n - 1][1] - spans[j][0]
        if (copies >= 4 and chars >= 240) or copies >= 8 or (cut and copies >= 3):
            if best is None or spans[j][0] < best[0]:
                best = (spans[j][0], spans[j + p - 1][1])
    return best


@register_filter("cut_repetition")
def cut_repetition(text: str, ctx: AnswerContext) -> str:
    """A reply that degenerates into repetition (:func:`repetition_start`) loses the repeated block, every copy
    (junk repeated until the budget ran out earns nothing), note ``degenerate_repetition``; one copy is kept when
    it holds a final-answer label (``Answer: 42`` repeated)."""
    rep = repetition_start(text, cut=finish_kind(ctx.finish_reason) == "length")
    if rep is None:
        return text
    ctx.notes.add("degenerate_repetition")
    start, end = rep
    first = text[start:end]
    if LABEL_LINE.search(first) or LABEL_INLINE.search(first) or any(rx.search(first) for rx in ANSWER_BLOCKS):
        return text[:end]
    return text[:start].rstrip()
