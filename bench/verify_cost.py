"""Cost of verifying a build against one tokenizer pass over its contexts (issue 23: target ≤ 1.5×).

    python bench/verify_cost.py BUILD_DIR [BUILD_DIR ...]

For each build: the seconds of one pass of the build's tokenizer over every instance's context (as the builder
counts them; needles: each sizing model's tokenizer), the seconds of ``verify_build`` (certificates not written),
and their ratio, also against a pass over the distinct contexts only (instances share contexts). Each figure is the
fastest of three interleaved runs. The gold engines' libraries are imported before timing (a build has them loaded
when its certify stage runs). One line per build."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

REPEAT = 3


def distinct_contexts(build: Path) -> int:
    """How many distinct contexts the build's instances hold."""
    return len(set(pq.read_table(build / "instances.parquet", columns=["context"]).column("context").to_pylist()))


def tokenizer_pass(build: Path, distinct: bool = False) -> float:
    from ctxbench.models.registry import sizing_tokenizer
    from ctxbench.tokenizers import get_tokenizer

    rows = pq.read_table(build / "instances.parquet", columns=["context", "tokenizer", "sizing_model"]).to_pylist()
    toks = {}
    if distinct:
        rows = list({(r["context"], r["tokenizer"], r["sizing_model"]): r for r in rows}.values())
    t0 = time.perf_counter()
    for r in rows:
        key = r["sizing_model"] or r["tokenizer"]
        if key not in toks:
            toks[key] = sizing_tokenizer(key)[1] if r["sizing_model"] else get_tokenizer(r["tokenizer"])
        toks[key].count(r["context"])
    return time.perf_counter() - t0


def main(argv: list[str]) -> None:
    import duckdb  # noqa: F401  the libraries a build has loaded before its certify stage, imported untimed
    import sqlglot  # noqa: F401

    import ctxbench.gold  # noqa: F401
    from ctxbench.verify import verify_build

    for b in map(Path, argv):
        tokenizer_pass(b)  # tokenizers loaded once before timing
        # each figure the fastest of REPEAT runs, interleaved (timeit's rule: the others measure the machine's noise)
        tok_s = dis_s = ver_s = float("inf")
        for _ in range(REPEAT):
            tok_s = min(tok_s, tokenizer_pass(b))
            dis_s = min(dis_s, tokenizer_pass(b, distinct=True))
            t0 = time.perf_counter()
            res = verify_build(b, write=False)
            ver_s = min(ver_s, time.perf_counter() - t0)
        n = len(res.certificates)
        print(f"{b}: {n} instances; tokenizer pass {tok_s:.2f} s over every instance's context "
              f"({dis_s:.2f} s over the {distinct_contexts(b)} distinct contexts), verify {ver_s:.2f} s, ratio {ver_s / tok_s:.2f}x "
              f"({ver_s / dis_s:.2f}x against distinct contexts); " + "; ".join(res.summary_lines()))


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(lambda: main(sys.argv[1:] or ["runs/default/latest"]))  # Ctrl-C: exit 130, no traceback
