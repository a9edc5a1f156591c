"""``score``: every stored response × matcher → ``scores.parquet`` (recomputed whole, deterministic).

Only responses with status ``ok`` are scored; over-length, refused and failed calls are never scored as wrong
answers (they are counted in the report instead).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from .errors import InputError
from .hashing import canonical_json
from .scoring.matchers import row_match
from .storage import read_table, to_table, write_parquet


def score_build(build_dir: str | Path) -> int:
    """Write ``scores.parquet`` for the build; returns the number of score rows. Raises InputError without a build."""
    build_dir = Path(build_dir)
    ipath = build_dir / "instances.parquet"
    if not ipath.exists():
        raise InputError(f"{build_dir} is not a build directory (no instances.parquet)")
    inst = pq.read_table(ipath, columns=["instance_id", "gold"]).to_pylist()
    gold = {r["instance_id"]: json.loads(r["gold"]) for r in inst}
    resp = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    rows = []
    for r in sorted(resp, key=lambda r: (r["model"], r["mode"], r["instance_id"], r["sample"], r["request_key"])):
        if r["status"] != "ok" or r["instance_id"] not in gold:
            continue
        m = row_match(r["response"], gold[r["instance_id"]])
        rows.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"], "sample": r["sample"],
                     "matcher": "row_match", "score": float(m.score), "tags": canonical_json(m.tags),
                     "request_key": r["request_key"], "detail": canonical_json({"rows": m.rows})})
    write_parquet(to_table("scores", rows), build_dir / "scores.parquet")
    return len(rows)
