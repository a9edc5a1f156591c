"""Scale-out by context (issue 36), run by ``bench/scaleout.py`` (or alone): one process against N workers, on a
scripted latency-bound server, and two replicas with prefix sharding. Prints, in one run:

- one process (``ctxbench evaluate``'s library call): calls/s against the bound ``concurrency / latency``, and the
  seconds from the start to the server's first request;
- N Dask workers (``evaluate --workers N``: a local Dask cluster, sharded by context): the same figures, the speed-up
  over one process and the first call's delay over one process's;
- the ``evaluate`` Prefect flow with ``workers: N`` on prefect-dask's DaskTaskRunner (a local cluster of N
  processes, all reporting to the flow's own temporary API): the same figures (its first call comes after Prefect's
  temporary server has started);
- two replicas given to ``--base-url``: prefix-cache hits over the most possible (every question but the first
  of each context), each replica modelling its own prefix cache, and the requests a rerun with the replicas
  reversed makes (0 expected);
- a killed worker: ``evaluate --workers N`` with one Dask worker process killed (SIGKILL) while it calls, then a
  rerun: the calls made twice (at most the killed worker's calls in flight) and the rerun's requests (0 expected).

The server answers after ``latency + uncached prompt tokens / prefill`` seconds (a prompt's prefix cached on that
server is not read again), so it is latency-bound and the 2 cores are not the limit. Prints figures; asserts
nothing.

    python bench/scaleout_workers.py [--contexts 12] [--questions 4] [--concurrency 4] [--workers 2] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx


def serve(port: int, latency: float, prefill_tps: float) -> None:
    """aiohttp server: POST /v1/chat/completions answers after ``latency`` plus the uncached prompt's reading time
    (characters / 4 tokens at ``prefill_tps``); the prompt up to ``</document>`` is this server's prefix cache
    entry. GET /stats: requests, prefix hits, distinct prefixes, first arrival (Unix time), distinct prompts and
    prompts asked more than once (``repeated``: calls made twice)."""
    import asyncio

    from aiohttp import web

    seen: set[str] = set()
    asked: Counter = Counter()  # requests per prompt (one call each: one sample)
    stats = {"requests": 0, "hits": 0, "first": None, "last": None}

    async def chat(request):
        body = await request.json()
        now = time.time()
        stats["first"] = stats["first"] or now
        stats["requests"] += 1
        text = "\n".join(m["content"] if isinstance(m["content"], str) else "" for m in body["messages"])
        asked[text] += 1
        end = text.find("</document>")
        prefix = text[:end] if end >= 0 else ""
        hit = bool(prefix) and prefix in seen
        seen.add(prefix)
        stats["hits"] += hit
        uncached = len(text) - (len(prefix) if hit else 0)
        await asyncio.sleep(latency + uncached / 4 / prefill_tps)
        pt = len(text) // 4
        stats["last"] = time.time()
        return web.json_response({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Answer: 42"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": pt, "completion_tokens": 3, "total_tokens": pt + 3,
                      "prompt_tokens_details": {"cached_tokens": len(prefix) // 4 if hit else 0}}})

    async def get_stats(request):
        return web.json_response({**stats, "prefixes": len(seen), "distinct": len(asked),
                                  "repeated": sum(1 for v in asked.values() if v > 1)})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/stats", get_stats)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One scripted server in its own process."""

    def __init__(self, latency: float, prefill_tps: float):
        self.port = free_port()
        self.proc = mp.Process(target=serve, args=(self.port, latency, prefill_tps), daemon=True)
        self.proc.start()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        for _ in range(200):
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.05)

    def stats(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=5).json()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.join(5)


def make_build(d: Path, contexts: int, questions: int) -> Path:
    from ctxbench.core.storage import to_table, write_parquet

    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for c in range(contexts):
        n = 60 * (1 + c % 4)  # contexts of four lengths: balancing by tokens matters
        ctx = " ".join(f"Entry {i} of ledger {c} is at shelf {i * 7 % 101}." for i in range(n))
        for q in range(questions):
            rows.append({"instance_id": f"c{c:03d}q{q}", "benchmark": "holobench", "source_id": "bench",
                         "question": f"Which shelf holds entry {q} of ledger {c}?", "gold": json.dumps([[q]]),
                         "context": ctx, "tokenizer": "cl100k_base", "target_tokens": 1024, "context_tokens": n * 12,
                         "context_format": "full_text", "query_types": "[]", "evidence_spans": "[]",
                         "build_hash": "scaleout"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "scaleout", "track": "holobench"}), encoding="utf-8")
    return d


