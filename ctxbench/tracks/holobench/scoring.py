"""Deterministic row matcher (``row_match``) of the verbalized-database track: HoloBench's recall-oriented score
(section 4.1, evaluation metrics).

Each gold row is judged *exact match* (every value of the row is stated in the answer: 1), *partial match* (some
value is: 0.5) or *no match* (0); the instance score is the mean over gold rows.

A matcher receives the *answer*: the reply after the answer pipeline (:mod:`ctxbench.scoring.pipeline`: reasoning,
chat tokens and everything before the final-answer label removed), never the raw reply. Gold values are compared
as follows: a gold that is a number, or text that is exactly one number (``"61"``, ``"1,234"``), is stated when a
number of the answer read by the one number reader (:mod:`ctxbench.scoring.numbers`) equals it — never as text, so
``"61"`` is not stated by ``61.5``, ``-61``, ``4:30`` or a date; other text is matched as normalised whole words
(:func:`ctxbench.scoring.normalize.text_matches`); a NULL gold value matches a stated "none"/"null"/"unknown".
"""

from __future__ import annotations

import re

from ...scoring.matchers import MatchResult
from ...scoring.normalize import normalize_text, text_matches
from ...scoring.numbers import Number, gold_number, number_matches, read_numbers

__all__ = ["row_match", "row_match_instance"]

_NULL_RE = re.compile(r"(?<!\w)(?:none|null|unknown|n a|not available|no value)(?!\w)")


def _value_in(v, answer_norm: str, nums: list[Number]) -> bool:
    if v is None:
        return _NULL_RE.search(answer_norm) is not None
    g = gold_number(v)
    if g is not None:
        return number_matches(g, nums)
    return text_matches(str(v), answer_norm)


def row_match(answer: str | None, gold: list[list]) -> MatchResult:
    """Score an answer (the answer pipeline's output) against gold rows (list of rows, values in SELECT order).
    An empty answer scores 0 with the tag ``null_answer``."""
    answer = answer or ""
    tags: list[str] = []
    if not answer.strip():
        return MatchResult(0.0, [0.0] * len(gold), ["null_answer"])
    norm = normalize_text(answer)
    nums = read_numbers(answer)
    verdicts = []
    for row in gold:
        hits = [_value_in(v, norm, nums) for v in row]
        verdicts.append(1.0 if all(hits) else 0.5 if any(hits) else 0.0)
    score = sum(verdicts) / len(verdicts) if verdicts else 0.0
    if len(gold) > 1 and 0 < score < 1:
        tags.append("partial_list")
    if any(v == 0.5 for v in verdicts):
        tags.append("wrong_attribute")
    return MatchResult(score, verdicts, tags)


def row_match_instance(answer: str | None, instance: dict) -> MatchResult:
    """:func:`row_match` in the matcher signature ``fn(answer, instance)`` (:mod:`ctxbench.scoring.matchers`)."""
    return row_match(answer, instance["gold"])
