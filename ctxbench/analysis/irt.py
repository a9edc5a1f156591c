"""Item response theory for adaptive evaluation (issue 34): a two-parameter logistic (2PL) model whose item
difficulties have a prior from the items' own properties, calibrated on the answers other models already gave.

**Model.** Model ``m`` answers item ``i`` (an instance in one mode) right with probability
``p = σ(a_i (θ_m − b_i))`` (Birnbaum 1968; σ the logistic function). Priors: ``θ_m ~ N(0, 1)``,
``log a_i ~ N(0, SIGMA_LOG_A²)`` and ``b_i ~ N(x_iᵀβ, TAU²)``, where ``x_i`` are the item's features
(:class:`FeatureSpace`: log₂ context length, LURCH scope, dispersion and reasoning depth, needle depth and hops,
distractors, lexical overlap, near-miss share, variant, ...; standardised, missing values at the mean) and ``β``
(ridge ``RIDGE`` on the feature weights, prior ``β₀ ~ N(0, SIGMA_B0²)`` on the intercept, which keeps every
difficulty finite when every calibration answer is right, or every one wrong) is fitted jointly: an explanatory
item model in the sense of De Boeck & Wilson (2004), the "feature-based prior on difficulty" of the issue. An
item no model answered gets ``b_i = x_iᵀβ``, so a build without any other model's answers is calibrated from the
features alone (on whatever builds are given).

**Calibration** is the joint posterior mode (Bayes modal, Mislevy 1986) of θ, log a, b and β over every stored
answer, found by scipy's L-BFGS-B with the analytic gradient; ``b_sd`` is each difficulty's Laplace standard error
given the rest (the inverse of its diagonal posterior curvature) and ``shift_sd`` the Laplace SD of the build's mean
difficulty through what the difficulties share (θ and β; :func:`_shift_sd`). With fewer than :data:`MIN_2PL`
calibration respondents every ``a_i`` is held at 1 (the Rasch model with the same priors): discriminations
estimated from a handful of models are noise that maximum-information selection then capitalises on
(bench/adaptive_validity.py: with 5 models the intervals' coverage fell to 0.40 with free discriminations, 0.90 with
a = 1). Library choice: docs/reference/statistics.md.

**Scores that are not 0/1** (row match, F1) are declared binary: the mean over an item's samples of the primary
matcher's score is 1 when it is at least :data:`THRESHOLD` (0.5), else 0.

**A new model** is scored by expected a posteriori (EAP) on a grid :data:`GRID` of θ with the prior
N(0, 1 + shift_sd²) (Bock & Mislevy 1982; a common shift of the difficulties is a shift of θ, so the calibration's
shared uncertainty widens θ's prior), each item's probability widened for its difficulty's uncertainty by the probit
approximation ``σ(a(θ−b)/√(1 + π a² b_sd²/8))``. The next item to ask is the one of maximum Fisher information
``a² p (1 − p)`` at the current EAP (Lord 1980). The **estimate** of a group (a context length, or the whole build)
is the predicted mean score over every instance of the group, asked or not: observed answers as they are, the
unasked ones at their posterior-predictive probability; its 95% interval is the normal interval of that
posterior-predictive distribution (the variance of the unasked answers' sum, ``E[Σ p(1−p)] + Var[Σ p]`` over θ's
posterior), clipped to [0, 1].
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow.parquet as pq
from scipy.optimize import minimize

from ctxbench.core.errors import InputError
from ctxbench.core.storage import read_table
from ctxbench.core.track import track_of_build
from ctxbench.scoring.pipeline import score_reply
from ctxbench.scoring.registry import matchers_for

THRESHOLD = 0.5          # a mean score at or above this is "right" (binary declaration of non-0/1 scores)
TAU = 1.0                # prior SD of a difficulty around its feature prediction
SIGMA_LOG_A = 0.5        # prior SD of log discrimination
RIDGE = 0.1              # ridge penalty on the feature weights (not the intercept)
SIGMA_B0 = 2.0           # prior SD of the intercept β₀ (the difficulties' common location; ability SD is 1)
GRID = np.linspace(-10.0, 10.0, 401)
Z95 = 1.959963984540054
METHOD = "2pl-map-features+eap"
RASCH_METHOD = "rasch-map-features+eap"
MIN_2PL = 10             # fewer calibration respondents than this: every a = 1 (the Rasch model; bench figures)
NUMERIC = ("scope", "dispersion", "reasoning_depth", "hops", "depth", "near_miss_share", "lexical_overlap",
           "distractor_needles", "n_articles")
CATEGORICAL = ("variant", "difficulty", "setting", "skill", "position", "attribute")


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def length_of(row: dict) -> Any:
    """An instance's context length group: its ``source_tier`` where it has one, else ``target_tokens``."""
    return row.get("source_tier") or row.get("target_tokens")


