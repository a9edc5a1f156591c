"""Deterministic row matcher (``row_match``): HoloBench's recall-oriented score (section 4.1, evaluation metrics).

Each gold row is judged *exact match* (every value of the row is stated in the answer: 1), *partial match* (some
value is: 0.5) or *no match* (0); the instance score is the mean over gold rows. Values are matched with the
normalisers of :mod:`ctxbench.scoring.normalize`; a NULL gold value matches a stated "none"/"null"/"unknown".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .normalize import extract_answer, normalize_text, number_matches, numbers_in, text_matches

_NULL_RE = re.compile(r"(?<!\w)(?:none|null|unknown|n a|not available|no value)(?!\w)")


@dataclass
class MatchResult:
    """Score in [0, 1], per-row verdicts (1, 0.5, 0) and failure tags."""

    score: float
    rows: list[float] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)


def _value_in(v, answer: str, answer_norm: str, nums) -> bool:
    if v is None:
        return _NULL_RE.search(answer_norm) is not None
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, (int, float)):
        return number_matches(float(v), nums)
    s = str(v)
    # a numeric string (e.g. a year stored as text) may be stated as a number
    try:
        if number_matches(float(s.replace(",", "")), nums):
            return True
    except ValueError:
        pass
    return text_matches(s, answer_norm)


def row_match(response: str | None, gold: list[list]) -> MatchResult:
    """Score a reply against gold rows (list of rows, values in SELECT order)."""
    answer = extract_answer(response)
    tags: list[str] = []
    if not answer.strip():
        return MatchResult(0.0, [0.0] * len(gold), ["null_answer"])
    norm = normalize_text(answer)
    nums = numbers_in(answer)
    verdicts = []
    for row in gold:
        hits = [_value_in(v, answer, norm, nums) for v in row]
        verdicts.append(1.0 if all(hits) else 0.5 if any(hits) else 0.0)
    score = sum(verdicts) / len(verdicts) if verdicts else 0.0
    if len(gold) > 1 and 0 < score < 1:
        tags.append("partial_list")
    if any(v == 0.5 for v in verdicts):
        tags.append("wrong_attribute")
    return MatchResult(score, verdicts, tags)


def row_match_instance(response: str | None, instance: dict) -> MatchResult:
    """:func:`row_match` in the matcher-registry signature (see :mod:`ctxbench.scoring.registry`)."""
    return row_match(response, instance["gold"])
