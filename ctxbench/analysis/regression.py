"""Difficulty regression (LURCH, "Beyond Context Length", regression analysis of RQ1 and RQ2): how context length,
evidence scope, evidence dispersion and reasoning depth relate to scores.

**Data.** One observation per instance × model: the mean score over the model's samples (the benchmark's primary
matcher, or a given one) for one evaluation mode. Clusters are questions (``question_id``, else the question text),
so the scores of one question at several lengths and from several models are dependent. The *task* of an instance
is ``benchmark/skill`` where it has a skill (article track, LaRA), else ``benchmark/source_id`` (database, corpus).
Instances with a null property (imports without evidence spans) are left out and counted.

**Predictors.** log₂ of context length (``context_tokens``), scope, dispersion and reasoning depth; a zero is
replaced by half the predictor's smallest positive value before the log; each logged predictor is standardised
to mean 0 and variance 1 over the analysed instances (each instance once, whatever the number of models).

**Additive GLM** (LURCH equation 4): fractional logit (Papke & Wooldridge 1996; statsmodels GLM, Binomial family,
logit link, on scores in [0, 1]) of score on the four predictors with task and model fixed effects; standard errors
clustered by question. Wald tests of scope, dispersion and depth individually and jointly, Holm-adjusted as one
family of four. Interquartile contrasts Δ25→75 in percentage points: the mean over all observations of the
predicted score with the predictor at its within-task 75th percentile minus at its 25th, the others as observed
(tasks with tied quartiles contribute zero); their intervals by the delta method with the clustered covariance.

**Interaction models** (equation 5), one per attribute j ∈ {scope, dispersion, depth}: the additive model plus
x_L·x_j. Reported: γ_Lj, and the length contrast (within-task 25th → 75th length percentile) at low (25th) and high
(75th) within-task values of j, and their high − low difference; Holm over the six tests (three γ, three
differences).

**Inestimable cases** are reported, not fitted into meaningless numbers: no observations; all scores 0 (or all 1);
a predictor that is constant or collinear with the fixed effects and the other predictors (that coefficient only);
too few question clusters for a cluster-robust covariance (clusters ≤ parameters); separation (the likelihood has
no finite maximum: a fitted mean reaches 0 or 1, or a coefficient diverges). Tasks or models whose scores are all
0 (or all 1) carry no information on the coefficients given their fixed effect (whose estimate would diverge):
they are left out, and the result says so.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from ctxbench.core.storage import read_table
from ctxbench.models.effort import EFFORTS, effort_labels
from ctxbench.scoring.registry import matchers_for

PREDICTORS = ("context_length", "scope", "dispersion", "reasoning_depth")
ATTRIBUTES = PREDICTORS[1:]
# issue 25's axes, entered where they vary: instance columns (near-miss share, look-alike count, lexical overlap) and
# the response's reasoning effort (none 0 < low 1 < medium 2 < high 3), each standardised linearly (no log: shares,
# counts and an ordinal scale); an observation without the factor (a question without predicates, a run without an
# effort, an older build) holds it at its mean (z = 0)
FACTORS = ("near_miss_share", "lookalike_count", "lexical_overlap", "reasoning_effort")
_FACTOR_COLUMN = {"near_miss_share": "near_miss_share", "lookalike_count": "distractor_needles",
                  "lexical_overlap": "lexical_overlap"}
OBSERVATION_LEVEL = frozenset({"reasoning_effort"})  # varies between answers to one instance
_COLUMN = {"context_length": "context_tokens", "scope": "scope", "dispersion": "dispersion",
           "reasoning_depth": "reasoning_depth"}
MAX_ABS_COEF = 15.0  # |logit coefficient| beyond this (a probability ratio of e^15 per SD) signals divergence
Z95 = 1.959963984540054


def holm(pvalues: list[float]) -> list[float]:
    """Holm-adjusted p-values (Holm 1979), in the input order."""
    from statsmodels.stats.multitest import multipletests

    if not pvalues:
        return []
    return [float(x) for x in multipletests(pvalues, method="holm")[1]]


def log2_standardise(values: list[float]) -> tuple[list[float] | None, str | None]:
    """LURCH's transform of one predictor: zeros floored at half the smallest positive value, log₂, standardised
    to mean 0 and (population) variance 1. Returns ``(values, None)``, or ``(None, reason)`` when it cannot be
    done (no positive value, a negative value, or a constant)."""
    v = np.asarray(values, dtype=float)
    if (v < 0).any():
        return None, f"negative values (min {v.min():g})"
    pos = v[v > 0]
    if pos.size == 0:
        return None, "every value is 0"
    v = np.where(v > 0, v, pos.min() / 2)
    lg = np.log2(v)
    sd = lg.std()
    if not np.isfinite(sd) or sd <= 1e-12 * max(1.0, abs(lg.mean())):
        return None, f"constant: every analysed instance has the value {v[0]:g}"
    return list((lg - lg.mean()) / sd), None


def task_of(row: dict) -> str:
    """Task of an instance (module docstring)."""
    return f"{row.get('benchmark')}/{row.get('skill') or row.get('source_id')}"


def mode_labels(build_dir: str | Path) -> dict[str, str]:
    """request_key → evaluation setting: ``lc``, ``rag`` (the default top-k retrieval) or ``rag@N`` (a retrieval
    budget of N tokens), so that a regression never pools answers from different retrieval budgets."""
    resp = read_table(Path(build_dir) / "responses.parquet", "responses")
    cols = [c for c in ("request_key", "mode", "rag_tokens") if c in resp.column_names]
    return {r["request_key"]: r["mode"] if r.get("rag_tokens") is None else f"{r['mode']}@{r['rag_tokens']}"
            for r in resp.select(cols).to_pylist()}


def observations(build_dir: str | Path, mode: str = "lc", matcher: str | None = None) -> tuple[list[dict], dict]:
    """Instance × model observations of a build for one setting (``lc``, ``rag`` or ``rag@N``, see
    :func:`mode_labels`): ``(rows, counts)``. Each row has instance_id,
    question (cluster), task, model, score (mean over samples) and the four raw predictor values; ``counts`` has
    ``null_properties`` (observations left out because a property is null) and ``instances_null`` (instances of
    the build with a null property, scored or not)."""
    import pyarrow.parquet as pq


    build_dir = Path(build_dir)
    ipath = build_dir / "instances.parquet"
    have = set(pq.read_schema(ipath).names)
    cols = [c for c in ("instance_id", "question_id", "question", "benchmark", "skill", "source_id",
                        "context_tokens", "scope", "dispersion", "reasoning_depth", *_FACTOR_COLUMN.values())
            if c in have]
    inst = {r["instance_id"]: r for r in pq.read_table(ipath, columns=cols).to_pylist()}
    null = {i for i, r in inst.items() if any(r.get(_COLUMN[p]) is None for p in ATTRIBUTES)}
    labels = mode_labels(build_dir)

    efforts = effort_labels(read_table(build_dir / "responses.parquet", "responses"))
    per: dict[tuple, list[float]] = defaultdict(list)
    for s in read_table(build_dir / "scores.parquet", "scores").to_pylist():
        r = inst.get(s["instance_id"])
        if r is None or labels.get(s.get("request_key"), s["mode"]) != mode or s["score"] is None:
            continue
        want = matcher or matchers_for(r.get("benchmark"))[0]
        if s["matcher"] == want:
            per[(s["instance_id"], s["model"], efforts.get(s.get("request_key")) or "")].append(float(s["score"]))
    rows, dropped = [], 0
    for (iid, model, effort), vals in sorted(per.items()):
        r = inst[iid]
        if iid in null:
            dropped += 1
            continue
        f = {k: (None if r.get(c) is None else float(r[c])) for k, c in _FACTOR_COLUMN.items()}
        f["reasoning_effort"] = float(EFFORTS.index(effort)) if effort in EFFORTS else None
        rows.append({"instance_id": iid, "obs": f"{iid}|{effort}", "question": r.get("question_id") or r["question"],
                     "task": task_of(r), "model": model, "mode": mode, "score": sum(vals) / len(vals),
                     **{p: float(r[_COLUMN[p]]) for p in PREDICTORS}, **f})
    return rows, {"null_properties": dropped, "instances_null": len(null), "instances": len(inst)}


# ---------------------------------------------------------------------------------------------------- fitting

def _sigmoid(z):
    """The logistic function without overflow for any finite z (scipy's expit: exp(-z) is never formed for a large
    negative z, where 1 / (1 + exp(-z)) overflows and numpy warns)."""
    from scipy.special import expit

    return expit(z)


class _Design:
    """Design matrix of one model: intercept, predictors (standardised), optional interaction, fixed effects."""

    def __init__(self, rows: list[dict], z: dict[str, dict[str, float]], preds: list[str],
                 interaction: str | None = None):
        self.rows, self.z, self.preds, self.interaction = rows, z, preds, interaction
        tasks = sorted({r["task"] for r in rows})
        models = sorted({r["model"] for r in rows})
        modes = sorted({r.get("mode") or "lc" for r in rows})  # several only in the pooled fit (mode as a factor)
        self.fe = ([("task", t) for t in tasks[1:]] + [("model", m) for m in models[1:]]
                   + [("mode", m) for m in modes[1:]])
        self.names = ["intercept", *preds, *([f"context_length:{interaction}"] if interaction else []),
                      *(f"{k}[{v}]" for k, v in self.fe)]

    def matrix(self, override: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """X with some predictors' standardised values replaced (arrays over rows)."""
        n = len(self.rows)
        cols = [np.ones(n)]
        vals = {p: np.array([self.z[p][_zkey(p, r)] for r in self.rows]) for p in self.preds}
        for p, v in (override or {}).items():
            vals[p] = v
        cols += [vals[p] for p in self.preds]
        if self.interaction:
            cols.append(vals["context_length"] * vals[self.interaction])
        for k, v in self.fe:
            cols.append(np.array([1.0 if (r.get(k) or "lc" if k == "mode" else r[k]) == v else 0.0
                                  for r in self.rows]))
        return np.column_stack(cols)


