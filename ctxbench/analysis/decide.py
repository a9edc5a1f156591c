"""The decision tables of ``ctxbench compare`` and the report: paired model differences (``pairs.parquet``) and
effective context lengths (``effective_length.parquet``), from the comparable per-instance rows of a leaderboard
table (one benchmark build × mode × matcher).

Pairs: for every two models and every context length (and all lengths together, ``context_length`` None), the mean
score difference a − b over the instances both answered, its 95% interval and p-value from the paired model with
errors clustered by context (:mod:`ctxbench.analysis.paired`), and Holm's adjustment over the pairs of one matrix
(one benchmark build × mode × matcher × context length: the family the page shows as one table).

Effective length: :func:`ctxbench.analysis.effective.effective_length` over the tiers a model has comparable scores
at, with the relative (NoLiMa, 85% of the shortest tier) and the absolute (RULER, 0.856) threshold.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

import numpy as np

from ctxbench.analysis.effective import RELATIVE_DEFAULT, RULER_THRESHOLD, effective_length
from ctxbench.analysis.paired import METHOD, holm, paired_difference


def pair_rows(by_len: dict[int, dict[str, list[dict]]], models: list[str], base: dict) -> list[dict]:
    """Rows of ``pairs.parquet`` for one leaderboard table (module docstring).

    ``by_len``: context length → model → its comparable per-instance rows (``instance_id``, ``score``,
    ``context_id``: the cluster); ``models``: the models to pair (sorted; each pair once, a before b); ``base``:
    columns every row carries (benchmark, build_hash, mode, matcher). Columns: ``model_a``, ``model_b``,
    ``context_length`` (None: all lengths), ``n`` (shared instances), ``clusters``, ``diff`` (a − b), ``ci_low``,
    ``ci_high``, ``p_value``, ``p_holm``, ``significant`` (Holm-adjusted p ≤ 0.05), ``method``, ``reason`` (why no
    interval)."""
    rows = []
    lengths = sorted(by_len)
    for a, b in combinations(sorted(models), 2):
        pooled_a, pooled_b, pooled_c = [], [], []
        for L in [*lengths, None]:
            if L is None:
                sa, sb, cl = pooled_a, pooled_b, pooled_c
            else:
                ra = {r["instance_id"]: r for r in by_len[L].get(a) or []}
                rb = {r["instance_id"]: r for r in by_len[L].get(b) or []}
                shared = sorted(set(ra) & set(rb))
                sa = [ra[i]["score"] for i in shared]
                sb = [rb[i]["score"] for i in shared]
                cl = [ra[i]["context_id"] for i in shared]
                pooled_a += sa
                pooled_b += sb
                pooled_c += cl
            if L is None and len(lengths) < 2:
                continue  # one length: the all-lengths row would repeat it
            r = paired_difference(sa, sb, cl)
            rows.append({**base, "model_a": a, "model_b": b, "context_length": L, **r, "method": METHOD})
    fam: dict[object, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        fam[r["context_length"]].append(i)
    for idx in fam.values():
        p = np.array([np.nan if rows[i]["p_value"] is None else rows[i]["p_value"] for i in idx])
        adj = holm(p)
        for i, v in zip(idx, adj):
            rows[i]["p_holm"] = None if np.isnan(v) else float(v)
            rows[i]["significant"] = None if np.isnan(v) else bool(v <= 0.05)
    return rows


def effective_rows(by_len: dict[int, dict[str, list[dict]]], models: list[str], base: dict,
                   fraction: float = RELATIVE_DEFAULT, absolute: float = RULER_THRESHOLD) -> list[dict]:
    """Rows of ``effective_length.parquet`` for one leaderboard table: per model and threshold kind (``relative``:
    ``fraction`` of its shortest tier's score; ``absolute``: ``absolute``) the ``effective_length`` (tokens, None
    below the shortest tier), ``ci_low``, ``ci_high`` (95% bootstrap over instances), ``threshold``, ``tiers``
    (the context lengths used, ``/``-joined) and ``reason`` (why there is none: no comparable score)."""
    out = []
    for m in sorted(models):
        scores = {L: [r["score"] for r in by_len[L].get(m) or []] for L in sorted(by_len)}
        scores = {L: v for L, v in scores.items() if v}
        for kind, rel, ab in (("relative", fraction, None), ("absolute", None, absolute)):
            row = {**base, "model": m, "kind": kind, "effective_length": None, "ci_low": None, "ci_high": None,
                   "threshold": rel if rel is not None else ab, "tiers": None, "reason": None}
            if not scores:
                row["reason"] = "no comparable score at any context length"
            else:
                e = effective_length(scores, rel, ab, seed=f"{base.get('build_hash')}|{m}|{kind}")
                row.update(effective_length=e["length"], ci_low=e["ci_low"], ci_high=e["ci_high"],
                           threshold=e["threshold"], tiers=" / ".join(f"{L:,}" for L in e["tiers"]))
                if e["length"] is None:
                    row["reason"] = f"below the threshold {e['threshold']:.3f} already at the shortest tier"
            out.append(row)
    return out