def fresh(tmp: Path, name: str, src: Path) -> Path:
    """A copy of the build and a new empty home (no cache): every run makes all its calls."""
    os.environ["CTXBENCH_HOME"] = str(tmp / name / "home")
    return Path(shutil.copytree(src, tmp / name / "build"))


def dask_worker_pids() -> list[int]:
    """This process's Dask worker processes (spawned by multiprocessing; not its resource tracker)."""
    import psutil  # lazy: only the killed-worker run needs it (it comes with distributed)

    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(c.cmdline())
        except psutil.Error:
            continue
        if "spawn_main" in cmd and "resource_tracker" not in cmd:
            out.append(c.pid)
    return out


def kill_calling_worker(port: int, stop: threading.Event, killed: list[int]) -> None:
    """Kill (SIGKILL) this process's Dask worker process once it has a connection open to the server on ``port``
    (it is calling: its calls in flight die with it), then return; ``stop`` ends the watch."""
    import psutil  # lazy: as above

    while not stop.is_set():
        for pid in dask_worker_pids():
            try:
                conns = psutil.Process(pid).net_connections(kind="tcp")
            except psutil.Error:
                continue
            if any(c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED for c in conns):
                time.sleep(1.0)  # a few of its calls answered, the next ones in flight
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.05)


def measure_killed_worker(tmp: Path, src: Path, n: int, concurrency: int, workers: int, latency: float,
                          prefill: float) -> None:
    """``evaluate --workers N`` with one Dask worker process killed (SIGKILL) while it calls, then a rerun on the
    same cache: prints the calls, the calls made twice (prompts the server was asked more than once: the calls
    the killed worker had in flight, whose answers died with it) and the rerun's requests."""
    from ctxbench.run.evaluate import EvalConfig
    from ctxbench.run.workers import evaluate_workers

    srv = Server(latency, prefill)
    try:
        build = fresh(tmp, "killed-worker", src)
        cfg = EvalConfig(model="openai/bench", base_url=srv.base, concurrency=concurrency, max_tokens=16)
        stop, killed = threading.Event(), []
        watch = threading.Thread(target=kill_calling_worker, args=(srv.port, stop, killed), daemon=True)
        watch.start()
        try:
            s = evaluate_workers(build, cfg, workers)
            status = s.status
        except Exception as e:  # the shard failed instead of running again: the rerun below finishes it
            status = f"failed ({type(e).__name__}: {e})"
        stop.set()
        st = srv.stats()
        s2 = evaluate_workers(build, cfg, workers)
        st2 = srv.stats()
    finally:
        srv.close()
    print(f"killed worker: {n} calls, {st2['repeated']} made twice (a {workers}-worker run with {len(killed)} "
          f"worker process killed while calling, at most --concurrency {concurrency} in flight: {status}, "
          f"{st['requests']} requests, {st['distinct']} distinct; the rerun: {s2.status}, {st2['requests'] - st['requests']} "
          f"requests)", flush=True)


def add_arguments(ap: argparse.ArgumentParser, prefix: str = "") -> None:
    """This benchmark's options (``prefix`` before each name where another script holds them too)."""
    ap.add_argument(f"--{prefix}contexts", type=int, default=12)
    ap.add_argument(f"--{prefix}questions", type=int, default=4)
    ap.add_argument(f"--{prefix}concurrency", type=int, default=4)
    ap.add_argument(f"--{prefix}workers", type=int, default=2)
    ap.add_argument(f"--{prefix}latency", type=float, default=1.0, help="seconds per call before reading the prompt")
    ap.add_argument(f"--{prefix}prefill", type=float, default=20000.0, help="prompt tokens a server reads per second")
    ap.add_argument(f"--{prefix}skip-flow", action="store_true", help="leave out the Prefect flow")


