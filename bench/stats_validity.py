"""Validity of the decision statistics (issue 24): a simulation with synthetic models of known accuracy on clustered
builds, checking each claim over many simulated runs (numpy, vectorised over runs).

The synthetic build: G contexts × m questions per context. Model k answers instance i of context g correctly iff
its latent ``x_k = √ρ·z_g + √κ·v_kg + √τ·z_i + √(1−ρ−κ−τ)·w_ki`` (all standard normal, independent) is below
``Φ⁻¹(p_k)``, so its accuracy is exactly ``p_k``; ``z_g`` (shared by the context's questions and by every model) and
``v_kg`` (the model's own affinity to the context) make instances of one context dependent (the clustering, also of
the differences between models), ``z_i`` (shared by the models) makes their answers on one instance agree more than
chance (the pairing). ρ = 0.15, κ = 0.10, τ = 0.40.

Claims (each over ``--runs`` runs, default 2,000):

1. the 95% interval of the paired difference (:mod:`ctxbench.analysis.paired`, clustered by context) covers the true
   difference ``p_a − p_b`` in 93–97% of runs, at several numbers of contexts;
2. the same after sequential stopping (``evaluate --target-ci``): contexts are asked one at a time, each model's
   confidence sequence (:mod:`ctxbench.analysis.sequential`) is updated, and asking stops once both half-widths are
   ≤ W; the paired interval on the stopped sample covers in 93–97%, and each model's confidence sequence covers
   its accuracy at every step (anytime) in ≥ 95% of runs;
3. the sample size of ``ctxbench plan`` reaches the stated power within ±3 points: the independent design (two
   proportions, the z-test it assumes) and the paired design (planned from the true discordance and a large
   pilot's design effect, tested with the clustered paired test);
4. Holm's correction over the 6 pairs of 4 models of equal accuracy keeps the family-wise error ≤ 5% (the
   unadjusted tests' is shown beside it).

Run: ``python bench/stats_validity.py [--runs 2000] [--seed 0]``; prints one line per claim with PASS/FAIL and exits
1 when a claim fails.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxbench.analysis.paired import clustered_t_test, holm_batch  # noqa: E402
from ctxbench.analysis.power import independent_n, paired_n  # noqa: E402
from ctxbench.analysis.sequential import confidence_sequence  # noqa: E402

RHO, KAPPA, TAU = 0.15, 0.10, 0.40  # latent variance shares: context, model × context, shared instance


def rng_for(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}|{name}".encode()).digest()[:8], "little"))


def answers(rng, R: int, G: int, m: int, ps: list[float], rho: float = RHO, kappa: float = KAPPA,
            tau: float = TAU) -> np.ndarray:
    """0/1 answers ``(K, R, G, m)`` of K models of accuracies ``ps`` (module docstring)."""
    zg = rng.standard_normal((R, G, 1))
    zi = rng.standard_normal((R, G, m))
    out = []
    for p in ps:
        vg = rng.standard_normal((R, G, 1))  # how well this model reads this context
        x = (np.sqrt(rho) * zg + np.sqrt(kappa) * vg + np.sqrt(tau) * zi
             + np.sqrt(1 - rho - kappa - tau) * rng.standard_normal((R, G, m)))
        out.append((x < norm.ppf(p)).astype(float))
    return np.stack(out)


def library_ci(d: np.ndarray, G: int, alpha: float = 0.05):
    """ctxbench.analysis.paired.clustered_t_test on ``d`` (R, G, m): every run's G contexts."""
    R, G, m = d.shape
    return clustered_t_test(d.reshape(R, G * m), np.repeat(np.arange(G), m), G, alpha)


def clustered_ci(d: np.ndarray, G: np.ndarray | int, alpha: float = 0.05):
    """Mean, low, high, p of the CR1 clustered paired test per run: ``d`` (R, Gmax, m) differences, the first ``G``
    (per run) contexts used (ctxbench.analysis.paired's formula written for a G of each run; checked against it in
    :func:`claim_sequential`)."""
    R, Gmax, m = d.shape
    G = np.broadcast_to(np.asarray(G), (R,))
    mask = (np.arange(Gmax)[None, :] < G[:, None]).astype(float)
    S = d.sum(axis=2) * mask
    n = G * m
    mean = S.sum(axis=1) / n
    resid = (S - m * mean[:, None]) * mask
    var = G / (G - 1) * (resid ** 2).sum(axis=1) / n ** 2
    se = np.sqrt(var)
    q = stats.t.ppf(1 - alpha / 2, G - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, mean / np.where(se > 0, se, 1), 0.0)
    return mean, mean - q * se, mean + q * se, 2 * stats.t.sf(np.abs(t), G - 1)


