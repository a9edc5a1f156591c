"""Issue 36, group commit: an evaluation's claims and stores are committed by one writer thread, every operation
waiting at that moment in one transaction (ctxbench.models.cache.GroupCommit). The guarantees of one transaction
per operation still hold: a key is claimed (committed) before its call is sent, an answer is stored (committed)
before it is counted, two processes sharing the cache make each call once, and a killed process loses no counted
answer and repeats no answered call."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxbench.models.cache import GroupCommit, ResponseCache
from fakeserver import FakeOpenAIServer, call_id

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

# one process running CallRunner.run on N requests against a server, with the cache at a path; each counted
# outcome's key is written to a file (flushed) as the run hands it over
WORKER = r"""
import sys
from ctxbench.models.cache import ResponseCache
from ctxbench.models.runner import CallRunner, Request

base, cache_path, n, counted_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
reqs = [Request(f"key{i:03d}", [{"role": "user", "content": f"question {i}"}], {"temperature": 0.0, "seed": 0}, 16)
        for i in range(n)]
with open(counted_path, "a", encoding="utf-8") as f:
    def on_outcome(o):
        if o.source == "call" and o.result.status == "ok":
            f.write(o.request.key + "\n")
            f.flush()
    runner = CallRunner("openai/fake", base, cache=ResponseCache(cache_path), concurrency=4,
                        truncation=None, pause_after=1000)
    runner.run(reqs, on_outcome)
