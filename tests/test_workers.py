"""``evaluate --workers N`` (issue 36): calls sharded over Dask workers by context, every question of a context on
one worker, contexts balanced by the prompt tokens they carry (not their count); each call made once; a rerun
starts nothing."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import psutil
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import ctxbench.run.evaluate as ev
from ctxbench.cli import app
from ctxbench.core.storage import to_table, write_parquet
from ctxbench.models.cache import ResponseCache
from ctxbench.models.gateway import RetryPolicy
from ctxbench.run.evaluate import EvalConfig, plan_requests
from ctxbench.run.shard import assign_contexts, restrict_plan
from ctxbench.run.workers import combine, others_rows, plan_shards
from fakeserver import FakeOpenAIServer

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CTXBENCH_DASK_ADDRESS", raising=False)
    monkeypatch.delenv("CTXBENCH_CACHE_URL", raising=False)
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def test_contexts_are_balanced_by_tokens_not_by_count():
    # worked by hand (longest first, each to the lighter worker): a->0 (100); b->1 (60); c->1 (110); d->0 (140);
    # e->1 (120)
    assert assign_contexts({"a": 100, "b": 60, "c": 50, "d": 40, "e": 10}, 2) == [["a", "d"], ["b", "c", "e"]]
    # one long context against nine short ones: the long one alone (an even count would put 5 and 5)
    tokens = {"big": 1000, **{f"s{i}": 10 for i in range(9)}}
    got = assign_contexts(tokens, 2)
    assert got[0] == ["big"] and sorted(got[1]) == sorted(f"s{i}" for i in range(9))
    assert assign_contexts({"x": 5}, 3) == [["x"], [], []]
    assert assign_contexts(tokens, 3) == assign_contexts(dict(reversed(list(tokens.items()))), 3)  # deterministic
    with pytest.raises(ValueError):
        assign_contexts(tokens, 0)


def make_build(d, sizes=(150, 10, 10, 10, 10, 10), questions=3):
    """Contexts of ``sizes`` sentences, ``questions`` questions each."""
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for c, n in enumerate(sizes):
        ctx = " ".join(f"Entry {i} of ledger {c} is at shelf {i * 7 % 101}." for i in range(n))
        for q in range(questions):
            rows.append({"instance_id": f"c{c}q{q}", "benchmark": "holobench", "source_id": "toy",
                         "question": f"Which shelf holds entry {q} of ledger {c}?", "gold": json.dumps([[q]]),
                         "context": ctx, "tokenizer": "cl100k_base", "target_tokens": 1024, "context_tokens": 100,
                         "context_format": "full_text", "query_types": "[]", "evidence_spans": "[]",
                         "build_hash": "wbuild"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "wbuild", "track": "holobench"}), encoding="utf-8")
    return d


def test_shards_keep_a_context_whole_and_restrict_the_plan(tmp_path):
    build = make_build(tmp_path / "b")
    cfg = EvalConfig(model="openai/fake", base_url="http://127.0.0.1:9/v1", max_tokens=32)
    plan = plan_requests(build, cfg, ResponseCache())
    shards = plan_shards(plan, 2)
    ctx_of = {t["instance_id"]: t["_ctx"] for t in plan.todo}
    big = ctx_of["c0q0"]  # 150 sentences: more tokens than the other five contexts together
    assert len(shards) == 2 and sorted(sum(shards, [])) == sorted(set(ctx_of.values()))
    assert [big] in shards  # alone on its worker
    parts = [restrict_plan(plan, set(s)) for s in shards]
    assert sorted(t["instance_id"] for p in parts for t in p.pending) == sorted(ctx_of)  # each request once
    for p in parts:  # every question of a context in the same part
        ids = {t["instance_id"] for t in p.pending}
        assert all({f"c{c}q{q}" for q in range(3)} <= ids for c in {i[1] for i in ids})


def test_combine_adds_counts_and_keeps_the_worst_status():
    a = {"calls": 3, "from_cache": 1, "retry_delay_s": 0.5, "notes": ["x"], "status": "complete",
         "unfinished_finish": {"length": 1}, "max_tokens": 32}
    b = {"calls": 4, "from_cache": 0, "retry_delay_s": 0.25, "notes": ["y"], "status": "paused",
         "unfinished_finish": {"length": 2, "stop": 1}, "max_tokens": 32}
    s = combine([a, b], selected=9, already_stored=2)
    assert (s.calls, s.from_cache, s.retry_delay_s, s.notes, s.status) == (7, 1, 0.75, ["x", "y"], "paused")
    assert s.unfinished_finish == {"length": 3, "stop": 1} and (s.selected, s.already_stored) == (9, 2)


def test_the_workers_rows_are_not_counted_as_another_process_rows():
    # each worker counts the other workers' rows as "another process's": the combined summary never sums them
    a = {"new_rows": 4, "others_rows": 2, "status": "complete"}
    b = {"new_rows": 2, "others_rows": 4, "status": "complete"}
    assert combine([a, b], selected=6, already_stored=0).others_rows == 0
    assert combine([a, b], selected=6, already_stored=0, others=3).others_rows == 3
    own = {"k1", "k2", "k3", "k4", "k5", "k6"}
    # the six new keys are the workers' six rows: none another process's
    assert others_rows({"k1", "k2", "k3", "k4", "k5", "k6"}, own, 6) == 0
    # two keys of another build's selection, and one of ours the workers did not write (the other process did)
    assert others_rows({"k1", "k2", "k3", "x1", "x2"}, own, 2) == 2 + 1


def test_evaluate_with_two_workers_makes_each_call_once_and_a_rerun_starts_nothing(tmp_path):
    build = make_build(tmp_path / "b")
    with FakeOpenAIServer(latency_s=0.05) as srv:
        args = ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url", srv.base_url,
                "--max-tokens", "32", "--concurrency", "2", "--workers", "2"]
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        counts = srv.call_counts()
        assert len(counts) == 18 and set(counts.values()) == {1}
        assert "18 calls made, 0 from cache" in r.output and "18 rows added" in r.output
        assert "another process" not in r.output  # the other worker's rows are this evaluation's
        rows = pq.read_table(build / "responses.parquet").to_pylist()
        assert len(rows) == 18 and {x["status"] for x in rows} == {"ok"}
        srv.reset_counts()
        r = runner.invoke(app, args)
        assert r.exit_code == 0 and srv.count == 0 and "0 calls made" in r.output


def test_workers_refuse_options_that_need_every_call_at_once(tmp_path):
    build = make_build(tmp_path / "b", sizes=(5,), questions=1)
    r = runner.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                            "http://127.0.0.1:9/v1", "--batch", "--workers", "2"])
    assert r.exit_code == 2 and "--batch decides over all calls at once" in r.output
    for flag in (["--target-ci", "0.1"], ["--adaptive-calls", "5"]):  # each picks its next call over all of them
        r = runner.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                                "http://127.0.0.1:9/v1", *flag, "--workers", "2"])
        assert r.exit_code == 2 and f"{flag[0]} decides over all calls at once" in r.output, r.output


def test_backfill_with_workers_shards_each_build(tmp_path):
    make_build(tmp_path / "runs" / "b", sizes=(10, 10, 10, 10), questions=2)
    with FakeOpenAIServer() as srv:
        r = runner.invoke(app, ["backfill", "--runs", str(tmp_path / "runs"), "--model", "openai/fake",
                                "--base-url", srv.base_url, "--max-tokens", "32", "--workers", "2"])
        assert r.exit_code == 0, r.output
        counts = srv.call_counts()
    assert len(counts) == 8 and set(counts.values()) == {1} and "8 calls made" in r.output


def test_run_workers_need_the_prefect_engine(tmp_path):
    r = runner.invoke(app, ["run", "--engine", "luigi", "--workers", "2", "--model", "gpt-4o", "--base-url",
                            "http://127.0.0.1:9/v1", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "use --engine prefect" in r.output and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_workers_from_a_real_command_line(tmp_path):
    """``python -m ctxbench.cli evaluate --workers 3`` in a process of its own (Dask spawns the workers from it):
    one summary, every call made once."""
    repo = REPO
    build = make_build(tmp_path / "b", sizes=(10, 10, 10, 10), questions=2)
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with FakeOpenAIServer() as srv:
        p = subprocess.run([sys.executable, "-m", "ctxbench.cli", "evaluate", "--build", str(build), "--model",
                            "openai/fake", "--base-url", srv.base_url, "--max-tokens", "32", "--workers", "3"],
                           env=env, capture_output=True, text=True, timeout=300)
        counts = srv.call_counts()
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("instances selected") == 1 and "8 calls made" in p.stdout
    assert len(counts) == 8 and set(counts.values()) == {1}


def test_the_flow_exports_its_temporary_api_to_the_workers_it_starts(monkeypatch):
    """A flow run without a server talks to Prefect's temporary server; its URL goes into the environment before
    a local Dask cluster starts, so the workers report there instead of starting a temporary server each."""
    import os

    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.flows import share_prefect_api

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    srv = SubprocessASGIServer()  # the singleton a flow run without a server starts
    monkeypatch.setattr(srv, "running", True)
    monkeypatch.setattr(srv, "port", 8765)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert share_prefect_api() == "http://127.0.0.1:8765/api"
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:8765/api"
    monkeypatch.setenv("PREFECT_API_URL", "http://prefect:4200/api")  # a real server: kept as it is
    assert share_prefect_api() == "http://prefect:4200/api"


# ------------------------------------------------------------------------------------------------ processes

KILLED_LINES = ("still alive after", "was killed by", "Timed out", "killed")


def dask_worker_procs(root: psutil.Process) -> list[psutil.Process]:
    """The Dask worker processes under ``root`` (multiprocessing's spawned children; not its resource tracker)."""
    out = []
    for c in root.children(recursive=True):
        try:
            cmd = " ".join(c.cmdline())
        except psutil.Error:
            continue
        if "spawn_main" in cmd and "resource_tracker" not in cmd:
            out.append(c)
    return out


def run_watched(cmd: list[str], env: dict, during: Callable[[psutil.Process], None] | None = None,
                timeout: float = 600) -> tuple[int, str, list[psutil.Process]]:
    """Run ``cmd``; while it runs, note every process it starts (and call ``during(process)`` every 0.1 s).
    Returns its exit status, its output (stdout and stderr), and the processes it started."""
    p = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(p.stdout), daemon=True)
    reader.start()
    seen: dict[int, psutil.Process] = {}
    root = psutil.Process(p.pid)
    end = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < end:
        try:
            for c in root.children(recursive=True):
                seen.setdefault(c.pid, c)
            if during:
                during(root)
        except psutil.Error:
            pass
        time.sleep(0.1)
    if p.poll() is None:
        p.kill()
    p.wait()
    reader.join(10)
    return p.returncode, "".join(out), list(seen.values())


