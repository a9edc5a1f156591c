"""What every matcher returns, and the matcher contract.

A matcher is ``fn(answer: str, instance: dict) -> MatchResult``: ``answer`` is the reply after the benchmark's
answer pipeline (:mod:`ctxbench.scoring.pipeline`), ``instance`` the ``instances.parquet`` row with ``gold`` (and
``accepted_answers``) parsed from JSON, without ``context`` (``score`` never loads contexts). Each track declares its matchers (:class:`ctxbench.core.track.Track`);
:func:`ctxbench.scoring.pipeline.score_reply` runs the pipeline and then the matchers. Numbers are read with
:mod:`ctxbench.scoring.numbers`, text compared with :mod:`ctxbench.scoring.normalize`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MatchResult"]


@dataclass
class MatchResult:
    """Score in [0, 1], per-row verdicts (1, 0.5, 0), failure tags and ``details``: for each gold row (or gold
    item, for list matchers) ``{"gold": the row, "credit": its credit in [0, 1], "text": the answer text that
    earned it, or None}`` (stored as ``scores.details``; None where a matcher gives none)."""

    score: float
    rows: list[float] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    details: list[dict] | None = None
