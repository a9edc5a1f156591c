"""Crash safety: an evaluation or a build killed with SIGKILL at various moments and restarted.

The promise under test: "killing an evaluation with SIGKILL at any moment and restarting it loses no stored response
and repeats no completed call; a killed build leaves no half-written Parquet file visible (write to a temporary
name, then rename)".

* Evaluation: a 40-instance toy build against a fake OpenAI-compatible server (answers delayed, so calls are in
  flight when the kill lands), run as a subprocess, killed several times, then run to completion. After every kill
  ``responses.parquet`` is absent or complete, keeps every row stored before and holds only cached answers; no run
  sends a request whose answer the response cache already held when it started; in the end every cached answer is
  stored, one ok row per instance.
* Build: ``ctxbench build holobench`` on Spider's wine_1, killed at fixed times and at the moment it writes its
  Parquet files; after every kill the visible Parquet files are complete and manifest.json (written last) is absent
  or valid and consistent; a final run completes, equals an uninterrupted build, and a rerun is a no-op.

A "completed" call is one whose answer reached the response cache: a call in flight at the kill (the server may have
answered it, the client died before storing it) is legitimately repeated, at most ``concurrency`` per kill.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.core.storage import parts_dir, pending_parts, read_table, schema, to_table, write_parquet
from fakeserver import FakeOpenAIServer, message_text

REPO = Path(__file__).resolve().parent.parent
N = 40
CONCURRENCY = 4
DELAY_S = 0.15
Q_RE = re.compile(r"Question: What is the code of item (Q\d\d)\?")
FACT_RE = re.compile(r"The code of item (Q\d\d) is (\d+)\.")

# litellm is imported by the gateway only to price a response (cost_usd); that import takes seconds and runs on the
# event loop at the first answer, so every run would stall there before caching anything. The fake model has no
# price: a stub price table keeps the runs short and the kills spread over calls, flushes and writes.
EVAL_SCRIPT = """
import dataclasses, json, sys, types
sys.modules['litellm'] = types.SimpleNamespace(model_cost={})
from ctxbench.run.evaluate import EvalConfig, evaluate_build
s = evaluate_build(sys.argv[1], EvalConfig(model='openai/fake', base_url=sys.argv[2], concurrency=4), flush_every=3)
print('SUMMARY ' + json.dumps(dataclasses.asdict(s)), flush=True)
"""

BUILD_SCRIPT = "import sys; from ctxbench.cli import app; sys.argv[0] = 'ctxbench'; app()"


# ---------------------------------------------------------------------------------------------------- helpers

def code(i: int) -> int:
    return 1000 + 37 * i


def make_toy_build(d: Path, n: int = N) -> Path:
    """A build of ``n`` instances, each with its own context and question (tests/test_evaluate.py's make_build
    indexes 10-element lists, so it cannot make more than 10)."""
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        facts = [f"The code of item Q{j:02d} is {code(j)}." for j in (i, (i + 1) % n, (i + 2) % n)]
        ctx = " ".join([f"This is record set number {i} of the inventory."] + facts[::-1 if i % 2 else 1])
        rows.append({
            "instance_id": f"inst-{i:02d}", "benchmark": "holobench", "source_id": "toy",
            "question": f"What is the code of item Q{i:02d}?", "question_id": f"q{i % 5}", "sql": None,
            "gold": json.dumps([[code(i)]]), "context": ctx, "tokenizer": "cl100k_base",
            "target_tokens": 1024 if i < n // 2 else 2048, "context_tokens": 40, "setting": "amount",
            "context_format": "full_text", "position": "beginning" if i % 2 == 0 else "end",
            "query_types": json.dumps(["Max/Min"]), "difficulty": "easy", "evidence_spans": "[]",
            "build_hash": "toybuild"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "toybuild", "track": "holobench"}), encoding="utf-8")
    return d


def instance_of(body: dict) -> str | None:
    """The instance a request asks about; None for a body cut short by the kill (the fake server reads a missing
    body as {})."""
    if not body.get("messages"):
        return None
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return "inst-" + Q_RE.search(user).group(1)[1:]


def slow_answer(body: dict) -> str:
    """A fake model that reads the document, slowly (the server is threaded: calls overlap)."""
    time.sleep(DELAY_S)
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    item = Q_RE.search(user).group(1)
    return f"The document gives the code of item {item}.\nAnswer: {dict(FACT_RE.findall(user))[item]}"


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process we started (it leads its own session; the group holds only what it spawned)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    f = open(log, "wb")
    try:
        return subprocess.Popen([sys.executable, "-c", *args], cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    finally:
        f.close()


def wait_for(cond, proc: subprocess.Popen, timeout: float, step: float = 0.002) -> bool:
    """Poll ``cond`` until true (True) or the process exits / the timeout passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        if proc.poll() is not None:
            return bool(cond())
        time.sleep(step)
    return False


