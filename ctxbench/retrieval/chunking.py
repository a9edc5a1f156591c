"""Token chunking of a context (LaRA section 4.1: 600-token chunks overlapping by 100 tokens).

Chunks are half-open token intervals ``[start, end)`` in the tokens of the instance's own tokenizer (the one that
counted ``context_tokens``, from :mod:`ctxbench.tokenizers.registry`), so chunk offsets and ``evidence_spans`` are
in the same unit and retrieval recall is exact. A chunk's text is the slice of the context between the first
characters of its first token and of the token after its last, so chunk texts are exact substrings of the context
and concatenating disjoint chunks in order gives back the context.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxbench.features.difficulty import merge_spans as merge_intervals
from ctxbench.core.errors import InputError

__all__ = ["Chunk", "chunk_context", "chunk_ranges", "merge_intervals", "overlap_tokens"]


@dataclass(frozen=True)
class Chunk:
    """One chunk: its index, token interval ``[start, end)`` and character interval ``[char_start, char_end)``."""

    index: int
    start: int
    end: int
    char_start: int
    char_end: int


def chunk_ranges(n_tokens: int, size: int = 600, overlap: int = 100) -> list[tuple[int, int]]:
    """Token intervals of ``size`` tokens starting every ``size - overlap`` tokens, the last one ending at
    ``n_tokens`` (it may be shorter); a context shorter than ``size`` is one chunk; an empty one has none.
    E.g. ``chunk_ranges(1300, 600, 100)`` → ``[(0, 600), (500, 1100), (1000, 1300)]``.
    Raises InputError unless ``0 <= overlap < size``."""
    if size <= 0 or not 0 <= overlap < size:
        raise InputError(f"chunking needs 0 <= overlap < size (got size {size}, overlap {overlap} tokens): "
                         f"fix --chunk-tokens / --chunk-overlap")
    out, s, step = [], 0, size - overlap
    while s < n_tokens:
        e = min(s + size, n_tokens)
        out.append((s, e))
        if e == n_tokens:
            break
        s += step
    return out


def chunk_context(context: str, starts: list[int], size: int = 600, overlap: int = 100) -> list[Chunk]:
    """Chunks of ``context`` given each token's first character (``Tokenizer.char_starts(context)[1]``)."""
    n = len(starts)

    def char_at(t: int) -> int:
        return starts[t] if t < n else len(context)

    return [Chunk(i, s, e, char_at(s), char_at(e)) for i, (s, e) in enumerate(chunk_ranges(n, size, overlap))]


def overlap_tokens(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intersection of two sets of half-open intervals, as merged intervals."""
    a, b = merge_intervals(a), merge_intervals(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return merge_intervals(out)
