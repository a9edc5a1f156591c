"""LURCH difficulty regression: recovery of known coefficients from simulated data, clustered against naive
standard errors, an independent refit with statsmodels' formula API, Holm, and the inestimable cases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ctxbench.analysis.regression import (difficulty_regression, fit_difficulty, holm, log2_standardise,
                                          observations)
from ctxbench.core.storage import to_table, write_parquet

BETA = {"context_length": -0.6, "scope": 0.35, "dispersion": -0.3, "reasoning_depth": -0.5}
TASK = {"holobench/a": 0.4, "holobench/b": -0.2}
MODEL = {"m1": 0.0, "m2": 0.8, "m3": -0.5}


def _z(values: np.ndarray) -> np.ndarray:
    """The test's own LURCH transform: zeros -> half the smallest positive, log2, population standardisation."""
    v = np.where(values > 0, values, values[values > 0].min() / 2)
    lg = np.log2(v)
    return (lg - lg.mean()) / lg.std()


def simulate(seed=0, n_q=240, contexts=2, u_sd=0.0, samples=4, beta=BETA):
    """Rows as ctxbench.analysis.regression.observations returns them, scores drawn from the model with known
    coefficients (on the standardised scale, computed here independently of the module)."""
    rng = np.random.default_rng(seed)
    inst = []
    for q in range(n_q):
        task = list(TASK)[q % 2]
        scope = 2 ** rng.normal(-6, 1.5)
        disp = 0.0 if rng.random() < 0.1 else min(1.0, 2 ** rng.normal(-1.5, 0.8))
        depth = int(rng.integers(1, 6))
        u = rng.normal(0, u_sd)
        for c in range(contexts):
            inst.append({"instance_id": f"q{q}c{c}", "question": f"q{q}", "task": task, "u": u,
                         "context_length": float(2 ** rng.uniform(11, 16)), "scope": scope, "dispersion": disp,
                         "reasoning_depth": float(depth)})
    z = {p: _z(np.array([r[p] for r in inst])) for p in BETA}
    rows = []
    for i, r in enumerate(inst):
        for m, am in MODEL.items():
            eta = TASK[r["task"]] + am + r["u"] + sum(beta[p] * z[p][i] for p in BETA)
            k = rng.binomial(samples, 1 / (1 + math.exp(-eta)))
            rows.append({**{k2: v for k2, v in r.items() if k2 != "u"}, "model": m, "score": k / samples})
    return rows


def _coef(res, term):
    return next(c for c in res["coefficients"] if c["term"] == term)


def test_log2_standardise_by_hand():
    # [0, 1, 4]: 0 -> 0.5 (half of 1); log2 -> [-1, 0, 2]; mean 1/3; population sd sqrt(42/27)
    vals, why = log2_standardise([0, 1, 4])
    sd = math.sqrt(42 / 27)
    assert why is None and vals == pytest.approx([(-1 - 1 / 3) / sd, (0 - 1 / 3) / sd, (2 - 1 / 3) / sd])
    assert log2_standardise([3, 3, 3])[1].startswith("constant")
    assert log2_standardise([0, 0])[1] == "every value is 0"


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_recovers_known_coefficients():
    res = fit_difficulty(simulate(seed=1))
    assert res["estimable"] and res["reason"] is None
    assert (res["n_questions"], res["n_instances"], res["n_obs"], res["n_tasks"], res["n_models"]) == (240, 480, 1440, 2, 3)
    for p, b in BETA.items():
        c = _coef(res, p)
        assert c["ci_low"] <= b <= c["ci_high"], (p, c)
        assert c["se"] < 0.15  # informative intervals, not wide enough to contain anything
    assert _coef(res, "model[m2]")["ci_low"] <= MODEL["m2"] - MODEL["m1"] <= _coef(res, "model[m2]")["ci_high"]
    # the three attributes are clearly non-zero: every Holm-adjusted Wald p-value is small
    assert [w["test"] for w in res["wald"]] == ["scope", "dispersion", "reasoning_depth",
                                                "joint(scope, dispersion, reasoning_depth)"]
    assert all(w["p_holm"] < 0.01 for w in res["wald"])
    # interquartile contrasts have the coefficients' signs; interactions fitted (true gamma = 0)
    pp = {c["predictor"]: c["pp"] for c in res["contrasts"]}
    assert pp["context_length"] < 0 < pp["scope"] and pp["dispersion"] < 0 and pp["reasoning_depth"] < 0
    for it in res["interactions"]:
        assert it["estimable"] and abs(it["gamma"]) < 3 * it["se"]