def assert_all_ended(procs: list[psutil.Process]) -> None:
    """Every process the command started has ended (the resource tracker ends when its pipe closes: a few seconds
    are allowed for that, never a kill)."""
    _, alive = psutil.wait_procs(procs, timeout=15)
    assert not alive, [" ".join(a.cmdline()) for a in alive]


def cli_env(tmp_path: Path, **extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "CTXBENCH_HOME": str(tmp_path / "home"), **extra}


@pytest.mark.slow
def test_evaluate_workers_command_ends_with_its_dask_processes(tmp_path):
    """``ctxbench evaluate --workers 2`` on a local cluster: the process exits by itself and leaves no process of
    its own behind (the Dask worker and nanny ended, none killed)."""
    build = make_build(tmp_path / "b", sizes=(10, 10, 10, 10), questions=2)
    with FakeOpenAIServer(latency_s=0.05) as srv:
        rc, out, procs = run_watched([sys.executable, "-m", "ctxbench.cli", "evaluate", "--build", str(build),
                                      "--model", "openai/fake", "--base-url", srv.base_url, "--max-tokens", "32",
                                      "--workers", "2"], cli_env(tmp_path))
        counts = srv.call_counts()
    assert rc == 0, out
    assert "8 calls made" in out and len(counts) == 8 and set(counts.values()) == {1}
    assert procs  # it started its Dask worker (and multiprocessing's resource tracker)
    assert not [ln for ln in out.splitlines() if any(k in ln for k in KILLED_LINES)], out
    assert_all_ended(procs)


