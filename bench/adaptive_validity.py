"""Validity of adaptive evaluation (issue 34): simulated populations of models on a simulated build, the items
calibrated and the new models asked adaptively exactly as ``evaluate --adaptive-calls`` does
(:mod:`ctxbench.analysis.irt`: the 2PL posterior mode with the feature prior, EAP on the grid, maximum Fisher
information with each context length covered first, the posterior-predictive estimate of the full-grid score).

The build: ``--items`` items (default 2,000) in 4 context lengths, with 4 features (log₂ length, scope,
dispersion, depth); difficulty ``b = xᵀβ + N(0, 0.6²)`` (β = 0.8, 0.4, 0.3, 0.5 on the standardised features),
discrimination ``a = exp(N(0, 0.25²))`` except for 15% of the items, whose ``a = 0.25`` (low discrimination).
Models have ``θ ~ N(0, 1)``; every answer is drawn once (seeded), so a model's full-grid score is known.

For each calibration condition — ``--calibration`` models (default 20) answering the full grid; 5; 3; none (the
difficulties from the features alone, with β fitted on another simulated build of 1,000 items answered by 5
models, as ``--runs`` does) — the ``--models`` new models (default 30) are asked with a budget of 1%, 2.5%, 5% and
10% of the items, adaptively and at random (the random sample scored by the same estimator, and by its plain
mean); and, for reference, with the true item parameters (an oracle calibration). Printed per condition and share:
Kendall τ of the estimated ranking against the full-grid one, the coverage of the 95% intervals of each model's
full-grid score, and RMSE(adaptive) / RMSE(random) at equal calls.

Contexts (``--section contexts``, also run by default): the same build with its items grouped 8 to a context (a
context of length group g holds 1,000·2^g tokens) and a testlet effect (Bradlow, Wainer & Wang 1999): model k's
ability on context c is θ_k + u_kc, u_kc ~ N(0, ``--testlet``² = 0.5²), so questions on one context are locally
dependent, for the calibration models as for the new ones. The 20-model calibration (which ignores the testlet
effect, as ``evaluate`` does) serves three selection rules of :func:`ctxbench.run.adaptive.pick`, asked one item a
wave: maximum information alone; with a prefix cache (a near-maximal item on the previous call's context first);
without one (a near-maximal item on another context first). Printed per rule and share: Kendall τ, coverage, and the
context tokens prefilled per call on a server that keeps the previous call's context warm (a call on another
context prefills its whole context; questions' and answers' tokens aside), with the share of calls on a warm context.

Attribution (``--section attribution``, run alone): with the ``--calibration`` models' calibration, the coverage
and the SD of the z-scores of adaptive and of random selection, and of adaptive selection with the true
discriminations (calibrated difficulties) or the true difficulties (calibrated discriminations): which of the
calibration's errors the intervals miss.

Run: ``python bench/adaptive_validity.py [--items 2000] [--models 30] [--seed 0]
[--section all|calibration|contexts|attribution]`` (70–110 s on one core for the calibration section).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxbench.analysis import irt  # noqa: E402
from ctxbench.run.adaptive import INFO_TOLERANCE, pick  # noqa: E402

SHARES = (0.01, 0.025, 0.05, 0.10)
BETA = np.array([0.8, 0.4, 0.3, 0.5])
PER_CONTEXT = 8  # questions per context in the contexts section
RULES = {"max information": None, "prefix cache": True, "no prefix cache": False}


def rng_for(seed: int, what: str) -> np.random.Generator:
    """A generator seeded by SHA-256 of (seed, what)."""
    return np.random.default_rng(int(hashlib.sha256(f"{seed}|{what}".encode()).hexdigest()[:16], 16))


def make_items(n: int, rng: np.random.Generator) -> dict:
    """Items: group (length index), raw features (n, 4), true a and b."""
    g = rng.integers(0, 4, n)
    raw = np.column_stack([np.log2(1000 * 2.0 ** g), rng.integers(1, 6, n), rng.random(n), rng.integers(1, 4, n)])
    z = (raw - raw.mean(0)) / raw.std(0)
    b = z @ BETA + rng.normal(0, 0.6, n)
    a = np.exp(rng.normal(0, 0.25, n))
    a[rng.random(n) < 0.15] = 0.25
    return {"group": g, "raw": raw, "a": a, "b": b}


def answers(items: dict, theta: np.ndarray, rng: np.random.Generator, testlet: float = 0.0) -> np.ndarray:
    """(n_models, n_items) 0/1 answers drawn from the true 2PL; with ``testlet`` > 0 and items with a ``context``,
    each model's ability on each context is shifted by N(0, testlet²) (the testlet model)."""
    th = theta[:, None]
    if testlet > 0:
        n_ctx = int(items["context"].max()) + 1
        th = th + rng.normal(0, testlet, (len(theta), n_ctx))[:, items["context"]]
    p = 1 / (1 + np.exp(-items["a"][None, :] * (th - items["b"][None, :])))
    return (rng.random(p.shape) < p).astype(float)


