"""Sample sizes for deciding between two models (``ctxbench plan``).

Independent design (no pilot, the conservative bound): the two-sided test of two independent proportions
``p1 = P`` and ``p2 = P − D`` with the normal approximation and no continuity correction (Fleiss, Levin & Paik 2003,
"Statistical Methods for Rates and Proportions", chapter 4, the formula without the correction term):

    n = ⌈ (z_{1−α/2} √(2 p̄ q̄) + z_{1−β} √(p1 q1 + p2 q2))² / D² ⌉,   p̄ = (p1 + p2) / 2, q = 1 − p

instances per model (``z``: standard normal quantiles, ``1 − β`` the power).

Paired design (with a pilot build both models answered): the models answer the *same* instances, so only the
instances they disagree on carry information. ``compare`` tests the mean of the per-instance differences
``d = a − b`` (:mod:`ctxbench.analysis.paired`); with ``ψ = E[d²]`` (for 0/1 scores the discordance
``P(a ≠ b) = p10 + p01``) their variance at a difference D is ``σ²_d = ψ − D²``, and the normal-approximation sample
size of that test of a mean (Chow, Shao & Wang 2008, "Sample Size Calculations in Clinical Research", section 3.1,
the one-sample / paired design) is

    n_pairs = ⌈ (z_{1−α/2} + z_{1−β})² (ψ − D²) / D² ⌉

for independent instances; instances sharing a context are not, and the pilot's design effect
``deff = V_cluster / V_iid`` (the cluster-robust variance of the mean difference over its i.i.d. variance, Kish 1965;
at least 1) multiplies it: ``n = ⌈ (z_{1−α/2} + z_{1−β})² (ψ − D²) · deff / D² ⌉``, for contexts holding as many
instances as the pilot's. (McNemar's test, Connor 1987, uses the null variance ψ for the first term and plans a
little more: it is not the test ``compare`` runs.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ctxbench.core.errors import InputError
from ctxbench.analysis.paired import cluster_index, clustered_mean_se


def _check(accuracy: float | None, mde: float, power: float, alpha: float) -> None:
    if accuracy is not None and not 0.0 < accuracy <= 1.0:
        raise InputError(f"--accuracy {accuracy}: give the expected accuracy of the better model in (0, 1], e.g. 0.7")
    if not 0.0 < mde < 1.0:
        raise InputError(f"--mde {mde}: give the smallest difference worth detecting in (0, 1), e.g. 0.05")
    if accuracy is not None and accuracy - mde < 0.0:
        raise InputError(f"--mde {mde} is larger than --accuracy {accuracy}: the other model's accuracy P − D would "
                         f"be below 0")
    if not 0.0 < power < 1.0:
        raise InputError(f"--power {power}: give a probability in (0, 1), e.g. 0.8")
    if not 0.0 < alpha < 1.0:
        raise InputError(f"--alpha {alpha}: give a significance level in (0, 1), e.g. 0.05")


def independent_n(accuracy: float, mde: float, power: float = 0.8, alpha: float = 0.05) -> int:
    """Instances per model for the two-sided two-proportion test of ``accuracy`` vs ``accuracy − mde`` at level
    ``alpha`` with ``power`` (module docstring, Fleiss et al. chapter 4 without continuity correction). Raises
    InputError for values outside their ranges."""
    _check(accuracy, mde, power, alpha)
    p1, p2 = accuracy, accuracy - mde
    pbar = (p1 + p2) / 2
    from scipy.stats import norm  # imported when used: scipy.stats takes about 1 s (CLI start-up)

    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    n = (za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / mde ** 2
    return int(math.ceil(n - 1e-9))


def paired_n(discordance: float, mde: float, power: float = 0.8, alpha: float = 0.05, deff: float = 1.0) -> int:
    """Instances (answered by both models) for the paired design (module docstring: the paired test of a mean,
    times the design effect ``deff``). ``discordance``: ψ, the mean squared per-instance difference. Raises InputError when
    ``mde² ≥ ψ`` (models that disagree that rarely cannot differ by ``mde``)."""
    _check(None, mde, power, alpha)
    if not mde ** 2 < discordance <= 1.0:
        raise InputError(f"the pilot's models disagree on {discordance:.3f} of their instances (mean squared "
                         f"difference): a difference of --mde {mde} needs more disagreement than {mde ** 2:.4f}; "
                         f"plan a larger --mde or pilot on more instances")
    from scipy.stats import norm  # imported when used: scipy.stats takes about 1 s (CLI start-up)

    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    n = (za + zb) ** 2 * (discordance - mde ** 2) / mde ** 2
    return int(math.ceil(n * max(1.0, deff) - 1e-9))


def pilot_estimates(a: Sequence[float], b: Sequence[float], clusters: Sequence) -> dict:
    """From a pilot's aligned per-instance scores of two models: ``n`` (shared instances), ``clusters``,
    ``discordance`` (ψ: mean of (a − b)², the share of instances they disagree on for 0/1 scores), ``diff`` (mean
    of a − b), ``deff`` (design effect of the contexts: cluster-robust variance of the mean difference over its
    i.i.d. variance s²/n, at least 1; 1 where either is 0) and ``instances_per_context``. Raises InputError for
    fewer than two shared instances."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = d.size
    if n < 2:
        raise InputError(f"the pilot has {n} instance(s) both models answered: evaluate both models on the same "
                         f"instances of the pilot build first")
    idx, G = cluster_index(clusters)
    _, se = clustered_mean_se(d, idx, G)
    iid = d.var(ddof=1) / n
    deff = float(se ** 2 / iid) if iid > 0 and G >= 2 and np.isfinite(se) else 1.0
    return {"n": n, "clusters": G, "discordance": float(np.mean(d ** 2)), "diff": float(d.mean()),
            "deff": max(1.0, deff), "instances_per_context": n / G}
