"""HoloBench build speed (issue 16 targets 1 and 2; issue 36: certify included): a whole build's wall time (its
stages as ``ctxbench build`` runs them, the ``certify`` stage included, each stage timed) divided by one tokenizer
pass over every context it writes (each instance's context, as stored in instances.parquet), cold (empty cache) and warm (a
rebuild with another seed on the cache the cold build left), and the same for one context alone; peak memory of
each build process. Each build runs in a fresh process (bench/buildbench.py). Prints figures; asserts nothing.

    python bench/build_speed.py [--db nycflights13] [--tokenizer cl100k_base] [--lengths 262144,1048576]
                                [--single 1048576] [--skip-whole] [--skip-single]
    python bench/build_speed.py --lengths 10000000 --questions nycflights13-q02 --skip-single   # one 10M context
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import buildbench as bb  # noqa: E402

STAGES = ["load_stage", "verbalize_stage", "assemble_stage", "gold_stage", "validate_stage", "write_stage"]
CERTIFY = ["certify_stage"]  # ctxbench.verify's stage that ends every build


def _child_whole(a) -> dict:
    import pyarrow.parquet as pq

    import ctxbench.tracks.holobench as hb
    import ctxbench.verify as cv
    from ctxbench.core.track import get_track
    from ctxbench.tokenizers import get_tokenizer
    from ctxbench.tokenizers import counts as tc

    cfg = hb.HoloBenchConfig(db=a.db, tokenizer=a.tokenizer, lengths=[int(x) for x in a.lengths.split(",")],
                             seed=a.seed, question_ids=a.questions.split(",") if a.questions else None)
    st: dict[str, float] = {}
    # the track's stages as `ctxbench build` runs them, certify included (each looked up when it runs: timed here)
    with bb.stage_times(hb, STAGES, st), bb.stage_times(cv, CERTIFY, st), bb.Clock() as clock:
        res = get_track("holobench").build(cfg, a.out)
    rss = bb.peak_rss_mib()
    t = pq.read_table(Path(a.out) / "instances.parquet", columns=["context", "context_tokens", "target_tokens"])
    contexts = t.column("context").to_pylist()
    tok = get_tokenizer(a.tokenizer)
    p = bb.tokenizer_pass(tok, contexts)
    uniq = list(dict.fromkeys(contexts))
    upass = bb.tokenizer_pass(tok, uniq).wall
    fill = [c / x for c, x in zip(t.column("context_tokens").to_pylist(), t.column("target_tokens").to_pylist())]
    hits = sum(c.hits for c in tc._LIVE)
    misses = sum(c.misses for c in tc._LIVE)
    return {"build_s": clock.wall, "build_cpu": clock.cpu, "pass_s": p.wall, "pass_cpu": p.cpu,
            "unique_pass_s": upass, "contexts": len(contexts),
            "unique": len(uniq), "tokens": sum(t.column("context_tokens").to_pylist()), "rss": rss,
            "stages": {k.replace("_stage", ""): round(v, 2) for k, v in st.items()}, "min_fill": min(fill),
            "count_hits": hits, "count_misses": misses, "instances": res.n_instances, "build_hash": res.build_hash}


def _child_single(a) -> dict:
    import pandas  # noqa: F401  (module imports are not the context's cost: a build has them loaded)
    import pyarrow.parquet  # noqa: F401

    from ctxbench.tokenizers import get_tokenizer
    from ctxbench.tracks.holobench import HoloBenchConfig, build_context
    from ctxbench.tracks.holobench.source import load_database_header, prepare_source_cached

    raw = load_database_header(a.db)
    src = prepare_source_cached(raw, Path(tempfile.mkdtemp()) / "source.sqlite",
                                reload=lambda: __import__("ctxbench.sources", fromlist=["x"]).load_database(a.db))
    tok = get_tokenizer(a.tokenizer)
    tok.count("warm up")
    q = max(src.questions, key=lambda q: sum(len(src.db.tables[t].rows) for t in src.db.tables
                                             if t.lower() in q.info["tables"]))
    tables = sorted(t for t in src.db.tables if t.lower() in q.info["tables"])
    L = int(a.single)
    cfg = HoloBenchConfig(db=a.db, lengths=[L], tokenizer=a.tokenizer, seed=a.seed)
    with bb.Clock() as clock:
        ctx = build_context(src, cfg, tables, L, "uniform", tok)
    rss = bb.peak_rss_mib()
    p = bb.tokenizer_pass(tok, [ctx.text])
    return {"build_s": clock.wall, "build_cpu": clock.cpu, "pass_s": p.wall, "pass_cpu": p.cpu, "contexts": 1,
            "tokens": ctx.context_tokens, "rss": rss,
            "tables": tables, "fill": ctx.context_tokens / L}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="nycflights13")
    ap.add_argument("--tokenizer", default="cl100k_base")
    ap.add_argument("--lengths", default="262144,1048576")
    ap.add_argument("--questions", default="", help="question ids (default: every question)")
    ap.add_argument("--single", default="1048576", help="tier of the one-context measurement")
    ap.add_argument("--skip-whole", action="store_true")
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--child", choices=["whole", "single"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        r = _child_whole(a) if a.child == "whole" else _child_single(a)
        print(json.dumps(r))
        return
    script = str(Path(__file__).resolve())
    common = ["--db", a.db, "--tokenizer", a.tokenizer, "--lengths", a.lengths, "--single", a.single,
              "--questions", a.questions]
    print(f"HoloBench {a.db}, {a.tokenizer}; each build in a fresh process; cold = empty cache, warm = rebuild "
          f"with a new seed on the cache left by the cold build")
    if not a.skip_whole:
        bb.series(script, [(label, [*common, "--child", "whole", "--seed", str(seed), "--out", f"{{work}}/s{seed}"])
                           for label, seed in (("whole build, cold", 0), ("whole build, warm (seed 1)", 1))],
                  lambda r: [f"    {r['instances']} instances, {r['unique']} distinct contexts (one pass over those: "
                             f"{r['unique_pass_s']:.2f} s); smallest fill {r['min_fill']:.4f} of the tier; unit "
                             f"counts read {r['count_hits']:,} / made {r['count_misses']:,}", bb.stages(r)])
    if not a.skip_single:
        bb.series(script, [(label, [*common, "--child", "single", "--seed", str(seed)])
                           for label, seed in ((f"one {int(a.single):,} context, cold", 0),
                                               ("  same, warm (seed 1)", 1), ("  same, warm (seed 0 again)", 0))])


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
