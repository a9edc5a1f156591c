"""Metrics over context lengths (HoloBench section 4.1): Avg, wAvg(inc), wAvg(dec), and breakdowns with
confidence intervals clustered by question.

wAvg weights are the lengths' ranks 1…n, increasing with length (inc) or decreasing (dec); with HoloBench table 5's
Llama-3.1-405B amount-setting scores 64.0, 61.0, 57.5, 55.1, 44.8 they give 56.5, 53.5 and 59.4.
"""

from __future__ import annotations

import math
from collections import defaultdict


def length_averages(scores_by_length: dict[int, float]) -> dict[str, float]:
    """``{"Avg", "wAvg(inc)", "wAvg(dec)"}`` of per-length scores (keys: context lengths in tokens)."""
    lengths = sorted(scores_by_length)
    n = len(lengths)
    if n == 0:
        return {"Avg": float("nan"), "wAvg(inc)": float("nan"), "wAvg(dec)": float("nan")}
    vals = [scores_by_length[L] for L in lengths]
    inc = list(range(1, n + 1))
    dec = inc[::-1]
    return {"Avg": sum(vals) / n,
            "wAvg(inc)": sum(w * v for w, v in zip(inc, vals)) / sum(inc),
            "wAvg(dec)": sum(w * v for w, v in zip(dec, vals)) / sum(dec)}


def clustered_mean_ci(values: list[float], clusters: list[str], z: float = 1.96,
                      clip: tuple[float, float] | None = (0.0, 1.0)) -> tuple[float, float, float]:
    """Mean with a cluster-robust 95% interval (clusters: question ids); returns (mean, low, high), the interval
    clipped to ``clip`` (scores lie in [0, 1]; pass None for differences of scores).
    With one cluster the interval is the mean itself."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    mean = sum(values) / n
    groups: dict[str, float] = defaultdict(float)
    for v, c in zip(values, clusters):
        groups[c] += v - mean
    G = len(groups)
    if G < 2:
        return mean, mean, mean
    var = (G / (G - 1)) * sum(s * s for s in groups.values()) / (n * n)
    half = z * math.sqrt(var)
    if clip is None:
        return mean, mean - half, mean + half
    return mean, max(clip[0], mean - half), min(clip[1], mean + half)
def length_averages_ci(by_length: dict[int, list[tuple[float, str]]], z: float = 1.96
                       ) -> dict[str, tuple[float, float, float]]:
    """``{"Avg", "wAvg(inc)", "wAvg(dec)"}`` → ``(value, low, high)``: :func:`length_averages` of the per-length
    mean scores, each with a 95% interval clustered by question. ``by_length``: context length (tokens) → the
    instances' ``(score, question id)``; the same question at several lengths is one cluster.

    Each average is ``θ = Σ_L c_L · ȳ_L`` with the weights ``c_L`` of :func:`length_averages` (read from it: it is
    linear in the per-length values). Its cluster-robust variance is that of the pseudo-values
    ``v_i = N · c_L · (y_i − ȳ_L) / n_L + θ`` (``N`` instances in all, ``n_L`` at length L; their mean is ``θ``),
    so :func:`clustered_mean_ci` of the pseudo-values gives the interval (the delta method for a linear
    estimator; one length gives the plain clustered interval of the mean). NaN for no lengths."""
    lengths = sorted(L for L in by_length if by_length[L])
    if not lengths:
        return {k: (float("nan"),) * 3 for k in ("Avg", "wAvg(inc)", "wAvg(dec)")}
    means = {L: sum(y for y, _ in by_length[L]) / len(by_length[L]) for L in lengths}
    point = length_averages(means)
    weights = {L: length_averages({M: float(M == L) for M in lengths}) for L in lengths}
    n_all = sum(len(by_length[L]) for L in lengths)
    out = {}
    for name, theta in point.items():
        vals, clusters = [], []
        for L in lengths:
            c, n_l = weights[L][name], len(by_length[L])
            for y, q in by_length[L]:
                vals.append(n_all * c * (y - means[L]) / n_l + theta)
                clusters.append(q)
        _, lo, hi = clustered_mean_ci(vals, clusters, z)
        out[name] = (theta, lo, hi)
    return out


