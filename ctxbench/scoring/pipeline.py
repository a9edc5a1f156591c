"""The one answer pipeline: a declared chain of registered filters that turns a stored reply into the answer every
matcher and the LLM judge receive.

Shape (in the manner of lm-evaluation-harness' filter chains: ``filter_list`` in a task's YAML, filters registered
with ``@register_filter`` and applied in order by a ``FilterEnsemble``): a *filter* is a small step
``fn(text: str, ctx: AnswerContext) -> str`` registered under a name; an :class:`AnswerChain` applies named filters
in order. Every benchmark's chain is :data:`DEFAULT_FILTERS` followed by the filters its track adds
(``Track.answer_filters``, :func:`ctxbench.scoring.registry.answer_filters`); ``score`` stores the chain's output as
``scores.extracted_answer``, so what is stored is exactly what was scored. No matcher extracts answers itself.

Default chain
    0. ``strip_format_chars`` — invisible format characters (Unicode category Cf: zero-width space, joiners, BOM,
       direction marks; the soft hyphen) removed: ``6\u200b1`` is ``61``.
    1. ``drop_reasoning_field`` — the provider's separate reasoning field (``responses.reasoning``) repeated inside
       the visible reply (servers and proxies that return it in both) is removed.
    2. ``strip_reasoning`` — reasoning written inline is removed, whichever delimiters the model uses:
       ``<think>…</think>`` (DeepSeek-R1, QwQ, Qwen3, GLM-4.5, MiniMax, Phi-4-reasoning, Hunyuan, ERNIE, OLMo 3),
       ``<thinking>``, ``<thought>``, ``<reasoning>``, ``<reflection>``, ``<scratchpad>``, ``<seed:think>``
       (Seed-OSS), ``◁think▷…◁/think▷`` (Kimi), ``[THINK]…[/THINK]`` (Magistral), ``<|begin_of_thought|>…
       <|end_of_thought|>`` (Sky-T1, OpenThoughts), ``<|START_THINKING|>…<|END_THINKING|>`` (Command A Reasoning),
       gpt-oss' harmony channels (``<|channel|>analysis<|message|>…``, also when a server printed them without their
       special tokens as ``analysis…assistantfinal``) and Granite 3.2's ``Here is my thought process: … Here is my
       response:``. A block that never closes (cut by the output budget) runs to the end of the reply, so the reply
       has no answer; a closing tag without an opening one (the chat template opened the block in the prompt, as
       DeepSeek-R1's and Qwen3's do) ends reasoning that began at the start of the reply.
    3. ``strip_chat_tokens`` — chat special tokens (``<|eot_id|>``, ``<|im_end|>``, ``</s>``, ``<|end|>``,
       ``<end_of_turn>``, ``<|endoftext|>``, ``<｜end▁of▁sentence｜>``, ``<|END_OF_TURN_TOKEN|>``, …): the reply ends
       at the first end-of-turn token that follows an answer (what a server that ignored the stop token generated
       after it is another turn), or that another turn's header follows (``<|im_start|>user``). A token before any
       answer — at the start, after markup only, or right after a final-answer label or an opening answer block
       (``Answer: <|endoftext|> 1003``) — ends nothing: the model went on to give its answer, so the token is
       dropped like any other. Role headers at its start (``<|im_start|>assistant``, ``<start_of_turn>model``,
       ``<|start_header_id|>assistant<|end_header_id|>``) and any other token of these forms (``<|…|>``,
       ``<｜…｜>``, ``<s>``, ``[INST]``) are removed.
    3b. ``cut_repetition`` — a reply that degenerates into repetition loses every copy of the repeated block
       (:func:`repetition_start`; note ``degenerate_repetition``).
    4. ``final_answer`` — the final answer, when the reply marks one: the content of the last answer block
       (``<answer>…</answer>``, Granite's ``<response>``, Reflection's ``<output>``, ``<|begin_of_solution|>``,
       Apriel's ``[BEGIN FINAL RESPONSE]``), else the text after the last final-answer label (a line starting with
       ``Answer:``, ``Final answer:``, ``**Answer:**``, ``### Answer:``, ``答案：``, ``答：``, ``最终答案：``,
       ``回答：``, GSM8K's ``####`` or a heading line that is the label alone, e.g.
       ``**Final Answer**``; else the last inline ``answer:`` / ``the (final) answer is`` / ``答案是``),
       else the last ``\\boxed{…}``, else the whole reply. When the output budget ended the reply (finish reason
       ``length``…) only a finished answer counts, else there is none (note ``cut_off``). The last answer the reply
       asserts is the answer: a corrected or final label inside a line after the last line label (``… Final
       answer: 17``), struck-out text removed (``~~42~~ 17``), and after a withdrawal marker that follows the
       answer (``Wait,``, ``Actually,``, ``No,``, ``Correction:``, ``I mean``, 不对, 应为, 更正, 其实…) the answer is
       read from what follows it alone (note ``withdrawn``; issue 30).
    4b. ``last_statement`` — without a final-answer marker, what the end of the reply asserts (the list that ends
       it, else its last sentence): steps, list numbers and values quoted before it are not the answer.
    4c. ``drop_ruled_out`` — values the answer rules out removed (``17 (not 42)`` → ``17``, ``六十（而非七十三）`` →
       ``六十``).
    5. ``tidy`` — Unicode NFC; ``\\boxed{x}``, ``\\text{x}``, ``$x$`` math delimiters and Markdown emphasis
       (``**x**``, ``__x__``, backticks around the whole answer) unwrapped; spaces collapsed and blank lines at the
       ends removed (line breaks kept: list matchers split on them).

Filters a track may add (``Track.answer_filters``): ``first_line`` (the first non-empty line), ``fold_width``
(NFKC: full-width letters, digits and punctuation to ASCII), ``strip_trailing_period``; ``-name`` removes a
default filter (needles and LaRA: ``-last_statement``). ``strip_code_fences`` serves the judges
(:func:`ctxbench.scoring.judge.judge_text`). :meth:`AnswerChain.extract` adds what the stored response says
besides its text: status ``cut_off``, the finish reason, and the reasoning field when the content is empty.

Versions: each filter has a ``version``; :meth:`AnswerChain.fingerprint` hashes the names, versions and code of the
chain's filters, so ``score`` reruns when a filter changes (:mod:`ctxbench.scoring.versions`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ctxbench.core.errors import InputError
from ctxbench.scoring.matchers import MatchResult
from ctxbench.core.config import assets_dir
from ctxbench.models.gateway import is_length_finish
from ctxbench.scoring.codehash import code_hash
from ctxbench.scoring.numbers import inline_markers
from ctxbench.scoring.refusal import is_refusal
from ctxbench.scoring.registry import answer_filters, matcher, matchers_for

__all__ = ["DEFAULT_FILTERS", "AnswerChain", "AnswerContext", "AnswerFilter", "Extraction", "MatcherError", "Scored",
           "answer_chain", "chain_for", "drop_ruled_out_values", "filter_names", "finish_kind", "get_filter",
           "gold_rows", "last_statement", "no_credit", "register_filter", "repetition_start", "score_reply",
           "sentences", "strip_invisible", "unwrap_latex"]


@dataclass(frozen=True)
class AnswerContext:
    """What a filter may look at besides the text: the provider's separate reasoning field of the response
    (``responses.reasoning``, None where there is none) and the server's finish reason as stored
    (``responses.finish_reason``: ``stop``, ``length``, ``MAX_TOKENS``…; None where unknown). ``notes``: what
    filters observed on the way (``degenerate_repetition``, ``ruled_out``…), which ``score`` adds to the row's
    tags."""

    reasoning: str | None = None
    finish_reason: str | None = None
    notes: set = field(default_factory=set, compare=False)


@dataclass(frozen=True)
class AnswerFilter:
    """A registered filter: its name, version and function ``fn(text, ctx) -> text``."""

    name: str
    version: str
    fn: Callable[[str, AnswerContext], str]
    description: str = ""


_FILTERS: dict[str, AnswerFilter] = {}


def register_filter(name: str, version: str = "1") -> Callable:
    """Decorator registering ``fn(text: str, ctx: AnswerContext) -> str`` as answer filter ``name`` (bump
    ``version`` when its behaviour changes; its code is hashed too). Raises ValueError for a name already taken by
    another function."""

    def deco(fn: Callable[[str, AnswerContext], str]) -> Callable[[str, AnswerContext], str]:
        old = _FILTERS.get(name)
        if old is not None and old.fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"answer filter {name!r} is already registered by {old.fn.__module__}.{old.fn.__qualname__}")
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        _FILTERS[name] = AnswerFilter(name, version, fn, doc)
        return fn

    return deco


def get_filter(name: str) -> AnswerFilter:
    """The filter registered as ``name``; InputError naming the known filters otherwise."""
    try:
        return _FILTERS[name]
    except KeyError:
        raise InputError(f"unknown answer filter {name!r}; registered: {', '.join(sorted(_FILTERS))}") from None


def filter_names() -> list[str]:
    """Every registered filter name, sorted."""
    return sorted(_FILTERS)


# -- 0. invisible characters -----------------------------------------------------------------------------------------

def strip_invisible(text: str) -> str:
    """``text`` without Unicode format characters (category Cf: zero-width space U+200B, joiners U+200C/D, word
    joiner U+2060, BOM U+FEFF, bidirectional marks, soft hyphen U+00AD…): they are invisible, so ``6\u200b1``
    reads as ``61``. Every matcher's input and every gold comparison passes through it."""
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


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
    for rx in (_LABEL_LINE, _LABEL_INLINE):
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


