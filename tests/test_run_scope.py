"""What a newcomer met after the README's first command (issue: newcomer-out): `ctxbench run`'s table counts the
replies that run selected, so a rerun after `ctxbench evaluate` stored more replies of the same model on the same
build prints the same table (and one line saying where the other replies are counted); `evaluate` says when it
made the build's scores and report out of date, with the commands that bring them up to date, and says nothing
when it stored nothing.

`run`'s engine is replaced by a stand-in that does what the `nightly` flow does on an already built build
(evaluate the run's EvalConfig through the real runner against a fake OpenAI-compatible server, then score when the
responses changed): the table and its lines are `run`'s own code."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.storage import set_latest
from ctxbench.run.evaluate import evaluate_build
from ctxbench.run.incremental import score_if_changed
from fakeserver import FakeOpenAIServer, message_text
from test_crash_safety import FACT_RE, Q_RE, instance_of, make_toy_build

runner = CliRunner()


def _answer(body: dict) -> str:
    """Right for the even-numbered instances (inst-00, inst-02, ...), wrong for the odd ones."""
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    item = Q_RE.search(user).group(1)
    right = int(instance_of(body).split("-")[1]) % 2 == 0
    return f"Answer: {dict(FACT_RE.findall(user))[item] if right else 1}"


engine_calls: list[dict] = []  # the options `run` gave its engine, one dict per run


@pytest.fixture
def run_env(monkeypatch, tmp_path):
    """`ctxbench run` on a toy build of 8 instances (4 at 1,024 tokens, 4 at 2,048), each on its own context, with
    the fake model; yields (out, server)."""
    import ctxbench.cli.run as cli_run
    import pipelines.flows as flows
    import pipelines.temp_server as ts

    out = tmp_path / "r"
    engine_calls.clear()

    def nightly(build, out, models, **engine_options):
        engine_calls.append({**engine_options, "models": models})
        d = make_toy_build(Path(out) / "toybuild", 8) if not (Path(out) / "toybuild").exists() else \
            Path(out) / "toybuild"
        set_latest(out, "toybuild")
        s = evaluate_build(d, models[0])
        score_if_changed(d)
        return {"evaluations": {models[0].model: {"workers": [dataclasses.asdict(s)]}}}

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")  # the table on one line per row
    monkeypatch.setattr(flows, "nightly", nightly)
    monkeypatch.setattr(ts, "temporary_server", contextlib.nullcontext)
    monkeypatch.setattr(cli_run, "preflight", lambda model, base_url=None: None)
    with FakeOpenAIServer(answer_fn=_answer) as srv:
        yield out, srv


def _run(out: Path, srv) -> str:
    r = runner.invoke(app, ["run", "--model", "openai/x", "--base-url", srv.base_url, "--per-length", "2",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    return r.output


def _table(output: str) -> list[str]:
    """The results table's lines (title to the last row), spaces collapsed."""
    lines = output.splitlines()
    start = next(i for i, ln in enumerate(lines) if "ctxbench results" in ln)
    end = next(i for i, ln in enumerate(lines) if i > start and "Avg" in ln and "openai/x" in ln)
    return [re.sub(r"\s+", " ", ln).strip() for ln in lines[start:end + 1]]


def _row(table: list[str], length: str) -> list[str]:
    """The cells of the table's row of openai/x at ``length`` (e.g. "1,024")."""
    rows = [[c.strip() for c in ln.strip("│ ").split("│")] for ln in table]
    return next(r for r in rows if r[0] == "openai/x" and len(r) > 3 and r[3] == length)


def test_a_rerun_after_evaluate_prints_the_same_table(run_env):
    out, srv = run_env
    first = _run(out, srv)
    assert srv.count == 4  # 2 per length x 2 lengths
    build = out / "toybuild"
    # by hand: the run's sample, its replies right on even-numbered instances
    sample = sorted(r["instance_id"] for r in pq.read_table(build / "responses.parquet").to_pylist())
    assert len(sample) == 4
    t1 = _table(first)
    for length, ids in (("1,024", sample[:2]), ("2,048", sample[2:])):
        want = sum(int(i.split("-")[1]) % 2 == 0 for i in ids) / 2
        assert _row(t1, length)[4:6] == ["2", f"{want:.3f}"], t1

    ev = runner.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/x", "--base-url", srv.base_url,
                             "--per-length", "4"])
    assert ev.exit_code == 0, ev.output
    assert srv.count == 8 and "4 rows added" in ev.output

    again = _run(out, srv)
    assert srv.count == 8 and "4 already stored" in again
    assert _table(again) == t1  # the same table: the run's 4 replies, not the model's 8
    assert (f"this table counts the replies this run selected; the build holds 4 more of openai/x (other "
            f"instances, samples or settings, e.g. from `ctxbench evaluate`), counted by `ctxbench score --build "
            f"{build}` and the report") in re.sub(r"\s*\n\s*", " ", again)
    assert "this table counts" not in first
    # scores.parquet and `ctxbench score` still count every stored reply: 4 per length, half right
    assert pq.read_table(build / "scores.parquet").num_rows == 8
    sc = runner.invoke(app, ["score", "--build", str(build)])
    assert sc.exit_code == 0, sc.output
    assert _row(_table(sc.output), "1,024")[4:6] == ["4", "0.500"]


