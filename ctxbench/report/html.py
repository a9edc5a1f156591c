"""``report``: accuracy by context length per model (with Avg / wAvg), breakdowns by position, query type and
difficulty (each with a 95% interval clustered by question), and counts of over-length, failed and cached calls.
Writes ``report/index.html`` and the same numbers as ``report/*.parquet``."""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..scoring.metrics import clustered_mean_ci, length_averages
from ..storage import read_table, require_build, write_parquet


def _instance_scores(build_dir: Path) -> tuple[list[dict], dict[str, dict]]:
    inst = {r["instance_id"]: r for r in pq.read_table(
        build_dir / "instances.parquet",
        columns=["instance_id", "question_id", "question", "target_tokens", "position", "setting", "query_types",
                 "difficulty", "benchmark", "source_id"]).to_pylist()}
    sc = read_table(build_dir / "scores.parquet", "scores").to_pylist()
    # RAG runs with a retrieval budget (evaluate --rag-tokens) are shown as their own mode, e.g. rag@2048
    rp = build_dir / "responses.parquet"
    budget = ({r["request_key"]: r["rag_tokens"] for r in pq.read_table(rp, columns=["request_key", "rag_tokens"])
               .to_pylist() if r["rag_tokens"] is not None}
              if rp.exists() and "rag_tokens" in pq.read_schema(rp).names else {})
    per: dict[tuple, list[float]] = defaultdict(list)
    for r in sc:
        b = budget.get(r.get("request_key"))
        mode = r["mode"] if b is None else f"{r['mode']}@{b}"
        per[(r["model"], mode, r["matcher"], r["instance_id"])].append(r["score"])
    out = []
    for (model, mode, matcher, iid), vals in sorted(per.items()):
        i = inst.get(iid)
        if i is None:
            continue
        out.append({"model": model, "mode": mode, "matcher": matcher, "instance_id": iid,
                    "question_id": i["question_id"] or i["question"], "target_tokens": i["target_tokens"],
                    "position": i["position"], "setting": i["setting"], "difficulty": i["difficulty"],
                    "query_types": json.loads(i["query_types"] or "[]"), "score": sum(vals) / len(vals),
                    "samples": len(vals), "sample_var": _var(vals)})
    return out, inst


def _var(v: list[float]) -> float:
    if len(v) < 2:
        return 0.0
    m = sum(v) / len(v)
    return sum((x - m) ** 2 for x in v) / (len(v) - 1)


def _group(rows: list[dict], key) -> list[dict]:
    g: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        for k in key(r):
            g[k].append(r)
    out = []
    for k, rs in sorted(g.items(), key=lambda x: tuple(str(y) for y in x[0])):
        mean, lo, hi = clustered_mean_ci([r["score"] for r in rs], [r["question_id"] for r in rs])
        out.append({"key": k, "n": len(rs), "score": mean, "ci_low": lo, "ci_high": hi})
    return out


def results_table(build_dir: str | Path) -> list[dict]:
    """Rows (model, mode, matcher, context length, n, score, ci) — the table ``ctxbench run`` prints."""
    rows, _ = _instance_scores(Path(build_dir))
    return [{"model": g["key"][0], "mode": g["key"][1], "matcher": g["key"][2], "context_length": g["key"][3],
             "n": g["n"], "score": g["score"], "ci_low": g["ci_low"], "ci_high": g["ci_high"]}
            for g in _group(rows, lambda r: [(r["model"], r["mode"], r["matcher"], r["target_tokens"])])]


