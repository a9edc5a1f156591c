"""``evaluate --mode lc,rag`` against the fake OpenAI-compatible server: both modes answered with distinct request
keys (their messages differ), the RAG prompts hold only retrieved chunks, budgets are recorded, a rerun makes no
call, and the dry run plans the same requests."""

from __future__ import annotations

import functools
import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import ctxbench.run.evaluate as ev
from ctxbench.cli import app
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.models.gateway import RetryPolicy
from ctxbench.report import build_report
from ctxbench.run.score import score_build
from fakeserver import FakeOpenAIServer, message_text
from test_evaluate import answer_from_document, make_build

RAG = dict(chunk_tokens=16, chunk_overlap=4, top_k=3, retriever="bm25")


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def _user(body: dict) -> str:
    return message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])


def test_lc_and_rag_both_answered_with_distinct_keys_and_rerun_calls_nothing(tmp_path):
    build = make_build(tmp_path / "build")
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, mode="lc,rag", **RAG)
        s = evaluate_build(build, cfg)
        rows = pq.read_table(build / "responses.parquet").to_pylist()
        assert s.calls == 20 and len(rows) == 20 and srv.count == 20
        by_mode = {m: [r for r in rows if r["mode"] == m] for m in ("lc", "rag")}
        assert {m: len(v) for m, v in by_mode.items()} == {"lc": 10, "rag": 10}
        assert len({r["request_key"] for r in rows}) == 20
        for r in by_mode["lc"]:
            assert r["rag_tokens"] is None and r["retrieval"] is None
        for r in by_mode["rag"]:
            rec = json.loads(r["retrieval"])
            assert len(rec["chunks"]) == 3 and rec["config"]["chunk_tokens"] == 16
            assert 0 < r["retrieved_tokens"] <= 3 * 16 and r["retrieval_recall"] is None  # no evidence spans
        lc_prompts = [_user(b) for b in srv.requests if "Below is a document" in _user(b)]
        rag_prompts = [_user(b) for b in srv.requests if "passages retrieved" in _user(b)]
        assert len(lc_prompts) == len(rag_prompts) == 10
        assert max(map(len, rag_prompts)) < min(map(len, lc_prompts))

        srv.reset_counts()
        s = evaluate_build(build, cfg)
        assert srv.count == 0 and s.calls == 0 and s.already_stored == 20 and s.new_rows == 0

        # a budget sweep adds one RAG run per budget; a budget covering the whole context retrieves all of it
        srv.reset_counts()
        s = evaluate_build(build, cfg.model_copy(update={"mode": "rag", "rag_tokens": [32, 4096]}))
        rows = pq.read_table(build / "responses.parquet").to_pylist()
        swept = [r for r in rows if r["rag_tokens"] is not None]
        assert srv.count == 20 and len(swept) == 20
        for r in swept:
            assert r["retrieved_tokens"] <= r["rag_tokens"]
            if r["rag_tokens"] == 4096:
                assert json.loads(r["retrieval"])["intervals"] == [[0, r["retrieved_tokens"]]]

    # score and report: the RAG-vs-LC section with one row per budget in the sweep
    score_build(build)
    page = build_report(build).read_text(encoding="utf-8")
    assert "RAG versus long context" in page and "Routing recommendation" in page
    sweep = pq.read_table(build / "report" / "rag_sweep.parquet").to_pylist()
    assert {r["rag_tokens"] for r in sweep} == {"32", "4096", "top-k", "full"}
    assert all(r["n"] == 5 for r in sweep)  # per context length: 5 instances each


def test_cli_mode_lc_rag_and_dry_run(tmp_path):
    build = make_build(tmp_path / "build", n=4)
    args = ["evaluate", "--build", str(build), "--model", "openai/fake", "--mode", "lc,rag", "--chunk-tokens", "16",
            "--chunk-overlap", "4", "--top-k", "2", "--retriever", "bm25"]
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        r = CliRunner().invoke(app, args + ["--base-url", srv.base_url, "--dry-run"])
        assert r.exit_code == 0, r.output
        assert "calls: 8" in r.output and srv.count == 0
        r = CliRunner().invoke(app, args + ["--base-url", srv.base_url])
        assert r.exit_code == 0, r.output
        assert srv.count == 8
    bad = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "x", "--mode", "lc,closed"])
    assert bad.exit_code == 2 and "use lc, rag, repl" in bad.output and "--mode" in bad.output