def test_matches_an_independent_formula_fit():
    """The same model fitted with statsmodels' formula API on a design built here (pandas dummies through
    C(task) + C(model)): same coefficients, clustered SEs and joint Wald statistic; contrast recomputed with
    pandas' within-task quantiles."""
    import statsmodels.formula.api as smf

    rows = simulate(seed=2, n_q=120)
    res = fit_difficulty(rows)
    df = pd.DataFrame(rows)
    inst = df.drop_duplicates("instance_id").set_index("instance_id")
    for p in BETA:
        df["x_" + p] = df["instance_id"].map(pd.Series(_z(inst[p].to_numpy()), index=inst.index))
    f = smf.glm("score ~ x_context_length + x_scope + x_dispersion + x_reasoning_depth + C(task) + C(model)",
                df, family=__import__("statsmodels.api").api.families.Binomial())
    g = f.fit(cov_type="cluster", cov_kwds={"groups": pd.factorize(df["question"])[0]})
    for p in BETA:
        assert _coef(res, p)["coef"] == pytest.approx(g.params["x_" + p], rel=1e-6)
        assert _coef(res, p)["se"] == pytest.approx(g.bse["x_" + p], rel=1e-6)
    W = g.wald_test("x_scope = 0, x_dispersion = 0, x_reasoning_depth = 0", scalar=True, use_f=False)
    assert res["wald"][-1]["stat"] == pytest.approx(float(W.statistic), rel=1e-6)
    # scope contrast: within-task quartiles of the instances' x_scope, predictions by the formula model
    q = inst.assign(x=df.drop_duplicates("instance_id").set_index("instance_id")["x_scope"]) \
        .groupby("task")["x"].quantile([0.25, 0.75]).unstack()
    hi, lo = df.copy(), df.copy()
    hi["x_scope"], lo["x_scope"] = df["task"].map(q[0.75]), df["task"].map(q[0.25])
    pp = 100 * (g.predict(hi) - g.predict(lo)).mean()
    assert next(c for c in res["contrasts"] if c["predictor"] == "scope")["pp"] == pytest.approx(pp, rel=1e-6)


def test_clustered_errors_differ_from_naive_when_scores_correlate_within_question():
    rows = simulate(seed=3, n_q=150, contexts=3, u_sd=1.5)
    cl, nv = fit_difficulty(rows, interactions=False), fit_difficulty(rows, cov="naive", interactions=False)
    # scope is a question-level property and the question effect is shared by its 9 scores: the naive SE,
    # which treats them as independent, is far too small
    assert _coef(cl, "scope")["se"] > 1.5 * _coef(nv, "scope")["se"]
    assert _coef(cl, "scope")["coef"] == pytest.approx(_coef(nv, "scope")["coef"])
    # without a question effect the two agree roughly
    rows0 = simulate(seed=3, n_q=150, contexts=3, u_sd=0.0)
    r = _coef(fit_difficulty(rows0, interactions=False), "scope")["se"] / \
        _coef(fit_difficulty(rows0, cov="naive", interactions=False), "scope")["se"]
    assert 0.7 < r < 1.4


def test_all_scores_zero_is_inestimable():
    rows = [dict(r, score=0.0) for r in simulate(seed=4, n_q=30)]
    res = fit_difficulty(rows)
    assert not res["estimable"] and res["reason"] == "all 180 scores are 0: there is no variation in score to explain"
    assert all(c["coef"] is None for c in res["coefficients"]) and res["contrasts"] == []


