"""Token counts of text units kept across tiers, positions, builds and nightly runs (issue 16).

Every track sizes its contexts from the token counts of its units (a verbalized row with its newline, a paragraph
with its newline, an article with its separator). A unit is counted once per tokenizer: the count is kept in memory
for the process and on disk, keyed by the tokenizer and the text's hash, so a rebuild with another seed, tier or
position tokenizes only units it has never seen.

Store: Parquet files ``$CTXBENCH_HOME/cache/token_counts/<tokenizer cache key>/<namespace>/part-*.parquet`` with
columns ``h`` (16-byte BLAKE2b digest of the unit's UTF-8 text) and ``n`` (its tokens, counted alone). The cache key
(:attr:`ctxbench.tokenizers.Tokenizer.cache_key`) names the vocabulary file and the tokenizer library's version, so
a changed vocabulary never reads old counts. A namespace (a database, a corpus) only partitions the files so that a
build loads the counts of its own source; a count is valid in any namespace. Each flush writes a new file (written
under a temporary name, then renamed), so processes building at the same time never block each other; when a
namespace holds more than ``COMPACT_AT`` files the next load merges them into one. Lookups are vectorised
(binary search in the sorted digests), so a count read costs about a tenth of counting a 40-token sentence.

The store only saves work: a count read from it is the count the tokenizer gives (same text, same tokenizer), so
builds are byte-identical whether it is empty, full, unwritable or missing. A file that cannot be read is skipped
with a warning naming it; a store that cannot be written is left aside with one warning. ``CTXBENCH_COUNT_CACHE=off``
keeps counts in memory only. Deleting the directory clears it.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ctxbench.core.config import cache_dir
from ctxbench.tokenizers.registry import Tokenizer

log = logging.getLogger(__name__)

COMPACT_AT = 16  # files in a namespace before a load merges them into one
FLUSH_AT = 500_000  # new counts held in memory before they are written without waiting for flush()
MEMORY_LIMIT = 4_000_000  # new counts kept in memory per counter (written first, then forgotten)


def text_key(text: str) -> bytes:
    """The store's key of a text: 16-byte BLAKE2b of its UTF-8 bytes."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def store_dir() -> Path:
    """``$CTXBENCH_HOME/cache/token_counts``."""
    return cache_dir() / "token_counts"


def _disk_enabled() -> bool:
    return os.environ.get("CTXBENCH_COUNT_CACHE", "").strip().lower() not in ("off", "0", "false", "no")


