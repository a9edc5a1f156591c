"""Formulas of issue 24 against worked values: paired clustered differences, Holm, sample sizes, the confidence
sequence, effective context length. Each expected value is worked out independently (by hand from the formula,
statsmodels, or a plain-Python loop of the paper's recursion), never read back from the code under test."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from ctxbench.analysis.effective import effective_length
from ctxbench.analysis.paired import holm, holm_batch, paired_difference
from ctxbench.analysis.power import independent_n, paired_n, pilot_estimates
from ctxbench.analysis.sequential import confidence_sequence, context_order, half_width
from ctxbench.core.errors import InputError


def test_independent_n_worked_values():
    # P = 0.7 vs 0.6: (1.959964·√(2·.65·.35) + 0.841621·√(.21+.24))² / .01 = 355.94 -> 356 (no continuity
    # correction)
    assert independent_n(0.7, 0.1) == 356
    za, zb = norm.ppf(0.975), norm.ppf(0.8)
    assert math.isclose((za * math.sqrt(2 * .65 * .35) + zb * math.sqrt(.45)) ** 2 / .01, 355.9428, abs_tol=1e-3)
    from statsmodels.stats.proportion import samplesize_proportions_2indep_onetail as sm

    for P, D, pw, a in ((0.7, 0.1, 0.8, 0.05), (0.5, 0.05, 0.9, 0.05), (0.9, 0.03, 0.8, 0.01), (0.3, 0.2, 0.8, 0.1)):
        assert independent_n(P, D, pw, a) == math.ceil(sm(D, P - D, pw, alpha=a, alternative="two-sided"))


def test_independent_n_bad_inputs():
    with pytest.raises(InputError, match="--mde"):
        independent_n(0.7, 0.0)
    with pytest.raises(InputError, match="larger than --accuracy"):
        independent_n(0.05, 0.1)
    with pytest.raises(InputError, match="--power"):
        independent_n(0.7, 0.1, power=1.0)


def test_paired_n_worked_values():
    # ψ = 0.2, D = 0.1: (1.959964 + 0.841621)² · (0.2 − 0.01) / 0.01 = 7.848880 · 19 = 149.13 -> 150
    assert paired_n(0.2, 0.1) == 150
    assert paired_n(0.2, 0.1, deff=1.5) == 224  # 149.13 × 1.5 = 223.7
    assert paired_n(0.2, 0.1, deff=0.5) == 150  # a design effect below 1 is not trusted: 1
    # ψ = 0.3, D = 0.05, power 0.9, α 0.01: (2.575829 + 1.281552)² · 0.2975 / 0.0025 = 14.87938 · 119 = 1770.6
    assert paired_n(0.3, 0.05, 0.9, 0.01) == 1771
    with pytest.raises(InputError, match="disagree"):
        paired_n(0.009, 0.1)


def test_pilot_estimates_discordance_and_deff():
    a = [1, 1, 0, 1, 0, 1, 1, 0]
    b = [1, 0, 0, 0, 0, 1, 0, 0]
    cl = ["x", "x", "y", "y", "z", "z", "w", "w"]
    e = pilot_estimates(a, b, cl)
    assert e["discordance"] == 3 / 8 and e["diff"] == 3 / 8 and e["clusters"] == 4
    # d = 0,1 | 0,1 | 0,0 | 1,0; cluster residual sums: .25,.25,-.75,.25 -> V = 4/3·(.0625·3+.5625)/64 = 1/64
    # iid: s² = (3·(5/8)² + 5·(3/8)²)/7 = 0.267857; /8 = 0.033482 -> deff = 0.015625/0.033482 < 1 -> 1
    assert e["deff"] == 1.0
    a2, b2 = [1, 1, 0, 0, 1, 1, 0, 0], [0] * 8
    e2 = pilot_estimates(a2, b2, cl)
    # d = 1,1 | 0,0 | 1,1 | 0,0, mean .5; cluster residual sums 1,-1,1,-1 -> V = 4/3·4/64 = 1/12;
    # s² = 8·.25/7 = 2/7, /8 = 1/28 -> deff = 28/12 = 2.333
    assert math.isclose(e2["deff"], 28 / 12)


def test_paired_difference_matches_statsmodels_cluster_ols():
    import statsmodels.api as sm
    from scipy import stats

    rng = np.random.default_rng(3)
    cl = np.repeat(np.arange(12), 5)
    a = rng.binomial(1, 0.7, 60).astype(float)
    b = rng.binomial(1, 0.6, 60).astype(float)
    r = paired_difference(a, b, [f"c{c}" for c in cl])
    fit = sm.OLS(a - b, np.ones(60)).fit(cov_type="cluster", cov_kwds={"groups": cl, "use_correction": True,
                                                                           "df_correction": True})
    se = float(fit.bse[0])
    assert math.isclose(r["diff"], float(fit.params[0]))
    q = stats.t.ppf(0.975, 11)
    assert math.isclose(r["ci_low"], fit.params[0] - q * se, rel_tol=1e-9)
    assert math.isclose(r["ci_high"], fit.params[0] + q * se, rel_tol=1e-9)
    assert math.isclose(r["p_value"], 2 * stats.t.sf(abs(fit.params[0] / se), 11), rel_tol=1e-9)
    assert r["clusters"] == 12 and r["n"] == 60 and r["reason"] is None


def test_paired_difference_by_hand_and_few_clusters():
    # d = 1,0 | 0,1 | 0,0 | 1,0 | 0,0 ; mean .3 ; residual sums .4,.4,-.6,.4,-.6 -> Σ² = 1.2; V = 5/4·1.2/100 = .015
    r = paired_difference([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], [0, 0, 1, 0, 0, 1, 0, 1, 0, 1], list("aabbccddee"))
    assert math.isclose(r["diff"], 0.3)
    half = 2.7764451 * math.sqrt(0.015)  # t_{0.975, 4}
    assert math.isclose(r["ci_high"] - 0.3, half, rel_tol=1e-6)
    few = paired_difference([1, 0, 1, 1], [0, 0, 1, 0], list("aabb"))
    assert few["diff"] == 0.5 and few["ci_low"] is None and few["p_value"] is None
    assert "2 contexts" in few["reason"] and "at least 5" in few["reason"]
    with pytest.raises(ValueError, match="aligned"):
        paired_difference([1], [1, 0], ["a"])


@pytest.mark.slow
def test_holm_matches_statsmodels(monkeypatch):
    from statsmodels.stats.multitest import multipletests

    # multipletests runs gc.collect() at every call: 50 full collections of a test process's heap took 20 s of CPU
    monkeypatch.setattr("gc.collect", lambda *a: 0)
    rng = np.random.default_rng(1)
    P = rng.uniform(0, 0.2, size=(50, 6))
    want = np.array([multipletests(p, method="holm")[1] for p in P])
    assert np.allclose(holm(P), want) and np.allclose(holm_batch(P), want)
    # by hand: 0.01, 0.04, 0.03 -> sorted .01·3 = .03, .03·2 = .06, max(.06, .04·1) = .06
    assert np.allclose(holm(np.array([0.01, 0.04, 0.03, np.nan]))[:3], [0.03, 0.06, 0.06])


def _cs_loop(xs, alpha=0.05):
    """Waudby-Smith & Ramdas' PrPl-EB recursion written out step by step."""
    lo_run, hi_run = 0.0, 1.0
    s_x = s_lam = s_lx = s_vpsi = s_dev = 0.0
    mu_prev, sig_prev = 0.5, 0.25
    out = []
    for t, x in enumerate(xs, start=1):
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (sig_prev * t * math.log(1 + t))), 0.5)
        v = 4 * (x - mu_prev) ** 2
        psi = (-math.log(1 - lam) - lam) / 4
        s_lam += lam
        s_lx += lam * x
        s_vpsi += v * psi
        c = s_lx / s_lam
        h = (math.log(2 / alpha) + s_vpsi) / s_lam
        lo_run, hi_run = max(lo_run, max(0.0, c - h)), min(hi_run, min(1.0, c + h))
        out.append((lo_run, hi_run))
        s_x += x
        mu = (0.5 + s_x) / (t + 1)
        s_dev += (x - mu) ** 2
        mu_prev, sig_prev = mu, (0.25 + s_dev) / (t + 1)
    return out


