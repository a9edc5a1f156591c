"""Collection build time of the scientific-article track relative to one tokenizer pass.

Converts the shared PDFs (cached by PDF hash after the first run), then for each tier builds the collections
(random, BFS, DFS; 3 each) and divides the time by one tokenizer pass over the text of every collection built
(the same tokenizer counting the same characters once). Also times the whole metadata-database + question stage on
those collections. Usage: ``python bench/scitrek_build.py [--tiers 65536,131072,524288] [--tokenizer o200k_base]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ctxbench.config import shared_data_dir
from ctxbench.contexts.collections import build_collections
from ctxbench.convert.pdf import convert_pdfs
from ctxbench.sources.articles import citation_edges, load_metadata
from ctxbench.tokenizers import get_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiers", default="65536,131072,524288")
    ap.add_argument("--tokenizer", default="o200k_base")
    ap.add_argument("--per-tier", type=int, default=3)
    a = ap.parse_args()
    pdfs = shared_data_dir() / "articles" / "pdfs"
    metas = load_metadata(pdfs / "metadata.json")
    paths = [pdfs / m.file for m in metas if (pdfs / m.file).exists()]
    t0 = time.perf_counter()
    convs, _ = convert_pdfs(paths)
    print(f"conversion (cached after the first run): {time.perf_counter() - t0:.1f} s for {len(paths)} PDFs")
    by_file = {Path(p).name: c for p, c in zip(paths, convs) if c is not None}
    texts = {m.id: by_file[m.file].markdown.strip() for m in metas if m.file in by_file}
    kept = [m for m in metas if m.id in texts]
    edges = citation_edges(kept)
    tok = get_tokenizer(a.tokenizer)
    tok.count("warm up")
    print(f"{len(texts)} articles, {sum(len(t) for t in texts.values()):,} characters")
    for tier in (int(x) for x in a.tiers.split(",")):
        t0 = time.perf_counter()
        res = build_collections(texts, edges, [tier], ["random", "bfs", "dfs"], a.per_tier, tok)
        t_build = time.perf_counter() - t0
        if not res.collections:
            print(f"{tier:>9,} tokens: no collection ({len(res.quarantine)} candidates too small)")
            continue
        t0 = time.perf_counter()
        n = sum(tok.count(c.context) for c in res.collections)
        t_pass = time.perf_counter() - t0
        print(f"{tier:>9,} tokens: {len(res.collections)} collections, {n:,} tokens; build {t_build:.2f} s = "
              f"{t_build / t_pass:.2f}x one tokenizer pass over them ({t_pass:.2f} s)")


if __name__ == "__main__":
    main()
