"""The gold engines (:mod:`ctxbench.gold.execute`): one set of tables loaded into SQLite, with the rows inserted in
order, reversed and shuffled, and into DuckDB through Arrow, each column in the form its SQLite storage classes
need (a column of numbers and text is DuckDB's UNION), SQLite's date and time functions registered in DuckDB, and
the declared collations kept (:class:`GoldEngines`)."""

from __future__ import annotations

import random
import re
import sqlite3
import threading
from typing import Any

import duckdb
import pyarrow as pa

from ctxbench.core.errors import InputError
from ctxbench.gold.dialect import SQLITE_UDFS
from ctxbench.sources.database import collation_of, quote_ident

__all__ = ["DUCKDB_COLLATIONS", "GoldEngines", "Tables"]

_DUCK_TYPES = {"INTEGER": pa.int64(), "REAL": pa.float64(), "TEXT": pa.string()}

Tables = dict[str, tuple[list[str], list[str], list[tuple]]]


def _sqlite_con(tables: Tables, order: str, seed: int) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:", check_same_thread=False)
    for name, (cols, types, rows) in tables.items():
        types = list(types) + [""] * (len(cols) - len(types))
        con.execute(f"CREATE TABLE {quote_ident(name)} "
                    f"({', '.join(f'{quote_ident(c)} {t}' for c, t in zip(cols, types))})")
        rs = list(rows)
        if order == "reverse":
            rs.reverse()
        elif order == "shuffle":
            random.Random(seed).shuffle(rs)
        con.executemany(f"INSERT INTO {quote_ident(name)} VALUES ({', '.join('?' for _ in cols)})", rs)
    con.execute("PRAGMA query_only = ON")  # the gold SQL and the checks' queries read; nothing may change a table
    return con


def _storage_kind(values: list) -> str:
    """The DuckDB form of one column from the storage classes SQLite gave its values (read back from SQLite, so
    type affinity has been applied as sqlite3 applies it): ``INTEGER``, ``REAL``, ``TEXT``, or ``MIXED_INTEGER`` /
    ``MIXED_REAL`` for a column holding numbers and text (``trip.zip_code`` declared INTEGER holding ``94107`` and
    ``'nil'``)."""
    kinds = {type(v) for v in values if v is not None}
    num = kinds & {int, float}
    text = bool(kinds & {str, bytes})
    if not kinds:
        return "TEXT"
    if num and text:
        return "MIXED_REAL" if float in num else "MIXED_INTEGER"
    if num:
        return "REAL" if float in num else "INTEGER"
    return "TEXT"


def _column_kinds(con: sqlite3.Connection, tables: Tables) -> dict[str, dict[str, str]]:
    """table -> column -> storage kind (:func:`_storage_kind`) of the tables as SQLite stores them."""
    out = {}
    for name, (cols, _, _) in tables.items():
        got = con.execute(f"SELECT {', '.join(quote_ident(c) for c in cols)} FROM {quote_ident(name)}").fetchall()
        out[name] = {c: _storage_kind([r[i] for r in got]) for i, c in enumerate(cols)}
    return out


def _text(v: Any) -> str:
    return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v


_UDF_LITE = sqlite3.connect(":memory:", check_same_thread=False)
_UDF_LOCK = threading.Lock()


def _sqlite_function(name: str, arity: int):
    sql = f"SELECT {name}({', '.join('?' for _ in range(arity))})"

    def run(*args):
        with _UDF_LOCK:
            return _UDF_LITE.execute(sql, args).fetchone()[0]
    # DuckDB reads the number of parameters from the Python signature
    fixed = {0: lambda: run(), 1: lambda a: run(a), 2: lambda a, b: run(a, b), 3: lambda a, b, c: run(a, b, c),
             4: lambda a, b, c, d: run(a, b, c, d), 5: lambda a, b, c, d, e: run(a, b, c, d, e),
             6: lambda a, b, c, d, e, f: run(a, b, c, d, e, f)}
    if arity not in fixed:
        raise InputError(f"SQLite function {name}() with {arity} arguments: at most 6 are supported")
    return fixed[arity]


_UNION = {"MIXED_INTEGER": "UNION(n BIGINT, s VARCHAR)", "MIXED_REAL": "UNION(n DOUBLE, s VARCHAR)"}


def _duck_con(lite: sqlite3.Connection, tables: Tables, kinds: dict[str, dict[str, str]]) -> duckdb.DuckDBPyConnection:
    """DuckDB over the tables with the values SQLite stores (``lite``: the insert-order copy), each column in the
    form its storage classes need (:func:`_storage_kind`): a column of numbers and text is DuckDB's UNION of a
    number and a text, which compares, sorts, joins and intersects as SQLite does (every number before every text;
    a number never equals a text: "Datatypes In SQLite" section 4.1)."""
    con = duckdb.connect(":memory:")
    con.execute("SET threads TO 1")  # one thread: the same input gives the same row order, run after run
    for name, (cols, _, _) in tables.items():
        got = lite.execute(f"SELECT {', '.join(quote_ident(c) for c in cols)} FROM {quote_ident(name)} "
                           f"ORDER BY rowid").fetchall()
        arrays, names, select = [], [], []
        for i, c in enumerate(cols):
            k = kinds[name][c]
            vals = [r[i] for r in got]
            if k in _UNION:
                num = pa.array([v if isinstance(v, (int, float)) else None for v in vals],
                               type=pa.float64() if k == "MIXED_REAL" else pa.int64())
                txt = pa.array([_text(v) if isinstance(v, (str, bytes)) else None for v in vals], type=pa.string())
                arrays += [num, txt]
                names += [f"__n{i}", f"__s{i}"]
                select.append(f"CASE WHEN __n{i} IS NOT NULL THEN CAST(__n{i} AS {_UNION[k]}) "
                              f"WHEN __s{i} IS NOT NULL THEN CAST(__s{i} AS {_UNION[k]}) END AS {quote_ident(c)}")
                continue
            if k == "TEXT":
                vals = [_text(v) for v in vals]
            elif k == "REAL":
                vals = [float(v) if v is not None else None for v in vals]
            arrays.append(pa.array(vals, type=_DUCK_TYPES[k]))
            names.append(f"__c{i}")
            select.append(f"__c{i} AS {quote_ident(c)}")
        at = pa.Table.from_arrays(arrays, names=names) if arrays else pa.table({})
        con.register("__t", at)
        con.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT {', '.join(select)} FROM __t")
        con.unregister("__t")
    return con


