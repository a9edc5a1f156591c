"""Time of a no-change nightly run relative to a full one (issue 8 benchmark).

A full run (build → evaluate → score → report) into a fresh run root against a local OpenAI-compatible server
answering after ``--latency`` seconds, then the same run again with no new input (it only checks: build hash,
stored request keys, inputs hashes of score and report), then a run after one new question in the query set.
Prints the three times and the ratios. ``--engine prefect`` runs the Prefect flow ``nightly`` (its temporary API
server's start is part of the first run), ``--engine luigi`` the luigi tasks.

    python bench/nightly_incremental.py [--db PATH] [--lengths 2048,4096] [--latency 0.2] [--engine luigi]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default=str(REPO.parent / "shared" / "data" / "spider" / "database" / "wine_1" /
                                        "wine_1.sqlite"))
    ap.add_argument("--lengths", default="2048,4096")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--engine", default="luigi", choices=["luigi", "prefect"])
    a = ap.parse_args()
    from fakeserver import FakeOpenAIServer

    from ctxbench.run.evaluate import EvalConfig
    from ctxbench.sources import load_database
    from ctxbench.tracks.holobench import HoloBenchConfig

    db_id = load_database(a.db).db_id
    qsrc = yaml.safe_load((REPO / "assets" / "queries" / f"{db_id}.yaml").read_text(encoding="utf-8"))

    def answer(body: dict) -> str:
        time.sleep(a.latency)
        return "Answer: 42"

    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(answer_fn=answer) as srv:
        os.environ["CTXBENCH_HOME"] = str(Path(tmp) / "home")
        queries = Path(tmp) / "queries.yaml"
        queries.write_text(yaml.safe_dump({**qsrc, "questions": qsrc["questions"][1:]}), encoding="utf-8")
        cfg = HoloBenchConfig(db=a.db, queries=str(queries), lengths=[int(x) for x in a.lengths.split(",")])
        models = [EvalConfig(model="openai/bench", base_url=srv.base_url, concurrency=8)]
        root = Path(tmp) / "runs"
        if a.engine == "luigi":
            from pipelines.luigi_tasks import run_luigi

            def run() -> None:
                run_luigi(cfg, root, models)
        else:
            from pipelines.flows import nightly

            def run() -> None:
                nightly(build=cfg, out=str(root), models=models)

        times, calls = [], []
        for step in ("full", "no change", "one new question"):
            if step == "one new question":
                queries.write_text(yaml.safe_dump(qsrc), encoding="utf-8")
            n0 = srv.count
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
            calls.append(srv.count - n0)
            print(f"{step}: {times[-1]:.2f} s, {calls[-1]} model calls", flush=True)
    print(f"no-change / full = {times[1] / times[0]:.3f}; one new question / full = {times[2] / times[0]:.3f} "
          f"({a.engine}, {a.latency * 1000:.0f} ms latency, lengths {a.lengths})")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
