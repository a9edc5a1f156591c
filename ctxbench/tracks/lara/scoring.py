"""Deterministic fallback matchers for free-text answers (LaRA imports), used when no LLM judge is configured.

LaRA (section 3.4, appendix C) scores answers with an LLM judge (``score --judge MODEL`` adds ``judge:MODEL``).
Without one, these matchers give a reproducible approximation, labelled ``fallback`` wherever it is reported:

* ``f1``: SQuAD-style token F1 between the extracted answer and the reference answer (text normalised by
  :func:`ctxbench.scoring.normalize.normalize_text`, articles dropped);
* ``containment``: the share of the reference answer's content tokens (English stopwords dropped) that occur in
  the extracted answer, i.e. token recall;
* ``lara_fallback`` (the primary score): for the hallucination task, 1 when the answer is a refusal (the question
  is unanswerable from the context) and 0 otherwise (tag ``fabrication``); for the other tasks 0 for a refusal
  (tag ``refusal``), else ``containment``.

Refusal detection: phrases stating the context does not give the information ("not mentioned", "does not
provide/specify/state ...", "no information", "cannot be determined", "I don't know", ...), matched on the
extracted answer.
"""

from __future__ import annotations

import re
from collections import Counter

from ...scoring.matchers import MatchResult
from ...scoring.normalize import extract_answer, normalize_text

_ARTICLES = {"a", "an", "the"}
_REFUSAL_RE = re.compile(
    r"\b(?:not (?:be )?(?:mentioned|provided|specified|stated|given|included|discussed|addressed|disclosed|"
    r"described|detailed|available|found|listed|known|reported|indicated|covered)"
    r"|(?:does|do|did|is|are|was|were) not (?:\w+ ){0,3}(?:mention|provide|specify|state|say|contain|include|"
    r"discuss|address|disclose|describe|detail|give|indicate|report|list|cover|offer|reveal|present|propose|suggest|"
    r"examine|explore|outline|explain|elaborate|investigate|analy[sz]e|evaluate|identify|reference)\w*"
    r"|(?:doesn't|don't|didn't|isn't|aren't) (?:\w+ ){0,3}(?:mention|provide|specify|state|say|contain|include|"
    r"discuss|address|disclose|describe|detail|give|indicate|report|list|cover|propose|suggest|examine|explore|"
    r"outline|explain)\w*"
    r"|no (?:\w+ ){0,2}(?:information|mention|details?|data|indication|record|evidence)"
    r"|(?:cannot|can't|can ?not|unable to) (?:be )?(?:determine|answer|find|tell|say|infer|identify)\w*"
    r"|(?:i )?(?:do not|don't) know|not enough information|insufficient information|unanswerable"
    r"|there is no (?:\w+ ){0,3}(?:about|regarding|on|of)|makes no mention|silent on)\b", re.IGNORECASE)


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _tokens(text: str) -> list[str]:
    return [t for t in normalize_text(text).split() if t not in _ARTICLES]


def is_refusal(answer: str | None) -> bool:
    """Whether ``answer`` declines to answer because the context lacks the information."""
    return bool(answer) and _REFUSAL_RE.search(" ".join(str(answer).split())) is not None


def token_f1(answer: str, reference: str) -> float:
    """Token F1 (SQuAD): 2PR/(P+R) over the multisets of normalised tokens; 0 when either side is empty."""
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


def _answer(response: str | None) -> str:
    return extract_answer(response)


def f1_instance(response: str | None, instance: dict) -> MatchResult:
    """:func:`token_f1` of the extracted answer against the reference (matcher ``f1``)."""
    a = _answer(response)
    if not a:
        return MatchResult(0.0, [], ["null_answer"])
    return MatchResult(token_f1(a, _reference(instance)))


def containment_instance(response: str | None, instance: dict) -> MatchResult:
    """:func:`containment` of the reference in the extracted answer (matcher ``containment``)."""
    a = _answer(response)
    if not a:
        return MatchResult(0.0, [], ["null_answer"])
    return MatchResult(containment(a, _reference(instance)))


def lara_fallback(response: str | None, instance: dict) -> MatchResult:
    """The primary fallback score (module docstring): refusal for hallucination, else containment."""
    a = _answer(response)
    if not a:
        return MatchResult(0.0, [], ["null_answer"])
    refused = is_refusal(a)
    if instance.get("skill") == "hallucination":
        return MatchResult(1.0 if refused else 0.0, [], [] if refused else ["fabrication"])
    if refused:
        return MatchResult(0.0, [], ["refusal"])
    return MatchResult(containment(a, _reference(instance)))
