"""The report's section that puts lc, rag and repl side by side (issue 35; :mod:`ctxbench.analysis.modes`). For
each model it gives the score, calls, tokens and money per instance and per correct answer by mode, and the paired
difference between every two modes on the instances both scored, clustered by context. It writes
``report/modes.parquet`` and ``report/mode_pairs.parquet``. The section is empty for a build without a
``--mode repl`` response."""

from __future__ import annotations

import pyarrow as pa

from ctxbench.analysis.modes import analyse_modes
from ctxbench.core.storage import write_parquet
from ctxbench.report.context import ReportContext


def modes_section(ctx: ReportContext) -> str:
    """lc, rag and repl side by side ("" without a repl response)."""
    a = analyse_modes(ctx.build_dir)
    if not a["modes"]:
        return ""
    for name in ("modes", "mode_pairs"):
        if a[name]:
            write_parquet(pa.Table.from_pylist(a[name]), ctx.out / f"{name}.parquet")
    link = lambda r: ctx.link(model=r["model"], mode=r["mode"])  # noqa: E731
    cols = ["model", "mode", "instances", "scored", "score", "calls_per_instance", "prompt_tokens_per_instance",
            "completion_tokens_per_instance", "cost_per_instance_usd", "usd_per_correct", "max_steps", "over_budget",
            "step_timeout"]
    pair_cols = ["model", "a", "b", "n", "clusters", "diff", "ci_low", "ci_high", "p_value", "reason"]
    return ("<h2>Full context, retrieval and the REPL side by side</h2><p>The same instances read three ways: "
            "<code>lc</code> (the whole context in the prompt), <code>rag</code> (retrieved chunks), "
            "<code>repl</code> (the context as a REPL variable the model reads with code, asking a sub-model "
            "through <code>llm_query</code>). Calls: one per response, and for repl each root turn and sub-call "
            "(steps.parquet). Cost: the responses that have a price. $ per correct answer: the cost over the "
            "credit earned.</p>"
            + ctx.table(a["modes"], cols, link)
            + "<h3>Paired differences between modes</h3><p>a − b on the instances both scored, 95% intervals "
              "clustered by context (as <code>compare</code> gives between models).</p>"
            + ctx.table(a["mode_pairs"], pair_cols))
