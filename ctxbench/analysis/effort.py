"""Reasoning effort against score, cost and cut-off replies (issue 25; :mod:`ctxbench.models.effort`).

One row per model (the name given on the CLI) × reasoning effort × mode of a build's responses: ``responses``,
``ok``, ``cut_off`` (replies cut by the output budget: status ``cut_off`` or a length-like ``finish_reason``,
:func:`ctxbench.models.effort.is_cut_off`; 0 where the table has neither), ``cut_off_share``, ``n`` / ``score`` /
``ci_low`` / ``ci_high`` (the benchmark's primary matcher, instance means, 95% interval clustered by question:
:func:`ctxbench.analysis.core.group_scores`), ``cost_usd`` (summed; None when no response has a price),
``cost_per_response_usd`` and ``completion_tokens`` (mean per response that reports it, reasoning included where
the provider counts it there). Runs without an effort are the row ``reasoning_effort = None`` (shown as the plain
model name)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ctxbench.models.effort import EFFORTS, display_model, is_cut_off
from ctxbench.core.storage import read_table
from ctxbench.analysis.core import group_scores, instance_scores, primary_rows


def effort_order(effort: str | None) -> int:
    """Position of an effort on the axis: none 0, low 1, medium 2, high 3; -1 for a run without one."""
    return EFFORTS.index(effort) if effort in EFFORTS else -1


def effort_rows(build_dir: str | Path) -> list[dict]:
    """The table of the module docstring, sorted by model, mode and effort; ``[]`` when no response of the build
    has a reasoning effort."""
    build_dir = Path(build_dir)
    resp = read_table(build_dir / "responses.parquet", "responses")
    if "reasoning_effort" not in resp.column_names or not any(resp.column("reasoning_effort").to_pylist()):
        return []
    rows = resp.to_pylist()
    acc: dict[tuple, dict] = defaultdict(lambda: {"responses": 0, "ok": 0, "cut_off": 0, "cost": [], "ct": []})
    for r in rows:
        mode = r["mode"] if r.get("rag_tokens") is None else f"{r['mode']}@{r['rag_tokens']}"  # as score rows
        a = acc[(r["model"], r.get("reasoning_effort"), mode)]
        a["responses"] += 1
        a["ok"] += r["status"] == "ok"
        a["cut_off"] += is_cut_off(r)
        if r.get("cost_usd") is not None:
            a["cost"].append(float(r["cost_usd"]))
        if r.get("completion_tokens") is not None:
            a["ct"].append(int(r["completion_tokens"]))
    scored, _ = instance_scores(build_dir)
    by_label = {g["key"]: g for g in group_scores(primary_rows(scored), lambda r: [(r["model"], r["mode"])])}
    out = []
    for (model, effort, mode), a in acc.items():
        g = by_label.get((display_model(model, effort), mode)) or {}
        out.append({"model": model, "reasoning_effort": effort, "label": display_model(model, effort), "mode": mode,
                    "responses": a["responses"], "ok": a["ok"], "cut_off": a["cut_off"],
                    "cut_off_share": a["cut_off"] / a["responses"] if a["responses"] else None,
                    "n": g.get("n", 0), "score": g.get("score"), "ci_low": g.get("ci_low"),
                    "ci_high": g.get("ci_high"),
                    "cost_usd": sum(a["cost"]) if a["cost"] else None,
                    "cost_per_response_usd": sum(a["cost"]) / len(a["cost"]) if a["cost"] else None,
                    "completion_tokens": sum(a["ct"]) / len(a["ct"]) if a["ct"] else None})
    return sorted(out, key=lambda r: (r["model"], r["mode"], effort_order(r["reasoning_effort"])))
