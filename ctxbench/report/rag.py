"""Report section "RAG versus long context" and the position plot (tables of :mod:`ctxbench.analysis.rag`,
figures of :mod:`ctxbench.report.plots`; every aggregate links to its instances in the browser). Writes ``report/rag_gap.parquet``, ``rag_sweep``, ``rag_routing`` and ``position``."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from ctxbench.core.storage import write_parquet
from ctxbench.report import plots
from ctxbench.report.browser import answer_position_label
from ctxbench.report.context import ReportContext
from ctxbench.analysis.rag import analyse


def _budget_mode(rag_tokens: str) -> str | None:
    """The browser's mode of a sweep row's budget: ``lc`` (full context), ``rag`` (top-k), ``rag@2048``."""
    return "lc" if rag_tokens == "full" else "rag" if rag_tokens == "top-k" else f"rag@{rag_tokens}"


def _length_filter(length: str) -> dict:
    """A length of the RAG tables (a token count, or a source tier such as ``32k``) as a browser filter."""
    return {"length": length} if str(length).isdigit() else {"source_tier": length}


def sweep_figure(sweep: list[dict], link=None):
    """Accuracy against retrieval budget, one line per model × length, the full context (LC) last (a plotly
    figure, None with fewer than two budgets)."""
    keys = sorted({r["rag_tokens"] for r in sweep if r["rag_tokens"].isdigit()}, key=int) + \
        [k for k in ("top-k", "full") if any(r["rag_tokens"] == k for r in sweep)]
    if len(keys) < 2:
        return None
    xs = {k: i for i, k in enumerate(keys)}
    series: dict[str, list] = defaultdict(list)
    for r in sweep:
        length = f"{int(r['length']):,}" if str(r["length"]).isdigit() else r["length"]
        series[f"{r['model']} @ {length}"].append({"x": xs[r["rag_tokens"]], "y": r["score"], "n": r.get("n"),
                                                   "link": link(r) if link else None})
    ticks = [(xs[k], "LC (full)" if k == "full" else "top-k" if k == "top-k" else f"{int(k):,}") for k in keys]
    return plots.line_figure(series, "Accuracy by retrieval budget", "retrieved tokens (RAG) or the full context (LC)",
                             x_ticks=ticks)


def position_figure(pos: list[dict], link=None):
    """Accuracy by answer position (segment centre as a fraction of the context), one line per model × mode, with
    95% intervals (a plotly figure, None without rows)."""
    series: dict[str, list] = defaultdict(list)
    for r in pos:
        series[f"{r['model']} ({r['mode']}, {r['n_segments']} segments)"].append(
            {"x": r["position"], "y": r["score"], "lo": r.get("ci_low"), "hi": r.get("ci_high"), "n": r.get("n"),
             "link": link(r) if link else None})
    ticks = [(x, f"{x:.2f}") for x in (0, 0.25, 0.5, 0.75, 1)]
    return plots.line_figure(series, "Accuracy by answer position",
                             "answer position in the context (0 = beginning, 1 = end)", x_ticks=ticks)


def rag_section(ctx: ReportContext) -> str:
    """HTML of the RAG-vs-LC section and the position plot (report section)."""
    out, table, link = ctx.out, ctx.table, ctx.link
    a = analyse(ctx.build_dir)
    task_key = "skill" if _has_skill(ctx) else "query_types"

    def gap_link(r: dict, mode: str | None = None) -> str:
        f = {} if str(r["model"]).startswith("(") else {"model": r["model"]}
        task = {} if r["task"] in ("overall", "all") else {task_key: r["task"]}
        return link(**f, mode=mode, **_length_filter(r["length"]), **task, score="scored")

    def sweep_link(r: dict) -> str:
        return link(model=r["model"], mode=_budget_mode(r["rag_tokens"]), **_length_filter(r["length"]),
                    score="scored")

    def pos_link(r: dict) -> str:
        return link(model=r["model"], mode=r["mode"],
                    answer_position=answer_position_label(r["segment"], r["n_segments"]), score="scored")

    for name in ("rag_gap", "rag_sweep", "rag_routing", "position"):
        if a[name]:
            write_parquet(pa.Table.from_pylist(a[name]), out / f"{name}.parquet")
    fb = [r["matcher"] for r in a["_fallback"]]
    note = (f"<p><b>Scores are a deterministic fallback</b> ({', '.join(fb)}: token containment of the reference "
            f"answer, refusal detection for hallucination questions), not LaRA's LLM judge; run "
            f"<code>ctxbench score --judge MODEL --judge-prompt NAME</code> with the benchmark's judging prompt "
            f"(<code>ctxbench tracks</code>) to judge.</p>") if fb else ""
    parts = ["<h2>RAG versus long context</h2>"]
    if not a["_has_rag"][0]["yes"]:
        parts.append("<p>No RAG responses: run <code>ctxbench evaluate --mode lc,rag</code>.</p>")
    else:
        parts.append(note + "<p>Same questions in both modes (an instance counts where both were scored). "
                     "RAG: hybrid retrieval (BM25 + embeddings, reciprocal rank fusion) of token chunks; gap = LC − RAG "
                     "(LaRA table 2); (all models) averages the models' accuracies first.</p>")
        parts.append(ctx.figure(plots.lc_vs_rag([r for r in a["rag_gap"] if r["task"] == "overall"
                                                 and not str(r["model"]).startswith("(")], gap_link))
                     + table(a["rag_gap"], ["model", "length", "task", "n", "lc", "rag", "gap", "lc_over_length",
                                            "fallback"], gap_link) if a["rag_gap"] else
                     "<p>No question was scored in both modes (see the routing table for why).</p>")
        parts.append("<h3>Retrieval budget (HoloBench tables 9–10)</h3>"
                     + ctx.figure(sweep_figure(a["rag_sweep"], sweep_link)))
        parts.append(table(a["rag_sweep"], ["model", "length", "rag_tokens", "n", "score", "retrieved_tokens",
                                            "recall"], sweep_link))
        parts.append("<p>recall: the exact share of evidence tokens inside the retrieved chunks (empty where the "
                     "build has no evidence spans).</p>")
        parts.append("<h3>Routing recommendation</h3>" + table(a["rag_routing"], [
            "model", "length", "recommendation", "lc_score", "best_rag", "rag_score", "diff", "ci_low", "ci_high",
            "evidence"]))
    parts.append("<h2>Accuracy by answer position (lost in the middle, LaRA appendix D)</h2>")
    if a["position"]:
        parts.append(ctx.figure(position_figure(a["position"], pos_link)) + table(a["position"], [
            "model", "mode", "n_segments", "segment", "position", "n", "score", "ci_low", "ci_high"], pos_link))
    else:
        parts.append("<p>No scored instance has a known answer position (evidence spans or a LaRA segment).</p>")
    return "\n".join(parts)


def _has_skill(ctx: ReportContext) -> bool:
    """Whether the build's instances carry a skill (the RAG tables' task is then the skill, else the query type)."""
    import pyarrow.parquet as pq

    ip = ctx.build_dir / "instances.parquet"
    if "skill" not in pq.read_schema(ip).names:
        return False
    return any(v for v in pq.read_table(ip, columns=["skill"]).column("skill").to_pylist())
