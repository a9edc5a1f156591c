"""The report's difficulty, closed-book and κ sections on hand-made builds."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxbench.analysis.regression import difficulty_regression
from ctxbench.report import build_report
from ctxbench.core.storage import to_table, write_parquet
from test_regression import simulate


def _write(d, rows, null_extra=0):
    d.mkdir(parents=True, exist_ok=True)
    inst, scores = {}, []
    for r in rows:
        inst.setdefault(r["instance_id"], {
            "instance_id": r["instance_id"], "benchmark": "holobench", "source_id": r["task"].split("/")[1],
            "question": r["question"], "question_id": r["question"], "gold": "[[1]]", "context": "x",
            "tokenizer": "cl100k_base", "target_tokens": 65536, "context_tokens": int(r["context_length"]),
            "context_format": "full_text", "query_types": "[]", "evidence_spans": "[[0, 1]]", "build_hash": "h",
            "scope": r["scope"], "dispersion": r["dispersion"], "reasoning_depth": int(r["reasoning_depth"])})
        scores.append({"instance_id": r["instance_id"], "model": r["model"], "mode": "lc", "sample": 0,
                       "matcher": "row_match", "score": r["score"], "tags": "[]"})
    for i in range(null_extra):  # an import without evidence spans: null properties
        inst[f"lara{i}"] = {"instance_id": f"lara{i}", "benchmark": "lara", "source_id": "novel", "question": "Q",
                            "gold": "[[\"a\"]]", "context": "x", "tokenizer": "cl100k_base", "target_tokens": 100,
                            "context_tokens": 100, "context_format": "full_text", "query_types": "[]",
                            "evidence_spans": "[]", "build_hash": "h"}
    write_parquet(to_table("instances", list(inst.values())), d / "instances.parquet")
    write_parquet(to_table("scores", scores), d / "scores.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "h", "track": "holobench"}), encoding="utf-8")
    return d


def test_report_shows_coefficients_contrasts_and_null_count(tmp_path):
    b = _write(tmp_path / "b", simulate(seed=11, n_q=80), null_extra=3)
    res = difficulty_regression(b)
    assert res["estimable"] and res["instances_null"] == 3
    page = build_report(b).read_text(encoding="utf-8")
    assert "Instance difficulty (LURCH)" in page
    assert "<td>lara</td><td>3</td><td>3</td>" in page and "<td>holobench</td><td>160</td><td>0</td>" in page
    scope = next(c for c in res["coefficients"] if c["term"] == "scope")
    assert f"<td>scope</td><td>{scope['coef']:.3f}</td><td>{scope['se']:.3f}</td>" in page
    pp = next(c for c in res["contrasts"] if c["predictor"] == "reasoning_depth")["pp"]
    assert f"<td>reasoning_depth</td><td>{pp:.3f}</td>" in page
    t = pq.read_table(b / "report" / "difficulty_regression.parquet").to_pylist()
    assert any(r["kind"] == "contrast_pp" and r["term"] == "reasoning_depth" and r["value"] == pytest.approx(pp)
               for r in t)


def test_report_says_why_inestimable(tmp_path):
    rows = [dict(r, score=0.0) for r in simulate(seed=12, n_q=20)]
    page = build_report(_write(tmp_path / "b", rows)).read_text(encoding="utf-8")
    assert "The difficulty regression is inestimable:</strong> all 120 scores are 0" in page
    assert "<th>β</th>" not in page  # no coefficient table of meaningless numbers


def test_report_closed_book_and_kappa(tmp_path):
    b = _write(tmp_path / "b", simulate(seed=13, n_q=20))
    write_parquet(pa.Table.from_pylist([
        {"instance_id": "q0c0", "model": "m1", "question": "Q", "request_key": "k", "status": "ok", "response": "1",
         "matcher": "row_match", "score": 1.0, "flagged": True},
        {"instance_id": "q0c1", "model": "m1", "question": "Q", "request_key": "k", "status": "ok", "response": "1",
         "matcher": "row_match", "score": 0.0, "flagged": False}]), b / "closed_book.parquet")
    write_parquet(pa.Table.from_pylist([{"matcher": "judge:gpt", "threshold": 1.0, "n": 50, "tp": 20, "tn": 15,
                                         "fp": 10, "fn": 5, "po": 0.7, "pe": 0.5, "kappa": 0.4, "se": 0.127,
                                         "ci_low": 0.151, "ci_high": 0.649}]), b / "kappa.parquet")
    page = build_report(b).read_text(encoding="utf-8")
    assert "Closed-book screen" in page and "<td>m1</td><td>2</td><td>1</td><td>0</td><td>0.500</td>" in page
    assert "<td>judge:gpt</td><td>50</td><td>1.000</td><td>0.700</td><td>0.500</td><td>0.400</td>" in page