def with_contexts(items: dict, per: int = PER_CONTEXT) -> dict:
    """The items grouped ``per`` to a context within each length group (in item order): ``context`` (n,) ids and
    ``ctx_tokens`` (n_contexts,), 1,000·2^g tokens for a context of group g."""
    ctx = np.zeros(len(items["group"]), int)
    tokens, nxt = [], 0
    for g in range(4):
        js = np.flatnonzero(items["group"] == g)
        for k in range(0, len(js), per):
            ctx[js[k:k + per]] = nxt
            tokens.append(1000 * 2 ** g)
            nxt += 1
    return {**items, "context": ctx, "ctx_tokens": np.array(tokens)}


def design(raw: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The intercept and the features standardised on ``ref`` (as :class:`irt.FeatureSpace` does)."""
    return np.column_stack([np.ones(len(raw)), (raw - ref.mean(0)) / ref.std(0)])


def calibrate(X: np.ndarray, Y: np.ndarray) -> dict:
    """irt.fit_2pl on a full response matrix (models × items); the Rasch model below irt.MIN_2PL models, as
    :func:`irt.calibrate_builds` does."""
    m, i = np.nonzero(np.ones_like(Y))
    return irt.fit_2pl(X, m, i, Y[m, i], Y.shape[0], fix_discrimination=Y.shape[0] < irt.MIN_2PL)


def run_model(y: np.ndarray, a, b, sd, group, budget: int, adaptive: bool, rng, shift_sd: float = 0.0,
              ctx: np.ndarray | None = None, cache: bool | None = None, ctx_tokens: np.ndarray | None = None) -> dict:
    """Ask ``budget`` items of one model (answers ``y``): adaptively (the first of each group, then maximum
    information at the EAP) or at random; the estimate at each share's checkpoint. θ's prior is
    N(0, 1 + ``shift_sd``²), as :meth:`irt.ItemParams.prior_var` gives it. With ``ctx`` (each item's context) and
    ``cache`` True/False, the adaptive choice is :func:`pick`'s with the previous call's context as the previous
    wave; each checkpoint then also carries the context tokens prefilled so far (``ctx_tokens`` per context, 0 for
    a call on the previous call's context) and the calls on it."""
    n = len(y)
    P = irt.probabilities(irt.GRID, a, b, sd)
    logP, log1P = np.log(np.clip(P, 1e-12, 1)), np.log(np.clip(1 - P, 1e-12, 1))
    logw = -0.5 * irt.GRID ** 2 / (1 + shift_sd ** 2)
    asked = np.zeros(n, bool)
    order = rng.permutation(n)
    covered: set = set()
    out = {}
    checkpoints = {max(1, int(round(s * n))): s for s in SHARES}
    prev, prefilled, warm = None, 0, 0
    for k in range(1, budget + 1):
        if adaptive:
            w = np.exp(logw - logw.max())
            w /= w.sum()
            th = float(w @ irt.GRID)
            info = irt.information(th, a, b)
            info[asked] = -1
            open_ = [g for g in range(4) if g not in covered]
            if open_:
                info[~np.isin(group, open_)] = -1
            j = int(np.argmax(info))
            if ctx is not None and cache is not None:  # only the items within the tolerance can change the choice
                near = np.flatnonzero(info >= INFO_TOLERANCE * info[j] - 1e-12)
                j = int(near[pick(info[near], list(ctx[near]), {prev}, cache, [(x,) for x in near])])
        else:
            j = int(order[k - 1])
        asked[j] = True
        covered.add(int(group[j]))
        if ctx is not None:
            warm += int(ctx[j] == prev)
            prefilled += 0 if ctx[j] == prev else int(ctx_tokens[ctx[j]])
            prev = ctx[j]
        logw = logw + (logP[:, j] if y[j] else log1P[:, j])
        if k in checkpoints:
            w = np.exp(logw - logw.max())
            w /= w.sum()
            est, lo, hi = irt.predict_group(w, y[asked], a[~asked], b[~asked], sd[~asked])
            out[checkpoints[k]] = (est, lo, hi, float(y[asked].mean()), prefilled / k, warm / k)
    return out


def contexts_section(args, items: dict, X: np.ndarray) -> None:
    """The contexts table (module docstring): τ, coverage and context tokens prefilled per call for each rule."""
    items = with_contexts(items)
    theta_t = rng_for(args.seed, "theta-new").normal(size=args.models)
    Yt = answers(items, theta_t, rng_for(args.seed, "answers-new-ctx"), args.testlet)
    truth = Yt.mean(1)
    Yc = answers(items, rng_for(args.seed, "theta-cal").normal(size=args.calibration),
                 rng_for(args.seed, "answers-cal-ctx"), args.testlet)
    fit = calibrate(X, Yc)
    print(f"\ncontexts: {PER_CONTEXT} questions a context ({int(items['context'].max()) + 1} contexts of 1,000 to "
          f"8,000 tokens), testlet SD {args.testlet}, {args.calibration} calibration models, one item a wave")
    print(f"{'rule':<18} {'share':>6} {'calls':>6} {'kendall':>8} {'coverage':>9} {'rmse':>8} "
          f"{'ctx tokens/call':>16} {'warm calls':>11}")
    n = len(items["b"])
    for name, cache in RULES.items():
        res = [run_model(Yt[k], fit["a"], fit["b"], fit["b_sd"], items["group"], int(round(max(SHARES) * n)), True,
                         rng_for(args.seed, f"order{k}"), fit["shift_sd"], items["context"], cache,
                         items["ctx_tokens"]) for k in range(Yt.shape[0])]
        for s in SHARES[1:]:
            est, lo, hi = (np.array([r[s][i] for r in res]) for i in range(3))
            tok, warm = np.mean([r[s][4] for r in res]), np.mean([r[s][5] for r in res])
            print(f"{name:<18} {s:>6.1%} {int(round(s * n)):>6} {kendalltau(est, truth).statistic:>8.3f} "
                  f"{float(np.mean((lo <= truth) & (truth <= hi))):>9.2f} "
                  f"{float(np.sqrt(np.mean((est - truth) ** 2))):>8.4f} {tok:>16,.0f} {warm:>11.2f}", flush=True)


def condition(name: str, a, b, sd, items, Yt, truth, seed: int, shift_sd: float = 0.0) -> list[str]:
    """One calibration condition: adaptive and random runs of every new model, the figures per share."""
    n = len(b)
    res = {"adaptive": [], "random": []}
    for kind in res:
        for k in range(Yt.shape[0]):
            res[kind].append(run_model(Yt[k], a, b, sd, items["group"], int(round(max(SHARES) * n)),
                                       kind == "adaptive", rng_for(seed, f"order{k}"), shift_sd))
    lines = []
    for s in SHARES:
        ad = np.array([r[s][0] for r in res["adaptive"]])
        lo = np.array([r[s][1] for r in res["adaptive"]])
        hi = np.array([r[s][2] for r in res["adaptive"]])
        rnd = np.array([r[s][0] for r in res["random"]])
        rnd_mean = np.array([r[s][3] for r in res["random"]])
        tau = kendalltau(ad, truth).statistic
        cover = float(np.mean((lo <= truth) & (truth <= hi)))
        rmse = lambda e: float(np.sqrt(np.mean((e - truth) ** 2)))  # noqa: E731
        lines.append(f"{name:<26} {s:>6.1%} {int(round(s * n)):>6} {tau:>8.3f} {cover:>9.2f} "
                     f"{rmse(ad):>8.4f} {rmse(ad) / rmse(rnd):>10.2f} {rmse(ad) / rmse(rnd_mean):>12.2f} "
                     f"{float(np.mean(hi - lo)):>7.3f}")
    return lines


def attribution_section(args, items: dict, X: np.ndarray) -> None:
    """Where the 20-model calibration's intervals lose coverage (``--section attribution``): the 95% coverage and
    the SD of the z-scores (estimate − truth) / (half-width / 1.96) of adaptive selection with the calibrated a and
    b, of random selection with them (the same estimator), and of adaptive selection with the true a and the
    calibrated b (and ``b_sd``), or the calibrated a and the true b. A z SD above 1: intervals too narrow."""
    theta_t = rng_for(args.seed, "theta-new").normal(size=args.models)
    Yt = answers(items, theta_t, rng_for(args.seed, "answers-new"))
    truth = Yt.mean(1)
    Yc = answers(items, rng_for(args.seed, "theta-cal").normal(size=args.calibration), rng_for(args.seed, "answers-cal"))
    fit = calibrate(X, Yc)
    n = len(items["b"])
    la = np.log(fit["a"]) - np.log(items["a"])
    print(f"\nattribution: {args.calibration} calibration models; RMSE of log a {float(np.sqrt(np.mean(la ** 2))):.2f}, "
          f"of b {float(np.sqrt(np.mean((fit['b'] - items['b']) ** 2))):.2f}")
    print(f"{'variant':<30} " + " ".join(f"{f'{s:.1%} cov / z SD':>18}" for s in SHARES))
    variants = {"calibrated a, b; adaptive": (fit["a"], fit["b"], fit["b_sd"], True, fit["shift_sd"]),
                "calibrated a, b; random": (fit["a"], fit["b"], fit["b_sd"], False, fit["shift_sd"]),
                "true a, calibrated b; adaptive": (items["a"], fit["b"], fit["b_sd"], True, fit["shift_sd"]),
                "calibrated a, true b; adaptive": (fit["a"], items["b"], np.zeros(n), True, 0.0)}
    for name, (a, b, sd, adaptive, shift) in variants.items():
        res = [run_model(Yt[k], a, b, sd, items["group"], int(round(max(SHARES) * n)), adaptive,
                         rng_for(args.seed, f"order{k}"), shift) for k in range(Yt.shape[0])]
        cells = []
        for s in SHARES:
            est, lo, hi = (np.array([r[s][i] for r in res]) for i in range(3))
            z = (est - truth) / np.maximum((hi - lo) / 2 / 1.959964, 1e-12)
            cells.append(f"{float(np.mean((lo <= truth) & (truth <= hi))):.2f} / {float(np.std(z)):.2f}")
        print(f"{name:<30} " + " ".join(f"{c:>18}" for c in cells), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--models", type=int, default=30)
    ap.add_argument("--calibration", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--section", choices=("all", "calibration", "contexts", "attribution"), default="all")
    ap.add_argument("--testlet", type=float, default=0.5, help="SD of the model × context ability shift (contexts)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    items = make_items(args.items, rng_for(args.seed, "items"))
    X = design(items["raw"], items["raw"])
    if args.section in ("contexts", "attribution"):
        (contexts_section if args.section == "contexts" else attribution_section)(args, items, X)
        print(f"{time.perf_counter() - t0:.1f} s")
        return 0
    theta_t = rng_for(args.seed, "theta-new").normal(size=args.models)
    Yt = answers(items, theta_t, rng_for(args.seed, "answers-new"))
    truth = Yt.mean(1)
    theta_c = rng_for(args.seed, "theta-cal").normal(size=args.calibration)
    Yc = answers(items, theta_c, rng_for(args.seed, "answers-cal"))
    print(f"{args.items} items (4 lengths, 15% with a = 0.25), {args.models} new models, seed {args.seed}")
    print(f"{'calibration':<26} {'share':>6} {'calls':>6} {'kendall':>8} {'coverage':>9} {'rmse':>8} "
          f"{'vs random':>10} {'vs rnd mean':>12} {'width':>7}")
    notes = []
    for c in (args.calibration, 5, 3):
        fit = calibrate(X, Yc[:c])
        notes.append(f"{c} models {float(np.sqrt(np.mean((fit['b'] - items['b']) ** 2))):.2f}")
        notes.append(f"shift_sd {fit['shift_sd']:.2f}")
        for line in condition(f"{c} calibration models", fit["a"], fit["b"], fit["b_sd"], items, Yt, truth,
                              args.seed, fit["shift_sd"]):
            print(line, flush=True)
    # none: β from another build (1,000 items, 5 models), each difficulty its feature prediction, a = 1
    other = make_items(1000, rng_for(args.seed, "other-items"))
    Yo = answers(other, rng_for(args.seed, "theta-other").normal(size=5), rng_for(args.seed, "answers-other"))
    fo = calibrate(design(other["raw"], other["raw"]), Yo)
    b0 = design(items["raw"], other["raw"]) @ fo["beta"]
    sd0 = np.full(args.items, irt.TAU)
    # the common location of these items is known as well as the other build's (its shift_sd)
    for line in condition("none (features, --runs)", np.ones(args.items), b0, sd0, items, Yt, truth, args.seed,
                          fo["shift_sd"]):
        print(line, flush=True)
    # the oracle: the true item parameters (what the selection and the estimator reach with a perfect calibration)
    for line in condition("oracle (true parameters)", items["a"], items["b"], np.zeros(args.items), items, Yt, truth,
                          args.seed):
        print(line, flush=True)
    notes.append(f"features only {float(np.sqrt(np.mean((b0 - items['b']) ** 2))):.2f}")
    print("RMSE of the calibrated difficulties against the true ones (and each calibration's shift_sd): "
          + ", ".join(notes))
    print(f"true full-grid scores: {truth.min():.3f} to {truth.max():.3f}; {time.perf_counter() - t0:.1f} s")
    if args.section == "all":
        contexts_section(args, items, X)
        print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