def _without_collation(declared: str) -> str:
    """``declared`` without a collation DuckDB cannot reproduce (:data:`DUCKDB_COLLATIONS`); others kept."""
    coll = collation_of(declared)
    if coll is None or coll in DUCKDB_COLLATIONS:
        return declared
    return re.sub(r"\s*\bCOLLATE\s+\"?\w+\"?\s*$", "", declared, flags=re.IGNORECASE)


# the collations DuckDB reproduces (NOCASE: by SQLite's ASCII folding, ctxbench.gold.dialect); BINARY is the default
DUCKDB_COLLATIONS = {"NOCASE", "BINARY"}


class GoldEngines:
    """The two engines loaded with one set of tables (name -> (columns, SQLite types, rows)), for any number of
    gold queries over them: SQLite with the rows inserted in order, reversed and shuffled (``seed``), and DuckDB
    (rows loaded through Arrow). Each copy is made at its first use and kept until :meth:`close`, so instances
    sharing their included rows (a context shared by several questions) load the tables once; every query reads
    only (SQLite connections are ``query_only``), so answers do not depend on what ran before.

    ``with GoldEngines(tables, seed) as eng: compute_gold(sql, tables, seed, engines=eng)``."""

    def __init__(self, tables: Tables, seed: int = 0):
        self.tables, self.seed = tables, seed
        self._lite: dict[str, sqlite3.Connection] = {}
        self._duck: duckdb.DuckDBPyConnection | None = None
        self._udfs: set[tuple[str, int]] = set()
        self._kinds: dict[str, dict[str, str]] | None = None

    def kinds(self) -> dict[str, dict[str, str]]:
        """table -> column -> storage kind of its values as SQLite stores them under the declared types
        (``INTEGER``, ``REAL``, ``TEXT``, ``MIXED_INTEGER``, ``MIXED_REAL``), computed once."""
        if self._kinds is None:
            self._kinds = _column_kinds(self.sqlite("insert"), self.tables)
        return self._kinds

    def schema(self) -> dict[str, dict[str, str]]:
        """table -> column -> the SQLite type the SQL is read with (INTEGER, REAL or TEXT): the storage class of
        its values; a column of numbers and text reads as its numbers' type (its declared affinity is numeric)."""
        return {t: {c: k.replace("MIXED_", "") for c, k in cols.items()} for t, cols in self.kinds().items()}

    def collations(self) -> dict[str, dict[str, str]]:
        """table -> column -> the collation its declared type carries (``NOCASE``, ``RTRIM``: the loader keeps a
        column's ``COLLATE`` clause with its type, :func:`ctxbench.sources.database.with_collation`); columns
        without one (BINARY) are left out."""
        out: dict[str, dict[str, str]] = {}
        for name, (cols, types, _) in self.tables.items():
            for c, t in zip(cols, types):
                coll = collation_of(t)
                if coll:
                    out.setdefault(name, {})[c] = coll
        return out

    def sqlite(self, order: str = "insert") -> sqlite3.Connection:
        """SQLite over the tables, rows inserted in ``order`` (insert, reverse or shuffle; ``reproducible``: in
        insert order, the declared collations DuckDB cannot reproduce (RTRIM, user collations) dropped, to tell
        whether an answer depends on one)."""
        if order not in self._lite:
            if order == "reproducible":
                plain = {n: (cols, [_without_collation(t) for t in types], rows)
                         for n, (cols, types, rows) in self.tables.items()}
                self._lite[order] = _sqlite_con(plain, "insert", self.seed)
            else:
                self._lite[order] = _sqlite_con(self.tables, order, self.seed)
        return self._lite[order]

    def duckdb(self, udfs: list[tuple[str, int]] = ()) -> duckdb.DuckDBPyConnection:
        """DuckDB over the tables, with SQLite's date and time functions ``udfs`` ((name, arity), computed by
        SQLite: ctxbench.gold.dialect) registered."""
        if self._duck is None:
            self._duck = _duck_con(self.sqlite("insert"), self.tables, self.kinds())
        for name, arity in udfs:
            if (name, arity) not in self._udfs:
                self._duck.create_function(f"sqlite_{name}_{arity}", _sqlite_function(name, arity),
                                           ["VARCHAR"] * arity, SQLITE_UDFS[name])
                self._udfs.add((name, arity))
        return self._duck

    def close(self) -> None:
        """Close every connection made."""
        for con in self._lite.values():
            con.close()
        self._lite.clear()
        if self._duck is not None:
            self._duck.close()
            self._duck = None
        self._udfs.clear()
        self._kinds = None

    def __enter__(self) -> "GoldEngines":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