def length_tokens(L: Any) -> int | None:
    """A length group as tokens: an int as it is, a tier name such as ``32k`` as 32,000; None otherwise."""
    if isinstance(L, int):
        return L
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", str(L)) if L is not None else None
    if not m:
        return None
    return int(float(m.group(1)) * {"": 1, "k": 1000, "m": 1000000}[m.group(2).lower()])


@dataclass
class FeatureSpace:
    """The item features of the difficulty prior, fitted on a list of instance rows: log₂ of the context length
    (``context_tokens``, else ``target_tokens``), each column of :data:`NUMERIC` that varies, and one indicator per
    value (but the first) of each column of :data:`CATEGORICAL` that varies; each standardised over the rows
    (mean 0, SD 1), a missing value at 0 (the mean)."""

    names: list[str] = field(default_factory=list)
    _spec: list[tuple[str, Any, float, float]] = field(default_factory=list)

    @classmethod
    def fit(cls, rows: Sequence[dict]) -> FeatureSpace:
        fs = cls()
        raw: dict[tuple, list] = {}
        raw[("log2_tokens", None)] = [_log_tokens(r) for r in rows]
        for c in NUMERIC:
            raw[(c, None)] = [_num(r.get(c)) for r in rows]
        for c in CATEGORICAL:
            vals = sorted({str(r.get(c)) for r in rows if r.get(c) is not None})
            for v in vals[1:]:
                raw[(c, v)] = [None if r.get(c) is None else float(str(r.get(c)) == v) for r in rows]
        for (c, v), xs in raw.items():
            xs = [x for x in xs if x is not None]
            if len(xs) < 2:
                continue
            mu, sd = float(np.mean(xs)), float(np.std(xs))
            if sd < 1e-9:
                continue
            fs._spec.append((c, v, mu, sd))
            fs.names.append(c if v is None else f"{c}={v}")
        return fs

    def matrix(self, rows: Sequence[dict]) -> np.ndarray:
        """``(len(rows), 1 + len(names))``: an intercept column, then the standardised features."""
        X = np.zeros((len(rows), 1 + len(self._spec)))
        X[:, 0] = 1.0
        for j, (c, v, mu, sd) in enumerate(self._spec, start=1):
            for k, r in enumerate(rows):
                x = _log_tokens(r) if c == "log2_tokens" else (_num(r.get(c)) if v is None else (
                    None if r.get(c) is None else float(str(r.get(c)) == v)))
                X[k, j] = 0.0 if x is None else (x - mu) / sd
        return X


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _log_tokens(r: dict) -> float | None:
    n = _num(r.get("context_tokens")) or _num(r.get("target_tokens"))
    return math.log2(n) if n and n > 0 else None


