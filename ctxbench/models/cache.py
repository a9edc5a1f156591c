"""Persistent response cache, shared by every build (``$CTXBENCH_HOME/cache/responses.sqlite``).

Keyed by :func:`request_key`, a hash of exactly what determines a model's output: model, messages, sampling
parameters, max tokens and the sample index; never run ids, concurrency, retry or timeout settings (the
practice of inspect_ai's model cache). Each response is committed as it arrives (SQLite in WAL mode), so a crash
loses at most the calls in flight, and several processes may share the cache.
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
        with self._lock:
            self._con.execute("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?)",
                              (key, model, json.dumps(payload, ensure_ascii=False), time.time()))
            self._con.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute("SELECT count(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._con.close()
