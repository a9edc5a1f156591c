"""Adaptive evaluation with item response theory (issue 34): a small calibration and the first information-maximising
choice worked out by hand, and `evaluate --adaptive-calls` on a needles build answered fully by five simulated models
(a local server where each model is right with a probability set per context length)."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import shutil
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest
from fakeserver import FakeOpenAIServer, message_text
from scipy.optimize import brentq
from typer.testing import CliRunner

import ctxbench.run.evaluate as ev
from ctxbench.analysis import irt
from ctxbench.cli import app
from ctxbench.models.gateway import RetryPolicy
from ctxbench.report.html import build_report
from ctxbench.run.score import score_build

pytest.importorskip("ctxbench.tracks.needles", reason="the needles build track (ctxbench.tracks.needles) is absent")

LENGTHS = [1000, 2000, 3000, 4000]
# P(right) per model and context length: five calibration models and the new one
P_RIGHT = {"m1": [0.95, 0.9, 0.85, 0.8], "m2": [0.9, 0.8, 0.7, 0.6], "m3": [0.8, 0.65, 0.5, 0.4],
           "m4": [0.6, 0.45, 0.3, 0.2], "m5": [0.4, 0.3, 0.2, 0.1], "m6": [0.85, 0.7, 0.55, 0.4]}


# --------------------------------------------------------------------------------------------- worked by hand

def test_one_model_one_item_calibration_solves_the_posterior_mode_equations():
    """One model right on one item, no features (an intercept β₀ only, its prior N(0, σ₀²): λ = 1/σ₀²), a = 1
    fixed. The posterior mode zeroes the gradient of −log σ(θ − b) + θ²/2 + (b − β₀)²/2τ² + λβ₀²/2:
    ∂θ: −(1 − p) + θ = 0; ∂b: (1 − p) + (b − β₀)/τ² = 0; ∂β₀: −(b − β₀)/τ² + λβ₀ = 0. So b − β₀ = τ²λβ₀,
    θ = 1 − p = −λβ₀, and β₀ solves 1 − σ(θ − b) = θ: one equation, solved here by bisection."""
    lam, tau = 1 / irt.SIGMA_B0 ** 2, irt.TAU

    def eq(beta0):
        theta, b = -lam * beta0, beta0 * (1 + tau ** 2 * lam)
        return (1 - 1 / (1 + math.exp(-(theta - b)))) - theta

    beta0 = brentq(eq, -50, 50)
    theta, b = -lam * beta0, beta0 * (1 + tau ** 2 * lam)
    fit = irt.fit_2pl(np.ones((1, 1)), np.array([0]), np.array([0]), np.array([1.0]), 1, fix_discrimination=True)
    assert fit["theta"][0] == pytest.approx(theta, abs=2e-3)
    assert fit["b"][0] == pytest.approx(b, abs=2e-2)


def test_two_models_two_items_symmetric_calibration():
    """Model A right on both items, model B wrong on both, the items alike, a = 1: by symmetry θ_A = −θ_B = t and
    b₁ = b₂ = β₀ = 0 (λ on β₀ keeps it there), and ∂/∂θ_A = −2(1 − σ(t)) + t = 0."""
    t = brentq(lambda t: -2 * (1 - 1 / (1 + math.exp(-t))) + t, 0, 5)
    fit = irt.fit_2pl(np.ones((2, 1)), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1.0, 1, 0, 0]), 2,
                      fix_discrimination=True)
    assert fit["theta"] == pytest.approx([t, -t], abs=2e-3)
    assert fit["b"] == pytest.approx([0, 0], abs=2e-3)
    # b's standard error: 1/√(Σ p(1−p) + 1/τ²) with p = σ(±t)
    p = 1 / (1 + math.exp(-t))
    assert fit["b_sd"] == pytest.approx([1 / math.sqrt(2 * p * (1 - p) + 1)] * 2, abs=2e-3)


def test_first_choice_is_the_item_of_maximum_information_at_the_prior_mean():
    """Before any answer the EAP is 0 (the N(0, 1) prior, symmetric grid); the items' information a²p(1 − p) at 0:
    (a=1, b=0) 0.25; (a=2, b=1) 4·σ(−2)·σ(2) = 0.4200; (a=0.5, b=0) 0.0625; (a=3, b=3) 9·σ(−9)σ(9) = 0.0011."""
    a = np.array([1.0, 2.0, 0.5, 3.0])
    b = np.array([0.0, 1.0, 0.0, 3.0])
    w = irt.posterior(a[:0], b[:0], np.array([]))
    theta, se = irt.eap(w)
    assert theta == pytest.approx(0.0, abs=1e-9) and se == pytest.approx(1.0, abs=1e-3)
    s2 = 1 / (1 + math.exp(2))
    info = irt.information(theta, a, b)
    s9 = 1 / (1 + math.exp(9))
    assert info == pytest.approx([0.25, 4 * s2 * (1 - s2), 0.0625, 9 * s9 * (1 - s9)])
    assert int(np.argmax(info)) == 1
    # after a right answer to item 1, the EAP moves up: ∫θ·π(θ)σ(2(θ−1)) / ∫π(θ)σ(2(θ−1)), by quadrature here
    g = np.linspace(-6, 6, 24001)
    like = np.exp(-g ** 2 / 2) / (1 + np.exp(-2 * (g - 1)))
    w = irt.posterior(a[1:2], b[1:2], np.array([1.0]))
    assert irt.eap(w)[0] == pytest.approx(float((g * like).sum() / like.sum()), abs=1e-3)


def test_the_selector_covers_each_length_then_asks_the_most_informative(tmp_path):
    """AdaptiveSelector on a toy build of two lengths (3 instances each) with hand-set item parameters: at θ = 0
    (no answer yet) the informations a²p(1 − p) are, at 1,024 tokens, (a=1, b=0) .25, (a=2, b=1) .420, (a=1,
    b=−2) .105; at 2,048, (a=1, b=3) .045, (a=0.5, b=0) .0625, (a=1, b=2) .105. With one item a wave (a budget of 4
    calls: a quarter is 1), the first wave is the best at 1,024 (item 1); the second, with 1,024 covered, the best
    at 2,048 (item 5) although item 0 at 1,024 carries more; a right answer to 1 and a wrong one to 5 leave θ's
    EAP between, and the third is the most informative at that EAP, worked out here; the fourth spends the budget
    and a fifth wave is empty."""
    from types import SimpleNamespace

    from test_spend_and_stopping import make_build

    from ctxbench.run.adaptive import AdaptiveSelector

    build = make_build(tmp_path / "b", per_length=3)
    ids = [r["instance_id"] for r in pq.read_table(build / "instances.parquet").to_pylist()]
    a = np.array([1.0, 2.0, 1.0, 1.0, 0.5, 1.0])
    b = np.array([0.0, 1.0, -2.0, 3.0, 0.0, 2.0])
    sel = AdaptiveSelector(build, "openai/new", calls=4)
    reqs = [SimpleNamespace(item={"instance_id": i, "mode": "lc", "sample": 0}) for i in ids]
    sel._cal = irt.Calibration([("lc", i) for i in ids], irt.instances(build),
                               irt.ItemParams(a=a, b=b, b_sd=np.zeros(6), b_prior=b, theta={}, beta=np.zeros(1),
                                              features=[], models=[], n_answers=np.zeros(6, int)), [str(build)])
    sel.arrange(reqs)
    w = sel.next_wave(reqs, 1)
    assert [r.item["instance_id"] for r in w] == [ids[1]]
    sel.sent(w)
    sel.score(reqs[1].item, "ok", "Answer: 0", None)  # the fake's item code is never 0: scored wrong...
    sel.answers[("lc", ids[1])] = [1.0]                # ...set right by hand
    left = [r for r in reqs if r is not reqs[1]]
    w = sel.next_wave(left, 1)
    assert [r.item["instance_id"] for r in w] == [ids[5]]
    sel.sent(w)
    sel.answers[("lc", ids[5])] = [0.0]
    left = [r for r in left if r is not reqs[5]]
    g = irt.GRID
    post = np.exp(-g ** 2 / 2) / (1 + np.exp(-2 * (g - 1))) * (1 - 1 / (1 + np.exp(-(g - 2))))
    th = float((g * post).sum() / post.sum())
    p = 1 / (1 + np.exp(-a * (th - b)))
    info = a ** 2 * p * (1 - p)
    best = max((0, 2, 3, 4), key=lambda j: info[j])
    w = sel.next_wave(left, 1)
    assert [r.item["instance_id"] for r in w] == [ids[best]]
    sel.sent(w)
    left = [r for r in left if r is not reqs[best]]
    w = sel.next_wave(left, 8)
    assert len(w) == 1  # the fourth call of the budget: one item whatever the concurrency
    sel.sent(w)
    assert sel.next_wave(left[1:], 8) == [] and sel.left() == 0


def _context_selector(tmp_path, prefix_cache: bool):
    """A selector on a toy build of two lengths (ids 0–2 at 1,024 tokens, 3–5 at 2,048) with hand-set items, all
    a = 1: ids 0 and 3 (b = 0) already answered, 0 right and 3 wrong, so both lengths are covered and θ's posterior
    ∝ φ(θ)σ(θ)(1 − σ(θ)) is symmetric: the EAP is 0. The candidates' information p(1 − p) at 0: id 1 (b = 0.5,
    context cA) σ(−.5)σ(.5) = .23500; id 2 (b = 0, cC) .25, the maximum; id 4 (b = −0.6, cB) σ(.6)σ(−.6) = .22878;
    id 5 (b = 2, cD) σ(−2)σ(2) = .10499. The tolerance keeps those at least 0.8 × .25 = .2: ids 1, 2 and 4."""
    from types import SimpleNamespace

    from test_spend_and_stopping import make_build

    from ctxbench.run.adaptive import AdaptiveSelector

    build = make_build(tmp_path / "b", per_length=3)
    ids = [r["instance_id"] for r in pq.read_table(build / "instances.parquet").to_pylist()]
    b = np.array([0.0, 0.5, 0.0, 0.0, -0.6, 2.0])
    ctx = ["cA", "cA", "cC", "cB", "cB", "cD"]
    sel = AdaptiveSelector(build, "openai/new", calls=40, prefix_cache=prefix_cache)
    reqs = [SimpleNamespace(item={"instance_id": i, "mode": "lc", "sample": 0, "_ctx": c}) for i, c in zip(ids, ctx)]
    sel._cal = irt.Calibration([("lc", i) for i in ids], irt.instances(build),
                               irt.ItemParams(a=np.ones(6), b=b, b_sd=np.zeros(6), b_prior=b, theta={},
                                              beta=np.zeros(1), features=[], models=[], n_answers=np.zeros(6, int)),
                               [str(build)])
    sel.arrange(reqs)
    assert [sel.group(("lc", i))[1] for i in ids] == [1024] * 3 + [2048] * 3
    sel.answers[("lc", ids[0])] = [1.0]
    sel.answers[("lc", ids[3])] = [0.0]
    assert sel._state("lc")[1] == pytest.approx(0.0, abs=1e-9)
    s = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    info = {1: s(-0.5) * s(0.5), 2: 0.25, 4: s(0.6) * s(-0.6), 5: s(-2) * s(2)}
    assert [round(info[j], 5) for j in (1, 2, 4, 5)] == [0.235, 0.25, 0.22878, 0.10499]
    left = [reqs[j] for j in (1, 2, 4, 5)]
    return sel, reqs, ids, left


@pytest.mark.parametrize("cache", [True, False])
def test_near_equal_items_are_chosen_by_the_previous_waves_context(tmp_path, cache):
    """The previous wave was on context cB. With a prefix cache the warm item 4 (.22878, within 0.8 of the maximum
    .25) is chosen over the maximum, item 2; without one the maximum (cC, another context) stays. After a wave on cC
    (the maximum's context): with a cache item 2; without, the best item on another context, item 1 (.235 > .22878).
    After a wave on cD, whose only item (5, .105) is far below the tolerance: item 2 either way."""
    sel, reqs, ids, left = _context_selector(tmp_path, cache)
    for prev, want in (("cB", 4 if cache else 2), ("cC", 2 if cache else 1), ("cD", 2)):
        sel.sent([SimpleNamespace(item={"instance_id": "x", "mode": "lc", "sample": 0, "_ctx": prev})])
        w = sel.next_wave(left, 1)
        assert [r.item["instance_id"] for r in w] == [ids[want]], prev


def test_within_a_wave_a_cached_context_is_reused_and_a_far_item_never_taken(tmp_path):
    """With a prefix cache and no previous wave, a wave of 3 items: first the maximum (item 2, cC); cC has no other
    item, so the next is the maximum of the rest (item 1, .235, cA); then cA's prefix is warm but its only other
    item (0) is answered, and the rest (4: .22878, 5: .105) hold no warm item: item 4. The wave's calls run in
    context order. Item 5 (cD, .105) is never taken while 4 is left, even with cD the previous wave's context."""
    sel, reqs, ids, left = _context_selector(tmp_path, True)
    w = sel.next_wave(left, 3)
    assert [r.item["instance_id"] for r in w] == [ids[1], ids[4], ids[2]]  # sorted by context: cA, cB, cC
    sel2, _, _, left2 = _context_selector(tmp_path / "again", True)
    sel2.sent([SimpleNamespace(item={"instance_id": "x", "mode": "lc", "sample": 0, "_ctx": "cD"})])
    assert ids[5] not in [r.item["instance_id"] for r in sel2.next_wave(left2, 3)]


def test_pick_keeps_the_tolerance_exactly():
    """pick: the tolerance is 0.8 of the maximum, inclusive (.2 of .25 counts, .1999 does not); None is no context
    (never warm); ties go to the smaller tie key; no candidate is an error."""
    from ctxbench.run.adaptive import INFO_TOLERANCE, pick

    assert INFO_TOLERANCE == 0.8
    ties = [(0, "a"), (0, "b")]
    assert pick([0.25, 0.2], ["x", "y"], {"y"}, True, ties) == 1
    assert pick([0.25, 0.1999], ["x", "y"], {"y"}, True, ties) == 0
    assert pick([0.25, 0.2], ["y", "x"], {"y"}, False, ties) == 1
    assert pick([0.25, 0.1999], ["y", "x"], {"y"}, False, ties) == 0
    assert pick([0.25, 0.25], [None, None], {None}, True, ties) == 0
    assert pick([0.25, 0.25], ["x", "x"], set(), True, [(1, "a"), (0, "b")]) == 1
    with pytest.raises(ValueError):
        pick([], [], set(), True, [])


def test_which_servers_keep_a_prefix_cache():
    """A self-hosted OpenAI-compatible server keeps one (vLLM, SGLang, llama.cpp by default), as does the embedded
    model and a Claude model with the cache hint; a name litellm does not know, at no base URL or at a provider's
    own host, has no cached-input price: none."""
    from ctxbench.models.providers import caches_prefixes

    assert caches_prefixes("openai/qwen", "http://127.0.0.1:8000/v1")
    assert caches_prefixes("smollm2-135m-instruct")
    assert caches_prefixes("claude-sonnet-4-20250514")
    assert not caches_prefixes("nosuchprovider/model-x")
    assert not caches_prefixes("groq/no-such-model", "https://api.groq.com/openai/v1")


def test_a_build_without_other_models_is_estimated_from_the_features_alone(tmp_path):
    """No other model on the build: β has no data (its prior keeps it 0), so every b = 0 with b_sd = τ = 1 and
    a = 1; every item informs alike, so the selection alternates between the two lengths (ties: the group asked
    least). The items' common location is the intercept alone, whose posterior is then its prior N(0, σ₀²), so θ's
    prior relative to the items is N(0, 1 + σ₀²). The whole-build estimate is then worked out here by quadrature:
    θ's posterior from the 6 answers under p(θ) = σ(θ/√(1 + π/8)), the 14 unasked items at its posterior mean, the
    interval from E[Σp(1−p)] + Var[Σp]."""
    from fakeserver import FakeOpenAIServer as Fake
    from test_spend_and_stopping import answer, make_build, wrong

    build = make_build(tmp_path / "b", per_length=10)
    with Fake(answer_fn=answer) as srv:
        r = _evaluate(build, srv, "fake", "--adaptive-calls", "6")
        assert r.exit_code == 0 and srv.count == 6, r.output
    rows = {x["instance_id"]: x for x in pq.read_table(build / "instances.parquet").to_pylist()}
    asked = [x["instance_id"] for x in pq.read_table(build / "responses.parquet").to_pylist()]
    assert sorted(rows[i]["target_tokens"] for i in asked) == [1024] * 3 + [2048] * 3
    assert score_build(build).adaptive == 3
    [whole] = [x for x in pq.read_table(build / "adaptive.parquet").to_pylist() if x["context_length"] is None]
    y = np.array([0.0 if wrong(int(i[1:])) else 1.0 for i in asked])
    g = np.linspace(-10, 10, 401)
    p = 1 / (1 + np.exp(-g / math.sqrt(1 + math.pi / 8)))
    w = np.exp(-g ** 2 / (2 * (1 + irt.SIGMA_B0 ** 2))) * np.prod([p if v else 1 - p for v in y], axis=0)
    w /= w.sum()
    mu, var = w @ (14 * p), w @ (14 * p * (1 - p) + (14 * p) ** 2) - (w @ (14 * p)) ** 2
    est = (y.sum() + mu) / 20
    assert whole["n_asked"] == 6 and whole["n_instances"] == 20 and whole["method"] == "rasch-map-features+eap"
    assert whole["estimate"] == pytest.approx(est, abs=1e-4)
    assert whole["ci_high"] - whole["ci_low"] == pytest.approx(2 * 1.959964 * math.sqrt(var) / 20, abs=1e-3)


def test_target_ci_stops_an_adaptive_run_once_the_whole_build_interval_is_narrow(tmp_path):
    """--adaptive-calls 20 --target-ci 0.3 on a toy build of 20 instances: the run stops once the whole-build
    interval is within ±0.3, before the budget; the half-width it reports is ≤ 0.3 and adaptive.parquet's
    whole-build interval (the same computation) agrees; a rerun asks nothing."""
    from fakeserver import FakeOpenAIServer as Fake
    from test_spend_and_stopping import answer, make_build

    build = make_build(tmp_path / "b", per_length=10)
    with Fake(answer_fn=answer) as srv:
        r = _evaluate(build, srv, "fake", "--adaptive-calls", "20", "--target-ci", "0.3", "--concurrency", "1")
        assert r.exit_code == 0, r.output
        n = srv.count
        assert 0 < n < 20 and "--target-ci 0.3 reached" in r.output, r.output
        hw = float(re.search(r"whole-build estimate [0-9.]+ \[[0-9., ]+\] ±([0-9.]+)", r.output).group(1))
        assert hw <= 0.3
        r = _evaluate(build, srv, "fake", "--adaptive-calls", "20", "--target-ci", "0.3", "--concurrency", "1")
        assert r.exit_code == 0 and srv.count == n, r.output
    score_build(build)
    [whole] = [x for x in pq.read_table(build / "adaptive.parquet").to_pylist() if x["context_length"] is None]
    assert whole["n_asked"] == n and (whole["ci_high"] - whole["ci_low"]) / 2 == pytest.approx(hw, abs=1e-3)


def test_max_cost_trims_an_adaptive_run_and_a_larger_cap_continues_to_the_budget(tmp_path):
    """--adaptive-calls 15 under a cap that lets about 5 calls through: the cap stops it (exit 3), the calls
    counted towards N are the calls sent; a rerun with a larger cap asks the rest of the 15, no more."""
    from fakeserver import FakeOpenAIServer as Fake
    from test_spend_and_stopping import answer, make_build

    build = make_build(tmp_path / "b", per_length=10)
    with Fake(answer_fn=answer) as srv:
        args = ("--adaptive-calls", "15", "--price", "2,8", "--concurrency", "1")
        r = _evaluate(build, srv, "fake", *args, "--max-cost", "0.002")
        n = srv.count
        assert r.exit_code == 3 and 0 < n < 15, r.output
        assert f"({n} calls counted of 15)" in r.output, r.output
        r = _evaluate(build, srv, "fake", *args, "--max-cost", "1")
        assert r.exit_code == 0 and srv.count == 15, r.output


def test_all_right_calibration_has_finite_difficulties_solving_the_mode_equations():
    """Two models right on all of 20 alike items (an intercept only, a = 1): by symmetry every b is one value and
    both θ one value. The posterior mode zeroes ∂θ: −N(1 − p) + θ; ∂b: M(1 − p) + (b − β₀)/τ²;
    ∂β₀: −N(b − β₀)/τ² + β₀/σ₀². So b = β₀(1 + τ²/(Nσ₀²)), θ = −β₀/(Mσ₀²) and β₀ solves
    1 − σ(θ − b) = −β₀/(NMσ₀²): finite, where without the intercept's prior b ran to −∞. All wrong is the mirror
    image (b → −b, θ → −θ)."""
    M, N, tau, s0 = 2, 20, irt.TAU, irt.SIGMA_B0

    def parts(beta0):
        return -beta0 / (M * s0 ** 2), beta0 * (1 + tau ** 2 / (N * s0 ** 2))

    def eq(beta0):
        theta, b = parts(beta0)
        return (1 - 1 / (1 + math.exp(-(theta - b)))) + beta0 / (N * M * s0 ** 2)

    beta0 = brentq(eq, -50, 0)
    theta, b = parts(beta0)
    m, i = np.repeat(np.arange(M), N), np.tile(np.arange(N), M)
    right = irt.fit_2pl(np.ones((N, 1)), m, i, np.ones(M * N), M, fix_discrimination=True)
    wrong = irt.fit_2pl(np.ones((N, 1)), m, i, np.zeros(M * N), M, fix_discrimination=True)
    assert right["b"] == pytest.approx([b] * N, abs=2e-2) and right["theta"] == pytest.approx([theta] * M, abs=2e-3)
    assert wrong["b"] == pytest.approx([-b] * N, abs=2e-2) and wrong["theta"] == pytest.approx([-theta] * M, abs=2e-3)
    assert -6 < b < -2


def test_shift_sd_is_the_shared_part_of_the_mean_difficultys_laplace_variance():
    """The Laplace variance of the mean difficulty b̄ from the full Hessian, built here by finite differences of the
    Rasch objective written out again (θ²/2 + Σ(b − β₀)²/2τ² + β₀²/2σ₀² + Σ log(1 + e^z) − yz, z = θ − b):
    Var(b̄) = 1ᵀ Cov_bb 1 / N². Less its independent part Σ (1/H_ii) / N² (each b_i given the rest: ``b_sd``) it is
    ``shift_sd``². All wrong: two models, 6 items."""
    M, N, tau, s0 = 2, 6, irt.TAU, irt.SIGMA_B0
    m, i = np.repeat(np.arange(M), N), np.tile(np.arange(N), M)
    y = np.zeros(M * N)
    fit = irt.fit_2pl(np.ones((N, 1)), m, i, y, M, fix_discrimination=True)

    def obj(v):
        th, b, b0 = v[:M], v[M:M + N], v[-1]
        z = th[m] - b[i]
        return (np.sum(np.logaddexp(0, z) - y * z) + th @ th / 2 + np.sum((b - b0) ** 2) / (2 * tau ** 2)
                + b0 ** 2 / (2 * s0 ** 2))

    v = np.concatenate([fit["theta"], fit["b"], fit["beta"]])
    h, K = 1e-3, len(v)
    H = np.zeros((K, K))
    for r in range(K):
        for c in range(K):
            e_r, e_c = np.eye(K)[r] * h, np.eye(K)[c] * h
            H[r, c] = (obj(v + e_r + e_c) - obj(v + e_r - e_c) - obj(v - e_r + e_c) + obj(v - e_r - e_c)) / (4 * h * h)
    cov = np.linalg.inv(H)
    var_mean = cov[M:M + N, M:M + N].sum() / N ** 2
    indep = np.sum(1 / np.diag(H)[M:M + N]) / N ** 2
    assert fit["b_sd"] == pytest.approx(1 / np.sqrt(np.diag(H)[M:M + N]), rel=1e-3)
    assert fit["shift_sd"] == pytest.approx(math.sqrt(var_mean - indep), rel=1e-3)
    assert fit["shift_sd"] > 0.5  # the all-wrong answers say little about how hard the items are


def _half_server():
    """The calibration models ``right*`` answer every item right, ``wrong*`` every one wrong; ``half`` is right on
    the items of odd number: exactly 10 of the 20 of ``make_build(per_length=10)``, a true score of 0.5."""
    from test_spend_and_stopping import code

    def answer(body: dict) -> str:
        text = message_text([x for x in body["messages"] if x["role"] == "user"][-1]["content"])
        i = int(re.search(r"What is the code of item X(\d+)\?", text).group(1))
        model = body["model"].split("/")[-1]
        ok = model.startswith("right") or (model == "half" and i % 2 == 1)
        return f"Answer: {code(i) + (0 if ok else 1)}"

    return FakeOpenAIServer(answer_fn=answer)


@pytest.mark.parametrize("kind", ["right", "wrong"])
def test_all_right_or_all_wrong_calibration_keeps_the_interval_honest(tmp_path, kind):
    """Every calibration model right on everything (or wrong on everything), a new model right on exactly half: with
    1 call the interval is wide (it was ±0.004 when the difficulties ran off to ±∞) and evaluate's summary is the
    same interval as score's adaptive.parquet; with 4 calls, 2 right and 2 wrong, the interval covers the true 0.5;
    and --target-ci 0.05 is not "reached" before the model has answered."""
    from test_spend_and_stopping import make_build

    out = {}
    for n in (1, 4):
        build = make_build(tmp_path / f"b{n}", per_length=10)
        with _half_server() as srv:
            for k in (1, 2):
                assert _evaluate(build, srv, f"{kind}{k}").exit_code == 0
            r = _evaluate(build, srv, "half", "--adaptive-calls", str(n))
            assert r.exit_code == 0, r.output
        est, lo, hi, hw = map(float, re.search(r"whole-build estimate ([0-9.]+) \[([0-9.]+), ([0-9.]+)\] ±([0-9.]+)",
                                               r.output).groups())
        score_build(build)
        [whole] = [x for x in pq.read_table(build / "adaptive.parquet").to_pylist() if x["context_length"] is None]
        assert (whole["estimate"], whole["ci_low"], whole["ci_high"]) == pytest.approx((est, lo, hi), abs=6e-4)
        assert whole["n_asked"] == n
        asked = [int(x["instance_id"][1:]) for x in pq.read_table(build / "responses.parquet").to_pylist()
                 if x["model"] == "openai/half"]
        out[n] = (whole, sum(i % 2 for i in asked))
    assert out[1][0]["ci_high"] - out[1][0]["ci_low"] > 0.25
    whole, n_right = out[4]
    assert n_right == 2 and whole["ci_low"] <= 0.5 <= whole["ci_high"], whole
    build = make_build(tmp_path / "t", per_length=10)
    with _half_server() as srv:
        for k in (1, 2):
            assert _evaluate(build, srv, f"{kind}{k}").exit_code == 0
        n0 = srv.count
        r = _evaluate(build, srv, "half", "--adaptive-calls", "20", "--target-ci", "0.05")
        assert r.exit_code == 0 and srv.count - n0 >= 2, r.output
        if "--target-ci 0.05 reached" in r.output:
            assert float(re.search(r"±([0-9.]+) \(95%\)", r.output).group(1)) <= 0.05


def test_target_ci_is_not_reached_before_each_length_has_an_answer(tmp_path):
    """--target-ci 1.0 (any interval is within ±1): with no answer, then with an answer at 1,024 tokens only, the
    selector still asks (a length without an answer of the model is never estimated by the calibration alone);
    once both lengths have one it stops."""
    from types import SimpleNamespace

    from test_spend_and_stopping import make_build

    from ctxbench.run.adaptive import AdaptiveSelector

    build = make_build(tmp_path / "b", per_length=3)
    ids = [r["instance_id"] for r in pq.read_table(build / "instances.parquet").to_pylist()]
    sel = AdaptiveSelector(build, "openai/new", calls=20, width=1.0)
    reqs = [SimpleNamespace(item={"instance_id": i, "mode": "lc", "sample": 0}) for i in ids]
    sel.arrange(reqs)
    assert sel.uncovered("lc") == [1024, 2048]
    w = sel.next_wave(reqs, 1)
    assert len(w) == 1 and "lc" not in sel.closed
    sel.sent(w)
    sel.answers[sel.key(w[0].item)] = [0.0]
    left = [r for r in reqs if r is not w[0]]
    w2 = sel.next_wave(left, 1)
    assert len(w2) == 1 and "lc" not in sel.closed
    assert {sel.group(sel.key(x.item))[1] for x in (w[0], w2[0])} == {1024, 2048}
    sel.sent(w2)
    sel.answers[sel.key(w2[0].item)] = [1.0]
    left = [r for r in left if r is not w2[0]]
    assert sel.next_wave(left, 1) == [] and "lc" in sel.closed


def test_group_prediction_of_unasked_items():
    """θ known exactly (all weight on θ = 0): two unasked items with p = ½ and σ(1); one asked item scored 1. The
    estimate is (1 + ½ + σ(1)) / 3 and the interval ±1.96·√(¼ + σ(1)σ(−1)) / 3."""
    w = np.zeros(len(irt.GRID))
    w[np.argmin(abs(irt.GRID))] = 1.0
    est, lo, hi = irt.predict_group(w, [1.0], np.array([1.0, 1.0]), np.array([0.0, -1.0]), np.zeros(2))
    s1 = 1 / (1 + math.exp(-1))
    assert est == pytest.approx((1 + 0.5 + s1) / 3)
    half = 1.959963984540054 * math.sqrt(0.25 + s1 * (1 - s1)) / 3
    assert (lo, hi) == pytest.approx((est - half, min(1.0, est + half)))


# ------------------------------------------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def needles4(shared_data, tmp_path_factory):
    from conftest import require_path

    from ctxbench.tracks.needles import NeedlesConfig, build_needles

    corpus = require_path(shared_data / "classical" / "songyuan_xuean" / "volumes", "宋元學案 volumes")
    out = tmp_path_factory.mktemp("adaptive") / "needles"
    build_needles(NeedlesConfig(corpus=str(corpus), models=["gpt-4.1"], lengths=LENGTHS, output_budget=64), out)
    return out


def _instances(build) -> list[dict]:
    return pq.read_table(build / "instances.parquet").to_pylist()


def _right(model: str, instance_id: str, L: int) -> bool:
    """Whether the simulated model answers this instance right: SHA-256 of (model, instance) below P_RIGHT."""
    u = int(hashlib.sha256(f"{model}|{instance_id}".encode()).hexdigest(), 16) / 2 ** 256
    return u < P_RIGHT[model][LENGTHS.index(L)]


def _server(build):
    rows = _instances(build)

    def answer(body: dict) -> str:
        text = message_text(body["messages"][-1]["content"])
        # the instance whose question and context the prompt holds (a shorter haystack can be part of a longer one)
        r = max((r for r in rows if r["question"] in text and r["context"] in text), key=lambda r: len(r["context"]))
        model = body["model"].split("/")[-1]
        if not _right(model, r["instance_id"], r["target_tokens"]):
            return "文中未提及。"
        acc = json.loads(r["accepted_answers"] or "[]") or [json.loads(r["gold"])]
        return f"Answer: {acc[0]}"

    return FakeOpenAIServer(answer_fn=answer)


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def _evaluate(build, srv, model, *extra):
    return CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", f"openai/{model}", "--base-url",
                                    srv.base_url, "--max-tokens", "64", *extra])