def claim_coverage(seed: int, R: int) -> list[tuple[str, float, bool]]:
    out = []
    pa, pb = 0.72, 0.65
    for G, m in ((10, 5), (30, 4), (100, 3)):
        A, B = answers(rng_for(seed, f"cov{G}"), R, G, m, [pa, pb])
        _, lo, hi, _ = library_ci(A - B, G)
        cov = float(np.mean((lo <= pa - pb) & (pa - pb <= hi)))
        out.append((f"coverage of the paired 95% interval, {G} contexts x {m} questions", cov, 0.93 <= cov <= 0.97))
    return out


def claim_sequential(seed: int, R: int, W: float = 0.1, m: int = 4, Gmax: int = 400
                     ) -> list[tuple[str, float, bool]]:
    pa, pb = 0.70, 0.62
    A, B = answers(rng_for(seed, "seq"), R, Gmax, m, [pa, pb])
    stops, cs_cover = [], []
    for X, p in ((A, pa), (B, pb)):
        _, lo, hi = confidence_sequence(X.mean(axis=2))  # context means in the asked order
        hw = (hi - lo) / 2
        reached = hw <= W
        stops.append(np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, Gmax))
        cs_cover.append(np.mean(((lo <= p) & (p <= hi)).all(axis=1)))
    G = np.maximum(np.maximum(*stops), 5)
    _, lo, hi, _ = clustered_ci(A - B, G)
    for r in range(min(R, 50)):  # the variable-G formula is the library's
        _, l1, h1, _ = library_ci((A - B)[r:r + 1, :G[r]], int(G[r]))
        assert np.isclose(l1[0], lo[r]) and np.isclose(h1[0], hi[r])
    cov = float(np.mean((lo <= pa - pb) & (pa - pb <= hi)))
    return [(f"coverage of the paired 95% interval after stopping at half-width {W} (median {int(np.median(G))} "
             f"contexts x {m})", cov, 0.93 <= cov <= 0.97),
            ("anytime coverage of each model's confidence sequence (min of the two)", float(min(cs_cover)),
             min(cs_cover) >= 0.95)]


def claim_power(seed: int, R: int) -> list[tuple[str, float, bool]]:
    out = []
    R = max(R, 4000)  # the band is ±3 points: Monte Carlo error (1 SE = 0.6 points at 4,000 runs) kept well inside
    for P, D, pw in ((0.7, 0.1, 0.8), (0.5, 0.08, 0.9), (0.85, 0.07, 0.8)):
        n = independent_n(P, D, pw)
        rng = rng_for(seed, f"pow{P}")
        xa, xb = rng.binomial(n, P, R), rng.binomial(n, P - D, R)
        pbar = (xa + xb) / (2 * n)
        z = (xa - xb) / n / np.sqrt(2 * pbar * (1 - pbar) / n)
        got = float(np.mean(np.abs(z) > norm.ppf(0.975)))
        out.append((f"power of the independent plan P={P} D={D} (n={n}), stated {pw} [{R} runs]", got,
                    abs(got - pw) <= 0.03))
    # paired: true discordance ψ and the design effect of a large pilot from the same generator
    m, pa, pb, D = 4, 0.72, 0.64, 0.08
    pilot = answers(rng_for(seed, "pilot"), 1, 20000, m, [pa, pb])
    d = (pilot[0] - pilot[1])[0]
    psi = float(np.mean(d ** 2))
    _, lo, hi, _ = library_ci(d[None], d.shape[0])
    se_cl = (hi[0] - lo[0]) / 2 / stats.t.ppf(0.975, d.shape[0] - 1)
    deff = float(se_cl ** 2 / (d.var(ddof=1) / d.size))
    n = paired_n(psi, D, 0.8, deff=deff)
    G = int(np.ceil(n / m))
    A, B = answers(rng_for(seed, "pairedpow"), R, G, m, [pa, pb])
    _, _, _, p = library_ci(A - B, G)
    got = float(np.mean(p <= 0.05))
    out.append((f"power of the paired plan (psi={psi:.3f}, deff={deff:.2f}, n={n} in {G} contexts), stated 0.8 "
                f"[{R} runs]",
                got, abs(got - 0.8) <= 0.03))
    return out


def claim_holm(seed: int, R: int) -> list[tuple[str, float, bool]]:
    G, m, k = 30, 4, 4
    X = answers(rng_for(seed, "holm"), R, G, m, [0.7] * k)
    ps = []
    for a in range(k):
        for b in range(a + 1, k):
            ps.append(library_ci(X[a] - X[b], G)[3])
    P = np.stack(ps, axis=1)
    fwer = float(np.mean((holm_batch(P) <= 0.05).any(axis=1)))
    raw = float(np.mean((P <= 0.05).any(axis=1)))
    return [(f"family-wise error with Holm over {P.shape[1]} pairs of {k} equal models (unadjusted: {raw:.3f})", fwer,
             fwer <= 0.05)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    ok = True
    for fn in (claim_coverage, claim_sequential, claim_power, claim_holm):
        for what, value, passed in fn(a.seed, a.runs):
            ok &= passed
            print(f"{'PASS' if passed else 'FAIL'}  {value:.3f}  {what}" + ("" if "runs]" in what else
                                                                           f"  [{a.runs} runs]"))
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
