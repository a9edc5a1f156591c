"""RAG-vs-LC analysis on hand-made tables, every number worked out by hand: LaRA's gap table (paired questions,
Avg GAP over models), the retrieval-budget sweep, the routing rule, and accuracy by answer position."""

from __future__ import annotations

import json

import pytest

from ctxbench.analysis.rag import answer_position, gap_table, instance_scores, position_table, routing, sweep_table


def _inst(iid, skill, seg=None, spans="[]", tier="32k"):
    return {"instance_id": iid, "benchmark": "lara", "question": iid, "question_id": iid, "target_tokens": 1000,
            "source_tier": tier, "skill": skill, "query_types": "[]", "evidence_spans": spans,
            "context_tokens": 1000, "answer_segment": seg, "n_segments": 5 if seg is not None else None}


INST = {i["instance_id"]: i for i in [
    _inst("a", "location", 0), _inst("b", "location", 2), _inst("c", "hallucination"), _inst("d", "location", 4)]}
# model m: LC scores a=1, b=0, c=0, d over length; RAG a=1, b=1, c=1, d=0; RAG@512: a=0, b=1, c=1
PLAN = [("m", "lc", None, "a", 1.0), ("m", "lc", None, "b", 0.0), ("m", "lc", None, "c", 0.0),
        ("m", "rag", None, "a", 1.0), ("m", "rag", None, "b", 1.0), ("m", "rag", None, "c", 1.0),
        ("m", "rag", None, "d", 0.0), ("m", "rag", 512, "a", 0.0), ("m", "rag", 512, "b", 1.0),
        ("m", "rag", 512, "c", 1.0),
        ("n", "lc", None, "a", 1.0), ("n", "rag", None, "a", 0.0)]


def _tables():
    responses, scores = [], []
    for k, (model, mode, b, iid, s) in enumerate(PLAN):
        responses.append({"request_key": f"k{k}", "instance_id": iid, "model": model, "mode": mode, "status": "ok",
                          "rag_tokens": b, "prompt_tokens": 1000 if mode == "lc" else 300,
                          "retrieved_tokens": None if mode == "lc" else (b or 250),
                          "retrieval_recall": None})
        scores.append({"instance_id": iid, "model": model, "mode": mode, "matcher": "lara_fallback", "score": s,
                       "request_key": f"k{k}"})
        scores.append({"instance_id": iid, "model": model, "mode": mode, "matcher": "f1", "score": 0.123,
                       "request_key": f"k{k}"})
    responses.append({"request_key": "kx", "instance_id": "d", "model": "m", "mode": "lc", "status": "over_length",
                      "rag_tokens": None, "prompt_tokens": 9000})
    return responses, instance_scores(INST, responses, scores)


def test_gap_table_by_hand():
    responses, rows = _tables()
    assert {r["matcher"] for r in rows} == {"lara_fallback"}  # the primary matcher only
    g = {(r["model"], r["task"]): r for r in gap_table(INST, rows, responses)}
    # m, location: paired a, b (d has no LC score): LC (1+0)/2, RAG (1+1)/2 → gap −0.5
    assert (g[("m", "location")]["n"], g[("m", "location")]["lc"], g[("m", "location")]["rag"],
            g[("m", "location")]["gap"]) == (2, 0.5, 1.0, -0.5)
    assert g[("m", "hallucination")]["gap"] == -1.0
    assert g[("m", "overall")]["n"] == 3 and g[("m", "overall")]["gap"] == pytest.approx(1 / 3 - 1)
    assert g[("m", "location")]["lc_over_length"] == 1 and g[("m", "location")]["fallback"] is True
    # n, location: LC 1, RAG 0 → +1; Avg GAP averages the models' accuracies: LC (0.5+1)/2, RAG (1+0)/2
    assert g[("n", "location")]["gap"] == 1.0
    assert g[("(all models)", "location")]["gap"] == pytest.approx(0.75 - 0.5)