def cache_keys(home: Path) -> set[str]:
    p = home / "cache" / "responses.sqlite"
    if not p.exists():
        return set()
    con = sqlite3.connect(p)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'responses'").fetchone():
            return set()  # a run killed between creating the file and its table: nothing cached (the next creates it)
        return {r[0] for r in con.execute("SELECT key FROM responses")}
    finally:
        con.close()


def visible_parquet(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith(".parquet"))


def leftovers(d: Path) -> list[str]:
    """Temporary files of writers in the build directory and in the responses' part directory (an evaluation
    appends part files there, merged into responses.parquet when it ends: ctxbench.core.storage.TableAppender)."""
    parts = parts_dir(d / "responses.parquet")
    inner = [f"{parts.name}/{n}" for n in os.listdir(parts)] if parts.is_dir() else []
    return sorted(n for n in os.listdir(d) + inner if n.rsplit("/", 1)[-1].startswith(".") and ".tmp" in n)


# ---------------------------------------------------------------------------------------------------- evaluation

def read_responses(build: Path, ctx: str) -> dict[str, dict]:
    """The stored responses after a kill: responses.parquet (absent, or a complete file) and the part files a killed
    evaluation left (each complete), one row per request key over all of them."""
    p = build / "responses.parquet"
    rows = []
    for f in ([p] if p.exists() else []) + pending_parts(p):
        try:
            got = pq.read_table(f).to_pylist()
        except Exception as e:  # a half-written file
            pytest.fail(f"{ctx}: {f.name} is not readable: {e!r}")
        assert pq.ParquetFile(f).metadata.num_rows == len(got)
        rows += got
    keys = [r["request_key"] for r in rows]
    assert len(keys) == len(set(keys)), f"{ctx}: duplicate request keys in the stored responses"
    assert sorted(keys) == sorted(read_table(p, "responses").column("request_key").to_pylist())
    return {r["request_key"]: r for r in rows}


# kill schedules: (anchor, seconds); "start": after the process starts, "first": after its first request reaches
# the server, "tmp": as soon as a temporary responses file appears (a kill in the middle of a write). Jitter moves
# the kills across flush and write boundaries; the seed is in every failure message.
SCHEDULES = {
    "fixed": [("start", 0.3), ("tmp", 0.0), ("first", 0.5), ("tmp", 0.0), ("first", DELAY_S + 0.01)],
    "random": "random",
}


def _schedule(name: str, rng: random.Random) -> list[tuple[str, float]]:
    if SCHEDULES[name] != "random":
        return [(a, t + (rng.uniform(0, 0.05) if a != "tmp" else 0.0)) for a, t in SCHEDULES[name]]
    return [("first", rng.uniform(0.0, 0.35)) for _ in range(4)]


