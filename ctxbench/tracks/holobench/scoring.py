"""Deterministic row matcher (``row_match``) of the verbalized-database track: HoloBench's recall-oriented score
(section 4.1, evaluation metrics).

Each gold row is judged *exact match* (every value of the row is stated in the answer: 1), *partial match* (some
value is: 0.5) or *no match* (0); the instance score is the mean over gold rows.

A matcher receives the *answer*: the reply after the answer pipeline (:mod:`ctxbench.scoring.pipeline`: reasoning,
chat tokens and everything before the final-answer label removed), never the raw reply. Gold values are compared
as follows: a gold that is a number, or text that is exactly one number (``"61"``, ``"1,234"``), is stated when a
number of the answer read by the one number reader (:mod:`ctxbench.scoring.numbers`) equals it — never as text, so
``"61"`` is not stated by ``61.5``, ``-61``, ``4:30`` or a date; other text is matched as normalised whole words
(:func:`ctxbench.scoring.normalize.text_matches`); a gold date or time (``2004-04-01 00:00:00``, ``8:00 AM``) is
stated by the same date or time in any written form (``April 1, 2004``, ``2004年4月1日``, ``08:00``:
:mod:`ctxbench.scoring.dates`), never by another day or hour; a NULL gold value matches a stated
"none"/"null"/"unknown".
"""

from __future__ import annotations

import re

from ctxbench.scoring.dates import When, gold_when, read_whens, when_matches
from ctxbench.scoring.lists import split_spans
from ctxbench.scoring.matchers import MatchResult
from ctxbench.scoring.normalize import normalize_text, text_matches
from ctxbench.scoring.numbers import Number, gold_number, number_matches, read_numbers
from ctxbench.scoring.filters import strip_invisible

__all__ = ["row_match", "row_match_instance"]

_NULL_RE = re.compile(r"(?<!\w)(?:none|null|unknown|n a|not available|no value)(?!\w)")


def _value_in(v, answer_norm: str, nums: list[Number], whens: list[When]) -> bool:
    if v is None:
        return _NULL_RE.search(answer_norm) is not None
    w = gold_when(v)
    if w is not None:
        return when_matches(w, whens)
    g = gold_number(v)
    if g is not None:
        return number_matches(g, nums)
    return text_matches(str(v), answer_norm)


def _where(v, answer: str, nums: list[Number], whens: list[When] = ()) -> int | None:
    """The character offset in the answer of the text that states gold value ``v`` (None when not found)."""
    w = gold_when(v)
    if w is not None:
        return next((x.start for x in whens if when_matches(w, [x])), None)
    g = gold_number(v) if v is not None else None
    if g is not None:
        for n in nums:
            if number_matches(g, [n]):
                return n.start
        return None
    words = normalize_text("none" if v is None else str(v)).split()
    if not words:
        return None
    m = re.search(r"\W+".join(map(re.escape, words)), answer, re.IGNORECASE)
    return None if m is None else m.start()


def _evidence(answer: str, spans: list[tuple[int, int]], at: list[int]) -> str | None:
    """The answer items (:func:`ctxbench.scoring.lists.split_spans`) holding the offsets ``at``, joined by
    ``" | "``; the answer itself when no item holds them."""
    if not at:
        return None
    hit = [answer[a:b] for a, b in spans if any(a <= k < b for k in at)]
    return " | ".join(dict.fromkeys(hit)) if hit else answer


def row_match(answer: str | None, gold: list[list]) -> MatchResult:
    """Score an answer (the answer pipeline's output) against gold rows (list of rows, values in SELECT order).
    An empty answer scores 0 with the tag ``null_answer``. ``details``: per gold row its credit and the answer
    items (the one list splitter's) that state its values."""
    answer = answer or ""
    tags: list[str] = []
    if not answer.strip():
        return MatchResult(0.0, [0.0] * len(gold), ["null_answer"],
                           [{"gold": row, "credit": 0.0, "text": None} for row in gold])
    answer = strip_invisible(answer)
    norm = normalize_text(answer)
    nums = read_numbers(answer)
    whens = read_whens(answer)
    spans = split_spans(answer, keep=[str(v) for row in gold for v in row if isinstance(v, str)])
    verdicts, details = [], []
    for row in gold:
        hits = [_value_in(v, norm, nums, whens) for v in row]
        credit = 1.0 if all(hits) else 0.5 if any(hits) else 0.0
        verdicts.append(credit)
        at = [k for v, h in zip(row, hits) if h and (k := _where(v, answer, nums, whens)) is not None]
        details.append({"gold": row, "credit": credit, "text": _evidence(answer, spans, at) if credit else None})
    score = sum(verdicts) / len(verdicts) if verdicts else 0.0
    if len(gold) > 1 and 0 < score < 1:
        tags.append("partial_list")
    if any(v == 0.5 for v in verdicts):
        tags.append("wrong_attribute")
    return MatchResult(score, verdicts, tags, details)


def row_match_instance(answer: str | None, instance: dict) -> MatchResult:
    """:func:`row_match` in the matcher signature ``fn(answer, instance)`` (:mod:`ctxbench.scoring.matchers`)."""
    return row_match(answer, instance["gold"])
