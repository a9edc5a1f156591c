"""Build time of the scientific-article track relative to one tokenizer pass, and its peak memory.

Part 1, collections: converts the shared PDFs (cached by PDF hash after the first run) and reads the unArXive sample
(``--unarxive``, default the shared one; ``--unarxive ''`` for PDFs only), then for each tier builds the collections
(random, BFS, DFS; ``--per-tier`` each) and divides the time by one tokenizer pass over the text of every collection
built (the same tokenizer counting the same characters once).

Part 2, the whole build (``--full``, default on; run first): ``build_scitrek`` on the same sources at
``--full-tiers`` (default 131072,1048576), cold (empty token-count cache) and warm (another seed), each in a fresh
process, timed stage by stage, against one tokenizer pass over every context it writes (instances.parquet), with
the peak resident memory of the build process.

Usage: ``python bench/scitrek_build.py [--tiers 65536,131072,524288,1048576] [--tokenizer o200k_base]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import buildbench as bb  # noqa: E402

from ctxbench.core.config import shared_data_dir
from ctxbench.contexts.collections import build_collections
from ctxbench.convert.pdf import convert_pdfs
from ctxbench.sources.articles import citation_edges, load_metadata
from ctxbench.sources.unarxive import read_unarxive
from ctxbench.tokenizers import get_tokenizer


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


STAGES = ["fetch_stage", "convert_stage", "database_stage", "collections_stage", "questions_stage",
          "instances_stage", "validate_stage", "write_stage"]


def _child_whole(a) -> dict:
    import pyarrow.parquet as pq

    from ctxbench.tokenizers import get_tokenizer
    from ctxbench.tracks.scitrek import build as sb

    pdfs = shared_data_dir() / "articles" / "pdfs"
    cfg = sb.SciTrekConfig(pdfs=str(pdfs), metadata=str(pdfs / "metadata.json"), unarxive=a.unarxive or None,
                           tokenizer=a.tokenizer, lengths=[int(x) for x in a.full_tiers.split(",")], seed=a.seed)
    st: dict[str, float] = {}
    with bb.stage_times(sb, STAGES, st), bb.Clock() as clock:
        res = sb.build_scitrek(cfg, a.out)
    rss = bb.peak_rss_mib()
    t = pq.read_table(Path(res.out) / "instances.parquet", columns=["context", "context_tokens"])
    contexts = t.column("context").to_pylist()
    tok = get_tokenizer(a.tokenizer)
    p = bb.tokenizer_pass(tok, contexts)
    cols = pq.read_table(Path(res.out) / "collections.parquet").num_rows
    return {"build_s": clock.wall, "build_cpu": clock.cpu, "pass_s": p.wall, "pass_cpu": p.cpu,
            "contexts": len(contexts), "tokens": sum(t.column("context_tokens").to_pylist()), "rss": rss,
            "stages": {k.replace("_stage", ""): round(v, 2) for k, v in st.items() if not k.endswith("cpu")},
            "unique_pass_s": bb.tokenizer_pass(tok, list(dict.fromkeys(contexts))).wall,
            "unique": len(set(contexts)), "instances": res.n_instances, "collections": cols}


def full_part(a) -> None:
    """The whole build, cold and warm (another seed), each in a fresh process (bench/buildbench.py); PDF
    conversions come from the machine's conversion cache in both (conversion is not a tokenizer matter)."""
    args = ["--child", "--unarxive", a.unarxive, "--tokenizer", a.tokenizer, "--full-tiers", a.full_tiers]
    bb.series(str(Path(__file__).resolve()),
              [(label, [*args, "--seed", str(seed), "--out", f"{{work}}/s{seed}"])
               for label, seed in ((f"whole build {a.full_tiers}, cold", 0), ("whole build, warm (seed 1)", 1))],
              lambda r: [f"    {r['instances']} instances, {r['collections']} collections; {r['unique']} distinct "
                         f"contexts (one pass over those: {r['unique_pass_s']:.2f} s)", bb.stages(r)],
              conversions=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiers", default="65536,131072,524288,1048576")
    ap.add_argument("--tokenizer", default="o200k_base")
    ap.add_argument("--per-tier", type=int, default=3)
    ap.add_argument("--unarxive", default=str(shared_data_dir() / "articles" / "unarxive_sample"))
    ap.add_argument("--full-tiers", default="131072,1048576")
    ap.add_argument("--full", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_child_whole(a)))
        return
    pdfs = shared_data_dir() / "articles" / "pdfs"
    if a.full:
        full_part(a)
    collections_part(a, pdfs)


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