FLOW_SCRIPT = """
import json, sys
from ctxbench.run.evaluate import EvalConfig
from pipelines.flows import evaluate_flow
out = evaluate_flow(sys.argv[1], EvalConfig(model="openai/fake", base_url=sys.argv[2], max_tokens=32), workers=2)
print("RESULT", json.dumps({k: out[k] for k in ("status", "calls")}), len(out["workers"]))
"""


@pytest.mark.slow
def test_evaluate_flow_on_two_dask_worker_processes_ends_without_killing_them(tmp_path):
    """The ``evaluate`` flow with ``workers: 2`` on a local Dask cluster of 2 worker processes
    (``CTXBENCH_DASK_WORKERS=2``, prefect-dask's DaskTaskRunner): at its end each worker process stops by itself
    within the nanny's close timeout (distributed logs "Worker process still alive after 4.0 seconds, killing"
    otherwise: it did before :mod:`ctxbench.run.daskexit`), and the process leaves none behind."""
    build = make_build(tmp_path / "b", sizes=(10, 10, 10, 10), questions=2)
    env = cli_env(tmp_path, CTXBENCH_DASK_WORKERS="2", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("PREFECT_API_URL", None)  # the flow's own temporary server, whose URL the workers are given
    with FakeOpenAIServer(latency_s=0.05) as srv:
        rc, out, procs = run_watched([sys.executable, "-c", FLOW_SCRIPT, str(build), srv.base_url], env)
        counts = srv.call_counts()
    assert rc == 0, out
    assert 'RESULT {"status": "complete", "calls": 8} 2' in out, out
    assert len(counts) == 8 and set(counts.values()) == {1}
    assert "Lost all workers" in out  # the cluster's close was logged: the lines below would be among them
    assert not [ln for ln in out.splitlines() if any(k in ln for k in KILLED_LINES)], out
    assert_all_ended(procs)


def killed_worker_run(tmp_path: Path, srv: FakeOpenAIServer, after: int = 3) -> dict:
    """``ctxbench evaluate --workers 2`` (2 calls in flight each) on a build of 6 equal contexts of 4 questions;
    once ``after`` requests of the Dask worker's shard have reached ``srv``, its process is killed (SIGKILL); then
    a rerun. Returns both runs' exit status and output, the instance ids the killed worker had in flight at the kill
    (claimed in the cache as the process died, and sent to the server), and the server's requests per instance id
    over both runs."""
    build = make_build(tmp_path / "b", sizes=(10,) * 6, questions=4)
    args = [sys.executable, "-m", "ctxbench.cli", "evaluate", "--build", str(build), "--model", "openai/fake",
            "--base-url", srv.base_url, "--max-tokens", "32", "--concurrency", "2", "--workers", "2"]
    cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, max_tokens=32, concurrency=2)
    plan = plan_requests(build, cfg, ResponseCache())
    shards = plan_shards(plan, 2)  # the command's shards: [0] this process's, [1] the Dask worker's
    theirs = {t["instance_id"] for t in plan.todo if t["_ctx"] in set(shards[1])}
    instance_of_key = {t["request_key"]: t["instance_id"] for t in plan.todo}

    def instance(call: tuple) -> str:  # "Which shelf holds entry {q} of ledger {c}?" -> c{c}q{q}
        q, c = re.search(r"entry (\d+) of ledger (\d+)\?", call[0]).groups()
        return f"c{c}q{q}"

    killed: dict = {}

    def during(root: psutil.Process) -> None:
        if killed or sum(n for c, n in srv.call_counts().items() if instance(c) in theirs) < after:
            return
        pids = {w.pid for w in dask_worker_procs(root)}
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        claims = ResponseCache().claims()
        time.sleep(0.3)  # a request written just before the kill reaches the server (the restart takes seconds)
        sent = {instance(c) for c in srv.call_counts()}
        killed["pids"] = pids
        # a key is claimed before its call waits for a slot (up to twice --concurrency ahead): in flight are the
        # keys it had claimed and sent, unanswered (storing an answer drops its claim)
        killed["in_flight"] = {instance_of_key[k] for k, (owner, _) in claims.items()
                               if int(owner.split(":")[1]) in pids} & sent

    env = cli_env(tmp_path)
    rc1, out1, procs = run_watched(args, env, during)
    rc2, out2, _ = run_watched(args, env)
    assert_all_ended(procs)
    return {"rc": (rc1, rc2), "out": (out1, out2), "killed": killed,
            "requests": Counter(instance(c) for c in srv.call_counts().elements()), "theirs": theirs}


