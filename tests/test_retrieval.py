"""Retrieval solver: token chunking, BM25 on unsegmented Chinese, no zero-IDF collapse on tiny chunk pools,
fusion, budgets, the on-disk index, and exact evidence recall on a built verbalized-database instance (recall
recomputed independently as a set of token positions, and covered evidence found again in the retrieved text)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctxbench.retrieval import RetrievalConfig, retrieve
from ctxbench.retrieval.chunking import chunk_context, chunk_ranges
from ctxbench.retrieval.hybrid import ContextIndex, rrf, select
from ctxbench.retrieval.sparse import BM25Index, analyze


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def test_chunk_ranges_by_hand():
    assert chunk_ranges(1300, 600, 100) == [(0, 600), (500, 1100), (1000, 1300)]
    assert chunk_ranges(600, 600, 100) == [(0, 600)]
    assert chunk_ranges(601, 600, 100) == [(0, 600), (500, 601)]
    assert chunk_ranges(250, 600, 100) == [(0, 250)]
    assert chunk_ranges(0, 600, 100) == []
    with pytest.raises(Exception, match="overlap"):
        chunk_ranges(10, 100, 100)


def test_chunk_texts_are_exact_token_slices(tiktoken_enc):
    enc = tiktoken_enc("cl100k_base")
    text = "Über 北京大学 the café — naïve résumé. " * 40
    from ctxbench.tokenizers import get_tokenizer

    ids, starts = get_tokenizer("cl100k_base").char_starts(text)
    chunks = chunk_context(text, starts, 50, 10)
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text)
    # disjoint pieces (every other chunk's non-overlapping part) re-assemble the text
    for c in chunks:
        piece = text[c.char_start:c.char_end]
        n = len(enc.encode_ordinary(piece))
        assert abs(n - (c.end - c.start)) <= 2  # re-tokenizing a slice may merge at most the boundary tokens


CHINESE = ["今天天气很好，我们去公园散步。", "北京大学的图书馆藏书非常丰富。", "他在上海的一家银行工作了十年。"]


def test_analyzer_makes_cjk_unigrams_and_bigrams():
    assert analyze("北京大学 Library") == ["北", "京", "大", "学", "北京", "京大", "大学", "library"]


def test_bm25_on_chinese_returns_the_chunk_with_the_query_characters():
    ix = BM25Index(CHINESE)
    for i, q in enumerate(["图书馆藏书", "银行工作", "公园散步"]):
        s = ix.scores(q)
        assert int(np.argmax(s)) == [1, 2, 0][i]
        assert s.max() > 0
    # a whole-run tokenizer (bm25s's default word pattern) would see each sentence as one token and match nothing
    import bm25s

    toks = bm25s.tokenize(CHINESE, stopwords=None, show_progress=False)
    assert "图书馆藏书" not in toks.vocab and len(toks.vocab) <= 2 * len(CHINESE)


def test_small_pool_idf_does_not_collapse():
    pool = ["the harbour master logs every ship", "the lighthouse keeper counts gulls"]
    lucene = BM25Index(pool).scores("lighthouse")
    # Lucene IDF for df=1, N=2: log(1 + 1.5/1.5) = log 2; Lucene's term weight (no (k1+1) factor), tf=1, k1=1.5,
    # b=0.75, lengths 5 and 4 terms ("every" is not a bm25s stopword): log 2 / (1 + 1.5*(0.25 + 0.75*4/4.5))
    L = [len(analyze(t)) for t in pool]
    assert L == [5, 4]
    expected = np.log(2) / (1 + 1.5 * (1 - 0.75 + 0.75 * 4 / 4.5))
    assert lucene[0] == 0 and lucene[1] == pytest.approx(expected, rel=1e-5)
    # the original Robertson IDF is log(1.5/1.5) = 0 here: every chunk scores 0 and the ranking collapses
    assert np.all(BM25Index(pool, method="robertson").scores("lighthouse") == 0)
    three = BM25Index(pool + ["ships and gulls and the harbour"]).scores("harbour gulls")
    assert np.all(three > 0) and int(np.argmax(three)) == 2


def test_rrf_by_hand():
    bm = np.array([3.0, 1.0, 2.0])
    dense = np.array([0.1, 0.9, 0.5])
    # ranks bm: c0=1, c2=2, c1=3; dense: c1=1, c2=2, c0=3 → c0: 1/61+1/63, c1: 1/63+1/61, c2: 2/62
    # 1/61+1/63 = 0.032266 > 2/62 = 0.032258; c0 and c1 tie → earlier chunk first
    assert rrf([bm, dense], 3, 60) == [0, 1, 2]
    assert rrf([np.zeros(3), dense], 3, 60) == [1, 2, 0]  # an all-equal ranking is left out


def test_budget_selection_counts_overlaps_once():
    from ctxbench.retrieval.chunking import Chunk

    chunks = [Chunk(i, s, e, 0, 0) for i, (s, e) in enumerate(chunk_ranges(2000, 600, 100))]
    # chunks 1 and 2 overlap by 100: together 1100 tokens ≤ 1200; chunk 0 would add 500 more (its union with 1)
    assert select([1, 2, 0, 3], chunks, 5, 1200) == [1, 2]
    assert select([1, 3], chunks, 5, 1200) == [1, 3]       # 600 + 500 (chunk 3 is [1500, 2000))
    assert select([2, 0], chunks, 5, 400) == [2]           # longer than the budget alone: taken, then cut
    assert select([2, 0, 1], chunks, 2, None) == [2, 0]


def test_index_is_stored_once_and_reused(tmp_path):
    ctx = " ".join(f"Line {i} mentions {'zebras' if i == 40 else 'horses'}." for i in range(120))
    cfg = RetrievalConfig(chunk_tokens=60, chunk_overlap=10, top_k=1, retriever="bm25")
    r = retrieve(ctx, "Which line mentions zebras?", "cl100k_base", cfg)
    assert "zebras" in r.text
    ix = ContextIndex(ctx, "cl100k_base", cfg)
    assert (ix.dir / "chunks.json").exists() and (ix.dir / "bm25").is_dir()
    mtime = (ix.dir / "chunks.json").stat().st_mtime_ns
    again = ContextIndex(ctx, "cl100k_base", cfg.model_copy(update={"top_k": 2}))
    assert (again.dir / "chunks.json").stat().st_mtime_ns == mtime  # loaded, not rebuilt
    assert again.retrieve("Which line mentions zebras?").chunks[0] == r.chunks[0]


@pytest.fixture(scope="module")
def built(spider_db, tmp_path_factory):
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    out = tmp_path_factory.mktemp("rag") / "build"
    build_holobench(HoloBenchConfig(db=str(spider_db("wine_1")), lengths=[4096], setting="amount",
                                    amount_tokens=512, positions=["uniform"]), out)
    return out


@pytest.mark.slow
def test_hybrid_recall_on_a_built_instance_is_exact(built, tiktoken_enc):
    enc = tiktoken_enc("cl100k_base")
    rows = pq.read_table(built / "instances.parquet").to_pylist()
    rows = [r for r in rows if json.loads(r["evidence_spans"])][:3]
    assert rows
    cfg = RetrievalConfig(chunk_tokens=200, chunk_overlap=40, top_k=4)  # hybrid, the packaged MiniLM
    for row in rows:
        spans = json.loads(row["evidence_spans"])
        r = retrieve(row["context"], row["question"], "cl100k_base", cfg, spans)
        ids = enc.encode_ordinary(row["context"])
        n = len(ids)
        # independent recall: sets of token positions from the chunk grid of chunk_ranges' definition
        grid = [(s, min(s + 200, n)) for s in range(0, n, 160)]
        grid = grid[:next(i for i, (s, e) in enumerate(grid) if e == n) + 1]
        got = {t for i in r.chunks for t in range(*grid[i])}
        ev = {t for s, e in spans for t in range(s, e)}
        assert r.recall == pytest.approx(len(ev & got) / len(ev))
        assert r.retrieved_tokens == len(got) and len(r.chunks) == 4
        # every fully covered evidence span's text is in the retrieved context, in document order
        pos = -1
        for s, e in sorted(spans):
            if all(t in got for t in range(s, e)):
                piece = enc.decode(ids[s:e]).strip()
                assert piece in r.text
                p = r.text.index(piece)
                assert p >= pos
                pos = p
