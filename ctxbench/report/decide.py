"""The report's decision section: effective context length per model (and paired differences between the build's
models), from :mod:`ctxbench.analysis.decide`; written as ``report/effective_length.parquet`` and
``report/pairs.parquet`` and rendered as ``ctxbench compare`` renders them."""

from __future__ import annotations

import hashlib
from collections import defaultdict

import pyarrow.parquet as pq

from ctxbench.analysis.core import instance_scores, primary_rows
from ctxbench.analysis.decide import effective_rows, pair_rows
from ctxbench.core.storage import to_table, write_parquet
from ctxbench.report.context import ReportContext
from ctxbench.report.compare import effective_table


def decide_section(ctx: ReportContext) -> str:
    """Effective context length (relative 85% and absolute 0.856) per model × mode × matcher of the track's primary
    matcher and judges, over each model's own scored instances per tier; paired differences on the instances two
    models both scored, clustered by context ("" when nothing is scored)."""
    if not (ctx.build_dir / "scores.parquet").exists():
        return ""
    rows, _ = instance_scores(ctx.build_dir)
    rows = primary_rows(rows)
    if not rows:
        return ""
    ctx_of = {r["instance_id"]: hashlib.sha256(r["context"].encode()).hexdigest() for r in
              pq.read_table(ctx.build_dir / "instances.parquet", columns=["instance_id", "context"]).to_pylist()}
    tables: dict[tuple, dict[int, dict[str, list[dict]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        tables[(r["benchmark"], r["mode"], r["matcher"])][r["target_tokens"]][r["model"]].append(
            {**r, "context_id": ctx_of.get(r["instance_id"], r["instance_id"])})
    eff, pairs = [], []
    bh = str(ctx.manifest.get("build_hash") or "")
    for (bench, mode, matcher), by_len in sorted(tables.items(), key=lambda x: tuple(str(v) for v in x[0])):
        base = {"benchmark": bench, "build_hash": bh, "build": bh[:12], "mode": mode, "matcher": matcher}
        models = sorted({m for per in by_len.values() for m in per})
        eff += effective_rows(by_len, models, base)
        pairs += pair_rows(by_len, models, base)
    ctx.out.mkdir(parents=True, exist_ok=True)
    write_parquet(to_table("effective_length", eff), ctx.out / "effective_length.parquet")
    if pairs:
        write_parquet(to_table("pairs", pairs), ctx.out / "pairs.parquet")

    return "<section><h2>Effective context length</h2>" + effective_table(eff).split("</h3>", 1)[1] + "</section>"
