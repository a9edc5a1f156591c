"""Running it as a service: fault tolerance, a provider outage that pauses, several workers sharing the response
cache (processes and Dask workers) without duplicate calls, backfill of a new model over existing builds.

All against tests/fakeserver.py. A "call" is identified on the server by its last user message and sample seed
(fakeserver.call_id); "zero repeated calls" means every call id was requested once (or answered ok once, where
faults make the client retry the same call).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.models.cache import ResponseCache
from fakeserver import FAULT_KINDS, FakeOpenAIServer, message_text
from test_crash_safety import FACT_RE, Q_RE, code, make_toy_build

REPO = Path(__file__).resolve().parent.parent
N = 40


def reader(body: dict) -> str:
    """A fake model that reads the context: the code of the item asked about (right answers let the test check
    that every stored row belongs to its instance)."""
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    item = Q_RE.search(user).group(1)
    return f"Answer: {dict(FACT_RE.findall(user))[item]}"


def rows(build: Path) -> list[dict]:
    p = build / "responses.parquet"
    return pq.read_table(p).to_pylist() if p.exists() else []


def assert_one_right_row_per_instance(build: Path, n: int = N) -> list[dict]:
    rs = rows(build)
    assert Counter(r["instance_id"] for r in rs) == Counter({f"inst-{i:02d}": 1 for i in range(n)})
    for r in rs:
        assert r["status"] == "ok" and r["response"] == f"Answer: {code(int(r['instance_id'][5:]))}", r
    return rs


# ------------------------------------------------------------------------------------------------ claims

def test_claims_are_exclusive_expire_and_end_with_the_answer(tmp_path):
    a, b = ResponseCache(tmp_path / "c.sqlite"), ResponseCache(tmp_path / "c.sqlite")  # two connections
    assert a.claim("k", "A", lease_s=0.3) == "claimed"
    assert b.claim("k", "B", lease_s=0.3) == "taken"
    assert a.claim("k", "A", lease_s=0.3) == "claimed"  # renewal by its owner
    time.sleep(0.4)  # A crashed: its lease lapses
    assert b.claim("k", "B", lease_s=5) == "claimed"
    assert a.claim("k", "A") == "taken"
    b.put("k", "m", {"status": "ok", "response": "x"})
    assert a.claim("k", "A") == b.claim("k", "B") == "cached" and b.claims() == {}
    assert a.claim("j", "A", lease_s=0.2) == "claimed"
    a.release("j", "A")
    assert b.claim("j", "B") == "claimed"
    time.sleep(0.1)
    assert b.renew("B", lease_s=0.2) == 1
    assert b.claims()["j"][1] > time.time() + 0.1
    # a claim of a process of this machine that has ended (SIGKILL, crash) is taken over at once, lease or not;
    # one of a live process is not
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        host = socket.gethostname()
        assert a.claim("d", f"{host}:{dead.pid}:x", lease_s=600) == "claimed"
        assert a.claim("l", f"{host}:{live.pid}:x", lease_s=600) == "claimed"
        assert b.claim("d", "B") == "claimed" and b.claim("l", "B") == "taken"
    finally:
        live.kill()
        live.wait()


# ------------------------------------------------------------------------------------------------ faults

def test_fault_injection_every_call_completes_once_with_retries_and_delays_reported(tmp_path):
    """30% of requests fail: 429 with and without Retry-After / retry-after-ms, 500, 503, connection resets and
    answers slower than the client timeout. Every instance completes; the retries counted equal the failed
    requests the server saw; the waiting reported covers at least every Retry-After; no call answered twice."""
    build = make_toy_build(tmp_path / "b")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(answer_fn=reader, fail_rate=0.3, fail_kinds=FAULT_KINDS, seed=15, retry_after="1",
                          delay_s=3.5) as srv:
        # the client timeout (3 s) is far above an ok answer's time even on busy cores, below the "delay" fault's
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=4, timeout_s=3.0, max_retries=10,
                         retry_base_delay_s=0.05, retry_max_delay_s=0.4)
        s = evaluate_build(build, cfg, cache=cache)
        kinds = Counter(srv.behaviours)
        ok_per_call = srv.call_counts(ok_only=True)
    failed = sum(v for k, v in kinds.items() if k != "ok")
    assert set(kinds) == {"ok", *FAULT_KINDS}, kinds  # every kind of fault was injected
    assert 0.2 < failed / sum(kinds.values()) < 0.4, kinds
    assert (s.status, s.calls, s.unfinished, s.errors, s.new_rows) == ("complete", N, 0, 0, N), s
    assert s.retries == failed  # each failed request was retried once, and nothing else was
    rs = assert_one_right_row_per_instance(build)
    assert sum(r["retries"] for r in rs) == failed
    assert len(ok_per_call) == N and set(ok_per_call.values()) == {1}  # zero repeated calls
    # Retry-After (1 s) and retry-after-ms (1000 ms) are honoured: at least that long was waited for each
    assert s.retry_delay_s >= 1.0 * (kinds["429_retry_after"] + kinds["429_retry_after_ms"])
    assert s.retry_delay_s <= 1.0 * (kinds["429_retry_after"] + kinds["429_retry_after_ms"]) + 0.4 * failed


def test_outage_longer_than_the_retry_budget_pauses_and_resume_makes_only_the_missing_calls(tmp_path):
    build = make_toy_build(tmp_path / "b")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(answer_fn=reader) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=2, max_retries=2,
                         retry_base_delay_s=0.01, retry_max_delay_s=0.02, pause_after=3)
        srv.script(["ok"] * 12)
        srv.outage(True)  # after 12 answers the provider is down
        s = evaluate_build(build, cfg, cache=cache, flush_every=4)
        assert s.status == "paused" and s.notes[0].startswith("paused:"), s
        assert (s.new_rows, s.unfinished, s.errors, s.over_length) == (12, N - 12, 0, 0), s
        stored = rows(build)
        assert len(stored) == 12 and all(r["status"] == "ok" for r in stored)  # nothing marked wrong
        # the pause stopped the run: once 3 calls in a row were past their budget (3 requests each), at most the
        # calls then in flight tried again (concurrency 2), and those were cut short
        outage_requests = srv.count - 12
        assert 9 <= outage_requests <= 9 + 2 * 3, outage_requests
        srv.outage(False)
        before = srv.call_counts(ok_only=True)
        r = evaluate_build(build, cfg, cache=cache)
        after = srv.call_counts(ok_only=True)
    assert (r.status, r.already_stored, r.calls, r.unfinished) == ("complete", 12, N - 12, 0), r
    assert set(before) & set(after - before) == set()  # resume asked only for calls not answered before
    assert set(after.values()) == {1} and len(after) == N
    assert_one_right_row_per_instance(build)


def test_evaluate_flow_with_no_pause_returns_paused_at_once(tmp_path, monkeypatch, prefect_api):
    """``pause_timeout_s=0`` (what ``ctxbench run`` gives its temporary API server's flow): an outage ends the flow
    with status paused, at once, instead of a paused flow run waiting to be resumed; nothing is marked wrong."""
    from pipelines.flows import evaluate_flow

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    build = make_toy_build(tmp_path / "b", n=6)
    with FakeOpenAIServer(answer_fn=reader) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=1, max_retries=1,
                         retry_base_delay_s=0.01, retry_max_delay_s=0.01, pause_after=2)
        srv.script(["ok"] * 2)
        srv.outage(True, "503")
        out = evaluate_flow(str(build), cfg, pause_timeout_s=0)  # before: a pause of 0 s, FlowPauseTimeout
    # 2 answers, then 2 calls failing past their budget (pause_after 2): 4 calls, 4 left (2 failed, 2 not asked)
    assert (out["status"], out["resumes"], out["calls"], out["unfinished"]) == ("paused", 0, 4, 4), out
    assert [r["status"] for r in rows(build)] == ["ok", "ok"]


def test_cli_reports_a_pause_with_its_own_exit_status(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ctxbench.cli import app

    build = make_toy_build(tmp_path / "b", n=6)
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    # the CLI's default retry budget (6 retries from 0.5 s) would take minutes: shrink it for the test
    from ctxbench.models import gateway

    monkeypatch.setattr(gateway.RetryPolicy, "delay", lambda self, a, ra, rng: 0.0)
    with FakeOpenAIServer(answer_fn=reader) as srv:
        srv.outage(True, "500")
        res = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake",
                                       "--base-url", srv.base_url, "--concurrency", "1"])
        assert srv.count == 3 * 7  # three calls, each 1 + 6 retries, then the pause
    assert res.exit_code == 75, res.output
    assert "status: paused (6 calls left); rerun the same command to resume" in res.output
    assert not (build / "responses.parquet").exists()


# ------------------------------------------------------------------------------------------------ scale-out

WORKER = """
import dataclasses, json, os, sys, time, types
sys.modules['litellm'] = types.SimpleNamespace(model_cost={})  # no price table for the fake model (fast start)
from ctxbench.run.evaluate import EvalConfig, evaluate_build
build, url, go = sys.argv[1], sys.argv[2], sys.argv[3]
print('READY', flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
s = evaluate_build(build, EvalConfig(model='openai/fake', base_url=url, concurrency=4), flush_every=4)
print('SUMMARY ' + json.dumps(dataclasses.asdict(s)), flush=True)
"""


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.slow
def test_worker_processes_sharing_the_cache_make_every_call_once(tmp_path, workers):
    build = make_toy_build(tmp_path / "b")
    env = {**os.environ, "CTXBENCH_HOME": str(tmp_path / "home")}
    go = tmp_path / "go"
    with FakeOpenAIServer(answer_fn=reader, latency_s=0.1) as srv:
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(build), srv.base_url, str(go)], cwd=REPO,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(workers)]
        for p in procs:  # every worker has imported what it runs (a fresh process calls within 0.1 s of go)
            while "READY" not in (line := p.stdout.readline()):
                assert line, f"a worker ended before it was ready: {p.communicate()[0]}"
        go.touch()  # all start together
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        per_call = srv.call_counts()
    sums = [json.loads(re.search(r"^SUMMARY (.*)$", o, re.M).group(1)) for o in outs]
    assert len(per_call) == N and set(per_call.values()) == {1}, per_call.most_common(3)  # zero repeated calls
    assert sum(s["calls"] for s in sums) == N
    assert sum(s["calls"] > 0 for s in sums) >= 2, sums  # the work was shared
    for s in sums:  # every worker accounts for every instance: called, answered by another, or found stored
        assert s["status"] == "complete" and s["unfinished"] == 0
        assert s["calls"] + s["taken_by_others"] + s["from_cache"] + s["already_stored"] == N, s
    assert_one_right_row_per_instance(build)
    assert ResponseCache(tmp_path / "home" / "cache" / "responses.sqlite").claims() == {}


def test_a_crashed_workers_claims_lapse_and_its_calls_are_taken_over(tmp_path):
    build = make_toy_build(tmp_path / "b", n=8)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(answer_fn=reader) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=4)
        from ctxbench.run.evaluate import plan_requests

        for t in plan_requests(build, cfg, cache).pending:  # a dead worker claimed everything, 0.6 s before its lease ends
            cache.claim(t["request_key"], "dead-worker", lease_s=0.6)
        t0 = time.monotonic()
        s = evaluate_build(build, cfg, cache=cache)
        took = time.monotonic() - t0
        assert set(srv.call_counts().values()) == {1} and srv.count == 8
    assert s.status == "complete" and s.calls == 8 and took >= 0.5
    assert_one_right_row_per_instance(build, 8)


@pytest.fixture
def prefect_api(monkeypatch):
    """A temporary Prefect server whose URL is also in the environment, so processes the test starts (Dask workers)
    report to it instead of each starting a temporary server of its own. The suite's shared server when it runs
    one (tests/conftest.py); the tests read back only their own flow runs."""
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.settings import PREFECT_API_URL

    if os.environ.get("CTXBENCH_TEST_PREFECT_SHARED"):
        yield os.environ["CTXBENCH_TEST_PREFECT_SHARED"]
        return
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
        yield PREFECT_API_URL.value()


@pytest.mark.slow
def test_evaluate_flow_on_a_dask_local_cluster_splits_the_calls(tmp_path, monkeypatch, prefect_api):
    """The evaluate flow with prefect-dask's DaskTaskRunner on a LocalCluster of 2 workers: 2 evaluation
    tasks, sharded by context, share the response cache; every call is made once. (A LocalCluster of worker threads: the
    processes of a real cluster are stood in for by the test with plain processes above.)"""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from prefect_dask import DaskTaskRunner

    from pipelines.flows import evaluate_flow

    build = make_toy_build(tmp_path / "b")
    # threads of one worker process: cross-process sharing is tested above with plain processes
    runner = DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 1, "processes": False,
                                            "dashboard_address": None})
    with FakeOpenAIServer(answer_fn=reader, latency_s=0.1) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=4)
        out = evaluate_flow.with_options(task_runner=runner)(str(build), cfg, workers=2)
        per_call = srv.call_counts()
    assert len(per_call) == N and set(per_call.values()) == {1}
    assert (out["status"], out["calls"], out["unfinished"], len(out["workers"])) == ("complete", N, 0, 2), out
    assert sum(p["calls"] for p in out["workers"]) == N
    # sharded by context (issue 36): each worker makes the calls of its own contexts, about half of them (the 40
    # contexts are of about equal length), none taken over from the other
    assert all(N // 4 <= p["calls"] <= 3 * N // 4 and p["taken_by_others"] == 0 for p in out["workers"]), out
    assert_one_right_row_per_instance(build)


# ------------------------------------------------------------------------------------------------ backfill

@pytest.mark.slow
def test_backfill_calls_only_the_new_model_and_rewrites_no_row(tmp_path, monkeypatch, prefect_api):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from pipelines.flows import backfill_flow

    from ctxbench.run.backfill import BackfillConfig
    from ctxbench.core.storage import find_builds

    runs = tmp_path / "runs"
    b1, b2 = make_toy_build(runs / "a", n=6), make_toy_build(runs / "nested" / "b", n=4)
    (runs / "unfinished").mkdir()
    make_toy_build(runs / "unfinished", n=3)
    (runs / "unfinished" / "manifest.json").unlink()  # no manifest: not a completed build
    other = make_toy_build(runs / "other", n=2)
    man = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**man, "track": "needles"}))
    assert find_builds(runs, ["holobench"]) == [b1, b2]
    assert find_builds(runs) == [b1, b2, other]
    with FakeOpenAIServer(answer_fn=reader) as srv:
        for b in (b1, b2):
            evaluate_build(b, EvalConfig(model="openai/old", base_url=srv.base_url))
        old = {b: pq.read_table(b / "responses.parquet") for b in (b1, b2)}
        srv.reset_counts()
        out = backfill_flow(BackfillConfig(model=EvalConfig(model="openai/new", base_url=srv.base_url),
                                           runs_root=str(runs), benchmarks=["holobench"]))
        models = srv.count_by_model()
    # only the new model, only the holobench builds, each distinct prompt once: b2's first two instances have the
    # same context and question as b1's (the toy builds overlap), so the response cache answers them
    prompts = [(r["context"], r["question"]) for b in (b1, b2)
               for r in pq.read_table(b / "instances.parquet", columns=["context", "question"]).to_pylist()]
    assert len(prompts) == 10 and len(set(prompts)) == 8
    assert models == Counter({"new": 8})
    assert sorted(out) == [str(b1), str(b2)] and [out[str(b)]["calls"] for b in (b1, b2)] == [6, 2]
    assert [r["cached"] for r in rows(b2) if r["model"] == "openai/new"].count(True) == 2
    for b in (b1, b2):
        t = pq.read_table(b / "responses.parquet")
        olds = [r for r in t.to_pylist() if r["model"] == "openai/old"]
        assert olds == old[b].to_pylist()  # other models' rows unchanged
        assert Counter(r["model"] for r in t.to_pylist())["openai/new"] == old[b].num_rows
    assert not (other / "responses.parquet").exists()


@pytest.mark.slow
def test_evaluate_flow_pauses_on_an_outage_and_a_resume_makes_only_the_missing_calls(tmp_path, monkeypatch,
                                                                                     prefect_api):
    """The Prefect side of a pause: the flow run goes to Paused (resumable from the UI); resuming it after the
    outage makes only the calls not answered before, and the run completes."""
    import threading
    import uuid

    import prefect
    from prefect import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType,
                                                FlowRunFilterTags)
    from prefect.client.schemas.objects import StateType
    from prefect.flow_runs import resume_flow_run
    from prefect.utilities.asyncutils import run_coro_as_sync

    from pipelines.flows import evaluate_flow

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    build = make_toy_build(tmp_path / "b", n=12)
    result: dict = {}
    with FakeOpenAIServer(answer_fn=reader) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=1, max_retries=1,
                         retry_base_delay_s=0.01, retry_max_delay_s=0.01, pause_after=2)
        srv.script(["ok"] * 5)
        srv.outage(True, "503")
        tag = f"test-pause-{uuid.uuid4().hex}"  # this test's flow run among the server's others

        def run_flow():
            with prefect.tags(tag):
                result.update(out=evaluate_flow(str(build), cfg))

        th = threading.Thread(target=run_flow, daemon=True)
        th.start()

        async def paused_runs():
            async with get_client() as c:
                return await c.read_flow_runs(flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])),
                    tags=FlowRunFilterTags(all_=[tag])))

        deadline, runs = time.monotonic() + 240, []
        while time.monotonic() < deadline and not runs:
            runs = run_coro_as_sync(paused_runs())
            time.sleep(0.5)
        assert len(runs) == 1, "the flow run did not pause"
        stored = rows(build)
        assert len(stored) == 5 and all(r["status"] == "ok" for r in stored)  # nothing marked wrong
        before = srv.call_counts(ok_only=True)
        srv.outage(False)
        resume_flow_run(runs[0].id)
        th.join(timeout=240)
        assert not th.is_alive(), "the resumed flow run did not finish"
        after = srv.call_counts(ok_only=True)
    out = result["out"]
    assert (out["status"], out["resumes"], out["calls"], out["unfinished"]) == ("complete", 1, 7, 0), out
    assert len(before) == 5 and set(before) & set(after - before) == set() and set(after.values()) == {1}
    assert_one_right_row_per_instance(build, 12)