@pytest.mark.slow
def test_a_killed_dask_worker_repeats_only_the_calls_it_had_in_flight(tmp_path):
    """A Dask worker process of ``evaluate --workers 2`` killed (SIGKILL) mid-run: Dask runs its shard again on
    the worker process the nanny restarts, which takes the dead process's claims over and makes only the calls
    whose answers never reached the cache. The calls made twice are exactly those the killed worker had claimed
    and sent at the kill (in flight: their answers died with it, no client can have them), at most its
    ``--concurrency``; the keys it had claimed ahead of their calls are made once, by the restarted worker;
    every other call is made once over the run and a rerun, and the rerun makes none."""
    with FakeOpenAIServer(latency_s=0.5) as srv:
        r = killed_worker_run(tmp_path, srv)
    out1, out2 = r["out"]
    assert r["killed"]["pids"], out1  # the worker process was found and killed mid-run
    if r["rc"][0] != 0:  # the shard failed instead of being run again: one clear line, no traceback
        assert r["rc"][0] == 1 and "Traceback" not in out1, out1
    else:
        assert "24 instances selected" in out1 and "0 unfinished" in out1, out1
    assert r["rc"][1] == 0 and "0 unfinished" in out2, out2
    if r["rc"][0] == 0:
        assert "0 calls made" in out2, out2
    twice = {i for i, n in r["requests"].items() if n > 1}
    assert set(r["requests"]) == {f"c{c}q{q}" for c in range(6) for q in range(4)}  # every call made
    assert max(r["requests"].values()) <= 2
    assert twice == r["killed"]["in_flight"] and twice <= r["theirs"] and len(twice) <= 2, r