def _primary_mean(build, model) -> float:
    inst = irt.instances(build)
    ans = irt.answers(build, inst)
    vals = [s for (m, _, _), s in ans.items() if m == f"openai/{model}"]
    assert len(vals) == len(inst)
    return sum(vals) / len(vals)


@pytest.mark.slow
def test_adaptive_calls_on_a_needles_build_of_four_lengths(needles4, tmp_path):
    build = tmp_path / "b"
    shutil.copytree(needles4, build)
    rows = _instances(build)
    assert sorted({r["target_tokens"] for r in rows}) == LENGTHS
    with _server(build) as srv:
        for m in ("m1", "m2", "m3", "m4", "m5"):
            r = _evaluate(build, srv, m)
            assert r.exit_code == 0, r.output
        score_build(build)
        n0 = srv.count
        # a dry run says what the budget allows: at most 25 calls, the tokens of the 25 longest (fewer than all)
        full = _evaluate(build, srv, "m6", "--dry-run")
        dry = _evaluate(build, srv, "m6", "--dry-run", "--adaptive-calls", "25")
        assert full.exit_code == dry.exit_code == 0 and srv.count == n0, dry.output
        tokens = [int(x.split("input tokens: ", 1)[1].split(" ", 1)[0].replace(",", "")) for x in (full.output,
                                                                                                dry.output)]
        assert f"calls to make: {len(rows)}\n" in full.output and 0 < tokens[1] < tokens[0]
        assert "calls to make: at most 25 (--adaptive-calls 25, 0 stored;" in dry.output
        r = _evaluate(build, srv, "m6", "--adaptive-calls", "25")
        assert r.exit_code == 0, r.output
        asked = srv.count - n0
        assert 0 < asked <= 25
        dry = _evaluate(build, srv, "m6", "--dry-run", "--adaptive-calls", "40")  # a larger N continues
        assert f"calls to make: at most {40 - asked} (--adaptive-calls 40, {asked} stored;" in dry.output, dry.output
        assert "--adaptive-calls 25" in r.output
        # every context length covered
        m6 = [x for x in pq.read_table(build / "responses.parquet").to_pylist() if x["model"] == "openai/m6"]
        by_id = {x["instance_id"]: x for x in rows}
        assert {by_id[x["instance_id"]]["target_tokens"] for x in m6} == set(LENGTHS)
        r = CliRunner().invoke(app, ["score", "--build", str(build)])
        assert r.exit_code == 0 and "adaptive estimate (item response theory, not a full result): openai/m6 lc" \
            in r.output, r.output
        ad = pq.read_table(build / "adaptive.parquet").to_pylist()
        assert len(ad) == 5 and all(x["model"] == "openai/m6" for x in ad)  # four lengths and the whole build
        whole = [x for x in ad if x["context_length"] is None]
        # compare: the five full runs on every instance, the sixth model's cells its estimates, marked as such
        r = CliRunner().invoke(app, ["compare", str(build), "--out", str(tmp_path / "board")])
        assert r.exit_code == 0, r.output
        cells = pq.read_table(tmp_path / "board" / "leaderboard.parquet").to_pylist()
        per_len = len(rows) // 4
        for c in cells:
            if c["model"] == "openai/m6":
                e = [x for x in ad if x["context_length"] == c["context_length"]][0]
                assert c["estimate"] and c["score"] == e["estimate"] and c["n"] == e["n_asked"]
            else:
                assert not c["estimate"] and c["n"] == per_len
        assert "estimate" in (tmp_path / "board" / "index.html").read_text(encoding="utf-8")
        # ranked together: P(the full grid ranks m6 above a full run) = Φ((estimate − its Avg) / (half-width/1.96))
        avgs = {a["model"]: a for a in pq.read_table(tmp_path / "board" / "averages.parquet").to_pylist()}
        page = (tmp_path / "board" / "index.html").read_text(encoding="utf-8")
        assert "Adaptive and full runs ranked together" in page
        a6 = avgs["openai/m6"]
        assert a6["estimate"] and a6["avg"] == whole[0]["estimate"]
        se = (whole[0]["ci_high"] - whole[0]["ci_low"]) / 2 / 1.959963984540054
        order = sorted(avgs, key=lambda m: -avgs[m]["avg"])
        cells = "".join("<td>–</td>" if m == "openai/m6" else
                        f"<td>{0.5 * (1 + math.erf((a6['avg'] - avgs[m]['avg']) / se / math.sqrt(2))):.2f}</td>"
                        for m in order)
        rank = order.index("openai/m6") + 1
        assert f'<td class="name">{rank} · openai/m6 (estimate)</td><td>≈{a6["avg"]:.3f}</td>{cells}</tr>' in page
        doc = build_report(build).read_text(encoding="utf-8")
        assert "Adaptive estimates (item response theory, not full results)" in doc and "whole build" in doc
        assert len(whole) == 1 and whole[0]["model"] == "openai/m6" and whole[0]["n_asked"] == asked
        assert whole[0]["n_instances"] == len(rows)
        items = pq.read_table(build / "irt_items.parquet").to_pylist()
        prov = json.loads(items[0]["provenance"])
        assert prov["models"] == [f"openai/m{k}" for k in range(1, 6)] and prov["answers"] == 5 * len(rows)
        # a rerun with the same budget asks nothing; a larger one continues
        n1 = srv.count
        r = _evaluate(build, srv, "m6", "--adaptive-calls", "25")
        assert r.exit_code == 0 and srv.count == n1, r.output
        r = _evaluate(build, srv, "m6", "--adaptive-calls", "30")
        assert r.exit_code == 0 and 0 < srv.count - n1 <= 5, r.output
        # the full grid, in a copy: its score is what the interval must cover
        full = tmp_path / "full"
        shutil.copytree(needles4, full)
        r = _evaluate(full, srv, "m6")
        assert r.exit_code == 0, r.output
        # the same model evaluated in full on the adaptive build: a full run now, no estimate left
        r = _evaluate(build, srv, "m6")
        assert r.exit_code == 0, r.output
        assert score_build(build).adaptive == 0 and not (build / "adaptive.parquet").exists()
    truth = _primary_mean(full, "m6")
    lo, hi = whole[0]["ci_low"], whole[0]["ci_high"]
    assert lo <= truth <= hi, (truth, whole[0])
    assert hi - lo < 0.5
