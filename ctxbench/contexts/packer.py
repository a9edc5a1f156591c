"""One packer for every track: fill token budgets with units and merge relevant and distractor units by position.

Method: HoloBench section 3.2 (steps 2-3) and section 3.3 (positions: beginning, middle, end; uniform and bimodal,
"concentrated at both ends"). Units are counted once each, in tokens of the context's tokenizer, with their
separator; the assembled context is measured once: for cl100k_base and o200k_base (split-safe tokenizers, units
starting with an ASCII letter or digit) its encoding is its units' encodings one after another, so its length and
every relevant unit's token span come from the units' counts by prefix sums (:func:`summed_measure`; the proof is in
:mod:`ctxbench.tokenizers.registry`, "Split at newlines"); for other tokenizers, or with
``CTXBENCH_VERIFY_CONTEXTS=1``, it is tokenized exactly once to verify its length and locate the spans. Building
stays linear in the context length.

Counting (issue 16): unit counts come from :mod:`ctxbench.tokenizers.counts` (kept in memory and on disk across
tiers, positions, builds and nightly runs; a unit never seen is counted by the tokenizer, alone or, for a
split-safe tokenizer, in one encoding with its neighbours, to the same count). A
:class:`UnitStream` lets :func:`take_until` look ahead: it counts the next units in batches sized from the mean
unit length so far (2% over), then consumes exactly the units the one-at-a-time rule would have drawn (those taken
and the first that did not fit), so the random draws, and therefore the built contexts, are those of drawing one
unit at a time. Token offsets of the verifying count come from the same single encoding
(:meth:`ctxbench.tokenizers.Tokenizer.encode_with_starts`).

Positions place the i-th of R relevant units at a fraction p_i of the context and the j-th of D distractor units at
(j + 0.5) / D, then merge by fraction: beginning p_i = 0, end p_i = 1, middle p_i = 0.5 (one block),
uniform p_i = (i + 0.5) / R, bimodal p_i = sin²(π/2 · (i + 0.5) / R) (the arcsine law: dense at both ends).
"""

from __future__ import annotations

import math
import os
import random
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ctxbench.core.errors import InputError
from ctxbench.core.values import MAX_CONTEXT_TOKENS, POSITIONS  # noqa: F401 (defined there, light to import)
from ctxbench.tokenizers import Tokenizer
from ctxbench.tokenizers.counts import TokenCounter, counter_for
from ctxbench.tokenizers.registry import ASCII_ALNUM, hard_start

SEP = "\n"


@dataclass(slots=True)
class Unit:
    """A unit of context text (without separator); ``tokens`` counts ``text + SEP``; ``ref`` identifies its source
    (e.g. ``(table, rowid)``; ``None`` for dummy documents)."""

    text: str
    relevant: bool
    ref: Any = None
    tokens: int = 0


class UnitStream:
    """Units in a fixed order, drawn by :meth:`advance` and looked at ahead of drawing by :meth:`peek`.
    Looking ahead changes nothing: the units drawn, and any random state they consume, are those of drawing one
    unit at a time."""

    def peek(self, k: int) -> list[Unit]:
        """The next ``k`` units (fewer where the stream ends), not drawn."""
        raise NotImplementedError

    def advance(self, k: int) -> None:
        """Draw the next ``k`` units (they must have been peeked)."""
        raise NotImplementedError


class _Permutation:
    """Sparse Fisher-Yates over ``0..n-1`` (O(k) for k draws): ``rng.randrange(i, n)`` per draw."""

    def __init__(self, n: int, rng: random.Random):
        self.n, self.rng, self.i, self.swaps = n, rng, 0, {}

    def draw(self) -> int:
        i, n, swaps = self.i, self.n, self.swaps
        j = self.rng.randrange(i, n)
        vi, vj = swaps.get(i, i), swaps.get(j, j)
        swaps[j] = vi
        swaps.pop(i, None)
        self.i = i + 1
        return vj

    def draw_many(self, k: int) -> tuple[list[int], list[int]]:
        """``k`` draws: the values and the RNG's ``randrange`` result of each (for :meth:`apply`)."""
        start, n, swaps, randrange = self.i, self.n, self.swaps, self.rng.randrange
        vals: list[int] = []
        js: list[int] = []
        for i in range(start, start + k):
            j = randrange(i, n)
            vi, vj = swaps.get(i, i), swaps.get(j, j)
            swaps[j] = vi
            swaps.pop(i, None)
            vals.append(vj)
            js.append(j)
        self.i = start + k
        return vals, js

    def apply(self, js: list[int]) -> None:
        """The draws whose ``randrange`` results were ``js`` (recorded by a fork at this point), made without the
        RNG: the permutation moves as :meth:`draw` would; the RNG's state is the caller's to set."""
        i, swaps = self.i, self.swaps
        for j in js:
            vi = swaps.get(i, i)
            swaps[j] = vi
            swaps.pop(i, None)
            i += 1
        self.i = i

    def fork(self) -> "_Permutation":
        rng = random.Random()
        rng.setstate(self.rng.getstate())
        f = _Permutation(self.n, rng)
        f.i, f.swaps = self.i, dict(self.swaps)
        return f


