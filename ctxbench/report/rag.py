"""Report section "RAG versus long context" and the position plot (tables of :mod:`ctxbench.analysis.rag`,
curves as inline SVG). Writes ``report/rag_gap.parquet``, ``rag_sweep``, ``rag_routing`` and ``position``."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from ..storage import write_parquet
from .context import ReportContext
from .render import line_chart

def sweep_svg(sweep: list[dict]) -> str:
    """Accuracy against retrieval budget, one line per model × length, the full context (LC) last."""
    keys = sorted({r["rag_tokens"] for r in sweep if r["rag_tokens"].isdigit()}, key=int) + \
        [k for k in ("top-k", "full") if any(r["rag_tokens"] == k for r in sweep)]
    if len(keys) < 2:
        return ""
    xs = {k: i / (len(keys) - 1) for i, k in enumerate(keys)}
    series: dict[str, list] = defaultdict(list)
    for r in sweep:
        series[f"{r['model']} @ {r['length']}"].append((xs[r["rag_tokens"]], r["score"]))
    ticks = [(xs[k], "LC (full)" if k == "full" else "top-k" if k == "top-k" else f"{int(k):,}") for k in keys]
    return line_chart(series, ticks, "retrieved tokens (RAG) or the full context (LC)", "accuracy by retrieval budget")


def position_svg(pos: list[dict]) -> str:
    """Accuracy by answer position (segment centre as a fraction of the context), one line per model × mode."""
    series: dict[str, list] = defaultdict(list)
    for r in pos:
        series[f"{r['model']} ({r['mode']}, {r['n_segments']} segments)"].append((r["position"], r["score"]))
    ticks = [(x, f"{x:.1f}") for x in (0, 0.25, 0.5, 0.75, 1)]
    return line_chart(series, ticks, "answer position in the context (0 = beginning, 1 = end)",
                       "accuracy by answer position")


def rag_section(ctx: ReportContext) -> str:
    """HTML of the RAG-vs-LC section and the position plot (report section)."""
    from ..analysis.rag import analyse

    out, table = ctx.out, ctx.table
    a = analyse(ctx.build_dir)
    for name in ("rag_gap", "rag_sweep", "rag_routing", "position"):
        if a[name]:
            write_parquet(pa.Table.from_pylist(a[name]), out / f"{name}.parquet")
    fb = [r["matcher"] for r in a["_fallback"]]
    note = (f"<p><b>Scores are a deterministic fallback</b> ({', '.join(fb)}: token containment of the reference "
            f"answer, refusal detection for hallucination questions), not LaRA's LLM judge; run "
            f"<code>ctxbench score --judge MODEL</code> to judge.</p>") if fb else ""
    parts = ["<h2>RAG versus long context</h2>"]
    if not a["_has_rag"][0]["yes"]:
        parts.append("<p>No RAG responses: run <code>ctxbench evaluate --mode lc,rag</code>.</p>")
    else:
        parts.append(note + "<p>Same questions in both modes (an instance counts where both were scored). "
                     "RAG: hybrid retrieval (BM25 + embeddings, reciprocal rank fusion) of token chunks; gap = LC − RAG "
                     "(LaRA table 2); (all models) averages the models' accuracies first.</p>")
        parts.append(table(a["rag_gap"], ["model", "length", "task", "n", "lc", "rag", "gap", "lc_over_length",
                                          "fallback"]) if a["rag_gap"] else
                     "<p>No question was scored in both modes (see the routing table for why).</p>")
        parts.append("<h3>Retrieval budget (HoloBench tables 9–10)</h3>" + sweep_svg(a["rag_sweep"]))
        parts.append(table(a["rag_sweep"], ["model", "length", "rag_tokens", "n", "score", "retrieved_tokens",
                                            "recall"]))
        parts.append("<p>recall: the exact share of evidence tokens inside the retrieved chunks (empty where the "
                     "build has no evidence spans).</p>")
        parts.append("<h3>Routing recommendation</h3>" + table(a["rag_routing"], [
            "model", "length", "recommendation", "lc_score", "best_rag", "rag_score", "diff", "ci_low", "ci_high",
            "evidence"]))
    parts.append("<h2>Accuracy by answer position (lost in the middle, LaRA appendix D)</h2>")
    if a["position"]:
        parts.append(position_svg(a["position"]) + table(a["position"], [
            "model", "mode", "n_segments", "segment", "position", "n", "score", "ci_low", "ci_high"]))
    else:
        parts.append("<p>No scored instance has a known answer position (evidence spans or a LaRA segment).</p>")
    return "\n".join(parts)