def test_constant_predictor_is_inestimable_the_rest_is_fitted():
    rows = [dict(r, reasoning_depth=3.0) for r in simulate(seed=5, beta={**BETA, "reasoning_depth": 0.0})]
    res = fit_difficulty(rows)
    assert res["estimable"]
    d = _coef(res, "reasoning_depth")
    assert not d["estimable"] and d["coef"] is None and d["reason"].startswith("constant")
    assert _coef(res, "scope")["ci_low"] <= BETA["scope"] <= _coef(res, "scope")["ci_high"]
    assert [w["test"] for w in res["wald"]] == ["scope", "dispersion", "joint(scope, dispersion)"]
    assert next(i for i in res["interactions"] if i["attribute"] == "reasoning_depth")["estimable"] is False
    assert any("reasoning_depth inestimable: constant" in n for n in res["notes"])


def test_too_few_clusters():
    res = fit_difficulty(simulate(seed=6, n_q=6))
    assert not res["estimable"] and res["reason"].startswith("too few clusters: 6 questions for 8 parameters")


def test_separation():
    rows = simulate(seed=7, n_q=100)
    med = np.median([r["scope"] for r in rows])
    res = fit_difficulty([dict(r, score=1.0 if r["scope"] > med else 0.0) for r in rows])
    assert not res["estimable"] and res["reason"].startswith("separation")


def test_task_without_variation_is_left_out():
    rows = [dict(r, score=0.0) if r["task"] == "holobench/b" else r for r in simulate(seed=8)]
    res = fit_difficulty(rows)
    assert res["estimable"] and res["n_tasks"] == 1
    assert res["notes"][0] == "task holobench/b left out: all its scores are 0 (its fixed effect would diverge)"


def test_observations_from_a_build(tmp_path):
    """Mean over samples per instance × model, one mode, the primary matcher; null properties counted."""
    inst, scores, resp = [], [], []
    for i in range(5):
        known = i < 3
        inst.append({"instance_id": f"i{i}", "benchmark": "holobench", "source_id": "db", "question": f"Q{i}",
                     "question_id": f"q{i // 2}", "gold": "[[1]]", "context": "x", "tokenizer": "cl100k_base",
                     "target_tokens": 4096, "context_tokens": 4000 + i, "context_format": "full_text",
                     "query_types": "[]", "evidence_spans": "[[0, 10]]" if known else "[]", "build_hash": "h",
                     "scope": 0.1 if known else None, "dispersion": 0.0 if known else None,
                     "reasoning_depth": 2 if known else None})
        for s, v in enumerate((1.0, 0.5)):
            scores.append({"instance_id": f"i{i}", "model": "m", "mode": "lc", "sample": s, "matcher": "row_match",
                           "score": v, "tags": "[]"})
        for key, score in ((f"top-{i}", 1.0), (f"b2000-{i}", 0.0)):  # two retrieval settings: never pooled
            scores.append({"instance_id": f"i{i}", "model": "m", "mode": "rag", "sample": 0,
                           "matcher": "row_match", "score": score, "tags": "[]", "request_key": key})
            resp.append({"request_key": key, "instance_id": f"i{i}", "model": "m", "mode": "rag", "sample": 0,
                         "prompt_variant": "cot", "status": "ok", "cached": False, "retries": 0,
                         "rag_tokens": None if key.startswith("top") else 2000})
        scores.append({"instance_id": f"i{i}", "model": "m", "mode": "lc", "sample": 0, "matcher": "judge:j",
                       "score": 0.0, "tags": "[]"})
    write_parquet(to_table("instances", inst), tmp_path / "instances.parquet")
    write_parquet(to_table("scores", scores), tmp_path / "scores.parquet")
    write_parquet(to_table("responses", resp), tmp_path / "responses.parquet")
    assert {r["score"] for r in observations(tmp_path, "rag")[0]} == {1.0}
    assert {r["score"] for r in observations(tmp_path, "rag@2000")[0]} == {0.0}
    rows, counts = observations(tmp_path)
    assert counts == {"null_properties": 2, "instances_null": 2, "instances": 5}
    assert [(r["instance_id"], r["question"], r["task"], r["score"]) for r in rows] == [
        ("i0", "q0", "holobench/db", 0.75), ("i1", "q0", "holobench/db", 0.75), ("i2", "q1", "holobench/db", 0.75)]
    res = difficulty_regression(tmp_path)
    assert res["null_properties"] == 2 and not res["estimable"]
    # scope 0.1, dispersion 0 and depth 2 everywhere: only length is left, with 2 questions for 2 parameters
    assert res["notes"] == ["scope inestimable: constant: every analysed instance has the value 0.1",
                            "dispersion inestimable: every value is 0",
                            "reasoning_depth inestimable: constant: every analysed instance has the value 2"]
    assert res["reason"].startswith("too few clusters: 2 questions for 2 parameters")


