"""Opening a user's file by path without the path changing meaning: the one way ctxbench opens a SQLite file
read-only (:func:`open_sqlite_readonly`) and the one way a path goes into DuckDB SQL text (:func:`duckdb_path`).

A path put into a SQLite ``file:`` URI as it is loses its meaning at ``#`` (the rest is a fragment), ``?`` (the
rest is a query, so ``?mode=ro`` no longer applies and a missing file is created) and ``%`` (an escape): issue 31
found ``--db 'q/xss#frag.sqlite'`` reading ``q/xss`` instead, and creating it empty when it was missing. A path put
into DuckDB's ``read_parquet('...')`` as it is breaks at ``'`` and is a glob pattern at ``*``, ``?`` and ``[``
(``runs/a?b`` also reads ``runs/axb``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ctxbench.core.errors import InputError


def sqlite_readonly_uri(path: str | Path) -> str:
    """The SQLite URI that opens the file ``path`` read-only and immutable: the absolute path percent-encoded by
    :meth:`pathlib.Path.as_uri` (``#`` -> ``%23``, ``?`` -> ``%3F``, ``%`` -> ``%25``, space, quote, non-ASCII as
    UTF-8 bytes; a leading ``-`` is harmless once absolute) followed by ``?mode=ro&immutable=1``. SQLite's URI
    rules: https://www.sqlite.org/uri.html (``immutable``: the file is not locked and not expected to change).
    Exception: a database in WAL mode with a non-empty ``-wal`` file beside it (a writer still open, or one that
    crashed) is opened ``?mode=ro`` only, since ``immutable`` would skip the committed rows still in the WAL."""
    p = Path(path).resolve()
    wal = p.with_name(p.name + "-wal")
    pending = wal.is_file() and wal.stat().st_size > 0
    return p.as_uri() + ("?mode=ro" if pending else "?mode=ro&immutable=1")


def open_sqlite_readonly(path: str | Path, *, what: str = "database", check: bool = True,
                         **connect_kwargs: Any) -> sqlite3.Connection:
    """A read-only, immutable :class:`sqlite3.Connection` to the SQLite file ``path`` (a user's database or a
    build's own stored SQLite file), opened through :func:`sqlite_readonly_uri` so that no character of the path
    changes which file is read, and no file is ever created. ``connect_kwargs`` go to :func:`sqlite3.connect`
    (``check_same_thread``...). ``what`` names the file in errors (``"--db"``, ``"source database"``).

    Raises InputError (one line, naming the path) when ``path`` is missing or not a file, and, when ``check``
    (default), when it is not a readable SQLite database (read once: ``SELECT`` on ``sqlite_master``)."""
    p = Path(path)
    if not p.is_file():
        why = "is a directory" if p.is_dir() else "does not exist"
        raise InputError(f"{what} {str(p)!r} {why}: pass the path of a SQLite file")
    try:
        con = sqlite3.connect(sqlite_readonly_uri(p), uri=True, **connect_kwargs)
    except sqlite3.Error as e:
        raise InputError(f"{what} {str(p)!r} cannot be opened ({e}): pass a readable SQLite file") from None
    if check:
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as e:
            con.close()
            raise InputError(f"{what} {str(p)!r} is not a readable SQLite database ({e}): pass a SQLite file") \
                from None
    return con


def sql_text(s: str) -> str:
    """``s`` as an SQL string literal (single quotes, each ``'`` doubled), for DuckDB and SQLite."""
    return "'" + s.replace("'", "''") + "'"


def duckdb_path(path: str | Path) -> str:
    """The SQL string literal naming exactly the file ``path`` in a DuckDB table function (``read_parquet(...)``):
    the glob characters ``[``, ``*``, ``?`` each wrapped in a one-character class (``[[]``, ``[*]``, ``[?]``; DuckDB
    treats every file path as a glob pattern) and quoted by :func:`sql_text`. Forward slashes (POSIX form)."""
    s = Path(path).as_posix()
    s = "".join(f"[{c}]" if c in "[*?" else c for c in s)
    return sql_text(s)
