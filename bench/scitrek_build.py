"""Build time of the scientific-article track relative to one tokenizer pass, and its peak memory.

Part 1, collections: converts the shared PDFs (cached by PDF hash after the first run) and reads the unArXive sample
(``--unarxive``, default the shared one; ``--unarxive ''`` for PDFs only), then for each tier builds the collections
(random, BFS, DFS; ``--per-tier`` each) and divides the time by one tokenizer pass over the text of every collection
built (the same tokenizer counting the same characters once).

Part 2, the whole build (``--full``, default on): ``build_scitrek`` on the same sources at ``--full-tiers``
(default 131072,1048576, the issue's command), timed stage by stage, against one tokenizer pass over every
collection it built; peak resident memory of this process (``ru_maxrss``) after the build.

Usage: ``python bench/scitrek_build.py [--tiers 65536,131072,524288,1048576] [--tokenizer o200k_base]``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from ctxbench.config import shared_data_dir
from ctxbench.contexts.collections import build_collections
from ctxbench.convert.pdf import convert_pdfs
from ctxbench.sources.articles import citation_edges, load_metadata
from ctxbench.sources.unarxive import read_unarxive
from ctxbench.tokenizers import get_tokenizer


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def collections_part(a, pdfs: Path) -> None:
    metas = load_metadata(pdfs / "metadata.json")
    paths = [pdfs / m.file for m in metas if (pdfs / m.file).exists()]
    t0 = time.perf_counter()
    convs, _ = convert_pdfs(paths)
    print(f"conversion (cached after the first run): {time.perf_counter() - t0:.1f} s for {len(paths)} PDFs")
    by_file = {Path(p).name: c for p, c in zip(paths, convs) if c is not None}
    texts = {m.id: by_file[m.file].markdown.strip() for m in metas if m.file in by_file}
    edges = citation_edges([m for m in metas if m.id in texts])
    if a.unarxive:
        t0 = time.perf_counter()
        ux = read_unarxive(a.unarxive)
        print(f"unArXive: {len(ux.articles)} articles read in {time.perf_counter() - t0:.2f} s")
        texts.update({x.source_id: x.text.strip() for x in ux.articles})
    tok = get_tokenizer(a.tokenizer)
    tok.count("warm up")
    print(f"{len(texts)} articles, {sum(len(t) for t in texts.values()):,} characters")
    for tier in (int(x) for x in a.tiers.split(",")):
        t0 = time.perf_counter()
        res = build_collections(texts, edges, [tier], ["random", "bfs", "dfs"], a.per_tier, tok, min_fill=0.9)
        t_build = time.perf_counter() - t0
        if not res.collections:
            print(f"{tier:>9,} tokens: no collection ({len(res.quarantine)} candidates too small)")
            continue
        t0 = time.perf_counter()
        n = sum(tok.count(c.context) for c in res.collections)
        t_pass = time.perf_counter() - t0
        print(f"{tier:>9,} tokens: {len(res.collections)} collections, {n:,} tokens; build {t_build:.2f} s = "
              f"{t_build / t_pass:.2f}x one tokenizer pass over them ({t_pass:.2f} s)")


def full_part(a, pdfs: Path) -> None:
    from ctxbench.tracks.scitrek import build as sb

    cfg = sb.SciTrekConfig(pdfs=str(pdfs), metadata=str(pdfs / "metadata.json"), unarxive=a.unarxive or None,
                           tokenizer=a.tokenizer, lengths=[int(x) for x in a.full_tiers.split(",")])
    times = {}
    with tempfile.TemporaryDirectory() as d:
        t_all = time.perf_counter()
        t0 = time.perf_counter()
        loaded = sb.fetch_stage(cfg, Path(d) / "b", force=True)
        times["fetch+read"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        conversions, conv_q = sb.convert_stage(loaded)
        times["convert (cached)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        conv = sb.database_stage(loaded, conversions)
        times["database"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        col = sb.collections_stage(loaded, conv)
        times["collections"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        qs, q_q, counts = sb.questions_stage(loaded, conv, col)
        inst = sb.instances_stage(loaded, col, qs)
        times["questions+instances"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        sb.validate_stage(loaded, col, inst)
        sb.write_stage(loaded, conv, col, inst, conv_q, q_q, counts)
        times["validate+write"] = time.perf_counter() - t0
        total = time.perf_counter() - t_all
    tok = get_tokenizer(a.tokenizer)
    t0 = time.perf_counter()
    n = sum(tok.count(c.context) for c in col.collections)
    t_pass = time.perf_counter() - t0
    big = [c for c in col.collections if c.tier == max(cfg.lengths)]
    t0 = time.perf_counter()
    n_big = sum(tok.count(c.context) for c in big)
    t_big = time.perf_counter() - t0
    print(f"whole build at {cfg.lengths}: {total:.1f} s, {len(col.collections)} collections ({len(big)} at "
          f"{max(cfg.lengths):,}), {len(inst)} instances; " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))
    print(f"one tokenizer pass over every collection: {n:,} tokens in {t_pass:.2f} s -> build = "
          f"{total / t_pass:.1f}x that pass; over the {max(cfg.lengths):,} collections alone: {n_big:,} tokens in "
          f"{t_big:.2f} s -> build = {total / t_big:.1f}x")
    print(f"peak resident memory of this process: {_peak_mib():,.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiers", default="65536,131072,524288,1048576")
    ap.add_argument("--tokenizer", default="o200k_base")
    ap.add_argument("--per-tier", type=int, default=3)
    ap.add_argument("--unarxive", default=str(shared_data_dir() / "articles" / "unarxive_sample"))
    ap.add_argument("--full-tiers", default="131072,1048576")
    ap.add_argument("--full", action=argparse.BooleanOptionalAction, default=True)
    a = ap.parse_args()
    pdfs = shared_data_dir() / "articles" / "pdfs"
    if a.full:  # first, so that its peak memory is its own
        full_part(a, pdfs)
    collections_part(a, pdfs)


if __name__ == "__main__":
    main()
