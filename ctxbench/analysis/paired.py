"""Paired score differences between two models on the same instances, clustered by context, and Holm's correction.

Two models answer the same instances; the difference of their mean scores is the mean of the per-instance
differences ``d_i = score_a,i − score_b,i``. Instances sharing a context are not independent (one context read
badly costs every question on it), so the interval is that of a *paired model with clustered errors*: ordinary least
squares of ``d`` on an intercept, whose coefficient is the mean difference, with the cluster-robust (CR1, Liang &
Zeger 1986) variance

    V = G / (G − 1) · Σ_g (Σ_{i∈g} (d_i − d̄))² / n²

(``G`` clusters, ``n`` instances), and a t reference distribution with ``G − 1`` degrees of freedom (Cameron &
Miller 2015, "A practitioner's guide to cluster-robust inference", section VI, few clusters). This is
what statsmodels' ``OLS(d, 1).fit(cov_type="cluster", cov_kwds={"groups": g, "use_correction": True})`` computes for
the intercept; the t quantile with ``G − 1`` degrees of freedom is the one its ``df_correction`` uses. With fewer
than :data:`MIN_CLUSTERS` clusters no interval and no p-value are given (the variance estimate has too few degrees
of freedom to be trusted; the row says so).

Holm's step-down procedure (Holm 1979, "A simple sequentially rejective multiple test procedure") adjusts the
p-values of one family of tests so that the family-wise error rate stays at or below α under any dependence:
sorted ascending, ``p_holm(k) = max_{j≤k} min(1, (m − j + 1) p(j))``.

Everything here is numpy and vectorised over a leading axis of replicates (the simulation in
``bench/stats_validity.py`` runs thousands of replicates at once).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CLUSTERING_NOTE = (
    "Why two clusterings: the interval of one model's score is clustered by question (a question asked in several "
    "contexts gives answers that move together), while a difference between two models is paired on the instances "
    "both answered, which cancels each question's own difficulty, and is clustered by context (one context read "
    "badly costs every question on it).")  # said on the report and the leaderboard, beside both kinds of interval
MIN_CLUSTERS = 5
METHOD = ("paired differences, OLS on an intercept with cluster-robust (CR1) standard errors clustered by context, "
          "t with G−1 degrees of freedom")


def cluster_index(clusters: Sequence) -> tuple[np.ndarray, int]:
    """``(index, G)``: each element's cluster as an integer 0..G−1 (in order of first appearance) and the number of
    clusters."""
    ids: dict = {}
    idx = np.fromiter((ids.setdefault(c, len(ids)) for c in clusters), dtype=np.int64, count=len(clusters))
    return idx, len(ids)


def clustered_mean_se(d: np.ndarray, idx: np.ndarray, G: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and CR1 cluster-robust standard error of ``d`` along its last axis (module docstring).

    ``d``: array ``(..., n)`` of per-instance values (score differences); ``idx``: ``(n,)`` cluster index 0..G−1;
    returns ``(mean, se)`` of shape ``d.shape[:-1]``. With ``G < 2`` the standard error is NaN."""
    d = np.asarray(d, dtype=float)
    n = d.shape[-1]
    mean = d.mean(axis=-1)
    if G < 2 or n == 0:
        return mean, np.full(mean.shape, np.nan)
    onehot = np.zeros((n, G))
    onehot[np.arange(n), idx] = 1.0
    sums = (d - mean[..., None]) @ onehot  # (..., G): each cluster's sum of residuals
    var = G / (G - 1) * (sums ** 2).sum(axis=-1) / n ** 2
    return mean, np.sqrt(var)


def clustered_t_test(d: np.ndarray, idx: np.ndarray, G: int, alpha: float = 0.05
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(mean, low, high, p_value)`` along the last axis of ``d`` (shape ``(..., n)``): the (1 − α) interval
    ``mean ± t_{1−α/2, G−1} · se`` and the two-sided p-value of mean 0 (module docstring). A zero standard error
    (every cluster's differences sum to their mean: e.g. identical answers) gives the interval [mean, mean] and
    p-value 1 when the mean is 0, else 0."""
    mean, se = clustered_mean_se(d, idx, G)
    from scipy import stats  # third-party, imported when used: scipy.stats takes about 1 s (CLI start-up)

    q = stats.t.ppf(1 - alpha / 2, G - 1) if G >= 2 else np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, mean / np.where(se > 0, se, 1.0), np.where(np.isclose(mean, 0.0), 0.0, np.inf))
    p = 2 * stats.t.sf(np.abs(t), G - 1) if G >= 2 else np.full(np.shape(mean), np.nan)
    return mean, mean - q * se, mean + q * se, p


def paired_difference(a: Sequence[float], b: Sequence[float], clusters: Sequence, alpha: float = 0.05) -> dict:
    """The paired difference of two models' scores on the same instances (module docstring).

    ``a``, ``b``: per-instance scores in [0, 1] of model a and model b, aligned (the same instance at each index);
    ``clusters``: each instance's context identity. Returns ``n``, ``clusters`` (G), ``diff`` (mean of a − b),
    ``ci_low``, ``ci_high`` (the (1 − α) interval), ``p_value`` and ``reason``: None, or why there is no interval
    (fewer than :data:`MIN_CLUSTERS` clusters; no shared instance). Raises ValueError when the lengths differ."""
    if not (len(a) == len(b) == len(clusters)):
        raise ValueError(f"paired_difference: a, b and clusters must be aligned (lengths {len(a)}, {len(b)}, "
                         f"{len(clusters)})")
    n = len(a)
    out = {"n": n, "clusters": 0, "diff": None, "ci_low": None, "ci_high": None, "p_value": None, "reason": None}
    if n == 0:
        out["reason"] = "no instance answered by both models"
        return out
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    idx, G = cluster_index(clusters)
    out["clusters"] = G
    out["diff"] = float(d.mean())
    if G < MIN_CLUSTERS:
        out["reason"] = (f"{G} context{'s' if G != 1 else ''} (clusters): at least {MIN_CLUSTERS} are needed for a "
                         f"clustered interval; evaluate more contexts")
        return out
    mean, lo, hi, p = clustered_t_test(d, idx, G, alpha)
    out.update(ci_low=float(lo), ci_high=float(hi), p_value=float(p))
    return out


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values along the last axis of ``p`` (shape ``(..., m)``; NaN entries are left out of the
    family and stay NaN). Reject at level α where the adjusted value is ≤ α (module docstring)."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    flat, res = p.reshape(-1, p.shape[-1]) if p.ndim else p.reshape(1, 1), out.reshape(-1, max(1, p.shape[-1]))
    for r in range(flat.shape[0]):
        ok = ~np.isnan(flat[r])
        v = flat[r][ok]
        m = v.size
        if not m:
            continue
        order = np.argsort(v, kind="stable")
        adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * v[order]))
        back = np.empty(m)
        back[order] = adj
        res[r][ok] = back
    return out


def holm_batch(p: np.ndarray) -> np.ndarray:
    """:func:`holm` for an array ``(R, m)`` without NaN, vectorised over the R families (the simulation's)."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    sp = np.take_along_axis(p, order, axis=-1)
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * sp, axis=-1))
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, axis=-1)
    return out


def significant(p_holm: float | None, alpha: float = 0.05) -> bool | None:
    """Whether a Holm-adjusted p-value rejects at ``alpha`` (None without one)."""
    return None if p_holm is None or (isinstance(p_holm, float) and math.isnan(p_holm)) else p_holm <= alpha
