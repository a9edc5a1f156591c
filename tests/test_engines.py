"""Two engines, one result: ``ctxbench run --engine luigi`` and ``--engine prefect`` on the same small configuration
against the same deterministic fake server write the same artifacts; a luigi rerun with unchanged inputs runs no
task."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from fakeserver import FakeOpenAIServer

runner = CliRunner()


def tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def table(p: Path, sort: str | list[str]):
    t = pq.read_table(p)
    return t.replace_schema_metadata(None).sort_by(sort if isinstance(sort, list) else [(sort, "ascending")])


@pytest.mark.slow
def test_luigi_and_prefect_engines_write_identical_artifacts(spider_db, tmp_path, monkeypatch):
    db = str(spider_db("wine_1"))
    roots = {}
    with FakeOpenAIServer() as srv:
        for engine in ("luigi", "prefect"):
            monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / f"home-{engine}"))  # both really call the server
            before = srv.count
            r = runner.invoke(app, ["run", "--engine", engine, "--db", db, "--lengths", "1024,2048", "--per-length",
                                    "4", "--model", "openai/fake", "--base-url", srv.base_url,
                                    "--out", str(tmp_path / engine)])
            assert r.exit_code == 0, r.output
            assert "ctxbench results" in r.output
            assert srv.count - before == 8  # 4 instances per length
            roots[engine] = tmp_path / engine
        # luigi again: every task is complete, nothing runs, nothing is called
        monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home-luigi"))
        from ctxbench.run.evaluate import EvalConfig
        from ctxbench.tracks.holobench import HoloBenchConfig
        from pipelines.luigi_tasks import run_luigi

        n = srv.count
        again = run_luigi(HoloBenchConfig(db=db, lengths=[1024, 2048]), roots["luigi"],
                          [EvalConfig(model="openai/fake", base_url=srv.base_url, per_length=4,
                                      share_contexts=True)])  # run's sample, the same for every model
        assert srv.count == n and "Did not run any tasks" in again["summary"]
    a, b = ((roots[e] / "latest").resolve() for e in ("luigi", "prefect"))
    assert a.name == b.name  # the same build hash
    ta, tb = tree(a), tree(b)
    assert set(ta) == set(tb)
    assert {"instances.parquet", "quarantine.parquet", "source.sqlite", "manifest.json", "responses.parquet",
            "scores.parquet", "report/index.html"} <= set(ta)
    # responses record each call's latency (and arrive in any order); the inputs hashes stored with scores and
    # report cover the responses file's bytes. Everything else is equal byte for byte.
    assert sorted(k for k in ta if ta[k] != tb[k]) == ["report/inputs.json", "responses.parquet", "scores.parquet"]
    ra, rb = (table(d / "responses.parquet", "request_key").drop_columns(["latency_s"]) for d in (a, b))
    assert ra.equals(rb) and ra.num_rows == 8
    sa, sb = (table(d / "scores.parquet", [("request_key", "ascending"), ("matcher", "ascending")]) for d in (a, b))
    assert sa.equals(sb) and sa.num_rows == 8


@pytest.mark.parametrize("status,target,not_asked,done", [("budget", None, 5, True), ("complete", 0.1, 7, True),
                                                            ("complete", None, 0, False)])
def test_luigi_evaluate_stopped_by_its_own_rule_is_complete(tmp_path, monkeypatch, status, target, not_asked, done):
    """--max-cost or --target-ci ending an evaluation with calls unasked completes the luigi task (else the score
    task fails as an unfulfilled dependency); an evaluation with nothing unasked is judged by the stored requests."""
    pytest.importorskip("luigi")
    import pipelines.luigi_tasks as lt
    from ctxbench.run.evaluate import EvalConfig, EvalSummary

    summary = EvalSummary()
    summary.status, summary.not_asked = status, not_asked
    monkeypatch.setattr(lt, "evaluate_build", lambda *a, **k: summary)
    cfg = EvalConfig(model="openai/fake", base_url="http://127.0.0.1:9", target_ci=target)
    task = lt.EvaluateTask(track="holobench", cfg="{}", out=str(tmp_path / f"{status}-{target}"),
                           eval_cfg=cfg.model_dump_json())
    monkeypatch.setattr(lt.BuildTask, "build_dir", lambda self: tmp_path)
    task.run()
    assert task.stopped_by_rule is done
    if done:
        assert task.complete()  # without reading a build: the run itself said so
