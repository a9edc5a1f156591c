"""The report's adaptive-estimates section (issue 34): the ``adaptive.parquet`` rows of the models ``evaluate
--adaptive-calls`` evaluated on the build, marked as estimates of the full grid beside the measured results above."""

from __future__ import annotations

import html

import pyarrow.parquet as pq

from ctxbench.report.context import ReportContext
from ctxbench.report.render import table


def adaptive_section(ctx: ReportContext) -> str:
    """A table per model × mode × context length (and the whole build) of the adaptive estimates, with the number
    of instances asked; "" when no model was evaluated adaptively (no ``adaptive.parquet``)."""
    p = ctx.build_dir / "adaptive.parquet"
    if not p.exists():
        return ""
    rows = pq.read_table(p).to_pylist()
    for r in rows:
        r["context_length"] = "whole build" if r["context_length"] is None else r["context_length"]
    models = ", ".join(sorted({html.escape(r["model"]) for r in rows}))
    return (f"<h2>Adaptive estimates (item response theory, not full results)</h2><p>{models} answered only the "
            f"instances an adaptive evaluation chose (<code>evaluate --adaptive-calls</code>): the tables above show "
            f"those answers as they are. Below, each <b>estimate</b> is the predicted mean score over every instance "
            f"of the group, asked or not, with its 95% posterior-predictive interval, from a 2PL model calibrated on "
            f"the other models' answers (<code>adaptive.parquet</code>; method in the statistics reference).</p>"
            + table(rows, ["model", "mode", "context_length", "n_asked", "n_instances", "estimate", "ci_low",
                           "ci_high", "theta", "theta_se", "method"]))