def test_evaluate_says_what_its_new_replies_made_out_of_date(run_env, tmp_path):
    out, srv = run_env
    _run(out, srv)
    build = out / "toybuild"
    args = ["evaluate", "--build", str(build), "--model", "openai/x", "--base-url", srv.base_url]
    ev = runner.invoke(app, [*args, "--per-length", "3"])
    assert ev.exit_code == 0, ev.output
    assert (f"out of date: {build / 'scores.parquet'} does not count the 2 replies just stored; next: ctxbench score "
            f"--build {build} && ctxbench report --build {build}") in re.sub(r"\s*\n\s*", " ", ev.output)
    # everything already stored: nothing is out of date, nothing said
    same = runner.invoke(app, [*args, "--per-length", "3"])
    assert same.exit_code == 0 and "0 rows added" in same.output and "out of date" not in same.output
    # a build never scored: says so, with the same commands
    fresh = make_toy_build(tmp_path / "fresh", 4)
    ev = runner.invoke(app, ["evaluate", "--build", str(fresh), "--model", "openai/x", "--base-url", srv.base_url])
    assert ev.exit_code == 0, ev.output
    assert (f"not scored yet: 4 replies stored; next: ctxbench score --build {fresh} && ctxbench report --build "
            f"{fresh}") in re.sub(r"\s*\n\s*", " ", ev.output)


def test_the_scope_keeps_other_models_on_the_runs_instances_and_counts_the_rest(tmp_path):
    from ctxbench.core.storage import to_table, write_parquet
    from ctxbench.run.outcome import RunScope, outside_scope

    scope = RunScope("m", frozenset({"k1"}), frozenset({"i1"}))
    rows = [{"model": "m", "request_key": "k1", "instance_id": "i1"},   # the run's own request
            {"model": "m", "request_key": "k2", "instance_id": "i1"},   # its instance, another sample or setting
            {"model": "m", "request_key": "k3", "instance_id": "i2"},   # another instance
            {"model": "o", "request_key": "x1", "instance_id": "i1"},   # another model on the run's sample
            {"model": "o", "request_key": "x2", "instance_id": "i2"}]   # another model elsewhere
    assert [scope(r) for r in rows] == [True, False, False, True, False]
    # scores.parquet holds a row per matcher: two matchers per reply, each reply counted once
    write_parquet(to_table("scores", [{**r, "mode": "lc", "sample": 0, "matcher": mt, "score": 0.0, "tags": "[]"}
                                      for r in rows for mt in ("row_match", "exact")]), tmp_path / "scores.parquet")
    assert outside_scope(tmp_path, scope) == {"m": 2, "o": 1}


def test_an_outage_ends_run_with_status_paused_and_exit_75_not_a_wait(run_env, monkeypatch):
    """A server that is down: the Prefect engine is told not to pause (pause_timeout_s 0: a temporary API server's
    paused flow run has no UI to resume it from, and `run` waited up to 24 hours), so `run` ends as `evaluate` does:
    status paused, exit 75, nothing marked wrong; the rerun after the outage makes the missing calls."""
    from ctxbench.models import gateway

    out, srv = run_env
    monkeypatch.setattr(gateway.RetryPolicy, "delay", lambda self, a, ra, rng: 0.0)  # the budget in no time
    srv.outage(True, "503")
    r = runner.invoke(app, ["run", "--model", "openai/x", "--base-url", srv.base_url, "--per-length", "2",
                            "--out", str(out)])
    assert engine_calls[-1]["pause_timeout_s"] == 0
    assert r.exit_code == 75, r.output
    assert "rerun the same command to resume" in r.output and "status: paused" in r.output
    srv.outage(False)
    r = runner.invoke(app, ["run", "--model", "openai/x", "--base-url", srv.base_url, "--per-length", "2",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output


def test_run_takes_the_key_variable_and_the_retriever_its_hints_name(run_env, monkeypatch):
    """The missing-key hint names --api-key-env and the retrieval hint --retriever bm25: `run` takes both and hands
    them to its evaluation (they had been `evaluate`'s only: `run --api-key-env` was "No such option")."""
    out, srv = run_env
    monkeypatch.setenv("MY_SERVER_KEY", "sk-test-1")
    r = runner.invoke(app, ["run", "--model", "openai/x", "--base-url", srv.base_url, "--per-length", "2",
                            "--api-key-env", "MY_SERVER_KEY", "--retriever", "bm25", "--out", str(out)])
    assert r.exit_code == 0, r.output
    cfg = engine_calls[-1]["models"][0]
    assert (cfg.api_key_env, cfg.retriever, cfg.base_url) == ("MY_SERVER_KEY", "bm25", srv.base_url)
    assert set(srv.auth) == {"Bearer sk-test-1"} and len(srv.auth) == 4  # the 4 calls carried that key