"""


def _question_keys(srv: FakeOpenAIServer) -> list[str]:
    """The request key of every call the server received (the worker's keys are key000... for question 0...)."""
    return [f"key{int(q.split()[-1]):03d}" for q, _ in (call_id(b) for b in srv.requests) if q.startswith("question")]


def _stored(path: Path) -> set[str]:
    with sqlite3.connect(path) as con:
        return {k for (k,) in con.execute("SELECT key FROM responses")}


def _worker(srv: FakeOpenAIServer, cache: Path, n: int, counted: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", WORKER, srv.base_url, str(cache), str(n), str(counted)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def test_nothing_is_handed_over_before_its_transaction_commits_and_waiting_operations_share_one(tmp_path):
    """While another connection holds the cache's write lock, no claim or store resolves (its caller would send or
    count it uncommitted); once the lock goes, the operations queued meanwhile commit in one transaction and
    every other connection sees them."""
    path = tmp_path / "cache.sqlite"
    cache = ResponseCache(path)
    other = ResponseCache(path)
    blocker = sqlite3.connect(path, timeout=60)

    async def go() -> tuple[list, int, int]:
        commits = GroupCommit(cache)
        blocker.execute("BEGIN IMMEDIATE")  # the write lock: the writer's first transaction waits for it
        claims = [asyncio.ensure_future(commits.claim(f"k{i}", "me", 60.0)) for i in range(30)]
        puts = [asyncio.ensure_future(commits.put(f"a{i}", "m", {"status": "ok", "response": str(i)}))
                for i in range(20)]
        for _ in range(50):  # the writer thread runs meanwhile, blocked on the lock
            await asyncio.sleep(0.01)
        resolved_while_locked = sum(f.done() for f in claims + puts)
        seen_while_locked = len(other.claims()) + len(other)
        blocker.execute("COMMIT")
        got = await asyncio.gather(*claims, *puts)
        commits.close()
        assert resolved_while_locked == 0 and seen_while_locked == 0
        return got, commits.transactions, commits.operations

    got, transactions, operations = asyncio.run(go())
    assert got == ["claimed"] * 30 + [None] * 20
    assert operations == 50 and transactions <= 2  # the first transaction, then all that queued behind it
    assert set(other.claims()) == {f"k{i}" for i in range(30)}
    assert {k: other.get(k) for k in ("a0", "a19")} == {"a0": {"status": "ok", "response": "0"},
                                                         "a19": {"status": "ok", "response": "19"}}


def test_a_claim_of_a_key_someone_holds_or_answered_is_refused_in_a_group(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    assert cache.claim("held", "them", 60.0) == "claimed"
    cache.put("done", "m", {"status": "ok", "response": "x"})

    async def go() -> list:
        commits = GroupCommit(cache)
        try:
            return await asyncio.gather(commits.claim("held", "me", 60.0), commits.claim("done", "me", 60.0),
                                        commits.claim("free", "me", 60.0), commits.claim("free", "other", 60.0),
                                        commits.renew("me", 60.0), commits.release("free", "me"),
                                        commits.claim("free", "other", 60.0))
        finally:
            commits.close()

    assert asyncio.run(go()) == ["taken", "cached", "claimed", "taken", 1, None, "claimed"]
    assert {k: o for k, (o, _) in cache.claims().items()} == {"held": "them", "free": "other"}


def test_a_failed_group_fails_every_operation_in_it_and_commits_none(tmp_path):
    """A store that cannot be written (here a payload that is not JSON) fails its whole group: each operation in it
    raises, none is committed; the group before it stands."""
    cache = ResponseCache(tmp_path / "cache.sqlite")

    async def go() -> list:
        commits = GroupCommit(cache)
        blocker = sqlite3.connect(cache.path, timeout=60)
        blocker.execute("BEGIN IMMEDIATE")  # the writer waits in its first group (k0) while the next three queue
        first = asyncio.ensure_future(commits.claim("k0", "me", 60.0))
        await asyncio.sleep(0.2)
        ops = [asyncio.ensure_future(commits.claim("k1", "me", 60.0)),
               asyncio.ensure_future(commits.put("k2", "m", {"status": "ok", "response": object()})),
               asyncio.ensure_future(commits.put("k3", "m", {"status": "ok", "response": "x"}))]
        await asyncio.sleep(0.2)
        blocker.execute("COMMIT")
        out = [await first] + list(await asyncio.gather(*ops, return_exceptions=True))
        commits.close()
        return out

    out = asyncio.run(go())
    assert out[0] == "claimed" and all(isinstance(r, TypeError) for r in out[1:]), out
    assert set(cache.claims()) == {"k0"} and cache.get("k2") is None and cache.get("k3") is None


def test_two_processes_sharing_one_cache_make_each_call_once(tmp_path):
    path = tmp_path / "cache.sqlite"
    ResponseCache(path).close()
    with FakeOpenAIServer(latency_s=0.02) as srv:
        procs = [_worker(srv, path, 120, tmp_path / f"counted{i}.txt") for i in range(2)]
        for p in procs:
            out, _ = p.communicate(timeout=240)
            assert p.returncode == 0, out.decode(errors="replace")
        calls = _question_keys(srv)
    assert sorted(calls) == [f"key{i:03d}" for i in range(120)]  # each call once, none left out
    counted = [k for i in range(2) for k in (tmp_path / f"counted{i}.txt").read_text().split()]
    assert sorted(counted) == sorted(calls)  # each answer counted by the process that called it
    assert _stored(path) == set(calls)
    assert ResponseCache(path).claims() == {}


@pytest.mark.parametrize("kill_after", [0.15, 0.4, 0.9])
def test_a_killed_process_loses_no_counted_answer_and_repeats_no_answered_call(tmp_path, kill_after):
    path = tmp_path / "cache.sqlite"
    ResponseCache(path).close()
    counted = tmp_path / "counted.txt"
    with FakeOpenAIServer(latency_s=0.05) as srv:
        p = _worker(srv, path, 200, counted)
        deadline = time.monotonic() + 60
        while srv.count == 0 and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(kill_after)
        assert p.poll() is None, "the run ended before the kill"
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        while srv.in_flight:  # answers still being written into the dead process's sockets
            time.sleep(0.01)
        first = _question_keys(srv)
        stored = _stored(path)
        claimed = set(ResponseCache(path).claims())
        was_counted = set(counted.read_text().split()) if counted.exists() else set()
        # every answer the killed run counted had been committed to the cache before
        assert was_counted <= stored
        # what it sent was claimed first: each call it made is stored or still claimed (in flight at the kill)
        assert set(first) <= stored | claimed
        srv.reset_counts()
        rerun = _worker(srv, path, 200, tmp_path / "counted_rerun.txt")
        out, _ = rerun.communicate(timeout=240)
        assert rerun.returncode == 0, out.decode(errors="replace")
        again = _question_keys(srv)
    assert not set(again) & stored  # no answered call is made again
    assert set(again) & set(first) <= claimed  # only the calls whose answers died with the process
    assert _stored(path) == {f"key{i:03d}" for i in range(200)}
    assert ResponseCache(path).claims() == {}


def test_a_cancelled_run_leaves_no_claim_behind(tmp_path):
    """A run cancelled (a Ctrl-C, a Prefect task cancelled, a sibling's error) while one call is in flight and the
    next keys are claimed ahead of their calls releases every claim it holds: another runner in the same live
    process (a paused run's resume, the next REPL step, a service worker) would otherwise find them ``taken`` and
    wait for their lease to lapse (the owner's process is alive, so its claims are not taken over at once)."""
    from ctxbench.models.runner import CallRunner, Request  # lazy: the runner imports the gateway

    cache = ResponseCache(tmp_path / "cache.sqlite")
    reqs = [Request(f"key{i:03d}", [{"role": "user", "content": f"question {i}"}], {"temperature": 0.0}, 16)
            for i in range(6)]
    with FakeOpenAIServer(latency_s=3.0) as srv:
        runner = CallRunner("openai/fake", srv.base_url, cache=cache, concurrency=1, truncation=None,
                            pause_after=1000)

        async def go() -> dict:
            task = asyncio.ensure_future(runner.arun(reqs))
            while srv.in_flight == 0:  # the first call is at the server; the next key is claimed meanwhile
                await asyncio.sleep(0.01)
            for _ in range(20):
                await asyncio.sleep(0.01)
            held = {k for k, (o, _) in cache.claims().items() if o == runner.owner}
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return held

        held = asyncio.run(go())
        assert len(held) == 2  # the key in flight and the one claimed ahead of its call
        assert {k: o for k, (o, _) in cache.claims().items()} == {}
        other = CallRunner("openai/fake", srv.base_url, cache=cache, concurrency=1, truncation=None)
        assert all(other.claim(r.key) == "claimed" for r in reqs[:2])
