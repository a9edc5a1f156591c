"""The response cache and its call claims in PostgreSQL (issue 36): ``CTXBENCH_CACHE_URL=postgresql://...`` gives
the same cache protocol as SQLite, claims atomic across processes, and two ``ctxbench evaluate`` processes with
separate homes (two machines) sharing one PostgreSQL cache make no call twice; a rerun makes none. A real
PostgreSQL server (Debian's package) is started for the tests; they are skipped where it is not installed, and fail
under CI=true (``.ci/run`` installs it)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.core.storage import to_table, write_parquet
from ctxbench.models.cache import GroupCommit, ResponseCache
from ctxbench.models.cache_pg import shown_url
from fakeserver import FakeOpenAIServer
from pgserver import PgServer, pg_binaries

REPO = Path(__file__).resolve().parents[1]


def _absent(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why + " (required under CI=true: .ci/run installs postgresql)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def pg():
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _absent("psycopg is not installed (pip install -e '.[service]')")
    if pg_binaries() is None:
        _absent("PostgreSQL is not installed (apt-get install postgresql)")
    with PgServer() as server:
        yield server


@pytest.fixture
def pg_url(pg, monkeypatch, tmp_path):
    url = pg.database()
    monkeypatch.setenv("CTXBENCH_CACHE_URL", url)
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    return url


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_cache_protocol_is_the_same_in_both_databases(backend, request, tmp_path, monkeypatch):
    if backend == "postgresql":
        request.getfixturevalue("pg_url")
        c = ResponseCache()
        assert type(c).__name__ == "PgResponseCache" and not (tmp_path / "home").exists()  # nothing on disk
    else:
        monkeypatch.delenv("CTXBENCH_CACHE_URL", raising=False)
        c = ResponseCache(tmp_path / "r.sqlite")
    assert len(c) == 0 and c.get("k1") is None and bool(c)
    assert c.claim("k1", "w1", 60) == "claimed"
    assert c.claim("k1", "w2", 60) == "taken"
    assert c.claim("k1", "w1", 60) == "claimed"  # renewed by its owner
    assert c.renew("w1", 60) == 1 and set(c.claims()) == {"k1"}
    c.put("k1", "m", {"status": "ok", "response": "Answer: 4 – ünïcode"})
    assert c.claim("k1", "w2") == "cached" and c.claims() == {}
    assert c.get("k1") == {"status": "ok", "response": "Answer: 4 – ünïcode"}
    c.put("k1", "m", {"status": "ok", "response": "second"})  # the first answer stored wins
    assert c.get("k1")["response"] == "Answer: 4 – ünïcode"
    assert c.claim("k2", "w1", 0.0) == "claimed"
    time.sleep(0.01)
    assert c.claim("k2", "w2", 60) == "claimed"  # w1's lease lapsed
    c.release("k2", "w1")
    assert c.claims()["k2"][0] == "w2"  # only the owner's claim is released
    c.release("k2", "w2")
    assert c.claims() == {}
    keys = [f"x{i}" for i in range(1200)]
    for k in keys[:1100:100]:
        c.put(k, "m", {"status": "ok", "response": k})
    assert set(c.get_many(keys)) == set(keys[:1100:100]) and len(c) == 12
    assert not c.drop("k1", {"status": "ok", "response": "other"}) and c.drop("k1", c.get("k1"))
    assert c.get("k1") is None and len(c) == 11
    c.close()



@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_group_commits_answer_as_single_operations_and_two_writers_never_deadlock(backend, request, tmp_path,
                                                                                   monkeypatch):
    """GroupCommit (an evaluation's writer thread) on either database: the answers of one transaction per
    operation; two writers committing groups over the same keys in opposite orders (PostgreSQL: each key's
    advisory lock) both finish, and each key is claimed by exactly one of them."""
    if backend == "postgresql":
        request.getfixturevalue("pg_url")
        make = ResponseCache
    else:
        monkeypatch.delenv("CTXBENCH_CACHE_URL", raising=False)
        make = lambda: ResponseCache(tmp_path / "r.sqlite")  # noqa: E731
    c = make()
    assert c.claim("held", "them", 60) == "claimed"
    c.put("done", "m", {"status": "ok", "response": "x"})

    async def one_group() -> list:
        g = GroupCommit(c)
        try:
            return await asyncio.gather(g.claim("held", "me", 60), g.claim("done", "me", 60),
                                        g.claim("free", "me", 60), g.claim("free", "other", 60),
                                        g.renew("me", 60), g.put("free", "m", {"status": "ok", "response": "y"}),
                                        g.claim("free", "other", 60))
        finally:
            g.close()

    assert asyncio.run(one_group()) == ["taken", "cached", "claimed", "taken", 1, None, "cached"]
    assert set(c.claims()) == {"held"} and c.get("free") == {"status": "ok", "response": "y"}

    keys = [f"g{i}" for i in range(200)]
    won: dict[str, list[str]] = {}

    def writer(owner: str, order: list[str]) -> None:
        async def go() -> list:
            g = GroupCommit(make())
            try:
                return await asyncio.gather(*(g.claim(k, owner, 60) for k in order))
            finally:
                g.close()
        won[owner] = [k for k, r in zip(order, asyncio.run(go())) if r == "claimed"]

    threads = [threading.Thread(target=writer, args=("w1", keys)),
               threading.Thread(target=writer, args=("w2", keys[::-1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert sorted(won["w1"] + won["w2"]) == sorted(keys)  # each key claimed once
    c.close()

CLAIMER = """
import sys
from ctxbench.models.cache import ResponseCache
c = ResponseCache()
won = [k for k in (f"key{i}" for i in range(int(sys.argv[2]))) if c.claim(k, sys.argv[1], 60) == "claimed"]
print(",".join(won))
"""


def test_claims_are_atomic_across_processes(pg_url, tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, f"w{i}", "150"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    won = [set(filter(None, o.strip().split(","))) for o, _ in outs]
    assert sum(len(w) for w in won) == 150 and set().union(*won) == {f"key{i}" for i in range(150)}
    owners = {k: o for k, (o, _) in ResponseCache().claims().items()}
    assert all(owners[k] == f"w{i}" for i, w in enumerate(won) for k in w)  # the winner holds it


def make_build(d: Path, n: int = 24) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"instance_id": f"i{i:03d}", "benchmark": "holobench", "source_id": "pg", "question": f"What is item {i}?",
             "gold": json.dumps([[i]]), "context": f"Item {i} has the value {i}. " * 5, "tokenizer": "cl100k_base",
             "target_tokens": 128, "context_tokens": 60, "context_format": "full_text", "query_types": "[]",
             "evidence_spans": "[]", "build_hash": "pgbuild"} for i in range(n)]
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "pgbuild", "track": "holobench"}), encoding="utf-8")
    return d


def test_two_evaluate_processes_with_separate_homes_share_one_postgresql_cache(pg_url, tmp_path):
    build = make_build(tmp_path / "b0")
    with FakeOpenAIServer(latency_s=0.05) as srv:
        procs = []
        for m in ("m1", "m2"):  # two machines: their own home, their own copy of the build
            b = tmp_path / m / "build"
            shutil.copytree(build, b)
            env = {**os.environ, "CTXBENCH_HOME": str(tmp_path / m / "home"), "CTXBENCH_CACHE_URL": pg_url,
                   "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
            procs.append(subprocess.Popen([sys.executable, "-m", "ctxbench.cli", "evaluate", "--build", str(b),
                                           "--model", "openai/fake", "--base-url", srv.base_url, "--max-tokens",
                                           "32", "--concurrency", "4"], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=300)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        counts = srv.call_counts()
        assert len(counts) == 24 and set(counts.values()) == {1}  # every call made once, by one of them
        for m in ("m1", "m2"):  # each machine's build holds every answer
            assert pq.read_table(tmp_path / m / "build" / "responses.parquet").num_rows == 24
        assert not (tmp_path / "m1" / "home" / "cache" / "responses.sqlite").exists()
        # a rerun on a third machine: no call, every answer from the shared cache
        srv.reset_counts()
        r = CliRunner(env={"CTXBENCH_HOME": str(tmp_path / "m3" / "home")}).invoke(
            app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url", srv.base_url,
                  "--max-tokens", "32"])
        assert r.exit_code == 0, r.output
        assert srv.count == 0 and "0 calls made, 24 from cache" in r.output


@pytest.mark.parametrize("url,says", [
    ("mysql://root@127.0.0.1/x", "give a PostgreSQL URL"),
    ("postgresql://ctxbench:s3cret@127.0.0.1:9/none", "cannot connect to the PostgreSQL cache"),
])
def test_a_bad_cache_url_is_one_line_naming_it(tmp_path, monkeypatch, url, says):
    pytest.importorskip("psycopg")
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CTXBENCH_CACHE_URL", url)
    build = make_build(tmp_path / "b", n=2)
    r = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                                 "http://127.0.0.1:9/v1"])
    assert r.exit_code == 2 and says in r.output and "CTXBENCH_CACHE_URL" in r.output
    assert "s3cret" not in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("url,shown", [
    ("postgresql://bob@127.0.0.1:1/db?password=s3cret",
     "postgresql://[redacted]@127.0.0.1:1/db?password=[redacted]"),
    ("postgresql://127.0.0.1:1/db?user=bob&password=s3cret", "postgresql://127.0.0.1:1/db?user=bob&password=[redacted]"),
    ("postgresql://bob:s3cret@127.0.0.1:1/db?sslpassword=s3cret&sslmode=require",
     "postgresql://[redacted]@127.0.0.1:1/db?sslpassword=[redacted]&sslmode=require"),
    ("host=db user=bob password=s3cret", "host=db user=bob password=[redacted]"),
    ("host=db password = 's3cret with space' dbname=x", "host=db password = [redacted] dbname=x"),
])
def test_a_cache_url_is_shown_without_its_password_in_every_form(tmp_path, monkeypatch, url, shown):
    assert shown_url(url) == shown
    pytest.importorskip("psycopg")
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CTXBENCH_CACHE_URL", url)
    with pytest.raises(InputError) as e:  # the Python API's message (no CLI line redaction on the way)
        ResponseCache()
    assert "s3cret" not in str(e.value) and shown in str(e.value)


def test_a_group_that_deadlocks_with_another_writer_is_retried_not_failed(pg_url):
    """Row locks can close a cycle that the advisory locks of a group's keys do not order: a group that renews its
    owner's claims (their rows locked) and then takes over a lapsed claim of another owner, while that owner renews
    (its rows locked) and takes over a lapsed claim of the first. PostgreSQL aborts one transaction; a group that
    was aborted committed nothing, so it is run again instead of failing every operation in it (which would end
    the evaluation)."""
    import psycopg  # lazy: an optional extra, checked by the pg fixture

    c = ResponseCache()
    lapsed = time.time() - 10
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("INSERT INTO claims VALUES ('ka', 'A', %s), ('kb', 'B', %s)", (lapsed, lapsed))
    a = psycopg.connect(pg_url)  # owner A's connection, in a transaction from its first statement
    a.execute("UPDATE claims SET expires_at = expires_at WHERE owner = 'A'")  # A renews: ka's row locked
    out: dict[str, object] = {}

    def group_of_b() -> None:
        async def go() -> list:
            g = GroupCommit(c)
            try:  # B renews (kb's row locked), then takes over A's lapsed ka: waits for A's row lock
                return await asyncio.gather(g.renew("B", 60), g.claim("ka", "B", 60), return_exceptions=True)
            finally:
                g.close()
        out["b"] = asyncio.run(go())

    t = threading.Thread(target=group_of_b)
    t.start()
    with psycopg.connect(pg_url, autocommit=True) as watch:
        while not watch.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()[0]:
            time.sleep(0.02)  # until B's group waits for ka's row
    a.execute("DELETE FROM claims WHERE key = 'kb' AND expires_at < %s", (time.time(),))  # A takes over kb: a cycle
    a.commit()
    t.join(timeout=60)
    a.close()
    assert not t.is_alive()
    assert out["b"] == [0, "claimed"], out  # kb was taken from B meanwhile: B renews none, then claims ka
    assert {k: o for k, (o, _) in c.claims().items()} == {"ka": "B"}
    c.close()
