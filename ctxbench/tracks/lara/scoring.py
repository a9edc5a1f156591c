"""Deterministic fallback matchers for free-text answers (LaRA imports), used when no LLM judge is configured.

LaRA (section 3.4, appendix C) scores answers with an LLM judge: its own judging prompt is the judge prompt ``lara``
(:mod:`ctxbench.tracks.lara.judge`; ``score --judge MODEL --judge-prompt lara`` adds ``judge-lara:MODEL``, the row
judge ``judge:MODEL``).
Without one, these matchers give a reproducible approximation, labelled ``fallback`` wherever it is reported. Each
receives the answer pipeline's output (:mod:`ctxbench.scoring.pipeline`), never the raw reply:

* ``f1``: SQuAD-style token F1 between the answer and the reference answer over
  :func:`ctxbench.scoring.normalize.tokens` (words; CJK text character by character; numbers by value, so
  ``$1,093,095`` and ``1093095`` are one token), articles dropped;
* ``containment``: the share of the reference answer's content tokens (English stopwords dropped) that occur in
  the answer, i.e. token recall;
* ``lara_fallback`` (the primary score): for the hallucination task, 1 when the answer is a refusal (the question
  is unanswerable from the context) and 0 otherwise (tag ``fabrication``); for the other tasks 0 for a refusal
  (tag ``refusal``), else ``containment``.

Refusal detection: :func:`ctxbench.scoring.refusal.is_refusal`.
"""

from __future__ import annotations

from collections import Counter

from ctxbench.scoring.matchers import MatchResult
from ctxbench.scoring.normalize import tokens
from ctxbench.scoring.filters import strip_invisible
from ctxbench.scoring.refusal import is_refusal

__all__ = ["containment", "containment_instance", "f1_instance", "lara_fallback", "token_f1"]

_ARTICLES = {"a", "an", "the"}


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _tokens(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in _ARTICLES]


def token_f1(answer: str, reference: str) -> float:
    """Token F1 (SQuAD): 2PR/(P+R) over the multisets of tokens (:func:`ctxbench.scoring.normalize.tokens`:
    words, CJK characters one by one, numbers by value); 0 when either side is empty. ``答案是魏国`` against
    ``魏国``: 2 shared characters of 5 and 2, P = 0.4, R = 1, F1 = 4/7."""
    a, r = _tokens(answer), _tokens(reference)
    common = sum((Counter(a) & Counter(r)).values())
    if not a or not r or common == 0:
        return 0.0
    p, rec = common / len(a), common / len(r)
    return 2 * p * rec / (p + rec)


def containment(answer: str, reference: str) -> float:
    """Share of the reference's distinct content tokens (stopwords dropped) found among the answer's tokens;
    where the reference has only stopwords, all its tokens count."""
    stop = _stopwords()
    ref = set(_tokens(reference))
    content = {t for t in ref if t not in stop} or ref
    if not content:
        return 0.0
    return len(content & set(_tokens(answer))) / len(content)


def _reference(instance: dict) -> str:
    return " ".join(str(v) for row in instance["gold"] for v in row if v is not None)


def f1_instance(answer: str | None, instance: dict) -> MatchResult:
    """:func:`token_f1` of the answer against the reference (matcher ``f1``)."""
    a = strip_invisible(answer or "").strip()
    if not a:
        return MatchResult(0.0, [], ["null_answer"], _details(instance, 0.0, None))
    v = token_f1(a, _reference(instance))
    return MatchResult(v, [], [], _details(instance, v, a if v else None))


def containment_instance(answer: str | None, instance: dict) -> MatchResult:
    """:func:`containment` of the reference in the answer (matcher ``containment``)."""
    a = strip_invisible(answer or "").strip()
    if not a:
        return MatchResult(0.0, [], ["null_answer"], _details(instance, 0.0, None))
    v = containment(a, _reference(instance))
    return MatchResult(v, [], [], _details(instance, v, a if v else None))


def _details(instance: dict, credit: float, text: str | None) -> list[dict]:
    """``details`` of a free-text matcher: the one reference answer, its credit and the answer that earned it."""
    return [{"gold": _reference(instance), "credit": credit, "text": text}]


def lara_fallback(answer: str | None, instance: dict) -> MatchResult:
    """The primary fallback score (module docstring): refusal for hallucination, else containment."""
    a = strip_invisible(answer or "").strip()
    if not a:
        return MatchResult(0.0, [], ["null_answer"], _details(instance, 0.0, None))
    refused = is_refusal(a)
    if instance.get("skill") == "hallucination":
        v = 1.0 if refused else 0.0
        return MatchResult(v, [], [] if refused else ["fabrication"], _details(instance, v, a if refused else None))
    if refused:
        return MatchResult(0.0, [], ["refusal"], _details(instance, 0.0, None))
    v = containment(a, _reference(instance))
    return MatchResult(v, [], [], _details(instance, v, a if v else None))