# -- 4. the final answer ---------------------------------------------------------------------------------------------

# group 1: the block's content; group 2: its closing tag ("" for a block the end of the reply closed)
_ANSWER_BLOCKS = [re.compile(o + r"(.*?)(" + c + r"|\Z)", re.IGNORECASE | re.DOTALL) for o, c in (
    (r"<answer(?:\s[^>]*)?>", r"</answer\s*>"),
    (r"<response(?:\s[^>]*)?>", r"</response\s*>"),
    (r"<output(?:\s[^>]*)?>", r"</output\s*>"),
    (r"<final_answer(?:\s[^>]*)?>", r"</final_answer\s*>"),
    (r"<\|begin_of_solution\|>", r"<\|end_of_solution\|>"),
    (r"\[BEGIN FINAL RESPONSE\]", r"\[END FINAL RESPONSE\]"),
)]
_LABEL = r"(?:final answer|answer|最终答案|答案|回答|答)"
_LABEL_LINE = re.compile(rf"(?im)^[ \t]*(?:[*_#>]+[ \t]*)*(?:the[ \t]+)?{_LABEL}[ \t]*[*_]*[ \t]*[:：][ \t]*(?:[*_]+[ \t]*)?"
                         r"|^[ \t]*####[ \t]+"
                         # a heading that is the label alone, the answer on the lines below ("**Final Answer**")
                         rf"|^[ \t]*(?:[*_#>]+[ \t]*)*(?:the[ \t]+)?{_LABEL}[ \t]*[*_#]*[ \t]*\n")
