"""Retrieval solver (RAG mode): token chunking, BM25 (bm25s), dense embeddings (sentence-transformers) and
reciprocal rank fusion over one context; see :mod:`ctxbench.retrieval.hybrid`."""

from ctxbench.retrieval.hybrid import Retrieval, RetrievalConfig, retrieve

__all__ = ["Retrieval", "RetrievalConfig", "retrieve"]
