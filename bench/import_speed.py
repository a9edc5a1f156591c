"""Import speed with each database prepared once (issue 22, item 5): `ctxbench questions import` of 14 questions on
soccer_1 (Player_Attributes: 183,978 rows) against the import of one of them, as CPU seconds (process time, so the
ratio holds on a loaded machine) and wall seconds. Before issue 22 each question rebuilt DuckDB and three SQLite
copies and ran the value rule twice (3.4 s of CPU a question); now the database is loaded, normalised and put
into the engines once per import, so 14 questions should cost at most 2x one. Prints figures; asserts nothing.

    python bench/import_speed.py [--db-dir DIR] [--repeat 1]

Default DIR: Spider's databases under $CTXBENCH_SHARED_DATA (../shared/data/spider/database).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from ctxbench.questions.importer import import_questions

# 14 Spider-style questions over soccer_1, most of them reading Player_Attributes (the 184k-row table)
QUESTIONS = [
    ("How many player attribute records are there?", "SELECT count(*) FROM Player_Attributes"),
    ("What is the highest overall rating?", "SELECT max(overall_rating) FROM Player_Attributes"),
    ("How many records prefer the left foot?", "SELECT count(*) FROM Player_Attributes WHERE preferred_foot = 'left'"),
    ("What is the average potential of right-footed records?",
     "SELECT avg(potential) FROM Player_Attributes WHERE preferred_foot = 'right'"),
    ("How many distinct players have an attribute record?", "SELECT count(DISTINCT player_api_id) FROM Player_Attributes"),
    ("Which players have an overall rating above 90?",
     "SELECT DISTINCT T1.player_name FROM Player AS T1 JOIN Player_Attributes AS T2 ON T1.player_api_id = "
     "T2.player_api_id WHERE T2.overall_rating > 90"),
    ("How many records have a crossing above 80?", "SELECT count(*) FROM Player_Attributes WHERE crossing > 80"),
    ("What is the lowest finishing score?", "SELECT min(finishing) FROM Player_Attributes"),
    ("How many players are taller than 200?", "SELECT count(*) FROM Player WHERE height > 200"),
    ("What is the average weight of players?", "SELECT avg(weight) FROM Player"),
    ("How many records have a potential of 94?", "SELECT count(*) FROM Player_Attributes WHERE potential = 94"),
    ("How many records have a high attacking work rate?",
     "SELECT count(*) FROM Player_Attributes WHERE attacking_work_rate = 'high'"),
    ("What is the highest heading accuracy?", "SELECT max(heading_accuracy) FROM Player_Attributes"),
    ("How many leagues are there?", "SELECT count(*) FROM League"),
]


def _run(qfile: Path, db_dir: Path) -> tuple[float, float, dict]:
    out = Path(tempfile.mkdtemp(prefix="import-bench-"))
    c0, w0 = time.process_time(), time.perf_counter()
    r = import_questions(qfile, db_dir, out)
    return time.process_time() - c0, time.perf_counter() - w0, r.counts


def main() -> None:
    shared = Path(os.environ.get("CTXBENCH_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    ap = argparse.ArgumentParser()
    ap.add_argument("--db-dir", type=Path, default=shared / "spider" / "database")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each import (the fastest is kept)")
    a = ap.parse_args()
    os.environ.setdefault("CTXBENCH_HOME", tempfile.mkdtemp(prefix="ctxbench-bench-"))
    d = Path(tempfile.mkdtemp(prefix="import-bench-q-"))
    files = {}
    for n in (1, len(QUESTIONS)):
        files[n] = d / f"soccer_{n}.json"
        files[n].write_text(json.dumps([{"db_id": "soccer_1", "question": q, "query": s} for q, s in QUESTIONS[:n]]))
    res = {}
    for n, f in files.items():
        runs = [_run(f, a.db_dir) for _ in range(a.repeat)]
        res[n] = min(runs, key=lambda r: r[0])
        cpu, wall, counts = res[n]
        print(f"soccer_1, {n:2d} question(s): {cpu:6.1f} s CPU, {wall:6.1f} s wall; {counts['accepted']} accepted, "
              f"{counts['written']} written, rejected {counts['by_reason']}")
    one, many = res[1], res[len(QUESTIONS)]
    print(f"import of {len(QUESTIONS)} questions / import of 1: {many[0] / one[0]:.2f}x CPU, {many[1] / one[1]:.2f}x "
          f"wall (target: at most 2x)")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
