"""Anytime-valid confidence sequences for a mean score, for ``evaluate --target-ci`` (sequential stopping).

An ordinary 95% interval covers the mean 95% of the time only at a sample size fixed in advance; looking at it after
every answer and stopping once it is narrow enough loses that coverage. A *confidence sequence* holds at every
sample size at once (``P(∀t: μ ∈ C_t) ≥ 1 − α``), so any stopping rule keeps it.

The one used here is the predictable plug-in empirical-Bernstein (PrPl-EB) confidence sequence for the mean of
random variables bounded in [0, 1], from Waudby-Smith & Ramdas (2024), "Estimating means of bounded random
variables by betting", JRSS-B 86(1), Theorem 2 with the predictable λ of their eq. (15):

    μ̂_t = (1/2 + Σ_{i≤t} X_i) / (t + 1),    σ̂²_t = (1/4 + Σ_{i≤t} (X_i − μ̂_i)²) / (t + 1),
    λ_t = min( √(2 log(2/α) / (σ̂²_{t−1} · t · log(1 + t))), 1/2 ),
    v_t = 4 (X_t − μ̂_{t−1})²,     ψ_E(λ) = (−log(1 − λ) − λ) / 4,
    C_t = Σλ_i X_i / Σλ_i  ±  (log(2/α) + Σ v_i ψ_E(λ_i)) / Σλ_i,

intersected over time (the running maximum of the lower bounds and minimum of the upper ones, still valid) and
clipped to [0, 1].

Clustering: instances sharing a context are not independent, so the observations ``X_t`` are contexts, not
instances: a context's mean score over its instances (in [0, 1]), the contexts taken in a seeded random order
(:func:`context_order`). The mean the sequence covers is then the mean over contexts, which is the instance mean when
every context holds as many instances (as in the builds: each context has the same questions per tier).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

METHOD = ("predictable plug-in empirical-Bernstein confidence sequence (Waudby-Smith & Ramdas 2024, JRSS-B, "
          "Theorem 2) over context means")


def confidence_sequence(x: np.ndarray, alpha: float = 0.05, cap: float = 0.5
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The PrPl-EB confidence sequence (module docstring) of observations ``x`` in [0, 1] along the last axis.

    ``x``: array ``(..., T)``; returns ``(center, low, high)`` of the same shape: at index ``t`` the sequence after
    ``t + 1`` observations (``center``: the λ-weighted mean; ``low``/``high``: the running intersection, in
    [0, 1]). Raises ValueError for values outside [0, 1]."""
    x = np.asarray(x, dtype=float)
    if x.size and (np.nanmin(x) < 0.0 or np.nanmax(x) > 1.0):
        raise ValueError("confidence_sequence: observations must lie in [0, 1] (mean scores of contexts)")
    T = x.shape[-1]
    t = np.arange(1, T + 1, dtype=float)
    csum = np.cumsum(x, axis=-1)
    mu = (0.5 + csum) / (t + 1)  # μ̂_t for t = 1..T
    mu_prev = np.concatenate([np.full(x.shape[:-1] + (1,), 0.5), mu[..., :-1]], axis=-1)  # μ̂_{t−1}, μ̂_0 = 1/2
    sig2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    sig2_prev = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), sig2[..., :-1]], axis=-1)
    log_term = np.log(2 / alpha)
    lam = np.minimum(np.sqrt(2 * log_term / (sig2_prev * t * np.log1p(t))), cap)
    v = 4 * (x - mu_prev) ** 2
    psi = (-np.log1p(-lam) - lam) / 4
    slam = np.cumsum(lam, axis=-1)
    center = np.cumsum(lam * x, axis=-1) / slam
    half = (log_term + np.cumsum(v * psi, axis=-1)) / slam
    low = np.maximum.accumulate(np.clip(center - half, 0.0, 1.0), axis=-1)
    high = np.minimum.accumulate(np.clip(center + half, 0.0, 1.0), axis=-1)
    return center, low, high


def half_width(x: Sequence[float], alpha: float = 0.05) -> tuple[float, float, float]:
    """``(low, high, half-width)`` of the confidence sequence after all of ``x`` (context means in [0, 1]); the
    whole interval [0, 1] (half-width 0.5) for no observation."""
    if not len(x):
        return 0.0, 1.0, 0.5
    _, lo, hi = confidence_sequence(np.asarray(x, dtype=float), alpha)
    return float(lo[-1]), float(hi[-1]), float(hi[-1] - lo[-1]) / 2


def context_order(contexts: Sequence[str], seed: int | str) -> list[str]:
    """The distinct ``contexts`` (any identities, e.g. SHA-256 of the text) in the seeded random order of
    ``--target-ci``: sorted by SHA-256 of ``"{seed}|target-ci|{context}"``, so a rerun (and a rerun with a smaller
    target) asks them in the same order."""
    return sorted(set(contexts), key=lambda c: hashlib.sha256(f"{seed}|target-ci|{c}".encode()).hexdigest())
