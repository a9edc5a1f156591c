"""The answer filters' contract and registry (the answer pipeline of :mod:`ctxbench.scoring.pipeline`): what a filter
sees besides the text (:class:`AnswerContext`), a registered filter (:class:`AnswerFilter`), :func:`register_filter`
and the look-ups; the two reply readings every step shares, :func:`strip_invisible` (format characters) and
:func:`finish_kind` (the stored finish reason). The filters themselves: :mod:`ctxbench.scoring.strip` (steps 0–3b),
:mod:`ctxbench.scoring.extract` (4–4c), :mod:`ctxbench.scoring.tidy` (5 and the filters a track may add);
:mod:`ctxbench.scoring.pipeline` imports them all, so every filter is registered once it is imported."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxbench.core.errors import InputError
from ctxbench.models.gateway import is_length_finish

__all__ = ["AnswerContext", "AnswerFilter", "filter_names", "finish_kind", "get_filter", "register_filter",
           "strip_invisible"]


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


# -- invisible characters ------------------------------------------------------------------------------------------

def strip_invisible(text: str) -> str:
    """``text`` without Unicode format characters (category Cf: zero-width space U+200B, joiners U+200C/D, word
    joiner U+2060, BOM U+FEFF, bidirectional marks, soft hyphen U+00AD…): they are invisible, so ``6\u200b1``
    reads as ``61``. Every matcher's input and every gold comparison passes through it."""
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


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
