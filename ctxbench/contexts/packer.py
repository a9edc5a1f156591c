"""One packer for every track: fill token budgets with units and merge relevant and distractor units by position.

Method: HoloBench section 3.2 (steps 2-3) and section 3.3 (positions: beginning, middle, end; uniform and bimodal,
"concentrated at both ends"). Units are counted once each, in tokens of the context's tokenizer, with their
separator; the assembled context is tokenized exactly once to verify its length and to locate every relevant
unit's token span, so building stays linear in the context length.

Positions place the i-th of R relevant units at a fraction p_i of the context and the j-th of D distractor units at
(j + 0.5) / D, then merge by fraction: beginning p_i = 0, end p_i = 1, middle p_i = 0.5 (one block),
uniform p_i = (i + 0.5) / R, bimodal p_i = sin²(π/2 · (i + 0.5) / R) (the arcsine law: dense at both ends).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..errors import InputError
from ..tokenizers import Tokenizer

POSITIONS = ("beginning", "middle", "end", "uniform", "bimodal")
SEP = "\n"


@dataclass
class Unit:
    """A unit of context text (without separator); ``tokens`` counts ``text + SEP``; ``ref`` identifies its source
    (e.g. ``(table, rowid)``; ``None`` for dummy documents)."""

    text: str
    relevant: bool
    ref: Any = None
    tokens: int = 0


def take_until(units: Iterator[Unit], budget: int, tok: Tokenizer) -> tuple[list[Unit], int]:
    """Draw units in order while they fit in ``budget`` tokens; stop at the first that does not fit.

    Returns ``(taken, tokens_used)``; ``budget - tokens_used`` is smaller than the unit that did not fit.
    """
    taken, used = [], 0
    for u in units:
        u.tokens = tok.count(u.text + SEP)
        if used + u.tokens > budget:
            break
        taken.append(u)
        used += u.tokens
    return taken, used


def _relevant_fraction(i: int, r: int, position: str) -> float:
    if position == "beginning":
        return -1.0
    if position == "end":
        return 2.0
    if position == "middle":
        return 0.5
    if position == "uniform":
        return (i + 0.5) / r
    if position == "bimodal":
        return math.sin(math.pi / 2 * (i + 0.5) / r) ** 2
    raise InputError(f"unknown position {position!r}: use one of {', '.join(POSITIONS)}")


def arrange(relevant: list[Unit], distractors: list[Unit], position: str) -> list[Unit]:
    """Merge relevant and distractor units by position (module docstring). Relevant order is kept; a relevant
    unit and a distractor at the same fraction put the relevant one first."""
    r, d = len(relevant), len(distractors)
    keyed = [((_relevant_fraction(i, r, position), 0, i), u) for i, u in enumerate(relevant)]
    keyed += [(((j + 0.5) / d, 1, j), u) for j, u in enumerate(distractors)]
    keyed.sort(key=lambda x: x[0])
    return [u for _, u in keyed]


@dataclass
class PackedContext:
    """An assembled context: text, measured length, the units in order, and relevant units' token spans."""

    text: str
    context_tokens: int
    units: list[Unit]
    evidence_spans: list[list[int]] = field(default_factory=list)
    relevant_tokens: int = 0


def pack(relevant: list[Unit], distractors: list[Unit], position: str, target_tokens: int,
         tok: Tokenizer) -> PackedContext:
    """Assemble a context of at most ``target_tokens`` tokens and measure it with one tokenization.

    ``relevant`` and ``distractors`` were drawn with :func:`take_until`. Where the tokenizer merges across unit
    boundaries so that the whole is longer than the sum of its units, distractor units are removed from the end of
    the distractor list until the context fits (each check is one more tokenization; rare).
    Raises InputError when even the relevant units alone exceed the target.
    """
    distractors = list(distractors)
    while True:
        units = arrange(relevant, distractors, position)
        text = "".join(u.text + SEP for u in units)
        ids, starts = tok.char_starts(text)
        if len(ids) <= target_tokens:
            break
        if not distractors:
            raise InputError(f"relevant text alone is {len(ids)} tokens, over the target of {target_tokens}")
        distractors.pop()
    spans, rel_tokens, pos = [], 0, 0
    for u in units:
        end = pos + len(u.text)
        if u.relevant:
            s, e = tok.token_span(starts, pos, end)
            spans.append([s, e])
            rel_tokens += e - s
        pos = end + len(SEP)
    return PackedContext(text, len(ids), units, spans, rel_tokens)


def sample_without_replacement(n: int, rng) -> Iterator[int]:
    """Indices ``0..n-1`` in uniformly random order, drawn lazily (sparse Fisher-Yates: O(k) for k draws)."""
    swaps: dict[int, int] = {}
    for i in range(n):
        j = rng.randrange(i, n)
        vi, vj = swaps.get(i, i), swaps.get(j, j)
        swaps[j] = vi
        swaps.pop(i, None)
        yield vj


def cycle_units(texts: Iterable[str]) -> Iterator[Unit]:
    """Dummy documents repeated as often as needed (HoloBench appendix A.2.3)."""
    texts = list(texts)
    if not texts:
        return
    k = 0
    while True:
        yield Unit(texts[k % len(texts)], relevant=False, ref=None)
        k += 1
