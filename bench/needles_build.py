"""Haystack-building speed of the planted-fact track (issue 6): time to build one 1M-token haystack with a needle
planted (count every paragraph once, size by prefix sums, plant, count the context exactly and locate the needle)
divided by the time of one tokenizer pass over the same context, and peak memory. Prints figures; asserts nothing.

    python bench/needles_build.py [--corpus ../shared/data/classical/songyuan_xuean/volumes] [--model gpt-4.1]
                                  [--tier 1000000]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from ctxbench.config import shared_data_dir
from ctxbench.tracks.needles import build as nd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(shared_data_dir() / "classical" / "songyuan_xuean" / "volumes"))
    ap.add_argument("--model", default="gpt-4.1")
    ap.add_argument("--tier", type=int, default=1_000_000)
    a = ap.parse_args()
    cfg = nd.NeedlesConfig(corpus=a.corpus, models=[a.model], lengths=[a.tier], depths=[0.5], chains=False,
                           variants=["real"])
    t0 = time.perf_counter()
    loaded = nd.load_stage(cfg, Path("/nonexistent-bench-out"))
    load_s = time.perf_counter() - t0
    info, tok = loaded.models[a.model]
    paras = loaded.corpus.paragraphs()
    item = loaded.needle_set.items([0.5], variants=("real",))[0]
    # the build of one haystack: one batched count of the paragraphs, sizing by prefix sums, one planted context
    t0 = time.perf_counter()
    counts = nd.count_stage(loaded)[tok.name]
    count_s = time.perf_counter() - t0
    from itertools import accumulate

    t1 = time.perf_counter()
    prefix = [0, *accumulate(counts)]
    chars = [0, *accumulate(len(p) + 1 for p in paras)]
    overhead = nd._overhead(a.model, tok, [item.question], info.max_output_tokens)
    reserve = sum(tok.count(s + "\n") + 2 for s in item.statements)
    hs = nd.size_haystack(a.model, info, tok, a.tier, prefix, cfg.fill, overhead, reserve, chars,
                          more_paragraphs=len(counts) < len(paras))
    if isinstance(hs, str):
        raise SystemExit(hs)
    row, off = nd._instance(loaded, hs, tok, paras, counts, item)
    if row is None:
        raise SystemExit(off["reason"])
    plant_s = time.perf_counter() - t1
    build_s = count_s + plant_s
    t0 = time.perf_counter()
    n = tok.count(row["context"])
    pass_s = time.perf_counter() - t0
    print(f"corpus {loaded.corpus.corpus_id}: {len(paras):,} paragraphs; load {load_s:.1f} s")
    print(f"{a.model} ({tok.name}) @ {a.tier:,}: haystack {row['context_tokens']:,} tokens "
          f"({len(row['context']):,} characters, {hs.k:,} paragraphs), budget {hs.budget:,}; needle at "
          f"{row['achieved_depth']:.2%} of the tokens (label 50%)")
    print(f"build {build_s:.2f} s = count paragraphs {count_s:.2f} s + size, plant, count exactly and locate "
          f"{plant_s:.2f} s; one tokenizer pass over the context {pass_s:.2f} s ({n:,} tokens); "
          f"ratio {build_s / pass_s:.2f}x")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak:.0f} MiB")


if __name__ == "__main__":
    main()
