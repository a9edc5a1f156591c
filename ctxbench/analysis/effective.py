"""Effective context length: the longest tier at which a model's score stays at or above a threshold.

Two thresholds, as the papers define them:

* relative (NoLiMa, Modarressi et al. 2025: the longest length at which the model keeps at least 85% of its base
  score, the base score being its score at the shortest length): ``fraction`` (default 0.85) × the model's score at the build's shortest tier;
* absolute (RULER, Hsieh et al. 2024: the score of Llama-2-7B at 4K, 85.6%): a fixed score, 0.856 on
  ctxbench's [0, 1] scale.

The effective length is the longest tier ``L`` such that the score at ``L`` and at every shorter tier is at or above
the threshold ("stays"); None when even the shortest tier is below it (absolute threshold only: the relative one
always holds there). Its 95% interval is a percentile bootstrap over instances, resampled within each tier (the
relative threshold recomputed from each resample's shortest tier), vectorised with numpy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

RELATIVE_DEFAULT = 0.85
RULER_THRESHOLD = 0.856


def _longest(means: np.ndarray, lengths: np.ndarray, relative: float | None, absolute: float | None) -> np.ndarray:
    """Effective length per row of ``means`` (``(R, L)`` tier scores, tiers ascending); 0 where none holds."""
    thr = means[:, :1] * relative if relative is not None else np.full((means.shape[0], 1), absolute)
    ok = np.logical_and.accumulate(means >= thr - 1e-12, axis=1)
    count = ok.sum(axis=1)
    return np.where(count > 0, lengths[np.maximum(count - 1, 0)], 0)


def effective_length(scores: Mapping[int, Sequence[float]], relative: float | None = RELATIVE_DEFAULT,
                     absolute: float | None = None, boot: int = 2000, seed: str = "effective-length",
                     alpha: float = 0.05) -> dict:
    """The effective context length of one model on one benchmark (module docstring).

    ``scores``: context length (tokens) → the per-instance scores in [0, 1] there; ``relative``: the fraction of the
    shortest tier's score, or ``absolute``: a fixed score (give one, the other None). Returns ``length`` (tokens,
    None below the shortest tier), ``ci_low``, ``ci_high`` (tier lengths; None where the bootstrap falls below the
    shortest tier), ``threshold`` (the score it needs; relative: from the observed shortest tier), ``kind``
    (``relative`` or ``absolute``), ``tiers`` (the tiers used). The bootstrap's generator is seeded from SHA-256 of
    ``seed``. Raises ValueError for no tier, a tier without scores, or neither or both thresholds."""
    if (relative is None) == (absolute is None):
        raise ValueError("effective_length: give either relative (a fraction of the shortest tier) or absolute")
    if not scores:
        raise ValueError("effective_length: no tier")
    lengths = np.array(sorted(scores), dtype=np.int64)
    arrs = [np.asarray(scores[int(L)], dtype=float) for L in lengths]
    if any(a.size == 0 for a in arrs):
        raise ValueError("effective_length: a tier without scores")
    obs = np.array([[a.mean() for a in arrs]])
    length = int(_longest(obs, lengths, relative, absolute)[0])
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))
    boots = np.stack([a[rng.integers(0, a.size, size=(boot, a.size))].mean(axis=1) for a in arrs], axis=1)
    b = _longest(boots, lengths, relative, absolute)
    lo, hi = np.quantile(b, [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
    thr = float(obs[0, 0] * relative) if relative is not None else float(absolute)
    return {"length": length or None, "ci_low": int(lo) or None, "ci_high": int(hi) or None, "threshold": thr,
            "kind": "relative" if relative is not None else "absolute", "tiers": [int(L) for L in lengths]}
