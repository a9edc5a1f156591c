"""BM25 over chunks with bm25s (Robertson et al.; the Lucene variant).

Analyzer: NFKC, case folded; Latin/Cyrillic/... words of letters and digits (English stopwords from bm25s
removed); text in CJK scripts, written without spaces, becomes overlapping character unigrams and bigrams
(``"北京大学"`` → 北 京 大 学 北京 京大 大学), so unsegmented Chinese and Japanese are searchable without a word
segmenter.

IDF: bm25s's ``lucene`` method, ``log(1 + (N - df + 0.5) / (df + 0.5))``, which is positive for every term. The
original Robertson IDF ``log((N - df + 0.5) / (df + 0.5))`` is zero or negative (bm25s clamps it to zero) for a
term in half of the chunks or more, so on a pool of two chunks a term in one of them scores 0 everywhere and the
ranking collapses; contexts of a few chunks are common here (a 2,048-token context is 4 chunks).
"""

from __future__ import annotations

import logging
import re
import unicodedata

import numpy as np

CJK_RE = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002fa1f"
_TOKEN_RE = re.compile(rf"[{CJK_RE}]+|[^\W_{CJK_RE}]+")
_CJK_RUN = re.compile(rf"[{CJK_RE}]")


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


_STOP = None
logging.getLogger("bm25s").setLevel(logging.WARNING)  # its per-index DEBUG lines would reach Prefect's console


def analyze(text: str) -> list[str]:
    """Index terms of ``text``: words (stopwords dropped) and CJK character unigrams + bigrams (module docstring)."""
    global _STOP
    if _STOP is None:
        _STOP = _stopwords()
    out: list[str] = []
    for m in _TOKEN_RE.finditer(unicodedata.normalize("NFKC", text).casefold()):
        w = m.group(0)
        if _CJK_RUN.match(w):
            out.extend(w)
            out.extend(w[i:i + 2] for i in range(len(w) - 1))
        elif w not in _STOP:
            out.append(w)
    return out


class BM25Index:
    """BM25 (k1 1.5, b 0.75, Lucene IDF) over a list of chunk texts. ``scores(query)`` → one float per chunk."""

    def __init__(self, texts: list[str], method: str = "lucene"):
        import bm25s

        self.n = len(texts)
        self.method = method
        self.bm25 = bm25s.BM25(method=method)
        corpus = [analyze(t) for t in texts]
        # bm25s needs a non-empty token list per document; an empty chunk gets a term no query contains
        self.bm25.index([c or ["\x00"] for c in corpus], show_progress=False)
        self.vocab = self.bm25.vocab_dict

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for ``query`` (zeros when no query term occurs in any chunk)."""
        terms = [t for t in analyze(query) if t in self.vocab]
        if not terms or self.n == 0:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self.bm25.get_scores(terms), dtype=np.float32)

    def save(self, path) -> None:
        self.bm25.save(str(path))

    @classmethod
    def load(cls, path, n: int) -> "BM25Index":
        import bm25s

        obj = cls.__new__(cls)
        obj.bm25 = bm25s.BM25.load(str(path))
        obj.n = n
        obj.method = obj.bm25.method
        obj.vocab = obj.bm25.vocab_dict
        return obj
