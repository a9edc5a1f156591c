"""Crash safety of a whole incremental run (``ctxbench run --engine luigi`` into a versioned run root): SIGKILL at
seeded random moments — while building, while calling the model, while writing scores or the report — then a
restart. After every kill: ``latest`` is absent or points at a complete build, every visible Parquet file is
complete, no stored response is lost; in the end no completed call was repeated (counted at the fake server) and
the run equals an uninterrupted one.

Seed: ``CTXBENCH_CRASH_SEED`` (default 0), printed in every failure message.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fakeserver import FakeOpenAIServer, message_text
from test_crash_safety import cache_keys, kill_group, wait_for

REPO = Path(__file__).resolve().parent.parent
DELAY_S = 0.08
CONCURRENCY = 8  # evaluate's default

RUN = "import sys; from ctxbench.cli import app; sys.argv[0] = 'ctxbench'; app()"


def slow_answer(body: dict) -> str:
    time.sleep(DELAY_S)
    return "Answer: 42"


def prompt_of(body: dict) -> str | None:
    """The request's user message (unique per instance: the context differs by tier), hashed; None for a body cut
    short by the kill."""
    if not body.get("messages"):
        return None
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return hashlib.sha256(user.encode()).hexdigest()


def check_root(root: Path, ctx: str) -> dict:
    """After a kill: ``latest`` absent or pointing at a complete build; visible Parquet files complete."""
    state = {"latest": None, "responses": {}}
    if not root.exists():
        return state
    link = root / "latest"
    if link.is_symlink():
        b = link.resolve()
        assert (b / "manifest.json").exists(), f"{ctx}: latest points at an incomplete build {b}"
        state["latest"] = b
    for p in root.rglob("*.parquet"):
        try:
            t = pq.read_table(p)
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{ctx}: {p} is visible but not a complete Parquet file: {e!r}")
        assert pq.ParquetFile(p).metadata.num_rows == t.num_rows
        if p.name == "responses.parquet":
            keys = t.column("request_key").to_pylist()
            assert len(keys) == len(set(keys)), f"{ctx}: duplicate request keys"
            state["responses"] = {r["request_key"]: r for r in t.drop_columns(["latency_s"]).to_pylist()}
    return state


@pytest.mark.slow
def test_a_killed_incremental_run_restarts_without_loss_or_repeated_calls(spider_db, tmp_path):
    seed = int(os.environ.get("CTXBENCH_CRASH_SEED", "0"))
    rng = random.Random(seed)
    db = str(spider_db("wine_1"))
    root = tmp_path / "runs"
    home = tmp_path / "home"
    env = {**os.environ, "CTXBENCH_HOME": str(home), "COLUMNS": "200"}

    def launch(srv, tag: str, out: Path = root) -> subprocess.Popen:
        f = open(tmp_path / f"run-{tag}.log", "wb")
        try:
            return subprocess.Popen([sys.executable, "-c", RUN, "run", "--engine", "luigi", "--db", db, "--lengths",
                                     "1024,2048", "--per-length", "6", "--model", "openai/fake", "--base-url",
                                     srv.base_url, "--out", str(out)], cwd=REPO, env=env, stdout=f,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            f.close()

    # anchors: after start (building), after the first request (calling), at the first temporary scores file or
    # latest link (writing); each with a seeded random delay
    def tmp_files() -> set[str]:
        return {str(n) for n in root.rglob(".*") if n.name.startswith((".scores.parquet.tmp", ".latest.tmp"))}

    kills = [("start", rng.uniform(1.0, 6.0)), ("first", rng.uniform(0.0, 0.4)), ("first", rng.uniform(0.1, 0.6)),
             ("scores", 0.0)]
    runs, prev = [], {}
    with FakeOpenAIServer(answer_fn=slow_answer) as srv:
        for k, (anchor, after) in enumerate(kills):
            ctx = f"[seed {seed}, kill {k} at {anchor}+{after:.3f}s]"
            cached_at_start = cache_keys(home)
            i0 = srv.count
            old_tmp = tmp_files() if root.exists() else set()
            proc = launch(srv, str(k))
            if anchor == "first":
                fired = wait_for(lambda: srv.count > i0, proc, 120)
            elif anchor == "scores":
                fired = wait_for(lambda: bool(tmp_files() - old_tmp), proc, 120, step=0.0005)
            else:
                fired = True
            time.sleep(after)
            log = (tmp_path / f"run-{k}.log").read_text(errors="replace")
            if not fired or proc.poll() is not None:  # the run finished before this moment came: nothing to kill
                runs.append((i0, srv.count, cached_at_start, False))
                assert proc.wait(timeout=120) == 0, f"{ctx}: {log}"
                continue
            kill_group(proc)
            settle = time.monotonic() + 10
            while srv.in_flight and time.monotonic() < settle:
                time.sleep(0.01)
            runs.append((i0, srv.count, cached_at_start, True))
            state = check_root(root, ctx)
            assert set(prev) <= set(state["responses"]), f"{ctx}: stored responses lost"
            assert set(state["responses"]) <= cache_keys(home), f"{ctx}: stored rows missing from the cache"
            prev = state["responses"]

        i0 = srv.count
        cached_at_start = cache_keys(home)
        proc = launch(srv, "final")
        assert proc.wait(timeout=300) == 0, (tmp_path / "run-final.log").read_text(errors="replace")
        runs.append((i0, srv.count, cached_at_start, False))
        requests = [prompt_of(b) for b in srv.requests]

        # an uninterrupted run of the same configuration elsewhere (its own cache) as the reference
        env["CTXBENCH_HOME"] = str(tmp_path / "home-ref")
        ref_root = tmp_path / "ref"
        proc = launch(srv, "ref", ref_root)
        assert proc.wait(timeout=300) == 0, (tmp_path / "run-ref.log").read_text(errors="replace")

    where = f"[seed {seed}, kills {[(a, round(t, 3)) for a, t in kills]}]"
    final = check_root(root, where)
    ref = check_root(ref_root, where)
    b, rb = final["latest"], ref["latest"]
    assert b is not None and b.name == rb.name, where
    n = pq.read_table(b / "responses.parquet").num_rows
    assert n == 12 and set(final["responses"]) == set(ref["responses"]), where
    assert all(r["status"] == "ok" for r in final["responses"].values())
    for t in ("instances", "quarantine"):
        assert pq.read_table(b / f"{t}.parquet").equals(pq.read_table(rb / f"{t}.parquet")), (where, t)
    sa, sb = (pq.read_table(d / "scores.parquet").replace_schema_metadata(None).sort_by("request_key")
              for d in (b, rb))
    assert sa.equals(sb), where
    # the report is current (its count of answers taken from the cache differs from the reference, rightly)
    from ctxbench.run.incremental import report_is_current

    assert report_is_current(b), where
    # no completed call repeated: no run asked for a question whose answer the cache held when it started
    from ctxbench.models.prompts import render_messages

    prompt = {r["instance_id"]: hashlib.sha256(render_messages(r["context"], r["question"], "cot", "openai/fake")[1]
                                               ["content"].encode()).hexdigest()
              for r in pq.read_table(b / "instances.parquet").to_pylist()}
    q_of_key = {k: prompt[r["instance_id"]] for k, r in final["responses"].items()}
    for j, (a, e, cached_before, killed) in enumerate(runs):
        asked = [q for q in requests[a:e] if q is not None]
        done = {q_of_key[k] for k in cached_before if k in q_of_key}
        assert not set(asked) & done, f"{where}: run {j} repeated completed calls {sorted(set(asked) & done)}"
        assert len(asked) == len(set(asked)), f"{where}: run {j} asked one question twice"
    per_q = Counter(q for q in requests[: runs[-1][1]] if q is not None)
    assert len(per_q) == 12 and sum(per_q.values()) - 12 <= CONCURRENCY * sum(r[3] for r in runs), (where, per_q)
    print(f"{where}: {sum(per_q.values())} requests for 12 calls; killed runs {sum(r[3] for r in runs)}")