_LABEL_INLINE = re.compile(r"\b(?:final answer|answer)[ \t]*[*_]*[ \t]*[:：][ \t]*(?:[*_]+[ \t]*)?"
                           r"|\bthe (?:final |correct )?answer is[ \t]*:?[ \t]*|答案(?:是|为)[：:]?", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _brace_content(text: str, start: int) -> tuple[str, int] | None:
    """The text inside the brace opened just before ``start`` (nested braces counted) and the index after the
    closing brace; None when it never closes."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i], i + 1
    return None


# finish reasons saying the output budget ended the reply: ctxbench.models.gateway.is_length_finish (OpenAI, vLLM,
# SGLang, llama.cpp, Ollama, TGI ``length``, Anthropic ``max_tokens``, Gemini ``MAX_TOKENS``, Responses API
# ``max_output_tokens``); finish reasons saying the model ended its turn itself:
_STOP_FINISH = frozenset({"stop", "end_turn", "stop_sequence", "eos", "eos_token", "stop_token", "finish_reason_stop",
                          "complete", "completed", "end", "stopped", "tool_calls", "function_call"})


def finish_kind(finish_reason: str | None) -> str | None:
    """``"length"`` when a stored finish reason says the output budget ended the reply (``length``, ``max_tokens``,
    ``MAX_TOKENS``, ``max_output_tokens``…, any case), ``"stop"`` when the model ended its turn (``stop``,
    ``end_turn``, ``STOP``, ``eos``, ``stop_sequence``…), None when unknown or absent."""
    if not finish_reason:
        return None

    f = str(finish_reason).strip().lower().replace("-", "_")
    if is_length_finish(f):
        return "length"
    if f in _STOP_FINISH:
        return "stop"
    return None


# a line that starts what follows the answer: an explanation, a note, the reasoning given after it
_AFTER_ANSWER = re.compile(r"^[ \t]*(?:[*_#>]+[ \t]*)*(?:explanation|reasoning|rationale|justification|note|notes|"
                           r"because|reason|source|evidence|解释|说明|理由|注|备注|原因)\b[ \t]*[*_]*[ \t]*[:：]?",
                           re.IGNORECASE)


def _answer_paragraph(after: str) -> str:
    """The answer that follows a final-answer label: its paragraph (the label's line and the lines under it, e.g.
    a list, up to a blank line; lines right after a label alone on its line skip blank lines first), ending before
    a line that starts an explanation (``Explanation:``, ``Note:``, ``Because``, ``解释：``…). Text after the final
    answer is not the answer: ``Answer: 17\n\nThe table also lists 42`` is ``17``."""
    lines = after.split("\n")
    out: list[str] = []
    for i, ln in enumerate(lines):
        if not ln.strip():
            if any(x.strip() for x in out):
                break
            out.append(ln)
            continue
        if _AFTER_ANSWER.match(ln) and any(x.strip() for x in out):
            break
        out.append(ln)
    return "\n".join(out) if len(out) < len(lines) else after


def _complete_lines(text: str) -> str:
    """``text`` up to its last line break: a reply the output budget cut keeps only its finished lines."""
    i = text.rfind("\n")
    return "" if i < 0 else text[:i]


# the labels of a corrected or final answer written inside a line ("... the Napa rows. Final answer: 17",
# "The correct answer is 17", "正确答案是十七"): the last of them, when it follows the last line label, is the answer
_STRONG_INLINE = re.compile(
    r"\b(?:final|corrected|correct|revised|updated|actual|real|right|true|new)[ \t]+answer[ \t]*[*_]*[ \t]*[:：]"
    r"[ \t]*(?:[*_]+[ \t]*)?"
    r"|\b(?:so[ \t]+|thus[ \t]+|therefore[ \t]+)?the[ \t]+(?:final|correct|corrected|revised|updated|actual|real|right|"
    r"true)[ \t]+answer[ \t]+(?:is|should[ \t]+be|would[ \t]+be)[ \t]*:?[ \t]*"
    r"|\bcorrection[ \t]*[*_]*[ \t]*[:：][ \t]*(?:[*_]+[ \t]*)?"
    r"|(?:正确答案|更正后的答案|最终答案|最后答案)(?:应为|应该是|是|为)?[ \t]*[：:]?", re.IGNORECASE)
# discourse markers that withdraw what the reply said before them: "Wait, …", "Actually, …", "No, …", "Correction:",
# "I mean …", "Oops, …", "make that …", "I miscounted …", "EDIT:", 不对 / 错了 / 更正 / 改正 / 纠正 / 应为 / 其实 / 实际上 / 等等.
# A marker counts where a sentence or clause opens (start of a line, after . ! ? ; : , — or a bracket); "wait" only
# followed by punctuation ("Wait Until Dark", "wait times" are no marker), "no" only opening a sentence
_CUE_EN = re.compile(
    r"(?:(?<=^)|(?<=[\n.!?;:,(\u2014\u2013])|(?<=[.!?;:,(\u2014\u2013*_][ \t])|(?<=[.!?;:,(\u2014\u2013*_][ \t]{2}))[ \t]*"
    r"[*_]*(?:(?:hmm+|oh|ah|uh|um)[,.!]?[ \t]+)?"
    r"(?:(?:no[ \t]*,?[ \t]+)?wait(?:[ \t]+a[ \t]+(?:sec(?:ond)?|minute|moment))?[ \t]*(?:\.\.\.|…|[,.!:;\u2014\u2013])"
    r"|hold[ \t]+on[ \t]*(?:\.\.\.|…|[,.!:;\u2014\u2013])"
    r"|actually(?:[ \t]*[,:\u2014\u2013]|[ \t]+(?=[a-z0-9$]))"
    r"|(?:on[ \t]+)?second[ \t]+thought[s]?[ \t]*[,:.]?"
    r"|correction[ \t]*[,:.!]?|(?:let[ \t]+me[ \t]+)?correct(?:ing)?[ \t]+(?:that|myself)[ \t]*[,:.!]?"
    r"|I[ \t]+mean[t]?[ \t]*[,:]?|oops[ \t]*[,.!:\u2014\u2013]|scratch[ \t]+that[ \t]*[,.!:]?|(?:edit|update)[ \t]*:"
    r"|make[ \t]+that\b|I[ \t]+(?:miscounted|misread|misspoke|made[ \t]+(?:a[ \t]+)?(?:mistake|an[ \t]+error)|was[ \t]+wrong)"
    r"\b[ \t]*[,.!:;]?"
    r"|(?:that(?:'|’)?s|that[ \t]+is|this[ \t]+is)[ \t]+(?:wrong|incorrect|not[ \t]+right)\b[ \t]*[,.!:;]?"
    r"|(?<![\w,])no[ \t]*[,!:\u2014\u2013](?![ \t]*(?:one|such|data|rows?|results?)\b))",
    re.IGNORECASE | re.MULTILINE)
_CUE_ZH = re.compile(r"(?:(?<=^)|(?<=[\s。！？；，、：.!?;,:（(]))(?:不对|错了|说错了|更正|改正|纠正|修正|应为|应该是|其实|"
                     r"实际上|等等|等一下)[，,：:]?", re.MULTILINE)
# what a reply says after a marker when it keeps its answer ("Wait, let me check: 12 + 30 = 42. Yes.")
_AFFIRM = re.compile(r"^\W*(?:yes|yep|yeah|correct|confirmed|right|indeed|that(?:'|’)?s (?:right|correct)|"
                     r"it(?:'|’)?s correct|the answer stands|没错|是的|对的|正确|确认无误|无误)\W*$", re.IGNORECASE)
# what confirms the answer after a marker without giving another ("Wait — the question asks for Napa, which is what
# I counted", "Actually, the answer stands", 答案不变)
_CONFIRMS = re.compile(r"\bwhich is (?:what|exactly what) I\b|\bas I (?:said|counted|stated|wrote)\b|"
                       r"\b(?:answer|count|total|result)s? (?:stands|remains|is (?:still )?(?:correct|right|unchanged))\b|"
                       r"\bconsistent with (?:my|the) answer\b|\bso (?:it|that) is (?:correct|right)\b|"
                       r"答案不变|答案无误|答案正确|没有问题", re.IGNORECASE)
# struck-through text (Markdown ~~42~~, HTML <del>, <strike>): the reply withdrew it
_STRUCK = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~|<(del|strike)(?:\s[^>]*)?>.*?</\2\s*>", re.IGNORECASE | re.DOTALL)


# what may stand before a marker that opens a line: markup and interjections ("Sorry, I misread…", "Hmm, wait")
_LINE_OPENING = re.compile(r"[\s*_>#-]*(?:(?:sorry|oops|hmm+|oh|ah|ok(?:ay)?|well|no|yes)\b[\s*_,.!\u2014\u2013-]*)*",
                           re.IGNORECASE)


def _has_content(s: str) -> bool:
    return re.search(r"\w", s) is not None


def _last_correction(text: str, whole_reply: bool = False) -> re.Match | None:
    """The last withdrawal marker of ``text`` (:data:`_CUE_EN`, :data:`_CUE_ZH`) that follows some answer (a marker
    opening the text withdraws nothing), where a marker takes back the answer: in the answer's own paragraph (the
    first), in the reply's last paragraph, or opening a line ("Answer: 42\n\nWait, I miscounted…"); never after an
    explanation line (``Explanation:``, ``Note:``…: a marker inside the reasons given after the answer withdraws
    nothing, and neither does one in the middle of a paragraph of evidence)."""
    scope = len(text)
    for m in re.finditer(r"(?m)^.*$", text):
        if _AFTER_ANSWER.match(m.group(0)) and _has_content(text[:m.start()]):
            scope = m.start()
            break
    paras = [m.start() for m in re.finditer(r"\n[ \t]*\n", text[:scope])]
    first_end = paras[0] if paras else scope
    last_start = paras[-1] if paras else 0
    best = None
    for rx in (_CUE_EN, _CUE_ZH):
        for m in rx.finditer(text, 0, scope):
            s = m.start()
            line_open = _LINE_OPENING.fullmatch(text[text.rfind("\n", 0, s) + 1:s]) is not None
            if not (s < first_end or (whole_reply and s >= last_start) or line_open):
                continue
            if re.fullmatch(r"[\s*_]*no[\s,!:\u2014\u2013]*", m.group(0), re.IGNORECASE):
                nxt = re.split(r"[.!?;\n]", text[m.end():scope], maxsplit=1)[0]
                if re.search(r"\b(?:not|never|no longer)\b|n[’']t\b", nxt, re.IGNORECASE):
                    continue                # "No, London is not in the table": a negation, not a correction
            if _has_content(text[:s]) and (best is None or s > best.start()):
                best = m
    return best


def _labelled(text: str) -> re.Match | None:
    """The last final-answer label: the last line label, or a later corrected/final label inside a line
    (:data:`_STRONG_INLINE`); else the last inline ``answer:`` / ``the answer is``."""
    last = None
    for last in _LABEL_LINE.finditer(text):
        pass
    strong = None
    for strong in _STRONG_INLINE.finditer(text):
        pass
    if strong is not None and (last is None or strong.start() >= last.end()):
        last = strong
    if last is None:
        for last in _LABEL_INLINE.finditer(text):
            pass
    return last


@register_filter("final_answer", version="4")
def final_answer(text: str, ctx: AnswerContext) -> str:
    """The final answer: the last answer block, else the text after the last final-answer label (a corrected or
    final label inside a line counts when it follows the last line label), else the last ``\\boxed{}``, else the
    whole reply (which ``last_statement`` then narrows). An answer the reply withdraws is not the answer: struck-out
    text (``~~42~~``) is removed, and after a withdrawal marker that follows the answer (``Wait, …``,
    ``Actually, …``, ``No, …``, ``Correction:``, ``I mean``, ``I miscounted``, 不对, 应为, 更正, 其实…:
    :func:`_last_correction`) the
    answer is read again from what follows the marker alone (note ``withdrawn``), unless that only affirms it
    ("Yes."). When the output budget ended the reply (``ctx.finish_reason`` ``length``…) only a finished answer
    counts: a closed block or box, or the complete lines after the label; a reply cut before its answer has none
    (``""``, note ``cut_off``)."""
    return _final(_STRUCK.sub(" ", text) if ("~~" in text or "<" in text) else text, ctx, 0)


def _withdrawn(answer: str, ctx: AnswerContext, depth: int, unmarked: bool = False) -> str:
    """``answer`` (what a label, block or box gave, or the whole unmarked reply), or, where a withdrawal marker
    follows an answer in it, the answer read from the text after the marker."""
    cue = _last_correction(answer, unmarked) if depth < 4 else None
    if cue is None:
        if unmarked:
            ctx.notes.add("_unmarked")
        return answer
    after = answer[cue.end():].lstrip(" \t,，:：\u2014\u2013-")
    for m in re.finditer(r"(?m)^.*$", after):             # the reasons given after the corrected answer
        if _AFTER_ANSWER.match(m.group(0)) and _has_content(after[:m.start()]):
            after = after[:m.start()]
            break
    sub = AnswerContext(ctx.reasoning, ctx.finish_reason)
    new = _final(after, sub, depth + 1)
    if _AFFIRM.match(last_statement(new) if "_unmarked" in sub.notes else new.strip() or "x") or (
            _CONFIRMS.search(after) and not re.search(r"\d", after)):
        kept = answer[:cue.start()]             # the reply affirmed its answer after checking it
        if unmarked:
            ctx.notes.add("_unmarked")
            return kept.strip()
        return _answer_paragraph(kept).strip()
    ctx.notes.update(sub.notes)
    ctx.notes.add("withdrawn")
    return new


def _final(text: str, ctx: AnswerContext, depth: int) -> str:
    cut = finish_kind(ctx.finish_reason) == "length"
    for rx in _ANSWER_BLOCKS:
        last = None
        for last in rx.finditer(text):
            pass
        if last is not None:
            if cut and not last.group(2):
                ctx.notes.add("cut_off")      # an answer block the budget ended before it closed
                return ""
            return _withdrawn(last.group(1).strip(), ctx, depth)
    last = _labelled(text)
    if last is not None:
        prev = None
        for rx in (_LABEL_LINE, _STRONG_INLINE):
            for m in rx.finditer(text, 0, last.start()):
                if m.end() <= last.start() and (prev is None or m.end() > prev.end()):
                    prev = m
        if prev is not None and _last_correction(text[prev.end():last.start()]) is not None:
            ctx.notes.add("withdrawn")      # an earlier answer taken back before the final label
        rest = text[last.end():]
        if cut:
            after = _answer_paragraph(rest)
            if after is rest:               # the answer runs to where the budget cut: its finished lines only
                rest = _complete_lines(rest)
                if not rest.strip():
                    ctx.notes.add("cut_off")
                    return ""
        cue = _last_correction(rest) if depth < 4 else None
        if cue is not None:
            return _withdrawn(rest.strip(), ctx, depth)
        return _answer_paragraph(rest).strip()
    boxed = None
    for m in _BOXED.finditer(text):
        boxed = _brace_content(text, m.end()) or boxed
    if boxed is not None:
        tail = text[boxed[1]:]
        if depth < 4 and not cut and _last_correction(boxed[0] + tail) is not None:
            return _withdrawn(boxed[0].strip() + tail, ctx, depth)   # "\boxed{42} Wait, actually 17"
        return boxed[0].strip()
    if cut:
        ctx.notes.add("cut_off")   # ended by the budget with no final answer: whatever it quoted is not one
        return ""
    return _withdrawn(text.strip(), ctx, depth, unmarked=True)


# -- 4b. the last statement of a reply without a final-answer marker ---------------------------------------------------

# a line of a list or table: a bullet, "1." / "1)" / "(1)" / "[1]" / "a)" marker, or a table row
_LIST_LINE = re.compile(r"^\s*(?:[-*•·‣◦]|\(?\d{1,3}[.)、]|\[\d{1,3}\]|\(?[a-zA-Z][.)](?=\s)|\|)\s*\S")
_PLEASANTRY = re.compile(r"^\s*(?:i hope|hope this|let me know|feel free|if you (?:have|need|want|would)|please let|"
                         r"is there anything|happy to help|good luck|i'?m happy|glad to help|希望|如有|如果您?还有)",
                         re.IGNORECASE)
_ABBREV = frozenset("e.g i.e vs etc mr mrs ms dr no st fig al approx ca jr sr inc ltd co cf resp vol pp p".split())
_SENT_BREAK = re.compile(r"[.!?]+[\"'”’)\]]*\s+|[。！？]+[”’」』）]*")


def sentences(text: str) -> list[str]:
    """``text`` split into sentences: after ``.``, ``!``, ``?`` followed by a space (not after an abbreviation such as
    ``e.g.``, ``Dr.`` or an initial ``J.``; a decimal point is never followed by a space) and after ``。！？``.
    Line breaks end sentences too; the marker of a list numbered inside a line (``1. John Smith 2. Jane Doe``)
    ends none. Empty pieces are dropped."""
    out: list[str] = []
    for line in text.splitlines():
        pos = 0
        marks = inline_markers(line)
        for m in _SENT_BREAK.finditer(line):
            if any(a <= m.start() < b for a, b in marks):
                continue
            if m.group(0)[0] == ".":
                word = re.search(r"([A-Za-z][A-Za-z.]*)\.*$", line[:m.start()])
                w = word.group(1).lower().rstrip(".") if word else ""
                if w in _ABBREV or (word and len(word.group(1)) == 1 and word.group(1).isupper()):
                    continue
            piece = line[pos:m.end()].strip()
            if piece:
                out.append(piece)
            pos = m.end()
        if line[pos:].strip():
            out.append(line[pos:].strip())
    return out


def last_statement(text: str) -> str:
    """What the end of a reply without a final-answer marker asserts: the list (or table) that ends it, whole
    (with no line that only introduces it), else its last sentence; closing pleasantries ("I hope this helps",
    "Let me know…") skipped. Steps, lists and values quoted before it are evidence, not the answer."""
    blocks = [b for b in re.split(r"\n[ \t]*\n", text.strip()) if b.strip()]
    while len(blocks) > 1 and _PLEASANTRY.match(blocks[-1]):
        blocks.pop()
    if not blocks:
        return ""
    lines = [ln for ln in blocks[-1].splitlines() if ln.strip()]
    k = len(lines)
    while k > 0 and _LIST_LINE.match(lines[k - 1]):
        k -= 1
    if k < len(lines) and (len(lines) - k >= 2 or k == 0 or lines[k - 1].rstrip().endswith((":", "："))):
        return "\n".join(ln.strip() for ln in lines[k:])
    sents = sentences("\n".join(lines))
    while len(sents) > 1 and (_PLEASANTRY.match(sents[-1]) or not re.search(r"\w", sents[-1])):
        sents.pop()
    return sents[-1] if sents else ""


@register_filter("last_statement")
def last_statement_filter(text: str, ctx: AnswerContext) -> str:
    """Without a final-answer marker (no label, block or box: ``final_answer`` kept the whole reply), the answer
    is what the reply's end asserts (:func:`last_statement`); a marked answer passes unchanged."""
    if "_unmarked" not in ctx.notes:
        return text
    return last_statement(text)


