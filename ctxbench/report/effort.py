"""The report's reasoning-effort section (issue 25): score, cost and cut-off replies against the reasoning effort
of ``evaluate --reasoning-effort`` (:func:`ctxbench.analysis.effort.effort_rows`), as three figures (one line per
model × mode over none < low < medium < high) and a table; written to ``report/by_effort.parquet``. Empty for a
build without a response at an effort."""

from __future__ import annotations

import html
from collections import defaultdict

import pyarrow as pa

from ctxbench.analysis.effort import effort_order, effort_rows
from ctxbench.models.effort import EFFORTS
from ctxbench.core.storage import write_parquet
from ctxbench.report import plots
from ctxbench.report.context import ReportContext


def effort_section(ctx: ReportContext) -> str:
    """Score, cost and cut-off replies by reasoning effort ("" when no response has an effort)."""
    rows = effort_rows(ctx.build_dir)
    if not rows:
        return ""
    write_parquet(pa.Table.from_pylist(rows), ctx.out / "by_effort.parquet")
    ticks = [(i, e) for i, e in enumerate(EFFORTS) if any(r["reasoning_effort"] == e for r in rows)]

    def fig(y: str, title: str, y_title: str, y_range=None, ci: bool = False):
        series: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            if r["reasoning_effort"] is None or r[y] is None:
                continue
            series[f"{r['model']} ({r['mode']})"].append(
                {"x": effort_order(r["reasoning_effort"]), "y": r[y], "n": r["responses"],
                 "lo": r["ci_low"] if ci else None, "hi": r["ci_high"] if ci else None,
                 "link": ctx.link(model=r["model"], mode=r["mode"]) if y == "score" else None})
        return plots.line_figure(dict(series), title, "reasoning effort", y_title, x_ticks=ticks, y_range=y_range)

    score = fig("score", "Score by reasoning effort", "accuracy", (0, 1.02), ci=True)
    cost = fig("cost_usd", "Cost by reasoning effort", "cost (USD)")
    cut = fig("cut_off_share", "Replies cut off by the output budget, by reasoning effort", "share cut off",
              (0, 1.02))
    cols = ["label", "mode", "responses", "ok", "cut_off", "cut_off_share", "n", "score", "ci_low", "ci_high",
            "cost_usd", "cost_per_response_usd", "completion_tokens"]
    return (f"<h2>Reasoning effort</h2><p>Runs of <code>evaluate --reasoning-effort</code>, shown as "
            f"<code>model@effort</code> (the stored model is the name given). Score: the primary matcher, 95% "
            f"intervals clustered by question; cost summed over the responses that have a price; cut off: status "
            f"<code>cut_off</code> or a length finish reason (the output budget ran out, often in the reasoning). "
            f"The difficulty regression below enters the effort as a factor where it varies.</p>"
            f"{ctx.figure(score)}{ctx.figure(cost)}{ctx.figure(cut)}"
            f"{ctx.table(rows, cols, lambda r: ctx.link(model=r['model'], mode=r['mode']))}"
            f"<p>{html.escape(str(len(rows)))} model × effort × mode rows (report/by_effort.parquet).</p>")