def test_per_model_contrasts_are_separate_fits():
    from ctxbench.analysis.regression import per_model_contrasts

    rows = simulate(seed=9, n_q=120)
    pm = per_model_contrasts(rows)
    assert sorted({r["model"] for r in pm}) == ["m1", "m2", "m3"]
    alone = fit_difficulty([r for r in rows if r["model"] == "m2"], interactions=False)
    want = {c["predictor"]: c["pp"] for c in alone["contrasts"]}
    assert {r["predictor"]: r["pp"] for r in pm if r["model"] == "m2"} == pytest.approx(want)
    # a model whose scores are all 0 is reported inestimable, the others are fitted
    rows0 = [dict(r, score=0.0) if r["model"] == "m3" else r for r in rows]
    pm0 = per_model_contrasts(rows0)
    assert [r["reason"] for r in pm0 if r["model"] == "m3"] == [
        "all 240 scores are 0: there is no variation in score to explain"]


def test_a_diverging_fit_prints_no_numpy_warning():
    """Coefficients 60x LURCH's size drive the linear predictor past exp's range (|z| > 709) while IRLS diverges:
    the fit is reported inestimable (separation) and no RuntimeWarning (`t = np.exp(-z)` in statsmodels' logit
    link, printed at the end of `ctxbench run`) escapes."""
    import warnings

    rows = simulate(seed=3, n_q=24, beta={k: v * 60 for k, v in BETA.items()})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_difficulty(rows)
    assert not res["estimable"] and res["reason"].startswith("separation")
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []


def test_mode_as_a_factor_matches_an_independent_formula_fit_and_recovers_the_effect():
    """Issue 35: the modes pooled with the mode as a fixed effect (C(mode) beside C(task) + C(model)): the same
    coefficients and clustered SEs as statsmodels' formula API on a design built here, and the simulated mode
    effect (repl +0.9 on the logit against lc) recovered within its 95% interval."""
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(7)
    base = simulate(seed=3, n_q=200, samples=1)
    rows = []
    for r in base:  # each observation again under repl, the score drawn with the mode's effect added
        rows.append({**r, "mode": "lc"})
    inst = pd.DataFrame(base).drop_duplicates("instance_id").set_index("instance_id")
    z = {p: pd.Series(_z(inst[p].to_numpy()), index=inst.index) for p in BETA}
    for r in base:
        eta = (TASK[r["task"]] + MODEL[r["model"]] + 0.9
               + sum(BETA[p] * z[p][r["instance_id"]] for p in BETA))
        k = rng.binomial(4, 1 / (1 + math.exp(-eta)))
        rows.append({**r, "mode": "repl", "score": k / 4})
    res = fit_difficulty(rows, interactions=False)
    assert res["estimable"]
    df = pd.DataFrame(rows)
    for p in BETA:
        df["x_" + p] = df["instance_id"].map(z[p])
    g = smf.glm("score ~ x_context_length + x_scope + x_dispersion + x_reasoning_depth + C(task) + C(model)"
                " + C(mode)", df, family=__import__("statsmodels.api").api.families.Binomial()) \
        .fit(cov_type="cluster", cov_kwds={"groups": pd.factorize(df["question"])[0]})
    m = _coef(res, "mode[repl]")
    assert m["coef"] == pytest.approx(g.params["C(mode)[T.repl]"], rel=1e-6)
    assert m["se"] == pytest.approx(g.bse["C(mode)[T.repl]"], rel=1e-6)
    assert m["ci_low"] < 0.9 < m["ci_high"] and m["p"] < 0.001
    for p in BETA:
        assert _coef(res, p)["coef"] == pytest.approx(g.params["x_" + p], rel=1e-6)
