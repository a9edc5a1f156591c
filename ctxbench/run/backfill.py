"""Backfill: one model → every existing build of the chosen benchmarks under a runs root.

A new model is added to the tiers already built without rebuilding anything and without calling any other model:
each build is evaluated with :func:`ctxbench.run.evaluate.evaluate_build`, which appends rows for this model only
(``responses.parquet`` rows of other models are never rewritten) and reuses the shared response cache.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from ctxbench.core.storage import build_benchmark, find_builds
from ctxbench.run.evaluate import EvalConfig, EvalSummary, evaluate_build


class BackfillConfig(BaseModel):
    """What to backfill (validated the same way from the Prefect form and from Python)."""

    model: EvalConfig
    runs_root: str = Field("runs", min_length=1, description="directory searched (recursively) for builds")
    benchmarks: list[str] = Field(default_factory=list,
                                  description="benchmarks to backfill (the instances' `benchmark`: holobench, "
                                              "scitrek, needles, ...); empty: every benchmark found")


def backfill(cfg: BackfillConfig, **evaluate_kwargs) -> dict[str, EvalSummary]:
    """Evaluate ``cfg.model`` on every build :func:`find_builds` returns; build path -> summary. Extra keyword
    arguments go to :func:`evaluate_build` (e.g. ``server`` for the embedded model)."""
    return {str(b): evaluate_build(b, cfg.model, **evaluate_kwargs)
            for b in find_builds(cfg.runs_root, cfg.benchmarks)}


def builds_by_benchmark(runs_root: str | Path) -> dict[str, int]:
    """How many completed builds lie under ``runs_root`` (recursively, :func:`find_builds`) per benchmark, in
    benchmark name order: what a backfill that found no build of the chosen benchmarks tells the user."""
    found = sorted(build_benchmark(b) for b in find_builds(runs_root))
    return {k: found.count(k) for k in dict.fromkeys(found)}