@pytest.mark.parametrize("schedule", ["fixed", "random"])
@pytest.mark.slow
def test_evaluation_killed_and_restarted_loses_nothing_and_repeats_no_completed_call(tmp_path, schedule):
    seed = int(os.environ.get("CTXBENCH_CRASH_SEED", "0")) + (0 if schedule == "fixed" else 1)
    rng = random.Random(seed)
    build = make_toy_build(tmp_path / "build")
    home = tmp_path / "home"
    env = {**os.environ, "CTXBENCH_HOME": str(home)}
    kills = _schedule(schedule, rng)

    runs = []  # per run: (first request index, end index, cache keys at its start, killed)
    snapshots = []  # per kill: (stored rows, cache keys)
    mid_write = []  # per "tmp" kill: the temporary files it left (non-empty: the kill landed inside a write)
    prev_rows: dict[str, dict] = {}
    with FakeOpenAIServer(answer_fn=slow_answer) as srv:
        def launch(tag: str) -> subprocess.Popen:
            return start([EVAL_SCRIPT, str(build), srv.base_url], env, tmp_path / f"eval-{tag}.log")

        for k, (anchor, after) in enumerate(kills):
            ctx = f"[schedule {schedule}, seed {seed}, kill {k} at {anchor}+{after:.3f}s]"
            cached_at_start = cache_keys(home)
            i0 = srv.count
            old_tmp = set(leftovers(build))
            proc = launch(str(k))
            t0 = time.monotonic()
            if anchor == "first":
                assert wait_for(lambda: srv.count > i0, proc, 30), \
                    f"{ctx}: no request reached the server\n{(tmp_path / f'eval-{k}.log').read_text()}"
                t0 = time.monotonic()
            elif anchor == "tmp":
                hit = wait_for(lambda: any(n not in old_tmp for n in leftovers(build)), proc, 30, step=0.0002)
                assert hit, f"{ctx}: no write seen\n{(tmp_path / f'eval-{k}.log').read_text()}"
            time.sleep(max(0.0, t0 + after - time.monotonic()))
            if proc.poll() is not None and proc.returncode == 0 and schedule == "random":
                kills = kills[:k]  # random kills came late: everything was answered before this one
                break
            assert proc.poll() is None, f"{ctx}: the run ended before the kill (rc {proc.returncode}): " \
                                        f"{(tmp_path / f'eval-{k}.log').read_text()}"
            kill_group(proc)
            # requests the dead client sent are still being answered (into closed sockets): let them settle
            settle = time.monotonic() + 10
            while srv.in_flight and time.monotonic() < settle:
                time.sleep(0.01)
            assert srv.in_flight == 0, f"{ctx}: the server is still answering the killed run"
            runs.append((i0, srv.count, cached_at_start, True))
            if anchor == "tmp":
                mid_write.append(sorted(set(leftovers(build)) - old_tmp))

            rows = read_responses(build, ctx)
            cached = cache_keys(home)
            assert visible_parquet(build) in (["instances.parquet"], ["instances.parquet", "responses.parquet"]), \
                f"{ctx}: {visible_parquet(build)}"
            # nothing stored is lost or changed; only cached answers are stored (the cache is written first)
            assert set(prev_rows) <= set(rows), f"{ctx}: stored rows lost: {sorted(set(prev_rows) - set(rows))}"
            assert all(rows[key] == r for key, r in prev_rows.items()), f"{ctx}: a stored row changed"
            assert set(rows) <= cached, f"{ctx}: stored rows missing from the response cache"
            assert all(r["status"] == "ok" for r in rows.values()), ctx
            assert cached_at_start <= cached, f"{ctx}: cached answers lost"
            snapshots.append((rows, cached))
            prev_rows = rows

        # the final run completes
        cached_at_start = cache_keys(home)
        i0 = srv.count
        proc = launch("final")
        rc = proc.wait(timeout=60)
        log = (tmp_path / "eval-final.log").read_text()
        assert rc == 0, log
        runs.append((i0, srv.count, cached_at_start, False))
        summary = json.loads(re.search(r"^SUMMARY (.*)$", log, re.M).group(1))
        truncated = sum(instance_of(b) is None for b in srv.requests)
        requests = [instance_of(b) for b in srv.requests]

        # a rerun sends nothing and adds nothing
        i0 = srv.count
        proc = launch("rerun")
        assert proc.wait(timeout=60) == 0, (tmp_path / "eval-rerun.log").read_text()
        rerun = json.loads(re.search(r"^SUMMARY (.*)$", (tmp_path / "eval-rerun.log").read_text(), re.M).group(1))
        assert srv.count == i0, "a rerun of a complete evaluation called the model"
        assert (rerun["already_stored"], rerun["new_rows"], rerun["calls"], rerun["from_cache"]) == (N, 0, 0, 0)

    where = f"[schedule {schedule}, seed {seed}, kills {[(a, round(t, 3)) for a, t in kills]}]"
    # final table: one ok row per instance, the right answer, every cached answer stored
    final = read_responses(build, where)
    assert len(final) == N, where
    by_inst = Counter(r["instance_id"] for r in final.values())
    assert by_inst == Counter({f"inst-{i:02d}": 1 for i in range(N)}), where
    for r in final.values():
        assert r["status"] == "ok" and r["response"].endswith(f"Answer: {code(int(r['instance_id'][5:]))}"), r
    cached = cache_keys(home)
    assert cached <= set(final), f"{where}: cached answers never stored: {sorted(cached - set(final))}"
    assert len(cached) == N
    assert all(final[k] == r for k, r in prev_rows.items()), f"{where}: a row stored before the final run changed"
    assert summary["selected"] == N and summary["unfinished"] == 0 and summary["errors"] == 0, summary
    assert summary["already_stored"] + summary["from_cache"] + summary["calls"] == N, summary
    assert summary["already_stored"] == len(prev_rows), summary

    # no completed call repeated: no run asks for an answer the cache held when it started
    key_inst = {k: r["instance_id"] for k, r in final.items()}
    for n, (a, b, cached_before, killed) in enumerate(runs):
        asked = [i for i in requests[a:b] if i is not None]
        assert killed or len(asked) == b - a, "the final run sent a request without messages"
        done_before = {key_inst[k] for k in cached_before}
        repeated = sorted(set(asked) & done_before)
        assert not repeated, f"{where}: run {n} repeated completed calls for {repeated}"
        assert len(asked) == len(set(asked)), f"{where}: run {n} sent one instance twice"
        if killed:  # only calls in flight at the kill may be asked again later
            after = snapshots[n][1]
            lost = set(asked) - {key_inst[k] for k in after}
            assert len(lost) <= CONCURRENCY, f"{where}: run {n}: {len(lost)} answered calls not cached: {lost}"
        else:  # the final run stores everything it asks for
            assert len(asked) == summary["calls"]
    per_inst = Counter(i for i in requests if i is not None)
    assert set(per_inst) <= {f"inst-{i:02d}" for i in range(N)}
    # every instance was asked at least once (all answers came from this server); repeats only for in-flight calls
    assert len(per_inst) == N
    assert sum(per_inst.values()) - N <= CONCURRENCY * len(kills), (where, per_inst)
    assert visible_parquet(build) == ["instances.parquet", "responses.parquet"]
    print(f"{where}: requests {sum(per_inst.values())} for {N} instances (+{truncated} cut short); repeated in-flight: "
          f"{sorted(i for i, c in per_inst.items() if c > 1)}; rows after each kill: "
          f"{[len(s[0]) for s in snapshots]}; cached after each kill: {[len(s[1]) for s in snapshots]}; "
          f"temporary files left by the mid-write kills: {mid_write}; leftover temporary files: {leftovers(build)}")


