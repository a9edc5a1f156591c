"""Persistent response cache, shared by every build (``$CTXBENCH_HOME/cache/responses.sqlite``).

Keyed by :func:`request_key`, a hash of exactly what determines a model's output: model, messages, sampling
parameters, max tokens and the sample index; never run ids, concurrency, retry or timeout settings (the
practice of inspect_ai's model cache). Each response is committed as it arrives (SQLite in WAL mode), so a crash
loses at most the calls in flight, and several processes may share the cache.

Several workers (processes, Dask workers, machines sharing the file) evaluating at once make each call once: before
calling, a worker *claims* the request key (:meth:`ResponseCache.claim`, an atomic ``INSERT OR IGNORE`` into the
``claims`` table inside one write transaction). A claim names its owner (host, process id) and expires after a
lease (``lease_s``, renewed while the owner runs), so the claims of a crashed worker lapse and another worker takes
the call over (at once when the dead owner was a process on the same machine); storing the answer
(:meth:`ResponseCache.put`) drops the claim.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..config import cache_dir
from ..hashing import canonical_json


def request_key(model: str, messages: list[dict], sampling: dict[str, Any], max_tokens: int, sample: int) -> str:
    """SHA-256 (hex) of the canonical JSON of model, messages, sampling parameters, max tokens and sample index."""
    payload = {"model": model, "messages": messages, "sampling": sampling, "max_tokens": max_tokens,
               "sample": sample}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def claim_owner() -> str:
    """A claim owner id for this process: ``host:pid:random`` (the random part tells apart owners in one
    process)."""
    import os
    import socket
    import uuid

    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _dead_local_owner(owner: str) -> bool:
    """True when ``owner`` (see :func:`claim_owner`) is a process of this machine that no longer runs (killed or
    crashed): its claims need not wait for their lease. Owners on other machines are judged by the lease only."""
    import os
    import socket

    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class ResponseCache:
    """Key -> stored response (a JSON object). Only answers are stored (status ok, over_length,
    refused_by_provider); failed calls are not, so a rerun tries them again."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else cache_dir() / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=NORMAL")
        self._con.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, "
                          "payload TEXT NOT NULL, created_at REAL)")
        self._con.execute("CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                          "expires_at REAL NOT NULL)")
        self._con.commit()

    def get(self, key: str) -> dict | None:
        with self._lock:
            r = self._con.execute("SELECT payload FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(r[0]) if r else None

    def get_many(self, keys: list[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT key, payload FROM responses WHERE key IN ({','.join('?' for _ in chunk)})"
                for k, p in self._con.execute(q, chunk):
                    out[k] = json.loads(p)
        return out

    def put(self, key: str, model: str, payload: dict) -> None:
        """Store an answer (the first one stored for a key wins) and drop any claim on the key."""
        with self._lock:
            self._con.execute("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?)",
                              (key, model, json.dumps(payload, ensure_ascii=False), time.time()))
            self._con.execute("DELETE FROM claims WHERE key = ?", (key,))
            self._con.commit()

    # -- claims: one call per request key across workers ---------------------------------------------------------
    def claim(self, key: str, owner: str, lease_s: float = 120.0) -> str:
        """Try to take the call for ``key`` for ``owner`` for ``lease_s`` seconds (wall clock). Returns
        ``"claimed"`` (the caller makes the call; a claim it already holds is renewed), ``"cached"`` (the answer is
        stored: read it with :meth:`get`) or ``"taken"`` (another owner holds an unexpired claim: try later).
        Atomic across processes: the check and the insert run in one ``BEGIN IMMEDIATE`` transaction."""
        now = time.time()
        with self._lock:
            con = self._con
            # a read first (no write lock): most answers for keys another worker holds are "taken" or "cached"
            if con.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone():
                return "cached"
            held = con.execute("SELECT owner, expires_at FROM claims WHERE key = ?", (key,)).fetchone()
            if held and held[0] != owner and held[1] >= now and not _dead_local_owner(held[0]):
                return "taken"
            con.execute("BEGIN IMMEDIATE")
            try:
                if con.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone():
                    out = "cached"
                else:
                    con.execute("DELETE FROM claims WHERE key = ? AND (expires_at < ? OR owner = ?)",
                                (key, now, owner))
                    held = con.execute("SELECT owner FROM claims WHERE key = ?", (key,)).fetchone()
                    if held and _dead_local_owner(held[0]):  # a crashed process on this machine: no need to wait
                        con.execute("DELETE FROM claims WHERE key = ?", (key,))
                    cur = con.execute("INSERT OR IGNORE INTO claims VALUES (?, ?, ?)", (key, owner, now + lease_s))
                    out = "claimed" if cur.rowcount == 1 else "taken"
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return out

    def release(self, key: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``key`` (a call that failed and was not stored), so others may take it."""
        with self._lock:
            self._con.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key, owner))
            self._con.commit()

    def renew(self, owner: str, lease_s: float = 120.0) -> int:
        """Extend every claim ``owner`` holds to ``lease_s`` seconds from now (a heartbeat of a live worker whose
        calls outlast the lease, e.g. long retries); returns how many claims it holds."""
        with self._lock:
            n = self._con.execute("UPDATE claims SET expires_at = ? WHERE owner = ?",
                                  (time.time() + lease_s, owner)).rowcount
            self._con.commit()
        return n

    def claims(self) -> dict[str, tuple[str, float]]:
        """Current claims: key -> (owner, expires_at as a Unix time), expired ones included."""
        with self._lock:
            return {k: (o, e) for k, o, e in self._con.execute("SELECT key, owner, expires_at FROM claims")}

    def __bool__(self) -> bool:  # an empty cache is still a cache (`cache or ResponseCache()` must keep it)
        return True

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute("SELECT count(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._con.close()