def test_confidence_sequence_matches_the_recursion():
    rng = np.random.default_rng(7)
    xs = rng.beta(2, 3, 300)
    _, lo, hi = confidence_sequence(xs)
    want = _cs_loop(list(xs))
    assert np.allclose(lo, [w[0] for w in want]) and np.allclose(hi, [w[1] for w in want])
    assert hi[-1] - lo[-1] < hi[20] - lo[20]
    l0, h0, w0 = half_width([])
    assert (l0, h0, w0) == (0.0, 1.0, 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        confidence_sequence(np.array([0.2, 1.5]))


def test_context_order_is_seeded_and_stable():
    ids = [f"ctx{i}" for i in range(20)]
    a, b = context_order(ids, 0), context_order(list(reversed(ids)), 0)
    assert a == b and sorted(a) == sorted(ids) and a != context_order(ids, 1)


def test_effective_length_relative_and_absolute():
    s = {4096: [1.0] * 10, 8192: [1.0] * 9 + [0.0], 16384: [1.0] * 8 + [0.0] * 2, 32768: [1.0] * 9 + [0.0]}
    rel = effective_length(s)  # threshold .85·1.0: 8192 (.9) and 16384 (.8 < .85) -> 8192, even though 32768 is .9
    assert rel["length"] == 8192 and math.isclose(rel["threshold"], 0.85) and rel["kind"] == "relative"
    ab = effective_length(s, relative=None, absolute=0.856)
    assert ab["length"] == 8192 and ab["threshold"] == 0.856
    low = effective_length({4096: [0.0, 1.0], 8192: [1.0, 1.0]}, relative=None, absolute=0.856)
    assert low["length"] is None  # .5 at the shortest tier: below the absolute threshold from the start
    assert rel["ci_low"] in (4096, 8192, 16384, 32768) and rel["ci_low"] <= rel["length"] <= rel["ci_high"]
    sure = effective_length({1000: [1.0] * 50, 2000: [1.0] * 50, 4000: [0.0] * 50})
    assert (sure["length"], sure["ci_low"], sure["ci_high"]) == (2000, 2000, 2000)
    with pytest.raises(ValueError, match="either"):
        effective_length(s, relative=0.85, absolute=0.856)