# -- 4c. values the answer rules out --------------------------------------------------------------------------------

# cues that rule a value out. Bare "not" only after a separator ("17 (not 42)", "17, not 42", "17 and not 42"):
# "is not mentioned" is a statement, not a value ruled out; the other cues anywhere
_RULE_OUT_EN = re.compile(
    r"(?P<open>[(\[（【]\s*)?"
    r"(?:(?:(?<=[(\[（【,，;；:：—–.!?。])|(?<=\s[-—–])|(?<=^))\s*(?:but\s+|and\s+)?not\b|(?<![\w])(?:but|and)\s+not\b"
    r"|(?<![\w])(?:rather\s+than|instead\s+of|as\s+opposed\s+to|excluding|except(?:\s+for)?|as\s+distinct\s+from|"
    r"in\s+place\s+of)\b)"
    r"(?P<body>[^)）\]】,，;；。!?！？\n]*?)"
    r"(?=\s*(?:$|[)）\]】,，;；。!?！？\n]|\.(?:\s|$)|\bbut\b))(?P<close>\s*[)）\]】])?",
    re.IGNORECASE | re.MULTILINE)
_RULE_OUT_ZH = re.compile(
    r"(?P<open>[(（【\[]\s*)?(?:而非|而不是|并非|并不是|也不是|(?<!是)不是|而并非|而绝非|绝非)"
    r"(?P<body>[^)）\]】,，;；。!?！？\n]*?)(?=$|[)）\]】,，;；。!?！？\n]|而是)(?P<close>[)）\]】])?", re.MULTILINE)