@dataclass
class ItemParams:
    """Calibrated items: discrimination ``a``, difficulty ``b`` and its standard error ``b_sd``, the feature
    prediction ``b_prior`` (all shape ``(n_items,)``), the calibration models' abilities ``theta`` (by model), the
    feature weights ``beta`` (intercept first, then :attr:`FeatureSpace.names`) and the provenance: the models and
    the number of answers that calibrated them."""

    a: np.ndarray
    b: np.ndarray
    b_sd: np.ndarray
    b_prior: np.ndarray
    theta: dict[str, float]
    beta: np.ndarray
    features: list[str]
    models: list[str]
    n_answers: np.ndarray  # answers per item
    converged: bool = True
    method: str = METHOD
    shift_sd: float = 0.0  # posterior SD of the items' common location (module docstring); widens θ's prior

    def prior_var(self) -> float:
        """The variance of a new model's θ prior relative to these items: ``1 + shift_sd²``."""
        return 1.0 + self.shift_sd ** 2


def fit_2pl(X: np.ndarray, model_idx: np.ndarray, item_idx: np.ndarray, y: np.ndarray, n_models: int,
            tau: float = TAU, sigma_log_a: float = SIGMA_LOG_A, ridge: float = RIDGE,
            fix_discrimination: bool = False, sigma_b0: float = SIGMA_B0,
            target: np.ndarray | None = None) -> dict[str, Any]:
    """The joint posterior mode of the 2PL with the feature prior (module docstring). ``X``: ``(n_items, F)`` with
    the intercept first; answers as parallel arrays (model index, item index, 0/1). ``fix_discrimination``: every
    ``a_i = 1`` (the Rasch model with the same priors). ``sigma_b0``: prior SD of the intercept (keeps every
    difficulty finite when all answers are right or all wrong). ``target``: the items (indices or a mask) whose
    common location ``shift_sd`` describes (default all). Returns ``theta`` (n_models), ``a``, ``b``, ``b_sd``
    (n_items: each difficulty's own Laplace SD given the rest), ``beta`` (F), ``shift_sd`` (the Laplace SD of the
    target items' mean difficulty shared through θ and β, :func:`_shift_sd`) and ``converged``."""
    n_items, F = X.shape
    m = np.asarray(model_idx, int)
    i = np.asarray(item_idx, int)
    y = np.asarray(y, float)
    pen = np.full(F, ridge)
    pen[0] = 1.0 / sigma_b0 ** 2

    def unpack(v):
        th, la, b, beta = v[:n_models], v[n_models:n_models + n_items], v[n_models + n_items:n_models + 2 * n_items], \
            v[n_models + 2 * n_items:]
        if fix_discrimination:
            la = np.zeros(n_items)
        return th, la, b, beta

    def f(v):
        th, la, b, beta = unpack(v)
        a = np.exp(la)
        z = a[i] * (th[m] - b[i])
        p = _sigmoid(z)
        r = p - y
        nll = np.sum(np.logaddexp(0.0, z) - y * z)
        res = b - X @ beta
        obj = nll + 0.5 * th @ th + 0.5 * res @ res / tau ** 2 + 0.5 * pen @ (beta * beta)
        g_th = np.bincount(m, r * a[i], n_models) + th
        g_b = -np.bincount(i, r * a[i], n_items) + res / tau ** 2
        g_beta = -X.T @ res / tau ** 2 + pen * beta
        if fix_discrimination:
            g_la = np.zeros(n_items)
        else:
            obj += 0.5 * la @ la / sigma_log_a ** 2
            g_la = np.bincount(i, r * z, n_items) + la / sigma_log_a ** 2
        return obj, np.concatenate([g_th, g_la, g_b, g_beta])

    v0 = np.zeros(n_models + 2 * n_items + F)
    res = minimize(f, v0, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "maxfun": 20000, "gtol": 1e-6})
    th, la, b, beta = unpack(res.x)
    a = np.exp(la)
    p = _sigmoid(a[i] * (th[m] - b[i]))
    wgt = a[i] ** 2 * p * (1 - p)
    curv = np.bincount(i, wgt, n_items) + 1.0 / tau ** 2
    tgt = np.arange(n_items) if target is None else np.asarray(target)
    return {"theta": th, "a": a, "b": b, "b_sd": 1.0 / np.sqrt(curv), "beta": beta,
            "shift_sd": _shift_sd(X, m, i, wgt, curv, n_models, tau, pen, tgt), "converged": bool(res.success)}