def test_sweep_and_routing_by_hand():
    responses, rows = _tables()
    sw = [(r["model"], r["rag_tokens"], r["n"], r["score"]) for r in sweep_table(INST, rows) if r["model"] == "m"]
    assert sw == [("m", "512", 3, pytest.approx(2 / 3)), ("m", "top-k", 4, 0.75), ("m", "full", 3, pytest.approx(1 / 3))]
    rt = {r["model"]: r for r in routing(INST, rows, responses)}
    # m: rag − LC on a, b, c = 0, +1, +1 → mean 2/3; rag@512: −1, +1, +1 → 1/3; best = rag.
    # clustered (one question per cluster) variance: G/(G−1) Σ (d−m)² / n² = 1.5 * (4/9+1/9+1/9) / 9 = 1/9 → se 1/3
    r = rt["m"]
    assert r["best_rag"] == "rag" and r["diff"] == pytest.approx(2 / 3)
    assert r["ci_low"] == pytest.approx(2 / 3 - 1.96 / 3) and r["ci_high"] == pytest.approx(2 / 3 + 1.96 / 3)
    assert r["recommendation"] == "rag"  # 2/3 − 0.653 = 0.013 > 0
    assert "1 LC calls over the window" in r["evidence"]
    # n: one question, RAG − LC = −1; one cluster: the interval is the mean itself → lc
    assert (rt["n"]["diff"], rt["n"]["ci_high"], rt["n"]["recommendation"]) == (-1.0, -1.0, "lc")
    # with one more question where RAG wins, the interval holds 0: either, and RAG reads fewer tokens
    inst = {**INST, "e": _inst("e", "location", 1)}
    extra = [{"request_key": "e1", "instance_id": "e", "model": "n", "mode": "lc", "status": "ok", "rag_tokens": None,
              "prompt_tokens": 1000}, {"request_key": "e2", "instance_id": "e", "model": "n", "mode": "rag",
                                       "status": "ok", "rag_tokens": None, "prompt_tokens": 300}]
    sc = [{"instance_id": "e", "model": "n", "mode": m, "matcher": "lara_fallback", "score": v, "request_key": k}
          for m, v, k in (("lc", 0.0, "e1"), ("rag", 1.0, "e2"))]
    rows2 = rows + instance_scores(inst, extra, sc)
    r = {x["model"]: x for x in routing(inst, rows2, responses + extra)}["n"]
    assert r["diff"] == 0.0 and r["ci_low"] < 0 < r["ci_high"] and r["recommendation"] == "either (rag is cheaper)"


def test_routing_recommends_rag_when_lc_never_fits():
    inst = {"x": _inst("x", "location", 1)}
    responses = [{"request_key": "1", "instance_id": "x", "model": "m", "mode": "lc", "status": "over_length",
                  "rag_tokens": None},
                 {"request_key": "2", "instance_id": "x", "model": "m", "mode": "rag", "status": "ok",
                  "rag_tokens": None, "prompt_tokens": 10}]
    scores = [{"instance_id": "x", "model": "m", "mode": "rag", "matcher": "lara_fallback", "score": 0.5,
               "request_key": "2"}]
    (r,) = routing(inst, instance_scores(inst, responses, scores), responses)
    assert r["recommendation"] == "rag" and "1 of 1 LC calls over length" in r["evidence"]


def test_position_by_hand():
    assert answer_position(_inst("p", "location", 3)) == (3, 5)
    # evidence [100, 200) and [700, 800): token-weighted centre 450 of 1000 → segment 2 of 5
    assert answer_position(_inst("q", "x", spans=json.dumps([[100, 200], [700, 800]]))) == (2, 5)
    assert answer_position(_inst("r", "x", spans=json.dumps([[990, 1000]]))) == (4, 5)
    assert answer_position(_inst("s", "x")) is None
    _, rows = _tables()
    pos = {(r["model"], r["mode"], r["segment"]): r for r in position_table(INST, rows)}
    assert pos[("m", "lc", 0)]["score"] == 1.0 and pos[("m", "lc", 2)]["score"] == 0.0
    assert pos[("m", "rag", 4)]["score"] == 0.0 and pos[("m", "rag", 2)]["position"] == 0.5
    assert ("m", "lc", 4) not in pos and ("m", "rag@512", 2) in pos