class SampledUnits(UnitStream):
    """The units ``make(k)`` for ``k`` in ``0..n-1`` in uniformly random order from ``rng`` (the order of
    :func:`sample_without_replacement`). Peeking draws from a copy of ``rng``; :meth:`advance` moves ``rng``
    itself to where drawing one unit at a time leaves it (the copy's state when every unit peeked is drawn, else
    the copy's state saved every ``SNAP_EVERY`` draws and the few draws after it made again), so the draws are
    made about once. ``make_many(ks)``: ``[make(k) for k in ks]`` in one call (e.g. verbalized in a batch)."""

    SNAP_EVERY = 128

    def __init__(self, n: int, rng: random.Random, make: Callable[[int], Unit],
                 make_many: Callable[[list[int]], list[Unit]] | None = None):
        self._perm = _Permutation(n, rng)
        self._ahead_perm: _Permutation | None = None
        self._ahead: list[Unit] = []
        self._js: list[int] = []  # the RNG's draw behind each unit ahead
        self._snaps: list[tuple[int, tuple]] = []  # (units ahead drawn before it, the copy's RNG state then)
        self.make = make
        self.make_many = make_many or (lambda ks: [make(k) for k in ks])

    def peek(self, k: int) -> list[Unit]:
        ahead = self._ahead
        if len(ahead) < k:
            if self._ahead_perm is None:
                self._ahead_perm = self._perm.fork()
            p, every = self._ahead_perm, self.SNAP_EVERY
            want = min(k, p.n - self._perm.i)
            m = len(ahead)
            idx: list[int] = []
            while m < want:
                if m % every == 0:
                    self._snaps.append((m, p.rng.getstate()))
                vals, js = p.draw_many(min(want - m, every - m % every))
                idx += vals
                self._js += js
                m += len(vals)
            ahead += self.make_many(idx)
        return ahead[:k]

    def advance(self, k: int) -> None:
        if k > len(self._ahead):
            raise ValueError("advance past the units peeked")
        if k <= 0:
            return
        perm, ahead = self._perm, self._ahead_perm
        if k == len(self._ahead):  # every unit peeked is drawn: the copy is where one at a time leaves the draws
            perm.rng.setstate(ahead.rng.getstate())
            perm.i, perm.swaps = ahead.i, ahead.swaps
            self._ahead_perm, self._snaps, self._js, self._ahead = None, [], [], []
            return
        m, state = max((s for s in self._snaps if s[0] <= k), key=lambda s: s[0])
        perm.rng.setstate(state)
        perm.apply(self._js[:m])
        _, js = perm.draw_many(k - m)
        if js != self._js[m:k]:  # the copy's draws and these come from one state: never differ
            raise RuntimeError("look-ahead draws differ from the draws made again")
        del self._ahead[:k]
        del self._js[:k]
        self._snaps = [(sm - k, st) for sm, st in self._snaps if sm > k]
        self._snaps.insert(0, (0, perm.rng.getstate()))


class CycledUnits(UnitStream):
    """Dummy documents repeated as often as needed (HoloBench appendix A.2.3); empty when there are none."""

    def __init__(self, texts: Iterable[str]):
        self.texts, self.k = list(texts), 0
        self._ahead: list[Unit] = []

    def peek(self, k: int) -> list[Unit]:
        if not self.texts:
            return []
        t, ahead = self.texts, self._ahead
        while len(ahead) < k:
            ahead.append(Unit(t[(self.k + len(ahead)) % len(t)], relevant=False, ref=None))
        return ahead[:k]

    def advance(self, k: int) -> None:
        self.peek(k)
        del self._ahead[:k]
        self.k += k