def _svg_curves(by_len: list[dict]) -> str:
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in by_len:
        series[f"{r['model']} ({r['mode']})"].append((r["context_length"], r["score"]))
    if not series:
        return "<p>No scores yet.</p>"
    lengths = sorted({L for s in series.values() for L, _ in s})
    W, H, P = 640, 300, 50
    xs = {L: P + (i * (W - 2 * P) / max(1, len(lengths) - 1)) for i, L in enumerate(lengths)}
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
    parts = [f'<svg width="{W}" height="{H}" role="img" aria-label="accuracy by context length">',
             f'<line x1="{P}" y1="{H - P}" x2="{W - P}" y2="{H - P}" stroke="#333"/>',
             f'<line x1="{P}" y1="{P / 2}" x2="{P}" y2="{H - P}" stroke="#333"/>']
    for v in (0, 0.5, 1):
        y = H - P - v * (H - 1.5 * P)
        parts.append(f'<text x="{P - 8}" y="{y + 4}" text-anchor="end" font-size="11">{v:.1f}</text>')
    for L, x in xs.items():
        parts.append(f'<text x="{x}" y="{H - P + 16}" text-anchor="middle" font-size="11">{L:,}</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = colors[i % len(colors)]
        pts = sorted(pts)
        path = " ".join(f"{xs[L]:.1f},{H - P - s * (H - 1.5 * P):.1f}" for L, s in pts)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{path}"/>')
        for L, s in pts:
            parts.append(f'<circle cx="{xs[L]:.1f}" cy="{H - P - s * (H - 1.5 * P):.1f}" r="3" fill="{c}"/>')
        parts.append(f'<text x="{W - P + 4}" y="{P / 2 + 14 * i}" font-size="11" fill="{c}">'
                     f'{html.escape(name)}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="12">context length (tokens)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(rows: list[dict], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"<td>{v:.3f}</td>" if isinstance(v, float) else f"<td>{html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def build_report(build_dir: str | Path, regime_thresholds: dict | None = None) -> Path:
    """Write ``report/index.html`` and ``report/*.parquet`` for the build; returns the HTML path.
    ``regime_thresholds``: overrides of the needles decay-regime thresholds (``assets/analysis/needles.yaml``)."""
    build_dir = require_build(build_dir)
    rows, inst = _instance_scores(build_dir)
    by_len = results_table(build_dir)
    avgs = []
    for (model, mode, matcher) in sorted({(r["model"], r["mode"], r["matcher"]) for r in by_len}):
        a = length_averages({r["context_length"]: r["score"] for r in by_len
                             if (r["model"], r["mode"], r["matcher"]) == (model, mode, matcher)})
        avgs.append({"model": model, "mode": mode, "matcher": matcher, **a})
    breakdowns = {}
    for name, key in (("setting", lambda r: [(r["model"], r["mode"], r["setting"])]),
                      ("position", lambda r: [(r["model"], r["mode"], r["position"])]),
                      ("query_type", lambda r: [(r["model"], r["mode"], t) for t in r["query_types"]]),
                      ("difficulty", lambda r: [(r["model"], r["mode"], r["difficulty"])])):
        breakdowns[name] = [{"model": g["key"][0], "mode": g["key"][1], name: g["key"][2], "n": g["n"],
                             "score": g["score"], "ci_low": g["ci_low"], "ci_high": g["ci_high"]}
                            for g in _group(rows, key)]
    resp = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    counts: dict[tuple, dict] = defaultdict(lambda: {"calls": 0, "ok": 0, "over_length": 0, "failed": 0,
                                                      "refused": 0, "cached": 0, "retries": 0})
    for r in resp:
        c = counts[(r["model"], r["mode"])]
        c["calls"] += 1
        c["ok"] += r["status"] == "ok"
        c["over_length"] += r["status"] == "over_length"
        c["failed"] += r["status"] == "error"
        c["refused"] += r["status"] == "refused_by_provider"
        c["cached"] += bool(r["cached"])
        c["retries"] += r["retries"] or 0
    count_rows = [{"model": m, "mode": md, **c} for (m, md), c in sorted(counts.items())]
    var_rows = [{"model": m, "mean_sample_variance": sum(r["sample_var"] for r in rows if r["model"] == m) /
                 max(1, sum(1 for r in rows if r["model"] == m))} for m in sorted({r["model"] for r in rows})]
    out = build_dir / "report"
    out.mkdir(exist_ok=True)
    for name, data in (("by_length", by_len), ("averages", avgs), ("counts", count_rows),
                       *((f"by_{k}", v) for k, v in breakdowns.items())):
        if data:
            write_parquet(pa.Table.from_pylist(data), out / f"{name}.parquet")
    manifest = json.loads((build_dir / "manifest.json").read_text(encoding="utf-8")) \
        if (build_dir / "manifest.json").exists() else {}
    from .rag import rag_section  # RAG vs LC, retrieval sweep, routing, answer position (issue 7)

    rag_html = rag_section(build_dir, out, _table)
    # needles builds: per-model haystack sizes (the needles section names approximate sizing)
    haystacks = _table(manifest["haystacks"], ["model", "tier", "tokenizer", "window", "budget", "tokens", "chars", "k",
                                               "approximate"]) if manifest.get("haystacks") else ""
    matcher_note = ("Scores use the deterministic row matcher (row_match): each gold row is an exact (1), partial "
                    "(0.5) or no match (0); an instance scores the mean over its gold rows."
                    if any(r["matcher"] == "row_match" for r in rows) or
                    (not rows and manifest.get("track", "holobench") == "holobench") else
                    "Scores use the matchers each benchmark registers (ctxbench/scoring/registry.py)."
                    + ("" if rows else " No answer has been scored yet."))
    from ..scoring.registry import is_fallback

    fb = sorted({r["matcher"] for r in rows if is_fallback(r["matcher"], inst[r["instance_id"]].get("benchmark"))})
    if fb:  # e.g. LaRA without an LLM judge
        matcher_note += (f" Matchers {', '.join(fb)} are a deterministic <b>fallback</b> for free-text answers (token "
                         f"containment / F1 against the reference, refusal detection for unanswerable questions), "
                         f"not the benchmark's LLM judge (<code>score --judge MODEL</code>).")
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>ctxbench report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1000px}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th{{background:#f4f4f4}}</style></head><body>
<h1>ctxbench report</h1>
<p>Build <code>{html.escape(str(manifest.get('build_hash', '')))}</code> · track {html.escape(str(manifest.get('track', '')))}
 · source {html.escape(str(manifest.get('db_id', '')))} · {len(inst)} instances · tokenizer
 {html.escape(str(manifest.get('tokenizer', {}).get('name', '')))}</p>
<p>{matcher_note} Intervals are 95% and clustered by question.</p>
{"<h2>Haystacks (tokens of each sizing model's tokenizer; k = whole paragraphs)</h2>" + haystacks if haystacks else ""}
<h2>Accuracy by context length</h2>{_svg_curves(by_len)}
{_table(by_len, ["model", "mode", "matcher", "context_length", "n", "score", "ci_low", "ci_high"])}
<h2>Averages over context lengths</h2>{_table(avgs, ["model", "mode", "matcher", "Avg", "wAvg(inc)", "wAvg(dec)"])}
<h2>By setting</h2>{_table(breakdowns["setting"], ["model", "mode", "setting", "n", "score", "ci_low", "ci_high"])}
<h2>By position</h2>{_table(breakdowns["position"], ["model", "mode", "position", "n", "score", "ci_low", "ci_high"])}
<h2>By query type</h2>{_table(breakdowns["query_type"], ["model", "mode", "query_type", "n", "score", "ci_low", "ci_high"])}
<h2>By difficulty</h2>{_table(breakdowns["difficulty"], ["model", "mode", "difficulty", "n", "score", "ci_low", "ci_high"])}
<h2>Calls</h2>{_table(count_rows, ["model", "mode", "calls", "ok", "over_length", "failed", "refused", "cached", "retries"])}
<h2>Run-to-run variance</h2>{_table(var_rows, ["model", "mean_sample_variance"])}
{rag_html}
</body></html>"""
    from ..tracks.needles.report import needles_section  # planted-fact track (issue 6): "" for a build without needles
    doc = doc.replace("</body></html>", needles_section(build_dir, out, regime_thresholds) + "</body></html>")
    from ..tracks.scitrek.report import scitrek_section  # scientific-article track (issue 5): "" for a build without it
    doc = doc.replace("</body></html>", scitrek_section(build_dir, out, _table) + "</body></html>")
    from .difficulty import difficulty_section  # LURCH difficulty, closed-book screen, judge κ (issue 7)
    doc = doc.replace("</body></html>", difficulty_section(build_dir, out) + "</body></html>")
    p = out / "index.html"
    p.write_text(doc, encoding="utf-8")
    return p