# ---------------------------------------------------------------------------------------------------- build

def check_build_dir(out: Path, ctx: str) -> dict:
    """After a kill: visible Parquet files complete, manifest absent or valid and consistent with them."""
    if not out.exists():
        return {"files": []}
    names = sorted(os.listdir(out))
    pq_names = [n for n in names if n.endswith(".parquet")]
    assert set(pq_names) <= {"instances.parquet", "quarantine.parquet", "certificates.parquet"}, f"{ctx}: {names}"
    tables = {}
    for t in ("instances", "quarantine", "certificates"):  # certificates: the build's last stage, certify
        p = out / f"{t}.parquet"
        if p.exists():
            try:
                tbl = pq.read_table(p)
            except Exception as e:
                pytest.fail(f"{ctx}: {p.name} is present but not a complete Parquet file: {e!r}")
            assert pq.ParquetFile(p).metadata.num_rows == tbl.num_rows
            assert tbl.schema.names == schema(t).names, f"{ctx}: {p.name} columns"
            tables[t] = tbl
    src = out / "source.sqlite"
    if src.exists():
        con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"{ctx}: source.sqlite"
        finally:
            con.close()
    m = out / "manifest.json"
    if m.exists():
        try:
            man = json.loads(m.read_text(encoding="utf-8"))
        except ValueError as e:
            pytest.fail(f"{ctx}: manifest.json is present but not valid JSON: {e}")
        assert isinstance(man, dict), ctx
        assert "instances" in tables and "quarantine" in tables, f"{ctx}: a manifest without its tables: {names}"
        assert src.exists(), f"{ctx}: a manifest without source.sqlite"
        assert tables["instances"].num_rows == man["counts"]["instances"] > 0, ctx
        assert tables["quarantine"].num_rows == man["counts"]["quarantined"], ctx
        assert set(tables["instances"].column("build_hash").to_pylist()) == {man["build_hash"]}, ctx
    if "certificates" in tables and "instances" in tables:  # every instance written has its certificate
        assert set(tables["instances"].column("instance_id").to_pylist()) <= \
            set(tables["certificates"].column("instance_id").to_pylist()), ctx
    return {"files": names, "manifest": m.exists()}


def _inodes(out: Path) -> dict[str, int]:
    try:
        return {n: os.stat(out / n).st_ino for n in os.listdir(out)}
    except FileNotFoundError:
        return {}


