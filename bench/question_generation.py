"""Question generation speed and yield (issue 14 part 2): for each database, questions generated per second (wall
time of `ctxbench questions generate` without process start-up, checks included), the same time as a ratio to one
pass of the gold engine over the kept questions on the full database (measured in the same run, so it holds on a
loaded machine), and the share of checked candidate queries kept, with what the others were left out for. Prints
figures; asserts nothing.

    python bench/question_generation.py [--db FILE.sqlite ...] [--n 30] [--seed 0]
                                         [--question-model NAME --question-base-url URL]

Default databases: Spider's flight_2, chinook_1 and world_1 under $CTXBENCH_SHARED_DATA (../shared/data).
With --question-model the round trip's share of phrased questions kept is printed too.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from ctxbench.gold import compute_gold
from ctxbench.tracks.holobench.checker import Checker
from ctxbench.tracks.holobench.generate import GenerateConfig, generate_questions, prepare
from ctxbench.questions.sqlinfo import sql_info


def main() -> None:
    shared = Path(os.environ.get("CTXBENCH_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", action="append", help="SQLite file (repeatable)")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--question-model")
    ap.add_argument("--question-base-url")
    a = ap.parse_args()
    dbs = a.db or [str(shared / "spider" / "database" / d / f"{d}.sqlite")
                   for d in ("flight_2", "chinook_1", "world_1")]
    os.environ.setdefault("CTXBENCH_HOME", tempfile.mkdtemp(prefix="ctxbench-bench-"))
    tot_q = tot_s = tot_checked = tot_passed = tot_gold = 0
    for db in dbs:
        cfg = GenerateConfig(db=db, n=a.n, seed=a.seed, question_model=a.question_model,
                             question_base_url=a.question_base_url)
        t0 = time.perf_counter()
        r = generate_questions(cfg)
        s = time.perf_counter() - t0
        rep = r.report
        _, src, _ = prepare(cfg)
        ck = Checker(src, cfg)
        t1 = time.perf_counter()
        for q in r.questions:
            tables = sorted(ck.low[t] for t in sql_info(q["sql"])["tables"])
            compute_gold(q["sql"], ck.gold_tables(tables), seed=cfg.seed)
        gold_s = time.perf_counter() - t1
        ck.close()
        tot_q, tot_s = tot_q + len(r.questions), tot_s + s
        tot_checked, tot_passed = tot_checked + rep["checked"], tot_passed + rep["passed"]
        tot_gold += gold_s
        line = (f"{r.db_id}: {len(r.questions)} questions in {s:.1f} s = {len(r.questions) / s:.2f} questions/s "
                f"({s / gold_s:.0f}x one gold pass over them on the full database); kept {rep['passed']} of "
                f"{rep['checked']} checked candidates ({rep['passed'] / rep['checked']:.0%}; "
                f"{rep['candidates']} drawn)")
        if "roundtrip_dropped" in rep:
            phrased = len(r.questions) + rep["roundtrip_dropped"]
            line += f"; round trip kept {len(r.questions)} of {phrased} phrased ({len(r.questions) / phrased:.0%})"
        print(line)
        for why, k in rep["left_out"].items():
            print(f"    left out {k}: {why}")
    print(f"all: {tot_q} questions in {tot_s:.1f} s = {tot_q / tot_s:.2f} questions/s ({tot_s / tot_gold:.0f}x one "
          f"gold pass); kept {tot_passed} of "
          f"{tot_checked} checked ({tot_passed / tot_checked:.0%})")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