def measure_all(contexts: int, questions: int, concurrency: int, workers: int, latency: float, prefill: float,
                skip_flow: bool = False) -> None:
    """Print the figures of the module docstring."""
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    os.environ["CTXBENCH_DASK_WORKERS"] = str(workers)  # the evaluate flow's task runner: a local Dask cluster
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.run.workers import evaluate_workers

    n = contexts * questions
    bound1 = concurrency / latency
    print(f"{n} calls ({contexts} contexts x {questions} questions), --concurrency {concurrency}, "
          f"{latency:.2f} s per call + prompt reading at {prefill:,.0f} tokens/s; bound of one process "
          f"{bound1:.1f} calls/s", flush=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        src = make_build(tmp / "src", contexts, questions)
        results = {}

        def measure(name: str, run) -> None:
            srv = Server(latency, prefill)
            try:
                build = fresh(tmp, name, src)
                cfg = EvalConfig(model="openai/bench", base_url=srv.base, concurrency=concurrency, max_tokens=16)
                t0 = time.time()
                s = run(build, cfg)
                dt = time.time() - t0
                st = srv.stats()
            finally:
                srv.close()
            calls = s["calls"] if isinstance(s, dict) else s.calls
            steady = n / (st["last"] - st["first"]) if st["first"] and st["last"] > st["first"] else float("nan")
            results[name] = (n / dt, st["first"] - t0 if st["first"] else float("nan"), calls, st["requests"],
                             steady)

        measure("one process", lambda b, c: evaluate_build(b, c, progress=lambda d, k: None))
        measure(f"{workers} Dask workers", lambda b, c: evaluate_workers(b, c, workers))
        if not skip_flow:
            from pipelines.flows import evaluate_flow  # lazy: imports Prefect with the Dask runner set above

            measure(f"evaluate flow, {workers} workers", lambda b, c: evaluate_flow(str(b), c, workers=workers))
        r1, f1, _, _, s1 = results["one process"]
        for name, (rate, first, calls, reqs, steady) in results.items():
            k = 1 if name == "one process" else workers
            print(f"{name:32s} {rate:6.2f} calls/s from the start = {rate / (k * bound1):.2f} of its bound "
                  f"({k * bound1:.1f}), {rate / r1:.2f}x one process; from the first call to the last answer "
                  f"{steady:6.2f} calls/s = {steady / (k * bound1):.2f} of the bound, {steady / s1:.2f}x one "
                  f"process; first call after {first:5.1f} s ({first - f1:+.1f} s); {calls} calls made, {reqs} "
                  f"requests served", flush=True)

        measure_killed_worker(tmp, src, n, concurrency, workers, latency, prefill)

        # two replicas with prefix sharding
        reps = [Server(latency, prefill) for _ in range(2)]
        try:
            build = fresh(tmp, "replicas", src)
            cfg = EvalConfig(model="openai/bench", base_url=",".join(r.base for r in reps), concurrency=concurrency,
                             max_tokens=16)
            t0 = time.time()
            evaluate_build(build, cfg, progress=lambda d, k: None)
            dt = time.time() - t0
            st = [r.stats() for r in reps]
            build2 = fresh(tmp, "replicas-rerun", src)  # the same cache, replicas reversed: no request
            os.environ["CTXBENCH_HOME"] = str(tmp / "replicas" / "home")
            before = sum(r.stats()["requests"] for r in reps)
            evaluate_build(build2, EvalConfig(model="openai/bench", base_url=",".join(r.base for r in reversed(reps)),
                                              concurrency=concurrency, max_tokens=16), progress=lambda d, k: None)
            after = sum(r.stats()["requests"] for r in reps)
        finally:
            for r in reps:
                r.close()
        hits = sum(s["hits"] for s in st)
        possible = n - contexts
        print(f"two replicas, prefix sharding     {n / dt:6.2f} calls/s; requests per replica "
              f"{[s['requests'] for s in st]}; prefix hits {hits} of {possible} possible = {hits / possible:.2f}; "
              f"rerun with the replicas reversed: {after - before} requests", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    a = ap.parse_args()
    measure_all(a.contexts, a.questions, a.concurrency, a.workers, a.latency, a.prefill, a.skip_flow)


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
