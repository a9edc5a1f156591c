"""Evaluation throughput (issue 4): 1,000 instances against a local OpenAI-compatible server with a fixed 200 ms
latency, concurrency 16. Prints achieved calls/s divided by the bound concurrency/latency (80 calls/s), the same
figure for inspect_ai on the same instances against the same server in the same run (when inspect_ai is
installed: `pip install inspect-ai`), and the time of a fully cached rerun divided by the first run. Beside it, the
same requests sent by bare loops of aiohttp's client (the one ctxbench's OpenAI-compatible backend uses) and of
httpx's, with nothing stored: what the client and the server reach on this machine without a harness. Prints
figures; asserts nothing.

    python bench/eval_throughput.py [--n 1000] [--concurrency 16] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import tempfile
import time
from pathlib import Path


def serve(port: int, latency: float) -> None:
    """aiohttp server: POST /v1/chat/completions and /v1/responses answer after ``latency`` seconds."""
    import asyncio

    from aiohttp import web

    async def chat(request):
        body = await request.json()
        await asyncio.sleep(latency)
        return web.json_response({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Answer: 42"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(latency: float) -> tuple[mp.Process, str]:
    """:func:`serve` in a daemon process on a free port, answering already: (the process, its ``/v1`` base URL)."""
    import httpx  # lazy: as the rest of this script, imported where used

    port = free_port()
    proc = mp.Process(target=serve, args=(port, latency), daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            httpx.post(f"{base}/chat/completions", json={"model": "warm"}, timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    return proc, base


def make_build(d: Path, n: int) -> Path:
    from ctxbench.core.storage import to_table, write_parquet

    d.mkdir(parents=True, exist_ok=True)
    rows = [{"instance_id": f"i{i:05d}", "benchmark": "holobench", "source_id": "bench", "question": f"What is item {i}?",
             "gold": json.dumps([[42]]), "context": f"Item {i} has the value 42. " * 5, "tokenizer": "cl100k_base",
             "target_tokens": 128, "context_tokens": 60, "context_format": "full_text", "query_types": "[]",
             "evidence_spans": "[]", "build_hash": "bench"} for i in range(n)]
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "bench", "track": "holobench"}), encoding="utf-8")
    return d


def run_ctxbench(build: Path, base: str, conc: int) -> float:
    from ctxbench.run.evaluate import EvalConfig, evaluate_build  # imported before timing, as inspect_ai is below

    t0 = time.perf_counter()
    s = evaluate_build(build, EvalConfig(model="openai/bench-model", base_url=base, concurrency=conc),
                       flush_every=10_000)
    dt = time.perf_counter() - t0
    assert s.calls + s.from_cache + s.already_stored == s.selected, s
    return dt


def run_raw_httpx(n: int, base: str, conc: int) -> float:
    """The same n requests sent by a bare loop of httpx's AsyncClient (the HTTP client ctxbench's OpenAI backend
    used before issue 36), ``conc`` in flight, nothing stored: what this client and server reach on this machine,
    without a harness."""
    import asyncio

    import httpx

    async def go() -> float:
        sem = asyncio.Semaphore(conc)
        limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
            async def one(i: int) -> None:
                async with sem:
                    r = await client.post("/chat/completions", json={
                        "model": "bench-model", "messages": [{"role": "user", "content": f"raw {i}"}]})
                    r.raise_for_status()
                    r.json()

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n)))
            return time.perf_counter() - t0

    return asyncio.run(go())


def run_raw_aiohttp(n: int, base: str, conc: int) -> float:
    """As :func:`run_raw_httpx`, over aiohttp's ``ClientSession`` (the client of ctxbench's ``openai_http``
    backend)."""
    import asyncio

    import aiohttp

    async def go() -> float:
        sem = asyncio.Semaphore(conc)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc),
                                         timeout=aiohttp.ClientTimeout(total=60)) as client:
            async def one(i: int) -> None:
                async with sem:
                    body = json.dumps({"model": "bench-model", "messages": [{"role": "user", "content": f"raw {i}"}]})
                    async with client.post(f"{base}/chat/completions", data=body,
                                           headers={"Content-Type": "application/json"}) as r:
                        r.raise_for_status()
                        json.loads(await r.read())

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n)))
            return time.perf_counter() - t0

    return asyncio.run(go())


def run_inspect(n: int, base: str, conc: int) -> float | None:
    try:
        from inspect_ai import Task, eval as inspect_eval
        from inspect_ai.dataset import Sample
        from inspect_ai.scorer import includes
        from inspect_ai.solver import generate
    except ImportError:
        return None
    # the chat-completions provider for OpenAI-compatible servers (the openai/ provider uses the Responses API)
    os.environ["BENCH_BASE_URL"] = base
    os.environ["BENCH_API_KEY"] = "sk-bench"
    samples = [Sample(input=f"Item {i} has the value 42. " * 5 + f"\nWhat is item {i}?", target="42")
               for i in range(n)]
    task = Task(dataset=samples, solver=generate(), scorer=includes())
    with tempfile.TemporaryDirectory() as logs:
        t0 = time.perf_counter()
        log = inspect_eval(task, model="openai-api/bench/bench-model", max_connections=conc,
                           log_dir=logs, display="none")[0]
        dt = time.perf_counter() - t0
        done = sum(1 for s in (log.samples or []) if s.output and s.output.completion and not s.error)
        if log.status != "success" or done != n:
            err = str(getattr(log.error, "message", log.error))[:300]
            print(f"inspect_ai: status {log.status}, {done}/{n} samples answered ({err})")
            return None
        return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.2)
    a = ap.parse_args()
    proc, base = start_server(a.latency)
    bound = a.concurrency / a.latency
    import ctxbench.models  # noqa: F401  (litellm offline price table)
    import ctxbench.run.evaluate  # noqa: F401  (imported before timing: both harnesses are measured warm)
    import litellm  # noqa: F401
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CTXBENCH_HOME"] = str(Path(tmp) / "home")
        build = make_build(Path(tmp) / "build", a.n)
        first = run_ctxbench(build, base, a.concurrency)
        rate = a.n / first
        print(f"ctxbench: {a.n} calls in {first:.2f} s = {rate:.1f} calls/s = {rate / bound:.2f} of the bound "
              f"({bound:.0f} calls/s)")
        raw = a.n / run_raw_aiohttp(a.n, base, a.concurrency)
        print(f"bare aiohttp loop (no harness): {raw:.1f} calls/s = {raw / bound:.2f} of the bound; "
              f"ctxbench / bare loop = {rate / raw:.2f}")
        raw = a.n / run_raw_httpx(a.n, base, a.concurrency)
        print(f"bare httpx loop (no harness): {raw:.1f} calls/s = {raw / bound:.2f} of the bound; "
              f"ctxbench / bare loop = {rate / raw:.2f}")
        (build / "responses.parquet").unlink()  # rerun: every answer comes from the response cache
        cached = run_ctxbench(build, base, a.concurrency)
        print(f"fully cached rerun: {cached:.2f} s = {cached / first:.3f} of the first run")
        t = run_inspect(a.n, base, a.concurrency)
        if t is None:
            print("inspect_ai: not installed (pip install -e '.[bench]') — no comparison")
        else:
            r2 = a.n / t
            print(f"inspect_ai: {a.n} calls in {t:.2f} s = {r2:.1f} calls/s = {r2 / bound:.2f} of the bound; "
                  f"ctxbench / inspect_ai = {rate / r2:.2f}x")
    proc.terminate()


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