class ChainedUnits(UnitStream):
    """One stream after another."""

    def __init__(self, *streams: UnitStream):
        self.streams = list(streams)

    def peek(self, k: int) -> list[Unit]:
        out: list[Unit] = []
        for s in self.streams:
            got = s.peek(k - len(out))
            out.extend(got)
            if len(out) >= k:
                break
        return out

    def advance(self, k: int) -> None:
        for s in self.streams:
            if k <= 0:
                return
            n = len(s.peek(k))
            s.advance(n)
            k -= n
        if k > 0:
            raise ValueError("advance past the end of the streams")


FIRST_BATCH = 64  # units counted before the mean unit length is known


def take_until(units: Iterator[Unit] | UnitStream, budget: int, tok: Tokenizer | TokenCounter) -> tuple[list[Unit], int]:
    """Draw units in order while they fit in ``budget`` tokens; stop at the first that does not fit.

    ``units``: a :class:`UnitStream` (counted in look-ahead batches, module docstring) or any iterator (drawn one
    at a time). Each unit's ``tokens`` is set to the tokens of ``text + SEP`` counted alone (through
    :func:`ctxbench.tokenizers.counts.counter_for` when ``tok`` is a Tokenizer). Returns ``(taken, tokens_used)``;
    ``budget - tokens_used`` is smaller than the unit that did not fit, which is drawn but not taken.
    """
    counter = counter_for(tok)
    taken: list[Unit] = []
    used = 0
    if not isinstance(units, UnitStream):
        for u in units:
            u.tokens = counter.count(u.text + SEP)
            if used + u.tokens > budget:
                break
            taken.append(u)
            used += u.tokens
        return taken, used
    pos, k = 0, FIRST_BATCH
    while True:
        batch = units.peek(pos + k)[pos:]
        counts = counter.counts([u.text + SEP for u in batch])
        acc = list(accumulate(counts, initial=used))  # tokens used before each unit of the batch
        fit = max(bisect_right(acc, budget) - 1, 0)  # units of the batch that fit (counts are >= 0)
        for u, c in zip(batch[:fit + 1], counts):
            u.tokens = c
        if fit < len(batch):
            taken += batch[:fit]
            units.advance(pos + fit + 1)  # the unit that did not fit is drawn, as one at a time
            return taken, acc[fit]
        taken += batch
        used = acc[-1]
        pos += len(batch)
        if len(batch) < k:  # the stream ended
            units.advance(pos)
            return taken, used
        # the next batch: the units still needed at the mean length so far, 2% over (units counted past the one
        # that does not fit are counted for nothing; a batch that falls short is followed by another)
        mean = used / max(len(taken), 1)
        k = max(FIRST_BATCH, int((budget - used) / max(mean, 1e-9) * 1.02) + 1)


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
    fr = [_relevant_fraction(i, r, position) for i in range(r)]
    fd = [(j + 0.5) / d for j in range(d)]
    if all(a <= b for a, b in zip(fr, fr[1:])):
        # both sequences are already in key order ((fraction, 0, i) and (fraction, 1, j)): merge them, a relevant
        # unit first at an equal fraction (the order the sort below gives, in linear time)
        out, i, j = [], 0, 0
        while i < r and j < d:
            if fr[i] <= fd[j]:
                out.append(relevant[i])
                i += 1
            else:
                out.append(distractors[j])
                j += 1
        out.extend(relevant[i:])
        out.extend(distractors[j:])
        return out
    keyed = [((fr[i], 0, i), u) for i, u in enumerate(relevant)]
    keyed += [((fd[j], 1, j), u) for j, u in enumerate(distractors)]
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
         tok: Tokenizer, counted: bool = False) -> PackedContext:
    """Assemble a context of at most ``target_tokens`` tokens and measure it with one tokenization.

    ``relevant`` and ``distractors`` were drawn with :func:`take_until`. Where the tokenizer merges across unit
    boundaries so that the whole is longer than the sum of its units, distractor units are removed from the end of
    the distractor list until the context fits (each check is one more tokenization; rare).
    ``counted=True`` says every unit's ``tokens`` is its count by ``tok`` (as :func:`take_until` with ``tok`` sets
    it): then, for a split-safe tokenizer (:attr:`ctxbench.tokenizers.Tokenizer.split_safe`) and units that all
    start with an ASCII letter or digit, the context's encoding is the concatenation of its units' encodings
    (each unit ends with a newline: :mod:`ctxbench.tokenizers.registry`, "Split at newlines"), so its length is
    the sum of the units' counts and each relevant unit's token span is read from the prefix sums, with no
    encoding of the whole (:func:`summed_measure`; the same numbers, tests/test_split_counts.py), unless
    ``CTXBENCH_VERIFY_CONTEXTS=1``.
    Raises InputError when even the relevant units alone exceed the target.
    """
    distractors = list(distractors)
    if counted and getattr(tok, "split_safe", False) and not _verify_contexts():
        units = arrange(relevant, distractors, position)
        measured = summed_measure(units, tok)
        if measured is not None and measured[0] <= target_tokens:
            text = SEP.join(u.text for u in units) + SEP if units else ""
            n, spans = measured
            return PackedContext(text, n, units, spans, sum(e - s for s, e in spans))
    while True:
        units = arrange(relevant, distractors, position)
        texts = [u.text for u in units]
        text = SEP.join(texts) + SEP if units else ""  # each unit followed by its separator
        ids, starts = tok.encode_with_starts(text)
        if len(ids) <= target_tokens:
            break
        if not distractors:
            raise InputError(f"relevant text alone is {len(ids)} tokens, over the target of {target_tokens}")
        distractors.pop()
    # character range of each relevant unit (without its separator), from the prefix sums of the units' lengths
    lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    begins = np.cumsum(lens + len(SEP)) - lens - len(SEP)
    rel = np.fromiter((u.relevant for u in units), dtype=bool, count=len(units))
    spans = tok.token_spans(starts, np.stack([begins[rel], begins[rel] + lens[rel]], axis=1))
    rel_tokens = sum(e - s for s, e in spans)
    return PackedContext(text, len(ids), units, spans, rel_tokens)


