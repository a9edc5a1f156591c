"""Where an evaluation's time goes against a latency-bound server (issue 36): the setting of
bench/eval_throughput.py (``--n`` calls, ``--concurrency`` in flight, a local aiohttp server answering after
``--latency`` seconds), evaluated ``--runs`` times in one process, each on a fresh cache. Per run it prints the
achieved share of the bound, when the first request left after ``evaluate_build`` started, the CPU the event loop's
thread spent per call, the mean round trip of a request (sent to answer read), the mean number of calls in flight
between the first half second and the last 0.3 s, how long the run took after its last answer, and how many
transactions the cache's writer thread committed for how many operations. Prints figures; asserts nothing.

    python bench/eval_timeline.py [--n 1000] [--concurrency 16] [--latency 0.2] [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_throughput import make_build, start_server  # noqa: E402


def in_flight(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Mean number of the (start, end) spans open between ``lo`` and ``hi``."""
    area = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)
    return area / max(hi - lo, 1e-9)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    proc, base = start_server(a.latency)
    import ctxbench.models.cache as cache_mod
    from ctxbench.models import runner as runner_mod
    from ctxbench.models.backends import openai_http
    from ctxbench.run.evaluate import EvalConfig, evaluate_build

    spans: list[tuple[float, float]] = []
    marks: dict[str, float] = {}
    commits: list[tuple[int, int]] = []
    generate, arun = openai_http.OpenAIHTTPBackend.generate, runner_mod.CallRunner.arun

    async def timed_generate(self, *args, **kw):
        t = time.perf_counter()
        try:
            return await generate(self, *args, **kw)
        finally:
            spans.append((t, time.perf_counter()))

    async def timed_arun(self, *args, **kw):
        c0 = time.thread_time()
        try:
            return await arun(self, *args, **kw)
        finally:
            marks["loop_cpu"] = time.thread_time() - c0

    openai_http.OpenAIHTTPBackend.generate = timed_generate
    runner_mod.CallRunner.arun = timed_arun
    group = getattr(cache_mod, "GroupCommit", None)  # the trees before issue 36's group commit have none
    if group is not None:
        close = group.close

        def counted_close(self):
            close(self)
            commits.append((self.operations, self.transactions))

        group.close = counted_close
    bound = a.concurrency / a.latency
    with tempfile.TemporaryDirectory() as tmp:
        build = make_build(Path(tmp) / "build", a.n)
        for run in range(a.runs):
            os.environ["CTXBENCH_HOME"] = str(Path(tmp) / f"home{run}")  # a fresh cache: every answer is called
            (build / "responses.parquet").unlink(missing_ok=True)
            spans.clear()
            commits.clear()
            t0 = time.perf_counter()
            evaluate_build(build, EvalConfig(model="openai/bench-model", base_url=base, concurrency=a.concurrency),
                           flush_every=10_000)
            dt = time.perf_counter() - t0
            first, last = min(s for s, _ in spans), max(e for _, e in spans)
            trip = sum(e - s for s, e in spans) / len(spans)
            group_s = (f"; {commits[0][0]} cache operations in {commits[0][1]} transactions" if commits else
                       "; no group commit")
            print(f"run {run + 1}: {a.n / dt / bound:.3f} of the bound ({dt:.2f} s); first request after "
                  f"{first - t0:.3f} s; event loop CPU {marks['loop_cpu'] * 1000 / a.n:.2f} ms per call; round "
                  f"trip {trip * 1000:.1f} ms; in flight {in_flight(spans, first + 0.5, last - 0.3):.2f} of "
                  f"{a.concurrency}; {t0 + dt - last:.3f} s after the last answer{group_s}")
    proc.terminate()


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
