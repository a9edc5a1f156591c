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