def drop_ruled_out_values(text: str) -> str:
    """``text`` without the values it rules out: a cue (``not`` after a separator, ``rather than``, ``instead
    of``, ``as opposed to``, ``excluding``, ``except``, ``而非``, ``而不是``, ``不是``, ``并非``…) and what follows
    it up to the end of its clause or bracket. ``Answer: 17 (not 42)`` → ``17``; ``六十（而非七十三）`` → ``六十``;
    ``不是七十三而是六十`` → ``而是六十``. A refusal (``not mentioned``) is a statement and is kept."""
    def drop(m: re.Match) -> str:
        body = m.group("body")
        if not body.strip() or is_refusal(m.group(0)):
            return m.group(0)
        if m.group("open") and not m.group("close"):
            return m.group(0)       # a bracket opened before the cue and not closed by it: leave it
        return " "

    out = _RULE_OUT_EN.sub(drop, text)
    out = _RULE_OUT_ZH.sub(drop, out)
    if out == text:
        return text
    out = re.sub(r"[(\[（【]\s*[)\]）】]", " ", out)          # brackets left empty
    out = re.sub(r"[ \t]*[—–-][ \t]*(?=[,，;；.。!?！？]|[ \t]*$)", "", out, flags=re.MULTILINE)  # a dash left dangling
    out = re.sub(r"\s*[,，;；]\s*(?=[,，;；.。)）]|$)", "", out, flags=re.MULTILINE)  # a separator left dangling
    out = re.sub(r"[ \t]+([,，;；.。!?！？])", r"\1", out)
    out = re.sub(r"([.。!?！？])(?:[ \t]*[.。])+", r"\1", out)          # "17. Not 42." → "17."
    return re.sub(r"[ \t]{2,}", " ", out).strip()