def _zkey(pred: str, r: dict) -> str:
    """The key of an observation's standardised value of ``pred``: its instance, or for a predictor that varies
    between answers to one instance (the reasoning effort) the observation (instance and effort)."""
    return r.get("obs", r["instance_id"]) if pred in OBSERVATION_LEVEL else r["instance_id"]


def standardise_factor(values: list[float | None]) -> tuple[list[float] | None, str | None]:
    """An issue-25 factor standardised linearly (mean 0, population variance 1 over the known values; a missing
    value is 0, the mean). ``(None, reason)`` when no value is known or the known ones are constant."""
    known = np.array([v for v in values if v is not None], dtype=float)
    if known.size == 0:
        return None, "unknown for every analysed observation"
    sd = known.std()
    if not np.isfinite(sd) or sd <= 1e-12 * max(1.0, abs(known.mean())):
        return None, f"constant: every analysed observation has the value {known[0]:g}"
    return [0.0 if v is None else float((v - known.mean()) / sd) for v in values], None


def _quartiles(rows: list[dict], z: dict[str, dict[str, float]], pred: str) -> tuple[np.ndarray, np.ndarray]:
    """Within-task 25th and 75th percentiles of a standardised predictor (over the task's instances, each once;
    observations for an observation-level one), one value per observation row."""
    by_task: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        by_task[r["task"]][_zkey(pred, r)] = z[pred][_zkey(pred, r)]
    q = {t: np.percentile(list(v.values()), [25, 75]) for t, v in by_task.items()}
    return np.array([q[r["task"]][0] for r in rows]), np.array([q[r["task"]][1] for r in rows])