def _shift_sd(X: np.ndarray, m: np.ndarray, i: np.ndarray, wgt: np.ndarray, curv: np.ndarray, n_models: int,
              tau: float, pen: np.ndarray, target: np.ndarray) -> float:
    """The Laplace posterior SD of the mean difficulty of the ``target`` items through what they share: the
    calibration abilities θ and the feature weights β (u = (θ, β); a held at its mode). With the Hessian at the mode
    in blocks (u, b), H_bb = diag(``curv``) and the Schur complement S = H_uu − H_ub H_bb⁻¹ H_bu, each
    b_i = b̂_i − g_iᵀ δu + ε_i with g_i = H_bu[i] / curv_i, δu ~ N(0, S⁻¹) and ε_i independent (SD ``b_sd``);
    the shared part of the mean is ḡᵀ δu, variance ḡᵀ S⁻¹ ḡ (ḡ: the mean of g_i over the target)."""
    n_items, F = X.shape
    K = n_models + F
    Hub = np.zeros((K, n_items))
    np.add.at(Hub, (m, i), -wgt)
    Hub[n_models:, :] = -X.T / tau ** 2
    Huu = np.zeros((K, K))
    Huu[:n_models, :n_models] = np.diag(np.bincount(m, wgt, n_models) + 1.0)
    Huu[n_models:, n_models:] = X.T @ X / tau ** 2 + np.diag(pen)
    G = Hub / curv[None, :]
    S = Huu - G @ Hub.T
    gbar = G[:, target].mean(axis=1) if len(target) else np.zeros(K)
    return float(math.sqrt(max(float(gbar @ np.linalg.solve(0.5 * (S + S.T), gbar)), 0.0)))


def probabilities(grid: np.ndarray, a: np.ndarray, b: np.ndarray, b_sd: np.ndarray | None = None) -> np.ndarray:
    """``(len(grid), n_items)``: P(right) of each item at each θ, widened for ``b_sd`` (probit approximation,
    module docstring; none when ``b_sd`` is None)."""
    scale = 1.0 if b_sd is None else 1.0 / np.sqrt(1.0 + math.pi * a ** 2 * b_sd ** 2 / 8.0)
    return _sigmoid((grid[:, None] - b[None, :]) * (a * scale)[None, :])


def posterior(a: np.ndarray, b: np.ndarray, y: np.ndarray, b_sd: np.ndarray | None = None,
              grid: np.ndarray = GRID, prior_var: float = 1.0) -> np.ndarray:
    """Posterior weights of θ on ``grid`` (summing to 1) after answers ``y`` (0/1) to items with parameters ``a``,
    ``b`` (, ``b_sd``), prior N(0, ``prior_var``) (:meth:`ItemParams.prior_var`: 1 plus the variance of the
    items' common location)."""
    logw = -0.5 * grid ** 2 / prior_var
    if len(y):
        P = np.clip(probabilities(grid, a, b, b_sd), 1e-12, 1 - 1e-12)
        logw = logw + np.log(P) @ y + np.log1p(-P) @ (1 - np.asarray(y, float))
    w = np.exp(logw - logw.max())
    return w / w.sum()


def eap(w: np.ndarray, grid: np.ndarray = GRID) -> tuple[float, float]:
    """(posterior mean, posterior SD) of θ from grid weights ``w``."""
    mu = float(w @ grid)
    return mu, float(math.sqrt(max(w @ (grid - mu) ** 2, 0.0)))


