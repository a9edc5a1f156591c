"""lc, rag and repl side by side (issue 35, ctxbench.analysis.modes and the report's section): calls, tokens,
money per instance and per correct answer by mode, and the paired difference between modes clustered by context,
on hand-made rows whose figures are worked out here by hand."""

from __future__ import annotations

import json
import math

import pytest

from ctxbench.analysis.modes import mode_pairs, mode_rows
from ctxbench.scoring.registry import matchers_for

LC = [1, 1, 1, 0, 0, 1]
REPL = [1, 1, 1, 1, 1, 1]


def _rows():
    m = matchers_for("holobench")[0]
    inst = {f"i{k}": {"instance_id": f"i{k}", "benchmark": "holobench", "question": f"q{k}"} for k in range(6)}
    resp, scores, steps = [], [], []
    for k in range(6):
        for mode, sc, cost in (("lc", LC[k], 0.01), ("repl", REPL[k], 0.002)):
            key = f"{mode}-{k}"
            resp.append({"request_key": key, "instance_id": f"i{k}", "model": "m", "mode": mode, "sample": 0,
                         "rag_tokens": None, "status": "ok", "prompt_tokens": 1000 if mode == "lc" else 300,
                         "completion_tokens": 10 if mode == "lc" else 90, "cost_usd": cost})
            scores.append({"request_key": key, "instance_id": f"i{k}", "model": "m", "mode": mode, "sample": 0,
                           "matcher": m, "score": float(sc)})
        # a repl answer: step 1 with two llm_query sub-calls, step 2 FINAL → 1 + 2 + 1 = 4 calls
        steps += [{"request_key": f"repl-{k}", "step": 1, "sub_calls": json.dumps([{}, {}])},
                  {"request_key": f"repl-{k}", "step": 2, "sub_calls": None}]
    return inst, resp, scores, steps


def test_mode_rows_by_hand():
    inst, resp, scores, steps = _rows()
    rows = {r["mode"]: r for r in mode_rows(inst, resp, scores, steps)}
    assert list(rows) == ["lc", "repl"]
    lc, repl = rows["lc"], rows["repl"]
    assert (lc["instances"], lc["score"], lc["calls_per_instance"]) == (6, pytest.approx(4 / 6), 1.0)
    assert (repl["score"], repl["calls_per_instance"]) == (1.0, 4.0)
    assert (repl["max_steps"], repl["over_budget"], repl["step_timeout"]) == (0, 0, 0)
    assert (lc["prompt_tokens_per_instance"], repl["completion_tokens_per_instance"]) == (1000, 90)
    assert lc["cost_per_instance_usd"] == pytest.approx(0.01) and repl["cost_per_instance_usd"] == pytest.approx(0.002)
    assert lc["usd_per_correct"] == pytest.approx(0.06 / 4) and repl["usd_per_correct"] == pytest.approx(0.012 / 6)


def test_mode_pairs_clustered_by_context_by_hand():
    inst, resp, scores, _ = _rows()
    (p,) = mode_pairs(inst, resp, scores, {f"i{k}": f"ctx{k}" for k in range(6)})
    # d = lc − repl = [0, 0, 0, −1, −1, 0]: mean −1/3; each instance its own context (G = 6): the CR1 variance
    # G/(G−1) · Σ(d − d̄)² / n² = 6/5 · (4/9 + 8/9) / 36; t(5) 97.5% quantile 2.570582
    se = math.sqrt(6 / 5 * (12 / 9) / 36)
    assert (p["a"], p["b"], p["n"], p["clusters"]) == ("lc", "repl", 6, 6)
    assert p["diff"] == pytest.approx(-1 / 3)
    assert p["ci_low"] == pytest.approx(-1 / 3 - 2.570582 * se, abs=1e-5)
    assert p["ci_high"] == pytest.approx(-1 / 3 + 2.570582 * se, abs=1e-5)
    # two contexts only: no interval, and the row says why
    (q,) = mode_pairs(inst, resp, scores, {f"i{k}": f"ctx{k % 2}" for k in range(6)})
    assert q["ci_low"] is None and "at least 5" in q["reason"]
