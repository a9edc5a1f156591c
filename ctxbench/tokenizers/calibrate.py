"""Tokenizer calibration: tokens per character of a corpus for each tokenizer.

Method: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows" (2026), section 3.2: each model's tokenizer
is calibrated against the corpus (the study found 0.901 to 1.222 tokens per character, a 1.35x spread), which is why
haystacks are sized per model.

A corpus is counted paragraph by paragraph, each paragraph with the newline that joins it into a haystack (one
batched tokenizer call), so the total is the haystack's length in tokens up to merges across newlines; the per-
paragraph counts are what the needle builder's prefix sums use. ``chars`` counts every character of the joined
text (newlines included); ``chars_nonspace`` leaves out whitespace.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ctxbench.tokenizers.registry import available_tokenizers, get_tokenizer


@dataclass
class Calibration:
    """One tokenizer on one corpus: ``tokens`` (sum over paragraphs of tokens of ``paragraph + "\\n"``),
    ``chars`` and ``chars_nonspace`` (characters), ``tokens_per_char`` = tokens / chars_nonspace, ``seconds`` of
    tokenization (None when the counts were given), and the vocabulary file's sha256."""

    tokenizer: str
    tokens: int
    chars: int
    chars_nonspace: int
    tokens_per_char: float
    seconds: float | None
    file_sha256: str

    def as_dict(self) -> dict:
        return asdict(self)


def paragraph_counts(paragraphs: list[str], tokenizer: str) -> list[int]:
    """Tokens of each ``paragraph + "\\n"`` in ``tokenizer`` (one batched call). Raises TokenizerError when the
    tokenizer cannot be loaded."""
    tok = get_tokenizer(tokenizer)
    return tok.count_batch([p + "\n" for p in paragraphs])


def calibrate(paragraphs: list[str], tokenizers: list[str] | None = None,
              counts: dict[str, list[int]] | None = None) -> list[Calibration]:
    """Calibrate every tokenizer in ``tokenizers`` (default: all registered) on the paragraphs. ``counts`` holds
    per-paragraph counts already made (reused, and filled in for the tokenizers counted here)."""
    names = tokenizers or available_tokenizers()
    chars = sum(len(p) + 1 for p in paragraphs)
    nonspace = sum(len(p) - sum(ch.isspace() for ch in p) for p in paragraphs)
    out = []
    for name in names:
        t0 = time.perf_counter()
        secs: float | None = None
        if counts is not None and name in counts:
            c = counts[name]
        else:
            c = paragraph_counts(paragraphs, name)
            secs = round(time.perf_counter() - t0, 3)
            if counts is not None:
                counts[name] = c
        n = sum(c)
        out.append(Calibration(name, n, chars, nonspace, round(n / nonspace, 4) if nonspace else 0.0, secs,
                               get_tokenizer(name).file_sha256))
    return out


def spread(cals: list[Calibration]) -> float:
    """Largest over smallest tokens-per-character ratio (the study's 1.35x)."""
    r = [c.tokens_per_char for c in cals if c.tokens_per_char > 0]
    return round(max(r) / min(r), 4) if r else 0.0
