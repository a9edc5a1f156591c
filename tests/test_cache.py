"""request_key (what determines a model's output, nothing else) and the persistent SQLite response cache."""

from __future__ import annotations

import re
import sqlite3
import threading

import pytest

from ctxbench.models.cache import ResponseCache, request_key

MSGS = [{"role": "system", "content": "You answer questions."}, {"role": "user", "content": "What is 2+2?"}]
SAMPLING = {"temperature": 0.0, "seed": 0}


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def base(**kw):
    args = {"model": "openai/fake", "messages": MSGS, "sampling": SAMPLING, "max_tokens": 256, "sample": 0}
    args.update(kw)
    return request_key(**args)


def test_key_is_sha256_hex_and_stable():
    k = base()
    assert re.fullmatch(r"[0-9a-f]{64}", k)
    assert base() == k
    assert base(messages=[dict(m) for m in MSGS], sampling=dict(SAMPLING)) == k  # equal values, new objects


@pytest.mark.parametrize("change", [
    {"model": "openai/fake2"},
    {"model": "fake"},
    {"messages": MSGS[:1] + [{"role": "user", "content": "What is 2+3?"}]},
    {"messages": MSGS[1:]},
    {"messages": [MSGS[0], {"role": "assistant", "content": "What is 2+2?"}]},
    {"messages": list(reversed(MSGS))},
    {"sampling": {"temperature": 0.7, "seed": 0}},
    {"sampling": {"temperature": 0.0, "seed": 1}},
    {"sampling": {"temperature": 0.0}},
    {"sampling": {"temperature": 0.0, "seed": 0, "top_p": 0.9}},
    {"max_tokens": 257},
    {"sample": 1},
])
def test_key_changes_with_every_input(change):
    assert base(**change) != base()


def test_all_keys_distinct():
    keys = {base(sample=k, max_tokens=m) for k in range(5) for m in (128, 256, 512)}
    assert len(keys) == 15


def test_key_does_not_depend_on_dict_key_order():
    msgs_reordered = [{"content": m["content"], "role": m["role"]} for m in MSGS]
    sampling_reordered = {"seed": 0, "temperature": 0.0}
    assert base(messages=msgs_reordered, sampling=sampling_reordered) == base()
    # nested content blocks (Anthropic cache_control) too
    blocks = [{"type": "text", "text": "doc", "cache_control": {"type": "ephemeral"}}]
    blocks_r = [{"cache_control": {"type": "ephemeral"}, "text": "doc", "type": "text"}]
    assert base(messages=[{"role": "user", "content": blocks}]) == \
        base(messages=[{"content": blocks_r, "role": "user"}])


def test_default_path_is_under_ctxbench_home(tmp_path):
    c = ResponseCache()
    try:
        assert c.path == tmp_path / "home" / "cache" / "responses.sqlite"
        assert c.path.exists()
    finally:
        c.close()


def test_put_get_and_persistence_across_instances(tmp_path):
    path = tmp_path / "c" / "responses.sqlite"
    c = ResponseCache(path)
    payload = {"status": "ok", "response": "Answer: 北京 4", "prompt_tokens": 12, "completion_tokens": 3,
               "latency_s": 0.5, "cost_usd": None, "error": None, "reasoning": None}
    c.put("k1", "openai/fake", payload)
    assert c.get("k1") == payload
    assert c.get("missing") is None
    c.close()

    c2 = ResponseCache(path)
    try:
        assert len(c2) == 1
        assert c2.get("k1") == payload
        assert c2.get_many(["k1", "nope"]) == {"k1": payload}
        # the first answer stored for a key stays
        c2.put("k1", "openai/fake", {**payload, "response": "other"})
        assert c2.get("k1")["response"] == "Answer: 北京 4"
    finally:
        c2.close()


def test_get_many_beyond_one_chunk(tmp_path):
    c = ResponseCache(tmp_path / "r.sqlite")
    try:
        for i in range(1203):
            c.put(f"k{i}", "m", {"i": i})
        got = c.get_many([f"k{i}" for i in range(0, 1300)])
        assert len(got) == 1203 and all(got[f"k{i}"] == {"i": i} for i in range(1203))
    finally:
        c.close()


def test_concurrent_puts_from_threads(tmp_path):
    path = tmp_path / "r.sqlite"
    shared = ResponseCache(path)
    errors = []

    def worker(t: int, cache: ResponseCache):
        try:
            for i in range(60):
                cache.put(f"t{t}-{i}", "m", {"t": t, "i": i})
                if i % 7 == 0:
                    assert cache.get(f"t{t}-{i}") == {"t": t, "i": i}
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    # eight threads on one object and four threads each with its own connection to the same file
    own = [ResponseCache(path) for _ in range(4)]
    threads = [threading.Thread(target=worker, args=(t, shared)) for t in range(8)]
    threads += [threading.Thread(target=worker, args=(8 + j, own[j])) for j in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors, errors
    for c in own:
        c.close()
    shared.close()

    fresh = ResponseCache(path)
    try:
        assert len(fresh) == 12 * 60
        got = fresh.get_many([f"t{t}-{i}" for t in range(12) for i in range(60)])
        assert all(got[f"t{t}-{i}"] == {"t": t, "i": i} for t in range(12) for i in range(60))
    finally:
        fresh.close()
    # and the file is a plain SQLite database anyone can read
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM responses").fetchone()[0] == 720
    con.close()


# -- many processes opening one cache at once (issue 16 item 3) -------------------------------------------------------

def test_opening_the_cache_while_another_connection_writes_waits_instead_of_failing(tmp_path):
    """SQLite refuses the switch to WAL at once ("database is locked", without waiting for the busy timeout) while
    another connection holds a write lock, as another worker's claim does: opening must wait for it."""
    path = tmp_path / "r.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE other (x)").connection.commit()  # a file not yet in WAL mode
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    threading.Timer(0.5, lambda: writer.execute("COMMIT")).start()
    c = ResponseCache(path, busy_timeout_s=30)
    try:
        c.put("k", "m", {"status": "ok"})
        assert c.get("k") == {"status": "ok"}
        assert c._con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        c.close()
        writer.close()


OPENER = r"""
import os, sys, time
go, path, me = sys.argv[1], sys.argv[2], sys.argv[3]
from ctxbench.models.cache import ResponseCache
while not os.path.exists(go):
    time.sleep(0.001)
c = ResponseCache(path)
for i in range(20):
    c.put(f"{me}-{i}", "m", {"status": "ok", "i": i})
    assert c.claim(f"shared-{i}", me, 30) in ("claimed", "taken")
print("ok", flush=True)
"""


@pytest.mark.parametrize("round_", range(3))
@pytest.mark.slow
def test_many_processes_open_one_new_cache_at_the_same_moment(tmp_path, round_):
    """Twelve processes (evaluate workers) wait for one signal, then open the same new cache file, store answers
    and claim keys: none fails with "database is locked" (issue 16: one start in three of the service benchmark
    crashed at PRAGMA journal_mode=WAL)."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    go, path = tmp_path / "go", tmp_path / "cache" / "responses.sqlite"
    path.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(go), str(path), f"w{i}"], env=env, cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(12)]
    time.sleep(2.0)  # every process has imported ctxbench and waits
    go.touch()
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 12, [o[-600:] for o in outs if "ok" not in o]
    c = ResponseCache(path)
    try:
        assert len(c) == 12 * 20
        assert len(c.claims()) == 20  # each shared key claimed by exactly one process
    finally:
        c.close()