def _written(out: Path, before: dict[str, int], names: tuple[str, ...], tmp_prefixes: tuple[str, ...]):
    """Condition: one of ``names`` was (re)placed since ``before``, or a new temporary file with a prefix appeared."""
    def cond() -> bool:
        now = _inodes(out)
        if any(n in now and now[n] != before.get(n) for n in names):
            return True
        return any(n.startswith(tmp_prefixes) and n not in before for n in now)
    return cond


@pytest.mark.slow
def test_build_killed_and_restarted_never_shows_a_half_written_file(tmp_path, spider_db):
    db = str(spider_db("wine_1"))
    out = tmp_path / "build"
    env = {**os.environ, "CTXBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}

    def launch(target: Path, tag: str) -> subprocess.Popen:
        return start([BUILD_SCRIPT, "build", "holobench", "--db", db, "--lengths", "4096,8192", "--out", str(target)],
                     env, tmp_path / f"build-{tag}.log")

    # moments: during start-up, as the verbalize stage stages source.sqlite, a little later (assembling contexts,
    # gold answers, validation: a build takes a few seconds, so fixed times would land after its end), and inside
    # the two Parquet writes
    kills = [("time", 1.0),
             ("write", ((".source.sqlite.staging",), ())),
             ("write", ((".source.sqlite.staging",), (), 0.4)),
             ("write", (("quarantine.parquet",), (".quarantine.parquet.tmp", ".instances.parquet.tmp"))),
             ("write", (("instances.parquet",), ()))]
    states = []
    for k, (how, arg) in enumerate(kills):
        ctx = f"[build kill {k}: {how} {arg}]"
        before = _inodes(out)
        proc = launch(out, str(k))
        if how == "time":
            time.sleep(arg)
            alive = proc.poll() is None
            assert alive, f"{ctx}: the build ended before the kill: {(tmp_path / f'build-{k}.log').read_text()}"
        else:
            hit = wait_for(_written(out, before, *arg[:2]), proc, 600, step=0.0005)  # a loaded machine is slow
            assert hit, f"{ctx}: trigger never fired: {(tmp_path / f'build-{k}.log').read_text()}"
            time.sleep(arg[2] if len(arg) > 2 else 0.0)
            alive = proc.poll() is None
            assert alive or len(arg) < 3, f"{ctx}: the build ended before the kill: " \
                                          f"{(tmp_path / f'build-{k}.log').read_text()}"
        kill_group(proc)
        states.append((k, alive, check_build_dir(out, ctx)))

    # the final run completes (unless the last kill came too late, after the manifest); an uninterrupted
    # reference build runs alongside it
    ref = tmp_path / "reference"
    proc, rproc = launch(out, "final"), launch(ref, "reference")
    assert proc.wait(timeout=120) == 0, (tmp_path / "build-final.log").read_text()
    assert rproc.wait(timeout=120) == 0, (tmp_path / "build-reference.log").read_text()
    final_log = (tmp_path / "build-final.log").read_text()
    info = check_build_dir(out, "[final]")
    m = re.search(r"(?:\bbuilt|already built \(same build hash\), nothing to do): (\d+) instances", final_log)
    assert m and int(m.group(1)) == json.loads((out / "manifest.json").read_text())["counts"]["instances"], final_log
    assert info["manifest"] and set(visible_parquet(out)) == {"instances.parquet", "quarantine.parquet",
                                                              "certificates.parquet"}

    # the restarted build equals the uninterrupted one
    for t in ("instances", "quarantine", "certificates"):
        a = pq.read_table(out / f"{t}.parquet")
        b = pq.read_table(ref / f"{t}.parquet")
        assert a.equals(b), f"{t}.parquet of the killed-and-restarted build differs from an uninterrupted build"
    ma = json.loads((out / "manifest.json").read_text())
    mb = json.loads((ref / "manifest.json").read_text())
    assert ma["build_hash"] == mb["build_hash"] and ma["counts"] == mb["counts"]

    # a rerun reports the build as already built and changes nothing
    mtimes = {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out)}
    proc = launch(out, "rerun")
    assert proc.wait(timeout=60) == 0
    rerun_log = (tmp_path / "build-rerun.log").read_text()
    assert "already built (same build hash), nothing to do" in rerun_log, rerun_log
    assert {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out)} == mtimes
    print(f"build states after kills: {states}; leftover temporary files: {leftovers(out)}")
