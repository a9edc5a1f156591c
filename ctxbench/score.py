"""``score``: every stored response × matcher → ``scores.parquet`` (recomputed whole, deterministic).

Only responses with status ``ok`` are scored; over-length, refused and failed calls are never scored as wrong
answers (they are counted in the report instead).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from .hashing import canonical_json
from .incremental import check_build_tables
from .scoring.registry import matcher, matchers_for, tagger
from .storage import read_table, require_build, to_table, write_parquet


@dataclass
class ScoreSummary:
    rows: int = 0
    judged: int = 0
    unparseable_verdicts: int = 0
    tagging: dict | None = None   # benchmark → what its failure tagger did (registry.TAGGERS)


def score_build(build_dir: str | Path, judge: str | None = None, judge_base_url: str | None = None,
                judge_api_key_env: str | None = None) -> ScoreSummary:
    """Write ``scores.parquet`` for the build: every deterministic matcher of the instance's benchmark
    (:mod:`ctxbench.scoring.registry`; ``row_match`` for holobench) for every ok response and, when a
    judge model is given, ``judge:<model>`` too (unparseable verdicts are counted, not scored). Raises InputError
    without a build."""
    build_dir = require_build(build_dir)
    bhash = check_build_tables(build_dir) if (build_dir / "manifest.json").exists() else None
    ipath = build_dir / "instances.parquet"
    cols = [c for c in pq.read_schema(ipath).names if c != "context"]  # contexts can be GBs in all
    inst = pq.read_table(ipath, columns=cols).to_pylist()
    by_id: dict[str, dict] = {}
    for r in inst:
        r = dict(r)
        r["gold"] = json.loads(r["gold"])
        if r.get("accepted_answers") is not None:
            r["accepted_answers"] = json.loads(r["accepted_answers"])
        by_id[r["instance_id"]] = r
    gold = {k: v["gold"] for k, v in by_id.items()}
    question = {k: v["question"] for k, v in by_id.items()}
    resp = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    rows = []
    ok = [r for r in sorted(resp, key=lambda r: (r["model"], r["mode"], r["instance_id"], r["sample"],
                                                 r["request_key"]))
          if r["status"] == "ok" and r["instance_id"] in gold]
    summary = ScoreSummary()
    for r in ok:
        row = by_id[r["instance_id"]]
        for name in matchers_for(row.get("benchmark")):
            m = matcher(name, row.get("benchmark"))(r["response"], row)
            rows.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                         "sample": r["sample"], "matcher": name, "score": float(m.score),
                         "tags": canonical_json(m.tags), "request_key": r["request_key"], "build_hash": bhash,
                         "detail": canonical_json({"rows": m.rows})})
    resp_by_key = {r["request_key"]: r for r in ok}
    judge_cfg = {"model": judge, "base_url": judge_base_url, "api_key_env": judge_api_key_env} if judge else None
    for bench in sorted({str(by_id[r["instance_id"]].get("benchmark")) for r in ok}):
        if (tag := tagger(bench)) is not None:   # failure tags that need the whole build (registry.TAGGERS)
            summary.tagging = summary.tagging or {}
            summary.tagging[bench] = tag([x for x in rows if str(by_id[x["instance_id"]].get("benchmark")) == bench], by_id, resp_by_key,
                judge=judge_cfg, build_dir=build_dir)
    if judge:
        from .scoring.judge import judge_all

        outs = judge_all([(question[r["instance_id"]], gold[r["instance_id"]], r["response"] or "") for r in ok],
                         judge, judge_base_url, api_key_env=judge_api_key_env)
        for r, o in zip(ok, outs):
            summary.judged += 1
            if o.score is None:
                summary.unparseable_verdicts += 1
                continue
            rows.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                         "sample": r["sample"], "matcher": f"judge:{judge}", "score": float(o.score),
                         "tags": canonical_json([]), "request_key": r["request_key"], "build_hash": bhash,
                         "detail": canonical_json({"verdicts": o.verdicts})})
    write_parquet(to_table("scores", rows), build_dir / "scores.parquet")
    summary.rows = len(rows)
    return summary