def _namespace_dir(namespace: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", namespace).strip("._")[:60] or "default"
    return f"{clean}-{hashlib.sha256(namespace.encode()).hexdigest()[:8]}"


def _split(keys: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated 16-byte digests -> (first 8 bytes, last 8 bytes) as uint64 arrays."""
    a = np.frombuffer(keys, dtype="<u8").reshape(-1, 2)
    return a[:, 0], a[:, 1]


class _Sorted:
    """Digests and counts sorted by digest, searched in bulk."""

    def __init__(self, hi: np.ndarray, lo: np.ndarray, n: np.ndarray):
        order = np.lexsort((lo, hi))
        self.hi, self.lo, self.n = hi[order], lo[order], n[order]

    def __len__(self) -> int:
        return len(self.hi)

    def find(self, qhi: np.ndarray, qlo: np.ndarray) -> np.ndarray:
        """Count of each query digest, -1 where absent."""
        out = np.full(len(qhi), -1, dtype=np.int64)
        m = len(self.hi)
        if not m or not len(qhi):
            return out
        pos = np.searchsorted(self.hi, qhi, side="left")
        pc = np.minimum(pos, m - 1)
        same_hi = (pos < m) & (self.hi[pc] == qhi)
        ok = same_hi & (self.lo[pc] == qlo)
        out[ok] = self.n[pc[ok]]
        for i in np.nonzero(same_hi & ~ok)[0]:  # equal first halves, different digests (astronomically rare)
            j = int(pos[i])
            while j < m and self.hi[j] == qhi[i]:
                if self.lo[j] == qlo[i]:
                    out[i] = self.n[j]
                    break
                j += 1
        return out


class TokenCounter:
    """Counts texts in tokens of ``tok``, each distinct text at most once per process and once per store.

    ``count(text) -> int`` and ``counts(texts) -> list[int]``: tokens of each text counted alone, exactly what
    ``tok.count`` returns. ``namespace``: the store partition to read and write (e.g. ``holobench/<db_id>``).
    ``root``: the store directory (default :func:`store_dir`); ``disk=False`` (or ``CTXBENCH_COUNT_CACHE=off``)
    keeps counts in memory only. New counts are written by :meth:`flush` (also every ``FLUSH_AT`` new counts and at
    exit). ``hits`` / ``misses``: texts answered without / with the tokenizer.
    """

    def __init__(self, tok: Tokenizer, namespace: str = "default", root: str | Path | None = None,
                 disk: bool | None = None):
        self.tok = tok
        self.namespace = namespace
        self.disk = _disk_enabled() if disk is None else disk
        self.dir = Path(root if root is not None else store_dir()) / tok.cache_key / _namespace_dir(namespace)
        self._stored: _Sorted | None = None
        self._mem: dict[bytes, int] = {}  # counts this process made or read outside the loaded files
        self._pending: dict[bytes, int] = {}  # made here, not yet written
        self._lock = threading.RLock()
        self.hits = self.misses = 0
        _LIVE.add(self)

    # ------------------------------------------------------------------ store
    def _warn_off(self, what: str, e: Exception) -> None:
        log.warning("token count store %s: %s (%s); counting without it", self.dir, what, e)
        self.disk = False

    def _parts(self) -> list[Path]:
        try:
            return sorted(p for p in self.dir.glob("part-*.parquet"))
        except OSError:
            return []

    @staticmethod
    def _read_part(p: Path) -> tuple[bytes, np.ndarray] | None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            t = pq.ParquetFile(p).read(columns=["h", "n"])
        except FileNotFoundError:
            return None  # merged away by another process meanwhile
        except (OSError, pa.ArrowException, ValueError) as e:
            log.warning("token count store: %s is not readable (%s); skipped (delete it)", p, e)
            return None
        h = t.column("h").combine_chunks()
        if not pa.types.is_fixed_size_binary(h.type) or h.type.byte_width != 16 or h.null_count:
            log.warning("token count store: %s has no 16-byte digests; skipped (delete it)", p)
            return None
        buf = h.buffers()[1]
        keys = bytes(memoryview(buf)[h.offset * 16: (h.offset + len(h)) * 16])
        return keys, t.column("n").to_numpy().astype(np.int64)

    def _load(self) -> _Sorted:
        if self._stored is not None:
            return self._stored
        keys, ns, merged = [], [], []
        if self.disk:
            for p in self._parts():
                r = self._read_part(p)
                if r is not None:
                    keys.append(r[0])
                    ns.append(r[1])
                    merged.append(p)
        hi, lo = _split(b"".join(keys)) if keys else (np.zeros(0, "<u8"), np.zeros(0, "<u8"))
        self._stored = _Sorted(hi, lo, np.concatenate(ns) if ns else np.zeros(0, np.int64))
        if len(merged) > COMPACT_AT:
            self._compact(merged)
        return self._stored

    def _write_part(self, hi: np.ndarray, lo: np.ndarray, n: np.ndarray) -> Path | None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not len(n):
            return None
        keys = np.stack([hi, lo], axis=1).astype("<u8").tobytes()
        h = pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), len(n), [None, pa.py_buffer(keys)])
        table = pa.table({"h": h, "n": pa.array(n.astype(np.int32))})
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = self.dir / f".{name}.tmp"
            pq.write_table(table, tmp, compression="zstd")
            tmp.replace(self.dir / name)
            return self.dir / name
        except OSError as e:
            self._warn_off("cannot be written", e)
            return None

    def _compact(self, parts: list[Path]) -> None:
        s = self._stored
        keep = np.ones(len(s), dtype=bool)
        if len(s) > 1:  # one row per digest
            keep[1:] = (s.hi[1:] != s.hi[:-1]) | (s.lo[1:] != s.lo[:-1])
        if self._write_part(s.hi[keep], s.lo[keep], s.n[keep]) is not None:
            for p in parts:
                p.unlink(missing_ok=True)

    def flush(self) -> None:
        """Write the counts made since the last flush as one new file of the store."""
        with self._lock:
            if not self._pending:
                return
            if self.disk:
                hi, lo = _split(b"".join(self._pending))
                self._write_part(hi, lo, np.fromiter(self._pending.values(), dtype=np.int64,
                                                     count=len(self._pending)))
            self._pending = {}

    # ------------------------------------------------------------------ counting
    def count(self, text: str) -> int:
        """Tokens of ``text`` (counted alone)."""
        return self.counts([text])[0]

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, counted alone: from memory, then the store, then the tokenizer (one batched call
        for the distinct texts found in neither). Thread-safe; the tokenizer runs outside the counter's lock, so
        threads building contexts at once tokenize at once (a text two threads miss together is counted twice,
        to the same count). A text repeated in ``texts`` (a cycled dummy document) is hashed and looked up once."""
        distinct = dict.fromkeys(texts)
        if len(distinct) < len(texts):
            got = dict(zip(distinct, self._counts(list(distinct))))
            with self._lock:
                self.hits += len(texts) - len(distinct)
            return [got[t] for t in texts]
        return self._counts(texts)

    def _counts(self, texts: Sequence[str]) -> list[int]:
        keys = [text_key(t) for t in texts]
        with self._lock:
            mem = self._mem
            out = [mem.get(k, -1) for k in keys]
            todo = [i for i, v in enumerate(out) if v < 0]
            if not todo:
                self.hits += len(texts)
                return out
            stored = self._load()
            if len(stored):
                qhi, qlo = _split(b"".join(keys[i] for i in todo))
                found = stored.find(qhi, qlo).tolist()
                for i, v in zip(todo, found):
                    out[i] = v
                rest = [i for i, v in zip(todo, found) if v < 0]
            else:
                rest = todo
            self.hits += len(texts) - len(rest)
        if not rest:
            return out
        first: dict[bytes, int] = {}  # one tokenization per distinct missing text
        for i in rest:
            first.setdefault(keys[i], i)
        made = self.tok.count_batch([texts[i] for i in first.values()])
        new = dict(zip(first, made))
        for i in rest:
            out[i] = new[keys[i]]
        with self._lock:
            self.misses += len(new)
            if len(mem) + len(new) > MEMORY_LIMIT:
                self.flush()
                mem.clear()
            mem.update(new)
            self._pending.update(new)
            if len(self._pending) >= FLUSH_AT:
                self.flush()
        return out


_LIVE: "weakref.WeakSet[TokenCounter]" = weakref.WeakSet()
_COUNTERS: dict[tuple, TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


@atexit.register
def _flush_all() -> None:
    for c in list(_LIVE):
        try:
            c.flush()
        except Exception:  # noqa: BLE001 - never fail an exiting process over a cache write
            pass


def counter_for(tok: Tokenizer | TokenCounter, namespace: str = "default") -> TokenCounter:
    """The process's counter for ``tok`` and ``namespace`` over the store of the current ``$CTXBENCH_HOME`` (a
    TokenCounter is returned as it is). Counters are kept for the process, so tiers, positions and builds in one
    process share what was counted."""
    if isinstance(tok, TokenCounter):
        return tok
    key = (tok.cache_key, id(tok), namespace, str(store_dir()), _disk_enabled())
    with _COUNTERS_LOCK:
        c = _COUNTERS.get(key)
        if c is None or c.tok is not tok:
            c = _COUNTERS[key] = TokenCounter(tok, namespace)
        return c


def flush_all() -> None:
    """Write every counter's new counts (call at the end of a build stage)."""
    _flush_all()


def count_all(tok: Tokenizer | TokenCounter, texts: Iterable[str], namespace: str = "default") -> list[int]:
    """Tokens of each text counted alone, through the process's counter (:func:`counter_for`)."""
    return counter_for(tok, namespace).counts(list(texts))
