"""Build speed of the planted-fact track (issues 6, 16): a whole needles build of the classical corpus divided by
one tokenizer pass over every context it writes, cold (empty cache) and warm (the same configuration rebuilt into
another directory on the cache the cold build left; the track has no seed), with per-stage times and peak memory;
and one 1M-token haystack with a needle planted (count the paragraphs, size by prefix sums, plant, count the
context exactly, locate the needle, detect its language) against one pass over that context. Each build runs in a fresh process
(bench/buildbench.py). Prints figures; asserts nothing.

    python bench/needles_build.py [--corpus ../shared/data/classical/songyuan_xuean/volumes] [--models gpt-4.1]
                                  [--lengths 262144,524288,1048576] [--tier 1000000] [--skip-whole] [--skip-single]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import buildbench as bb  # noqa: E402

STAGES = ["load_stage", "verify_stage", "count_stage", "assemble_stage", "validate_stage", "write_stage"]


def _child_whole(a) -> dict:
    import pyarrow.parquet as pq

    from ctxbench.tokenizers import get_tokenizer
    from ctxbench.tracks.needles import build as nd

    cfg = nd.NeedlesConfig(corpus=a.corpus, models=a.models.split(","), lengths=[int(x) for x in a.lengths.split(",")])
    st: dict[str, float] = {}
    with bb.stage_times(nd, STAGES, st), bb.Clock() as clock:
        res = nd.build_needles(cfg, a.out)
    rss = bb.peak_rss_mib()
    t = pq.read_table(Path(res.out) / "instances.parquet", columns=["context", "context_tokens", "tokenizer"])
    contexts, names = t.column("context").to_pylist(), t.column("tokenizer").to_pylist()
    with bb.Clock() as p:
        for c, name in zip(contexts, names):
            get_tokenizer(name).count(c)
    return {"build_s": clock.wall, "build_cpu": clock.cpu, "pass_s": p.wall, "pass_cpu": p.cpu,
            "contexts": len(contexts), "tokens": sum(t.column("context_tokens").to_pylist()), "rss": rss,
            "stages": {k.replace("_stage", ""): round(v, 2) for k, v in st.items()},
            "instances": res.n_instances, "quarantined": res.n_quarantined}


def _child_single(a) -> dict:
    from itertools import accumulate

    import pandas  # noqa: F401  (module imports are not the haystack's cost: a build has them loaded)
    import pyarrow.parquet  # noqa: F401

    from ctxbench.tracks.needles import build as nd

    model = a.models.split(",")[0]
    cfg = nd.NeedlesConfig(corpus=a.corpus, models=[model], lengths=[a.tier], depths=[0.5], chains=False,
                           variants=["real"])
    import os

    os.environ["CTXBENCH_SIDECAR"] = "off"  # one haystack, not a build: no validation helper beside it
    from ctxbench.features.language import language_columns

    loaded = nd.load_stage(cfg, Path(tempfile.mkdtemp()) / "out")
    info, tok = loaded.models[model]
    tok.count("warm up")
    paras = loaded.corpus.paragraphs()
    item = loaded.needle_set.items([0.5], variants=("real",))[0]
    with bb.Clock() as clock:
        counts = nd.count_stage(loaded)[tok.name]
        prefix = [0, *accumulate(counts)]
        chars = [0, *accumulate(len(p) + 1 for p in paras)]
        overhead = nd._overhead(model, tok, [item.question], info.max_output_tokens)
        reserve = sum(tok.count(s + "\n") + 2 for s in item.statements)
        hs = nd.size_haystack(model, info, tok, a.tier, prefix, cfg.fill, overhead, reserve, chars,
                              more_paragraphs=len(counts) < len(paras))
        if isinstance(hs, str):
            raise SystemExit(hs)
        row, off = nd._instance(loaded, hs, tok, paras, counts, item)
        if row is None:
            raise SystemExit(off["reason"])
        row.update(language_columns(row))  # as the assemble stage adds it
    rss = bb.peak_rss_mib()
    p = bb.tokenizer_pass(tok, [row["context"]])
    return {"build_s": clock.wall, "build_cpu": clock.cpu, "pass_s": p.wall, "pass_cpu": p.cpu, "contexts": 1,
            "tokens": row["context_tokens"], "rss": rss, "depth": row["achieved_depth"], "paragraphs": hs.k}


def main() -> None:
    from ctxbench.core.config import shared_data_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(shared_data_dir() / "classical" / "songyuan_xuean" / "volumes"))
    ap.add_argument("--models", default="gpt-4.1")
    ap.add_argument("--lengths", default="262144,524288,1048576")
    ap.add_argument("--tier", type=int, default=1_000_000)
    ap.add_argument("--skip-whole", action="store_true")
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--child", choices=["whole", "single"])
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_child_whole(a) if a.child == "whole" else _child_single(a)))
        return
    script = str(Path(__file__).resolve())
    common = ["--corpus", a.corpus, "--models", a.models, "--lengths", a.lengths, "--tier", str(a.tier)]
    print(f"needles build of {a.corpus} for {a.models}; each build in a fresh process; cold = empty cache, warm = "
          f"the same configuration rebuilt elsewhere on the cache left by the cold build")
    if not a.skip_whole:
        bb.series(script, [(label, [*common, "--child", "whole", "--out", f"{{work}}/{d}"])
                           for label, d in (("whole build, cold", "a"), ("whole build, warm", "b"))],
                  lambda r: [f"    {r['instances']} instances, {r['quarantined']} quarantined", bb.stages(r)])
    if not a.skip_single:
        bb.series(script, [(label, [*common, "--child", "single"])
                           for label in (f"one {a.tier:,} haystack, cold", "  same, warm")],
                  lambda r: [f"    {r['paragraphs']:,} paragraphs, needle at {r['depth']:.2%}"])


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