@register_filter("drop_ruled_out")
def drop_ruled_out(text: str, ctx: AnswerContext) -> str:
    """Remove the values the answer rules out (:func:`drop_ruled_out_values`): the answer is the value asserted."""
    out = drop_ruled_out_values(text)
    if out != text:
        ctx.notes.add("ruled_out")
    return out


# -- 4d. degenerate repetition --------------------------------------------------------------------------------------

_UNIT_MARKER = re.compile(r"^\s*(?:[-*•·]|\(?\d{1,3}[.)、]|\[\d{1,3}\])\s*")


def _units(text: str) -> list[tuple[int, int]]:
    """Spans of the text's units for repetition: lines, and sentences within a line."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        start = pos
        for m in _SENT_BREAK.finditer(line):
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
    if _LABEL_LINE.search(first) or _LABEL_INLINE.search(first) or any(rx.search(first) for rx in _ANSWER_BLOCKS):
        return text[:end]
    return text[:start].rstrip()


# -- 5. tidy ---------------------------------------------------------------------------------------------------------

_WRAPPERS = re.compile(r"\\(?:boxed|fbox|text|textbf|mathrm|mbox)\s*\{")
_MATH_DOLLARS = re.compile(r"\$\$?([^$\n]+?)\$\$?")
_MATH_PARENS = re.compile(r"\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)


def _unwrap(text: str) -> str:
    while True:
        m = _WRAPPERS.search(text)
        if m is None:
            return text
        inner = _brace_content(text, m.end())
        if inner is None:
            return text[:m.start()] + text[m.end():]
        text = text[:m.start()] + inner[0] + text[inner[1]:]


def unwrap_latex(text: str) -> str:
    """LaTeX wrappers unwrapped as ``tidy`` does: ``\\(x\\)`` / ``\\[x\\]`` delimiters, ``\\text{x}``,
    ``\\textbf{x}``, ``\\mathrm{x}``, ``\\boxed{x}``… and ``$x$`` math spans (prices such as ``$3 and $5`` kept).
    :func:`ctxbench.scoring.normalize.normalize_text` applies it to gold and answer alike, so a gold title holding
    ``$…$`` or ``\\text{}`` compares equal to a reply that repeats it."""
    text = _MATH_PARENS.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _unwrap(text)
    return _MATH_DOLLARS.sub(_math, text)


def _math(m: re.Match) -> str:
    inner = m.group(1)
    # a math span ($x$, $9{,}500$); "$3 and $5" (prices) is no math span: keep it as written
    if "\\" in inner or "{" in inner or re.fullmatch(r"[\s\d.,+\-−^*/=()%]+", inner):
        return inner
    return m.group(0)


# tags that delimit the parts of a prompt (the context, the question): a model that echoes them ("Answer: 42
# </document>", "<document>42</document>", the answer followed by "<question>...") put no answer in them
_PROMPT_TAGS = ("document", "documents", "context", "passage", "passages", "question", "query")


@lru_cache(maxsize=1)
def _prompt_tag_res() -> tuple[re.Pattern, re.Pattern]:
    """(an opening prompt tag, any prompt tag): the names above plus every tag that one of the prompt files
    (``assets/prompts/*.yaml``) both opens and closes."""
    names = set(_PROMPT_TAGS)
    for f in sorted((assets_dir() / "prompts").glob("*.yaml")):
        body = f.read_text(encoding="utf-8")
        names |= {n for n in re.findall(r"<([A-Za-z][\w-]*)>", body) if f"</{n}>" in body}
    alt = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return (re.compile(rf"<(?:{alt})(?:\s[^<>]*)?>", re.IGNORECASE),
            re.compile(rf"</?(?:{alt})(?:\s[^<>]*)?>", re.IGNORECASE))


def _strip_prompt_tags(text: str) -> str:
    """The answer without echoed prompt delimiters: cut at an opening one that follows the answer (the model went
    on to repeat the prompt), then drop the others."""
    opening, any_tag = _prompt_tag_res()
    for m in opening.finditer(text):
        if any_tag.sub("", text[:m.start()]).strip():
            text = text[:m.start()]
            break
    return any_tag.sub(" ", text)


@register_filter("tidy", version="2")
def tidy(text: str, ctx: AnswerContext) -> str:
    """NFC; the prompt's own delimiter tags that the model echoed removed (``</document>``, ``<question>``...: see
    :data:`_PROMPT_TAGS`); LaTeX wrappers, math delimiters and Markdown emphasis unwrapped; spaces collapsed, ends
    trimmed."""
    text = unicodedata.normalize("NFC", text)
    text = _strip_prompt_tags(text)
    text = unwrap_latex(text)
    text = re.sub(r"\*\*|__", "", text)
    s = text.strip()
    if len(s) > 1 and s[0] == s[-1] and s[0] in "`*_":
        s = s.strip(s[0])
    lines = [" ".join(ln.split()) for ln in s.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


# -- code fences (judge replies) ------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)


@register_filter("strip_code_fences")
def strip_code_fences(text: str, ctx: AnswerContext) -> str:
    """Markdown code fences unwrapped (````json\n{…}\n````→ ``{…}``), the text around them kept: what a judge that
    fences its JSON means."""
    return _FENCE.sub(lambda m: m.group(1), text).strip()


# -- filters a track may add -----------------------------------------------------------------------------------------

@register_filter("first_line")
def first_line(text: str, ctx: AnswerContext) -> str:
    """The first non-empty line of the answer (for tracks whose answers are one line)."""
    for ln in text.splitlines():
        if ln.strip():
            return ln.strip()
    return ""


@register_filter("fold_width")
def fold_width(text: str, ctx: AnswerContext) -> str:
    """NFKC: full-width and compatibility forms (ＡＢＣ, １２３, ：) to their plain forms."""
    return unicodedata.normalize("NFKC", text)


@register_filter("strip_trailing_period")
def strip_trailing_period(text: str, ctx: AnswerContext) -> str:
    """Remove a full stop (``.``, ``。``) ending the answer."""
    return re.sub(r"[.。]+\s*$", "", text)


DEFAULT_FILTERS: tuple[str, ...] = ("strip_format_chars", "drop_reasoning_field", "strip_reasoning",
                                    "strip_chat_tokens", "cut_repetition", "final_answer", "last_statement",
                                    "drop_ruled_out", "tidy")


@dataclass(frozen=True)
class AnswerChain:
    """Named filters applied in order. Calling it on a stored reply (and the response's reasoning field) gives the
    answer matchers and the judge receive (``""`` for no answer)."""

    names: tuple[str, ...] = DEFAULT_FILTERS

    def __post_init__(self) -> None:
        for n in self.names:
            get_filter(n)

    def __call__(self, response: str | None, reasoning: str | None = None, finish_reason: str | None = None) -> str:
        return self.trace(response, reasoning, finish_reason)[-1][1]

    def trace(self, response: str | None, reasoning: str | None = None, finish_reason: str | None = None,
              ctx: AnswerContext | None = None) -> list[tuple[str, str]]:
        """``[("input", text), (filter name, text after it), ...]``: each step's output, for debugging a score.
        ``ctx`` (optional) collects the filters' notes."""
        ctx = ctx if ctx is not None else AnswerContext(reasoning, finish_reason)
        text = "" if response is None else str(response)
        steps = [("input", text)]
        for n in self.names:
            text = get_filter(n).fn(text, ctx) if text else ""
            steps.append((n, text))
        return steps

    def extract(self, response: str | None, reasoning: str | None = None, finish_reason: str | None = None,
                status: str | None = "ok") -> Extraction:
        """The answer a stored response gives, with what ``score`` tags on its rows (:class:`Extraction`):

        * status ``cut_off`` (the output budget ended the reply before its answer), or a reply the budget ended
          (finish reason ``length``, ``max_tokens``, ``MAX_TOKENS``…) with no finished final answer, or one that
          stops in mid-sentence without a final-answer marker (its last word one that ends no sentence: "…but
          first I should check whether"): no answer, tag ``cut_off``;
        * empty visible content with the reply in the reasoning field (``content: null``, ``reasoning_content``)
          and a finished reply (finish reason ``stop``…; where the finish reason is unknown, only a reasoning that
          marks its final answer): the answer is taken from the reasoning text through this same chain, tag
          ``answer_from_reasoning``;
        * otherwise this chain on the reply; the filters' notes become tags (``degenerate_repetition``,
          ``ruled_out``)."""
        kind = finish_kind(finish_reason)
        if status == "cut_off":
            return Extraction("", ("cut_off",), "content")
        source = "content"
        text, field_reasoning = response, reasoning
        if not strip_invisible(str(response or "")).strip() and strip_invisible(str(reasoning or "")).strip():
            if kind == "length":
                return Extraction("", ("cut_off",), "reasoning")
            source, text, field_reasoning = "reasoning", reasoning, None
        ctx = AnswerContext(field_reasoning, finish_reason)
        answer = self.trace(text, field_reasoning, finish_reason, ctx)[-1][1]
        notes = set(ctx.notes)
        if source == "reasoning":
            if kind != "stop" and "_unmarked" in notes:
                answer = ""                     # finish unknown: only a marked final answer counts
            notes.add("answer_from_reasoning")
        if ("_unmarked" in notes and kind != "stop" and "last_statement" in self.names
                and _ENDS_MID_SENTENCE.search(answer)):
            answer = ""
            notes.add("cut_off")
        if kind == "length" and not answer:
            notes.add("cut_off")                # the budget ended a reply that holds no answer
        if "cut_off" in notes:
            answer = ""
        return Extraction(answer, tuple(sorted(n for n in notes if not n.startswith("_"))), source)

    def fingerprint(self) -> list[list[str]]:
        """``[[filter name, "version:code hash"], ...]`` in chain order: what makes stored answers current."""
        return [[n, f"{get_filter(n).version}:{code_hash(get_filter(n).fn)}"] for n in self.names]


# a reply stopped in mid-sentence: its last word is one no English sentence ends with
_ENDS_MID_SENTENCE = re.compile(r"(?<![\w-])(?:whether|the|a|an|and|or|but|of|to|in|on|at|that|which|who|if|because|"
                                r"with|for|from|by|is|are|was|were|than|then|so|as|its|their|whose|into|since)\s*$",
                                re.IGNORECASE)


@dataclass(frozen=True)
class Extraction:
    """What :meth:`AnswerChain.extract` read from a stored response: the answer (``""`` for none), the tags its
    score rows get (``cut_off``, ``answer_from_reasoning``, ``degenerate_repetition``, ``ruled_out``) and where the
    answer came from (``content`` or ``reasoning``)."""

    answer: str
    tags: tuple[str, ...] = ()
    source: str = "content"


@lru_cache(maxsize=64)
def answer_chain(extra: Sequence[str] = ()) -> AnswerChain:
    """The default chain followed by ``extra`` filter names (a track's ``answer_filters``); a name written
    ``-name`` removes that filter of the default chain instead (a track whose paper scores the whole reply, e.g.
    needles' substring rule, declares ``-last_statement``). Raises InputError for an unknown name and for removing
    a filter the default chain does not hold."""
    drop = {n[1:] for n in extra if n.startswith("-")}
    for n in drop:
        if n not in DEFAULT_FILTERS:
            raise InputError(f"answer filter -{n}: {n!r} is not in the default chain ({', '.join(DEFAULT_FILTERS)})")
    return AnswerChain(tuple(n for n in DEFAULT_FILTERS if n not in drop)
                       + tuple(n for n in extra if not n.startswith("-")))


def chain_for(benchmark: str | None) -> AnswerChain:
    """The answer chain of a benchmark: the default chain and the filters its track adds. Raises InputError for an
    unregistered benchmark or an unknown filter name (naming the track)."""
    extra = tuple(answer_filters(benchmark))
    try:
        return answer_chain(extra)
    except InputError as e:
        raise InputError(f"track {benchmark}: answer_filters: {e}") from None


@dataclass(frozen=True)
class Scored:
    """One matcher's result on one reply, the answer it scored (the answer chain's output) and the extraction's
    tags (``cut_off``, ``answer_from_reasoning``, ``degenerate_repetition``…: already among ``result.tags``)."""

    matcher: str
    result: MatchResult
    answer: str
    extraction: Extraction = Extraction("")


def gold_rows(instance: dict) -> list:
    """The gold rows of an instance (``gold``: a list of rows, each a list of values; a bare value is one row)."""
    gold = instance.get("gold")
    if not isinstance(gold, list):
        return [[gold]]
    return [r if isinstance(r, list) else [r] for r in gold]


def no_credit(instance: dict, tags: Sequence[str]) -> MatchResult:
    """The result of a reply that earns no credit whatever the matcher (a reply the output budget ended before
    its answer): 0 for every gold row, ``tags``."""
    rows = gold_rows(instance)
    return MatchResult(0.0, [0.0] * len(rows), list(tags),
                       [{"gold": r, "credit": 0.0, "text": None} for r in rows])


def score_reply(response: str | None, instance: dict, reasoning: str | None = None,
                names: Sequence[str] | None = None, errors: list | None = None, finish_reason: str | None = None,
                status: str | None = "ok") -> list[Scored]:
    """Score one stored reply the way ``score`` does: the instance's benchmark's answer chain (:func:`chain_for`,
    :meth:`AnswerChain.extract`: ``finish_reason`` and ``status`` as stored in ``responses``), then each of its
    matchers (``names``, default all, the primary first) on that answer. A reply cut off by the output budget
    (status ``cut_off``, or :meth:`AnswerChain.extract` finds it so) earns 0 from every matcher, tag ``cut_off``.
    The extraction's other tags (``answer_from_reasoning``, ``degenerate_repetition``, ``ruled_out``) are added to
    each result's tags. ``instance``: the ``instances.parquet`` row with ``gold`` and ``accepted_answers`` parsed
    from JSON, without ``context`` (``score`` never loads contexts). Raises InputError for an unregistered
    benchmark or an unknown matcher (:mod:`ctxbench.scoring.registry`). A matcher that raises is a
    :class:`MatcherError` (naming the track, the matcher, the instance and the line that raised): raised, or with
    ``errors`` (a list) appended to it while the other matchers still score the reply (``score`` sets that one
    response aside and goes on)."""
    bench = instance.get("benchmark")
    ex = chain_for(bench).extract(response, reasoning, finish_reason, status)
    answer = ex.answer
    out = []
    for n in (names or matchers_for(bench)):
        fn = matcher(n, bench)
        if "cut_off" in ex.tags:
            out.append(Scored(n, no_credit(instance, ex.tags), answer, ex))
            continue
        try:
            res = fn(strip_invisible(answer), instance)
        except Exception as e:  # a matcher's bug: name the track, matcher, instance and the failing line
            err = MatcherError(_matcher_failure(n, bench, instance, e), n, instance.get("instance_id"))
            if errors is None:
                raise err from e
            errors.append(err)
            continue
        res.tags = list(dict.fromkeys([*res.tags, *ex.tags]))
        out.append(Scored(n, res, answer, ex))
    return out


class MatcherError(InputError):
    """A matcher raised on one reply: ``matcher``, ``instance_id`` and the message (:func:`score_reply`)."""

    def __init__(self, msg: str, matcher: str, instance_id: str | None):
        super().__init__(msg)
        self.matcher, self.instance_id = matcher, instance_id


def _matcher_failure(name: str, bench: str | None, instance: dict, e: Exception) -> str:
    """The message of a matcher that raised: track, matcher, instance, exception, the line that raised, and for a
    missing column what the row holds (``context`` is never in it)."""
    import traceback

    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
    msg = (f"matcher {name!r} of track {bench} raised {type(e).__name__}: {e}{where} on instance "
           f"{instance.get('instance_id')}")
    if isinstance(e, KeyError) and e.args and e.args[0] not in instance:
        msg += (f". A matcher receives the instances.parquet row without `context` (contexts can be GBs: score "
                f"never loads them); it holds {', '.join(sorted(instance))}. A failure tag that needs the context "
                f"belongs in the track's `tagger`, which is given the build directory")
    return msg