def information(theta: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Fisher information of each 2PL item at ``theta``: ``a² p (1 − p)`` (Lord 1980)."""
    p = _sigmoid(a * (theta - b))
    return a ** 2 * p * (1 - p)


def predict_group(w: np.ndarray, observed: Sequence[float], a: np.ndarray, b: np.ndarray, b_sd: np.ndarray,
                  grid: np.ndarray = GRID) -> tuple[float, float, float]:
    """The predicted mean score of a group (module docstring): ``observed`` scores of its asked items, ``a``,
    ``b``, ``b_sd`` of its unasked ones, θ's posterior ``w``. Returns ``(estimate, ci_low, ci_high)``."""
    n = len(observed) + len(a)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    s_obs = float(np.sum(observed))
    if len(a):
        P = probabilities(grid, a, b, b_sd)
        mu_k, v_k = P.sum(axis=1), (P * (1 - P)).sum(axis=1)
        mean = float(w @ mu_k)
        var = float(w @ (v_k + mu_k ** 2) - mean ** 2)
    else:
        mean, var = 0.0, 0.0
    est = (s_obs + mean) / n
    half = Z95 * math.sqrt(max(var, 0.0)) / n
    return est, max(0.0, est - half), min(1.0, est + half)


# ------------------------------------------------------------------------------------------------- stored builds

def mode_label(mode: str, rag_tokens: Any) -> str:
    """An item's mode: ``lc``, ``rag``, or ``rag@N`` for a retrieval budget of N tokens."""
    return mode if rag_tokens is None else f"{mode}@{int(rag_tokens)}"


def instances(build_dir: str | Path) -> dict[str, dict]:
    """The build's instances by id, without contexts, ``gold`` and ``accepted_answers`` parsed from JSON (as
    scoring reads them)."""
    ip = Path(build_dir) / "instances.parquet"
    cols = [c for c in pq.read_schema(ip).names if c != "context"]
    out = {}
    for r in pq.read_table(ip, columns=cols).to_pylist():
        r["gold"] = json.loads(r["gold"]) if r.get("gold") is not None else None
        if r.get("accepted_answers") is not None:
            r["accepted_answers"] = json.loads(r["accepted_answers"])
        out[r["instance_id"]] = r
    return out


def primary_score(inst: dict, status: str, response: str | None, reasoning: str | None = None,
                  finish_reason: str | None = None) -> float | None:
    """The primary matcher's score of one stored reply, as ``score`` gives it (None for a reply that is no answer:
    a status other than ``ok`` or ``cut_off``, or a matcher that raised)."""
    if status not in ("ok", "cut_off"):
        return None
    try:
        [sc] = score_reply(response, inst, reasoning, names=matchers_for(inst.get("benchmark"))[:1],
                           finish_reason=finish_reason, status=status)
    except InputError:
        return None
    return float(sc.result.score)


def answers(build_dir: str | Path, inst: dict[str, dict] | None = None) -> dict[tuple[str, str, str], float]:
    """``(model, mode label, instance_id) → mean primary score over samples`` of every stored answer of the build:
    ``scores.parquet``'s primary-matcher rows, and replies it does not score yet scored here (as ``score``
    would)."""
    build_dir = Path(build_dir)
    inst = inst if inst is not None else instances(build_dir)
    resp = read_table(build_dir / "responses.parquet", "responses")
    if not resp.num_rows:
        return {}
    cols = [c for c in ("request_key", "instance_id", "model", "mode", "rag_tokens", "status", "response",
                        "reasoning", "finish_reason") if c in resp.column_names]
    sc = read_table(build_dir / "scores.parquet", "scores")
    scored: dict[str, float] = {}
    primary: dict[Any, str] = {}
    if sc.num_rows:
        for r in sc.select(["request_key", "instance_id", "matcher", "score"]).to_pylist():
            i = inst.get(r["instance_id"])
            if i is None or r["score"] is None:
                continue
            bench = i.get("benchmark")
            if bench not in primary:
                primary[bench] = matchers_for(bench)[0]
            if r["matcher"] == primary[bench]:
                scored[r["request_key"]] = float(r["score"])
    acc: dict[tuple, list[float]] = defaultdict(list)
    for r in resp.select(cols).to_pylist():
        i = inst.get(r["instance_id"])
        if i is None:
            continue
        s = scored.get(r["request_key"])
        if s is None:
            s = primary_score(i, r["status"], r.get("response"), r.get("reasoning"), r.get("finish_reason"))
        if s is not None:
            acc[(r["model"], mode_label(r["mode"], r.get("rag_tokens")), r["instance_id"])].append(s)
    return {k: sum(v) / len(v) for k, v in acc.items()}


@dataclass
class Calibration:
    """Item parameters of a build's items (``keys``: (mode label, instance_id), in order) calibrated on the stored
    answers of one or more builds (the first is the build whose items are keyed), with provenance."""

    keys: list[tuple[str, str]]
    rows: dict[str, dict]                       # the build's instances by id
    params: ItemParams
    builds: list[str]
    index: dict[tuple[str, str], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {k: j for j, k in enumerate(self.keys)}

    def item(self, mode: str, instance_id: str) -> tuple[float, float, float] | None:
        """``(a, b, b_sd)`` of one item, or None when the build has no such item."""
        j = self.index.get((mode, instance_id))
        if j is None:
            return None
        p = self.params
        return float(p.a[j]), float(p.b[j]), float(p.b_sd[j])

    def arrays(self, keys: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(a, b, b_sd)`` arrays of ``keys`` (each must be an item of the build)."""
        js = [self.index[k] for k in keys]
        return self.params.a[js], self.params.b[js], self.params.b_sd[js]

    def table_rows(self) -> list[dict]:
        """``irt_items.parquet`` rows: one per item, with the provenance (calibration models, answers, builds)."""
        p = self.params
        prov = json.dumps({"models": p.models, "builds": self.builds, "answers": int(p.n_answers.sum()),
                           "features": p.features, "beta": [round(float(x), 6) for x in p.beta],
                           "tau": TAU, "sigma_log_a": SIGMA_LOG_A, "sigma_b0": SIGMA_B0,
                           "shift_sd": round(float(p.shift_sd), 6), "threshold": THRESHOLD,
                           "converged": p.converged}, ensure_ascii=False)
        out = []
        for j, (mode, iid) in enumerate(self.keys):
            L = length_of(self.rows[iid])
            out.append({"instance_id": iid, "mode": mode, "context_length": length_tokens(L),
                        "a": float(p.a[j]), "b": float(p.b[j]), "b_sd": float(p.b_sd[j]),
                        "b_prior": float(p.b_prior[j]), "n_answers": int(p.n_answers[j]), "method": p.method,
                        "provenance": prov})
        return out


def calibrate_builds(build_dirs: Sequence[str | Path], modes: Sequence[str], exclude_model: str | None = None,
                     fix_discrimination: bool = False, first: tuple[dict, dict] | None = None) -> Calibration:
    """Calibrate the items of ``build_dirs[0]`` (each instance × each of ``modes``, plus every item some model
    answered) on the stored answers of every build given, leaving out ``exclude_model``'s (the model being
    evaluated). A respondent is a model in one mode; items of the other builds calibrate the feature weights and
    the respondents' abilities. With no answer at all every difficulty is its feature prediction (then 0: the
    prior's intercept). ``first``: ``(instances, answers)`` of ``build_dirs[0]`` when the caller has read them
    already (:func:`instances`, :func:`answers`). Raises InputError when a directory holds no build."""
    per_build = []
    for k, d in enumerate(build_dirs):
        d = Path(d)
        if not (d / "instances.parquet").exists():
            raise InputError(f"{d} holds no build (no instances.parquet): give build directories")
        if k == 0 and first is not None:
            per_build.append((d, *first))
            continue
        inst = instances(d)
        per_build.append((d, inst, answers(d, inst)))
    target_rows = per_build[0][1]
    keys: list[tuple] = [(0, m, iid) for m in modes for iid in target_rows]
    seen = set(keys)
    persons: dict[tuple[str, str], int] = {}
    mi, ii, ys = [], [], []
    for k, (_, inst, ans) in enumerate(per_build):
        for (model, mode, iid), s in sorted(ans.items()):
            if model == exclude_model:
                continue
            key = (k, mode, iid)
            if key not in seen:
                seen.add(key)
                keys.append(key)
            mi.append(persons.setdefault((model, mode), len(persons)))
            ii.append(key)
            ys.append(1.0 if s >= THRESHOLD else 0.0)
    pos = {key: j for j, key in enumerate(keys)}
    rows = [per_build[k][1][iid] for k, _, iid in keys]
    fs = FeatureSpace.fit(rows)
    X = fs.matrix(rows)
    item_idx = np.array([pos[k] for k in ii], int)
    rasch = fix_discrimination or len(persons) < MIN_2PL
    n_target = sum(1 for k in keys if k[0] == 0)
    sel = [j for j, k in enumerate(keys) if k[0] == 0]
    fit = fit_2pl(X, np.array(mi, int), item_idx, np.array(ys), len(persons), fix_discrimination=rasch,
                  target=np.array(sel, int))
    counts = np.bincount(item_idx, minlength=len(keys)) if len(item_idx) else np.zeros(len(keys), int)
    params = ItemParams(a=fit["a"][sel], b=fit["b"][sel], b_sd=fit["b_sd"][sel], b_prior=(X @ fit["beta"])[sel],
                        theta={f"{m}|{md}": float(fit["theta"][j]) for (m, md), j in persons.items()},
                        beta=fit["beta"], features=fs.names,
                        models=sorted({m for m, _ in persons}), n_answers=counts[sel],
                        converged=fit["converged"], method=RASCH_METHOD if rasch else METHOD,
                        shift_sd=fit["shift_sd"])
    assert len(sel) == n_target
    return Calibration([(m, iid) for _, m, iid in (keys[j] for j in sel)], target_rows, params,
                       [str(Path(d)) for d in build_dirs])


# ------------------------------------------------------------------------------------------ adaptive.parquet

ADAPTIVE_RUNS = "adaptive.json"   # the models evaluate --adaptive-calls ran on the build (and their call budgets)


def adaptive_models(build_dir: str | Path) -> dict[str, dict]:
    """The models ``evaluate --adaptive-calls`` evaluated on the build, from ``BUILD/adaptive.json``
    (``{model: {"calls": N, "calibration_builds": [...]}}``); {} when there is none."""
    p = Path(build_dir) / ADAPTIVE_RUNS
    if not p.exists():
        return {}
    try:
        return dict(json.loads(p.read_text(encoding="utf-8")).get("models") or {})
    except (ValueError, AttributeError) as e:
        raise InputError(f"{p} cannot be read ({e}): it is written by `evaluate --adaptive-calls`; move it away "
                         f"and rerun that command") from None


def record_adaptive(build_dir: str | Path, model: str, calls: int, calibration_builds: Sequence[str] = ()) -> None:
    """Note in ``BUILD/adaptive.json`` that ``model`` was evaluated adaptively with a budget of ``calls``."""
    p = Path(build_dir) / ADAPTIVE_RUNS
    runs = adaptive_models(build_dir)
    prev = runs.get(model, {})
    runs[model] = {"calls": max(int(calls), int(prev.get("calls", 0))),
                   "calibration_builds": list(calibration_builds) or prev.get("calibration_builds", [])}
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps({"models": runs}, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(p)


def group_estimates(cal: Calibration, keys: Sequence[tuple[str, str]], scores: dict[tuple[str, str], float]
                    ) -> dict[str, Any]:
    """The adaptive estimate over the items ``keys`` (mode label, instance_id) of one model whose answers are
    ``scores`` (key → mean primary score): θ's posterior from every answered item of ``cal`` (thresholded), then
    :func:`predict_group` over ``keys``. Returns ``n_asked``, ``n_instances``, ``estimate``, ``ci_low``,
    ``ci_high``, ``theta``, ``theta_se``."""
    asked = [k for k in scores if k in cal.index]
    a, b, sd = cal.arrays(asked)
    w = posterior(a, b, np.array([1.0 if scores[k] >= THRESHOLD else 0.0 for k in asked]), sd,
                  prior_var=cal.params.prior_var())
    th, se = eap(w)
    obs = [scores[k] for k in keys if k in scores]
    rest = [k for k in keys if k not in scores]
    a2, b2, sd2 = cal.arrays(rest)
    est, lo, hi = predict_group(w, obs, a2, b2, sd2)
    return {"n_asked": len(obs), "n_instances": len(keys), "estimate": est, "ci_low": lo, "ci_high": hi,
            "theta": th, "theta_se": se}


def model_ids(build_dir: str | Path, inst: dict[str, dict], model: str) -> list[str]:
    """The instance ids ``model`` answers on the build (the track's selection, in the build's order): the items an
    adaptive estimate covers (both ``evaluate``'s summary and ``score``'s ``adaptive.parquet``)."""
    keep = track_of_build(Path(build_dir)).select_for_model(Path(build_dir), model)
    return [i for i in inst if keep is None or i in keep]


def model_scores(ans: dict[tuple[str, str, str], float], model: str, mode: str) -> dict[tuple[str, str], float]:
    """``(mode, instance_id) → mean primary score`` of ``model``'s stored answers in ``mode`` (from
    :func:`answers`)."""
    return {(md, i): s for (m, md, i), s in ans.items() if m == model and md == mode}


def adaptive_rows(build_dir: str | Path) -> tuple[list[dict], list[dict]]:
    """``adaptive.parquet`` rows of a build: for each model ``evaluate --adaptive-calls`` ran (:func:`adaptive_models`)
    × each mode it answered, one row per context length and one with ``context_length`` null for every instance
    the model answers (the track's selection; none for a model that has since answered all of them) — the predicted
    mean score over every instance of the group, asked or not (:func:`group_estimates`), on items calibrated on the other models' answers (and its calibration builds).
    Also returns the ``irt_items.parquet`` rows of those calibrations (:meth:`Calibration.table_rows`, column
    ``for_model``: the model left out)."""
    build_dir = Path(build_dir)
    runs = adaptive_models(build_dir)
    if not runs:
        return [], []
    inst = instances(build_dir)
    ans = answers(build_dir, inst)
    out, items = [], []
    for model in sorted(runs):
        modes = sorted({md for (m, md, _) in ans if m == model})
        if not modes:
            continue
        ids = model_ids(build_dir, inst, model)
        done = {(md, i) for (m, md, i) in ans if m == model}
        if all((md, i) in done for md in modes for i in ids):
            continue  # evaluated in full since: a full run, no estimate
        builds = [build_dir, *[Path(p) for p in runs[model].get("calibration_builds") or []]]
        cal = calibrate_builds(builds, modes, exclude_model=model, first=(inst, ans))
        items += [{"for_model": model, **r} for r in cal.table_rows()]
        for mode in modes:
            scores = model_scores(ans, model, mode)
            by_len: dict[Any, list] = defaultdict(list)
            for i in ids:
                by_len[length_of(inst[i])].append((mode, i))
            groups = [(L, by_len[L]) for L in sorted(by_len, key=lambda v: (str(type(v)), v))]
            groups.append((None, [(mode, i) for i in ids]))
            bench = sorted({str(inst[i].get("benchmark")) for i in ids})
            for L, keys in groups:
                g = group_estimates(cal, keys, scores)
                out.append({"model": model, "mode": mode, "benchmark": ",".join(bench),
                            "context_length": length_tokens(L), **g, "method": cal.params.method})
    return out, items
