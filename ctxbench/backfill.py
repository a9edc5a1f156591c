"""Backfill: one model → every existing build of the chosen benchmarks under a runs root.

A new model is added to the tiers already built without rebuilding anything and without calling any other model:
each build is evaluated with :func:`ctxbench.evaluate.evaluate_build`, which appends rows for this model only
(``responses.parquet`` rows of other models are never rewritten) and reuses the shared response cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from .errors import InputError
from .evaluate import EvalConfig, EvalSummary, evaluate_build


class BackfillConfig(BaseModel):
    """What to backfill (validated the same way from the Prefect form and from Python)."""

    model: EvalConfig
    runs_root: str = Field("runs", min_length=1, description="directory searched (recursively) for builds")
    benchmarks: list[str] = Field(default_factory=list,
                                  description="benchmarks to backfill (the instances' `benchmark`: holobench, "
                                              "scitrek, needles, ...); empty: every benchmark found")


def build_benchmark(build_dir: Path) -> str:
    """The benchmark of a completed build: the manifest's ``benchmark`` or ``track``, else the ``benchmark``
    column of its instances."""
    try:
        man = json.loads((build_dir / "manifest.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(f"{build_dir / 'manifest.json'} is not valid JSON ({e}): rebuild it") from None
    name = man.get("benchmark") or man.get("track") if isinstance(man, dict) else None
    if not name:
        col = pq.read_table(build_dir / "instances.parquet", columns=["benchmark"]).column("benchmark")
        names = sorted(set(col.to_pylist()))
        name = names[0] if len(names) == 1 else ",".join(names)
    return str(name)


def find_builds(runs_root: str | Path, benchmarks: list[str] | None = None) -> list[Path]:
    """Completed builds (a directory with ``manifest.json`` beside ``instances.parquet``) under ``runs_root``,
    sorted by path, keeping those whose benchmark is in ``benchmarks`` (all when empty). Raises InputError when
    ``runs_root`` is not a directory."""
    root = Path(runs_root)
    if not root.is_dir():
        raise InputError(f"runs root {root} is not a directory: give the directory holding your builds")
    want = set(benchmarks or [])
    out = []
    for m in sorted(root.rglob("manifest.json")):
        d = m.parent
        if (d / "instances.parquet").exists() and (not want or build_benchmark(d) in want):
            out.append(d)
    return out


def backfill(cfg: BackfillConfig, **evaluate_kwargs) -> dict[str, EvalSummary]:
    """Evaluate ``cfg.model`` on every build :func:`find_builds` returns; build path -> summary. Extra keyword
    arguments go to :func:`evaluate_build` (e.g. ``server`` for the embedded model)."""
    return {str(b): evaluate_build(b, cfg.model, **evaluate_kwargs)
            for b in find_builds(cfg.runs_root, cfg.benchmarks)}