def _contrast(beta, cov, design: _Design, low: dict, high: dict) -> tuple[float, float]:
    """Mean predicted-score difference (high − low settings) over observations and its delta-method SE."""
    Xh, Xl = design.matrix(high), design.matrix(low)
    ph, pl = _sigmoid(Xh @ beta), _sigmoid(Xl @ beta)
    est = float(np.mean(ph - pl))
    grad = ((ph * (1 - ph))[:, None] * Xh - (pl * (1 - pl))[:, None] * Xl).mean(axis=0)
    return est, float(math.sqrt(max(0.0, grad @ cov @ grad)))


def _p_normal(z: float) -> float:
    return float(math.erfc(abs(z) / math.sqrt(2)))


def _fit(y: np.ndarray, X: np.ndarray, groups: np.ndarray, cov: str):
    """statsmodels GLM fit; returns (result, None) or (None, reason) on separation / non-convergence."""
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import PerfectSeparationError, PerfectSeparationWarning

    kw = {"cov_type": "cluster", "cov_kwds": {"groups": groups}} if cov == "cluster" else {"cov_type": "HC0"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        try:
            res = sm.GLM(y, X, family=sm.families.Binomial()).fit(maxiter=200, **kw)
        except (PerfectSeparationError, PerfectSeparationWarning):
            return None, "separation: the predictors perfectly separate high from low scores (no finite estimate)"
        except (np.linalg.LinAlgError, ValueError) as e:
            return None, f"the fit failed ({type(e).__name__}: {e})"
    # fitted means from the linear predictor with the stable logistic: statsmodels' fittedvalues apply the link's
    # inverse 1 / (1 + exp(-z)), which overflows (a RuntimeWarning printed at the end of a run) for the huge linear
    # predictors of a diverging fit, the very case the check below rejects
    mu = _sigmoid(np.asarray(X) @ np.asarray(res.params))
    params, bse = np.asarray(res.params), np.asarray(res.bse)
    if (not res.converged or np.abs(params).max() > MAX_ABS_COEF or not np.isfinite(bse).all()
            or (np.minimum(mu, 1 - mu) < 1e-9).any()):
        return None, ("separation: the likelihood has no finite maximum (a fitted score reaches 0 or 1, or a "
                      "coefficient diverges), so the coefficients are not identified")
    return res, None


def _prepare(rows: list[dict]) -> tuple[list[dict], list[str], str | None]:
    """Leave out tasks and models without variation in score; returns (rows, notes, reason if inestimable)."""
    notes = []
    if not rows:
        return rows, notes, "no scored instance with known scope, dispersion and reasoning depth"
    ys = {r["score"] for r in rows}
    if ys == {0.0}:
        return rows, notes, f"all {len(rows)} scores are 0: there is no variation in score to explain"
    if ys == {1.0}:
        return rows, notes, f"all {len(rows)} scores are 1: there is no variation in score to explain"
    for key in ("task", "model", "mode"):
        while True:
            by: dict[str, set] = defaultdict(set)
            for r in rows:
                by[r.get(key)].add(r["score"])
            flat = {k for k, v in by.items() if v == {0.0} or v == {1.0}}
            if not flat:
                break
            for k in sorted(flat):
                notes.append(f"{key} {k} left out: all its scores are {int(next(iter(by[k])))} "
                             f"(its fixed effect would diverge)")
            rows = [r for r in rows if r.get(key) not in flat]
    if not rows:
        return rows, notes, "every task or model has constant scores (all 0 or all 1)"
    return rows, notes, None


def fit_difficulty(rows: list[dict], cov: str = "cluster", interactions: bool = True) -> dict[str, Any]:
    """Fit LURCH's additive GLM (and the interaction models) to observation rows (:func:`observations`).

    Returns a JSON-able dict: ``estimable`` (bool) and ``reason`` (why not, when not), ``notes`` (left-out tasks or
    models, inestimable coefficients), ``n_obs``, ``n_instances``, ``n_questions`` (clusters), ``n_tasks``,
    ``n_models``; ``coefficients`` (term, coef, se, ci_low, ci_high, z, p, estimable, reason; ``p_holm`` for the
    RQ1 family), ``wald`` (scope, dispersion, reasoning_depth and the joint test: stat, df, p, p_holm),
    ``contrasts`` (predictor, pp, se_pp, ci_low_pp, ci_high_pp: Δ25→75 in percentage points) and ``interactions``
    (per attribute: gamma, se, p, p_holm, low_pp, high_pp, diff_pp, diff_se_pp, diff_p, diff_p_holm, or the reason
    it is inestimable). ``cov`` is ``cluster`` (by question) or ``naive`` (robust to heteroskedasticity, HC0, but
treating every observation as independent; for comparison).
    """
    out: dict[str, Any] = {"estimable": False, "reason": None, "notes": [], "coefficients": [], "wald": [], "factors": [],
                           "contrasts": [], "interactions": [], "cov": cov}
    rows, notes, reason = _prepare(list(rows))
    out["notes"] = notes
    out.update(n_obs=len(rows), n_instances=len({r["instance_id"] for r in rows}),
               n_questions=len({r["question"] for r in rows}), n_tasks=len({r["task"] for r in rows}),
               n_models=len({r["model"] for r in rows}))
    if reason:
        out["reason"] = reason
        return out
    inst = {r["instance_id"]: r for r in rows}
    ids = sorted(inst)
    z: dict[str, dict[str, float]] = {}
    bad: dict[str, str] = {}
    for p in PREDICTORS:
        vals, why = log2_standardise([inst[i][p] for i in ids])
        if vals is None:
            bad[p] = why
        else:
            z[p] = dict(zip(ids, vals))
    # issue 25's factors where present and varying (their absence is no note: an older build or another track)
    factor_notes = []
    for p in FACTORS:
        keys = sorted({_zkey(p, r) for r in rows})
        val = {_zkey(p, r): r.get(p) for r in rows}
        if all(v is None for v in val.values()):
            continue
        vals, why = standardise_factor([val[k] for k in keys])
        if vals is None:
            factor_notes.append(f"{p} not entered: {why}")
            continue
        missing = sum(val[k] is None for k in keys)
        if missing:
            factor_notes.append(f"{p}: {missing} of {len(keys)} observations without it are held at its mean")
        z[p] = dict(zip(keys, vals))
    out["notes"] += factor_notes
    # predictors collinear with the fixed effects and the predictors before them
    preds: list[str] = []
    for p in (*PREDICTORS, *(f for f in FACTORS if f in z)):
        if p in bad:
            continue
        X = _Design(rows, z, preds + [p]).matrix()
        if np.linalg.matrix_rank(X) < X.shape[1]:
            bad[p] = "collinear with the task/model fixed effects and the other predictors"
        else:
            preds.append(p)
    for p, why in bad.items():
        out["notes"].append(f"{p} inestimable: {why}")
    if "context_length" not in preds:
        out["reason"] = f"context length is inestimable ({bad['context_length']})"
        _fill_inestimable(out, bad)
        return out
    design = _Design(rows, z, preds)
    X = design.matrix()
    y = np.array([min(max(r["score"], 0.0), 1.0) for r in rows])
    qs = sorted({r["question"] for r in rows})
    qidx = {q: i for i, q in enumerate(qs)}
    groups = np.array([qidx[r["question"]] for r in rows])
    if cov == "cluster" and len(qs) <= X.shape[1]:
        out["reason"] = (f"too few clusters: {len(qs)} questions for {X.shape[1]} parameters (a cluster-robust "
                         f"covariance needs more questions than parameters)")
        _fill_inestimable(out, bad)
        return out
    res, why = _fit(y, X, groups, cov)
    if res is None:
        out["reason"] = why
        _fill_inestimable(out, bad)
        return out
    beta, V = np.asarray(res.params), np.asarray(res.cov_params())
    out["estimable"] = True
    coefs = []
    for k, name in enumerate(design.names):
        se = float(math.sqrt(V[k, k]))
        zz = beta[k] / se if se > 0 else float("nan")
        coefs.append({"term": name, "coef": float(beta[k]), "se": se, "ci_low": float(beta[k] - Z95 * se),
                      "ci_high": float(beta[k] + Z95 * se), "z": float(zz), "p": _p_normal(zz),
                      "estimable": True, "reason": None})
    for p, why in bad.items():
        coefs.append({"term": p, "coef": None, "se": None, "ci_low": None, "ci_high": None, "z": None, "p": None,
                      "estimable": False, "reason": why})
    # RQ1 family: scope, dispersion, depth individually and jointly
    attrs = [a for a in ATTRIBUTES if a in preds]
    wald = []
    for a in attrs:
        c = next(c for c in coefs if c["term"] == a)
        wald.append({"test": a, "stat": c["z"] ** 2, "df": 1, "p": c["p"]})
    if len(attrs) > 1:
        R = np.zeros((len(attrs), len(beta)))
        for i, a in enumerate(attrs):
            R[i, design.names.index(a)] = 1
        rb = R @ beta
        W = float(rb @ np.linalg.solve(R @ V @ R.T, rb))
        from scipy.stats import chi2

        wald.append({"test": "joint(" + ", ".join(attrs) + ")", "stat": W, "df": len(attrs),
                     "p": float(chi2.sf(W, len(attrs)))})
    for w, ph in zip(wald, holm([w["p"] for w in wald])):
        w["p_holm"] = ph
    for c in coefs:
        c["p_holm"] = next((w["p_holm"] for w in wald if w["test"] == c["term"]), None)
    # issue 25's factors: their own Holm family
    fac = [c for c in coefs if c["term"] in FACTORS and c["estimable"]]
    for c, ph in zip(fac, holm([c["p"] for c in fac])):
        c["p_holm"] = ph
    out["factors"] = [{"factor": c["term"], "coef": c["coef"], "ci_low": c["ci_low"], "ci_high": c["ci_high"],
                       "p": c["p"], "p_holm": c["p_holm"], "matters": bool(c["p_holm"] < 0.05)} for c in fac]
    out["coefficients"], out["wald"] = coefs, wald
    # within-task interquartile contrasts
    for p in preds:
        lo, hi = _quartiles(rows, z, p)
        est, se = _contrast(beta, V, design, {p: lo}, {p: hi})
        out["contrasts"].append({"predictor": p, "pp": 100 * est, "se_pp": 100 * se,
                                 "ci_low_pp": 100 * (est - Z95 * se), "ci_high_pp": 100 * (est + Z95 * se)})
    for p in bad:
        out["contrasts"].append({"predictor": p, "pp": None, "se_pp": None, "ci_low_pp": None, "ci_high_pp": None,
                                 "reason": bad[p]})
    if interactions:
        out["interactions"] = _interactions(rows, z, preds, bad, y, groups, cov)
    return out


def _fill_inestimable(out: dict, bad: dict[str, str]) -> None:
    for p in PREDICTORS:
        out["coefficients"].append({"term": p, "coef": None, "se": None, "ci_low": None, "ci_high": None,
                                    "z": None, "p": None, "estimable": False,
                                    "reason": bad.get(p) or out["reason"]})


def _interactions(rows, z, preds, bad, y, groups, cov) -> list[dict]:
    """RQ2: one model per attribute with x_L·x_j (module docstring), Holm over the six tests."""
    res_rows: list[dict] = []
    for a in ATTRIBUTES:
        if a not in preds:
            res_rows.append({"attribute": a, "estimable": False, "reason": bad.get(a, "not in the model")})
            continue
        design = _Design(rows, z, preds, interaction=a)
        X = design.matrix()
        if np.linalg.matrix_rank(X) < X.shape[1]:
            res_rows.append({"attribute": a, "estimable": False,
                             "reason": "the interaction is collinear with the other terms"})
            continue
        if cov == "cluster" and len(set(groups.tolist())) <= X.shape[1]:
            res_rows.append({"attribute": a, "estimable": False, "reason": "too few clusters"})
            continue
        res, why = _fit(y, X, groups, cov)
        if res is None:
            res_rows.append({"attribute": a, "estimable": False, "reason": why})
            continue
        beta, V = np.asarray(res.params), np.asarray(res.cov_params())
        k = design.names.index(f"context_length:{a}")
        se = float(math.sqrt(V[k, k]))
        Llo, Lhi = _quartiles(rows, z, "context_length")
        alo, ahi = _quartiles(rows, z, a)
        low, low_se = _contrast(beta, V, design, {"context_length": Llo, a: alo}, {"context_length": Lhi, a: alo})
        high, high_se = _contrast(beta, V, design, {"context_length": Llo, a: ahi}, {"context_length": Lhi, a: ahi})
        # difference of two contrasts: gradient of (high − low) with the same covariance
        Xs = {key: design.matrix(o) for key, o in (
            ("hh", {"context_length": Lhi, a: ahi}), ("lh", {"context_length": Llo, a: ahi}),
            ("hl", {"context_length": Lhi, a: alo}), ("ll", {"context_length": Llo, a: alo}))}
        P = {key: _sigmoid(M @ beta) for key, M in Xs.items()}
        g = sum(s * ((P[key] * (1 - P[key]))[:, None] * Xs[key]).mean(axis=0)
                for key, s in (("hh", 1), ("lh", -1), ("hl", -1), ("ll", 1)))
        dse = float(math.sqrt(max(0.0, g @ V @ g)))
        diff = high - low
        res_rows.append({"attribute": a, "estimable": True, "reason": None, "gamma": float(beta[k]), "se": se,
                         "gamma_p": _p_normal(beta[k] / se) if se > 0 else float("nan"),
                         "low_pp": 100 * low, "low_se_pp": 100 * low_se, "high_pp": 100 * high,
                         "high_se_pp": 100 * high_se, "diff_pp": 100 * diff, "diff_se_pp": 100 * dse,
                         "diff_p": _p_normal(diff / dse) if dse > 0 else float("nan")})
    ok = [r for r in res_rows if r["estimable"]]
    adj = holm([r["gamma_p"] for r in ok] + [r["diff_p"] for r in ok])
    for i, r in enumerate(ok):
        r["gamma_p_holm"], r["diff_p_holm"] = adj[i], adj[len(ok) + i]
    return res_rows


def per_model_contrasts(rows: list[dict], cov: str = "cluster") -> list[dict]:
    """LURCH figure 4: the additive GLM fitted separately to each model's observations (task fixed effects only);
    one row per model × predictor with the interquartile contrast in pp and its interval, or the reason the
    model's fit or the predictor is inestimable."""
    out = []
    for m in sorted({r["model"] for r in rows}):
        res = fit_difficulty([r for r in rows if r["model"] == m], cov, interactions=False)
        if not res["estimable"]:
            out.append({"model": m, "predictor": None, "pp": None, "ci_low_pp": None, "ci_high_pp": None,
                        "reason": res["reason"]})
            continue
        out += [{"model": m, "predictor": c["predictor"], "pp": c["pp"], "ci_low_pp": c["ci_low_pp"],
                 "ci_high_pp": c["ci_high_pp"], "reason": c.get("reason")} for c in res["contrasts"]]
    return out


def difficulty_regression_modes(build_dir: str | Path, modes: list[str], matcher: str | None = None,
                                cov: str = "cluster") -> dict[str, Any]:
    """:func:`fit_difficulty` on the observations of several settings (``modes``: ``lc``, ``rag``, ``rag@N``,
    ``repl``) pooled, with the mode as a fixed effect beside task and model (terms ``mode[rag]``, ``mode[repl]``...,
    against the first mode in name order, e.g. ``lc``): how much the way the context is read moves the score at equal
    scope, dispersion and depth (issue 35; LURCH equation 4 with one more factor). Clustered by question as the
    per-mode fits; ``modes`` in the result. Raises nothing for too few modes: one mode is the per-mode fit."""
    rows: list[dict] = []
    counts = {"null_properties": 0}
    for m in modes:
        r, c = observations(build_dir, m, matcher)
        rows += r
        counts["null_properties"] += c["null_properties"]
        counts.update(instances_null=c["instances_null"], instances=c["instances"])
    out = fit_difficulty(rows, cov, interactions=False)
    out.update(counts, mode="+".join(modes), modes=list(modes), matcher=matcher or "primary")
    return json.loads(json.dumps(out, default=float))


def difficulty_regression(build_dir: str | Path, mode: str = "lc", matcher: str | None = None,
                          cov: str = "cluster") -> dict[str, Any]:
    """:func:`fit_difficulty` on a build's scores for one mode, with the counts of :func:`observations`
    (``null_properties``, ``instances_null``) and the per-model contrasts (:func:`per_model_contrasts`) added."""
    rows, counts = observations(build_dir, mode, matcher)
    out = fit_difficulty(rows, cov)
    out.update(counts, mode=mode, matcher=matcher or "primary")
    out["per_model"] = per_model_contrasts(rows, cov)
    return json.loads(json.dumps(out, default=float))
