"""Prepared inputs kept across builds (issue 16): what a build derives from its source before sampling (a
preprocessed database with its checked questions and ``source.sqlite``), stored under
``$CTXBENCH_HOME/cache/prepared/<kind>/<key>/`` and reused while the key is unchanged.

The key is computed by the caller from everything the prepared input depends on: the source's content hashes,
the asset files read, and :func:`code_version` of the modules that prepare it (their source files' SHA-256,
ctxbench's version, Python's and SQLite's versions), so an edit to the preparation code or an upgrade makes a new
entry instead of reading a stale one. An entry is written into a temporary directory and renamed into place, so a
reader never sees half an entry and concurrent builds of the same key are harmless; an entry that cannot be read
(damaged, written by another Python) is ignored and prepared again; a cache that cannot be written is skipped with
a warning. The ``keep`` most recently used entries per kind are kept. ``CTXBENCH_PREPARED_CACHE=off`` disables it.
The cache never changes what a build writes: an entry holds exactly what preparing again would produce.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import platform
import shutil
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from ctxbench import __version__
from ctxbench.core.config import cache_dir
from ctxbench.core.hashing import file_sha256, stable_hash

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
PAYLOAD = "prepared.pickle"


def code_version(*parts: str) -> str:
    """Hash of the ctxbench source files under ``parts`` (paths relative to the package, files or directories:
    every ``*.py`` below), ctxbench's version, and the Python and SQLite versions."""
    files = []
    for part in parts:
        p = PACKAGE_DIR / part
        found = sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.exists() else []
        files += [(str(f.relative_to(PACKAGE_DIR)), file_sha256(f)) for f in found]
    return stable_hash(sorted(files), __version__, platform.python_version(), sqlite3.sqlite_version, length=24)


def _enabled() -> bool:
    return os.environ.get("CTXBENCH_PREPARED_CACHE", "").strip().lower() not in ("off", "0", "false", "no")


class PreparedStore:
    """Entries of one ``kind`` (e.g. ``holobench-source``): a pickled payload plus files, by key."""

    def __init__(self, kind: str, keep: int = 8, root: str | Path | None = None):
        self.kind, self.keep = kind, keep
        self.dir = Path(root if root is not None else cache_dir() / "prepared") / kind

    def entry(self, key: str) -> Path:
        return self.dir / hashlib.sha256(key.encode()).hexdigest()[:32]

    def get(self, key: str) -> tuple[Any, Path] | None:
        """``(payload, entry directory)`` or None when absent, disabled or unreadable."""
        if not _enabled():
            return None
        d = self.entry(key)
        f = d / PAYLOAD
        if not f.is_file():
            return None
        try:
            with open(f, "rb") as fh:
                stored_key, payload = pickle.load(fh)
        except Exception as e:  # noqa: BLE001 - any damage means: prepare again
            log.warning("prepared-input cache %s is not readable (%s); preparing again", d, e)
            return None
        if stored_key != key:
            return None
        try:
            os.utime(d)  # most recently used
        except OSError:
            pass
        return payload, d

    def put(self, key: str, payload: Any, files: dict[str, Path] | None = None, move: bool = False) -> Path | None:
        """Store ``payload`` and ``files`` (name in the entry -> path; moved when ``move``) under ``key``; returns
        the entry directory, or None when the cache is disabled or cannot be written."""
        if not _enabled():
            return None
        d = self.entry(key)
        tmp = self.dir / f".tmp-{uuid.uuid4().hex}"
        try:
            tmp.mkdir(parents=True)
            for name, src in (files or {}).items():
                (shutil.move if move else shutil.copyfile)(str(src), str(tmp / name))
            with open(tmp / PAYLOAD, "wb") as fh:
                pickle.dump((key, payload), fh, protocol=pickle.HIGHEST_PROTOCOL)
            if self.get(key) is not None:  # written meanwhile by another build: keep that one (it may be read now)
                shutil.rmtree(tmp, ignore_errors=True)
                return d
            if d.exists():  # an unreadable old entry
                shutil.rmtree(d, ignore_errors=True)
            tmp.rename(d)
        except OSError as e:
            log.warning("prepared-input cache %s: not saved (%s)", d, e)
            shutil.rmtree(tmp, ignore_errors=True)
            return d if (d / PAYLOAD).is_file() else None
        self._evict()
        return d

    def _evict(self) -> None:
        try:
            entries = [p for p in self.dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
            stale_tmp = [p for p in self.dir.iterdir() if p.name.startswith(".tmp-")
                         and time.time() - p.stat().st_mtime > 24 * 3600]
        except OSError:
            return
        entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for p in entries[self.keep:] + stale_tmp:
            shutil.rmtree(p, ignore_errors=True)