def _verify_contexts() -> bool:
    """``CTXBENCH_VERIFY_CONTEXTS=1``: encode every packed context whole, even where its units' counts measure it."""
    return os.environ.get("CTXBENCH_VERIFY_CONTEXTS", "").strip().lower() in ("1", "on", "true", "yes")


def summed_measure(units: list[Unit], tok: Tokenizer) -> tuple[int, list[list[int]]] | None:
    """``(tokens, evidence spans)`` of the context ``units`` make (each ``text + SEP``, ``tokens`` set to its
    count by the split-safe ``tok``), from the units' counts; ``None`` where it does not apply (a unit without a
    count, or whose text is empty or does not start with an ASCII letter or digit).

    The context's encoding is its units' encodings one after another (:mod:`ctxbench.tokenizers.registry`, "Split
    at newlines"), so it has ``sum(tokens)`` tokens and the i-th unit's tokens start at the sum of the counts
    before it. A relevant unit's span (the tokens that start before its separator, :meth:`Tokenizer.token_span`
    of its text) is its tokens less one where its newline is a token of its own. That is read from the unit's
    tail: the characters after its last ASCII letter or digit, with the newline. The piece of the
    pre-tokenizer holding that last letter or digit ends there (letter, digit and contraction pieces hold only
    letters, digits and marks, and the tail is ASCII without letters or digits), so from there the unit encodes
    as its tail alone; a tail with a character that is not ASCII (a mark could join a letter piece) is found by
    encoding the whole unit instead. Tails repeat (``".\n"``), each is encoded once per call.
    """
    if not units:
        return 0, []
    counts = [u.tokens for u in units]
    if min(counts) <= 0:
        return None
    if not all(hard_start(u.text) for u in units):
        return None
    alnum = ASCII_ALNUM
    before = list(accumulate(counts, initial=0))
    own_newline: dict[str, bool] = {}  # tail -> whether its newline is a token of its own
    spans: list[list[int]] = []
    for i, u in enumerate(units):
        if not u.relevant:
            continue
        t = u.text
        j = len(t)
        while t[j - 1] not in alnum:  # t[0] is a letter or digit: stops there at the latest
            j -= 1
        tail = t[j:] + SEP
        own = own_newline.get(tail)
        if own is None:
            whole = tail if tail.isascii() else t + SEP
            _, starts = tok.encode_with_starts(whole)
            own = own_newline[tail] = len(starts) > 0 and int(starts[-1]) == len(whole) - len(SEP)
        k = counts[i] - (1 if own else 0)
        spans.append([before[i], before[i] + max(k, 1)])
    return before[-1], spans


def sample_without_replacement(n: int, rng) -> Iterator[int]:
    """Indices ``0..n-1`` in uniformly random order, drawn lazily (sparse Fisher-Yates: O(k) for k draws)."""
    p = _Permutation(n, rng)
    for _ in range(n):
        yield p.draw()


def cycle_units(texts: Iterable[str]) -> Iterator[Unit]:
    """Dummy documents repeated as often as needed (HoloBench appendix A.2.3)."""
    texts = list(texts)
    if not texts:
        return
    k = 0
    while True:
        yield Unit(texts[k % len(texts)], relevant=False, ref=None)
        k += 1
