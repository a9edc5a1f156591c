"""Gold answers by executing the question's SQL over exactly the included relevant rows (HoloBench section 3.2,
step 4), with the checks that make a gold answer trustworthy before an instance is kept:

1. **Two engines agree**: DuckDB (primary) and SQLite run the same SQL text over the same rows; results are
   compared as multisets, or as lists where the query orders them, numbers within a relative tolerance of 1e-6.
   A disagreement (integer division, NULL ordering, dialect) rejects the instance.
2. **Order independence**: SQLite reruns the query with the rows inserted in reverse and in a shuffled order; a
   different answer means it depends on an unordered row choice or on ties at a LIMIT.
3. **Ties and NULLs at ORDER BY**: for a top-level ORDER BY, the sort keys are evaluated over all result rows; a
   NULL key (the answer would depend on NULL ordering) or equal keys on both sides of the LIMIT cut reject it.
4. **Empty or NULL answers** are rejected ("empty answers are flagged").
5. With ``strict_order`` (answers scored as ordered lists, e.g. SciTrek's exact match): rows with equal ORDER BY
   keys but different selected values are rejected, since their order in the answer is undefined.

An answer without a top-level ORDER BY is stored sorted (NULL, numbers, text), so equal inputs give equal bytes.
"""

from __future__ import annotations

import math
import random
import sqlite3
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

from ..sources.database import quote_ident

REL_TOL = 1e-6
_DUCK_TYPES = {"INTEGER": pa.int64(), "REAL": pa.float64(), "TEXT": pa.string()}


@dataclass
class GoldResult:
    """``rows``: the gold answer (list of rows, values in SELECT order); ``ok`` False with ``reason`` when rejected."""

    rows: list[list[Any]] | None
    ok: bool
    reason: str = ""
    detail: dict = field(default_factory=dict)


def _py(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return v
    if v is None or isinstance(v, (int, float, str)):
        return v
    return str(v)


def _norm_rows(rows) -> list[list[Any]]:
    return [[_py(v) for v in r] for r in rows]


def _value_equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-9)
    return str(a) == str(b)


def _row_equal(a: list, b: list) -> bool:
    return len(a) == len(b) and all(_value_equal(x, y) for x, y in zip(a, b))


def _sort_key(row: list) -> tuple:
    out = []
    for v in row:
        if v is None:
            out.append((0, 0.0, ""))
        elif isinstance(v, (int, float)):
            out.append((1, round(float(v), 6), ""))
        else:
            out.append((2, 0.0, str(v)))
    return tuple(out)


def results_equal(a: list[list[Any]], b: list[list[Any]], ordered: bool) -> bool:
    """Equal as lists (``ordered``) or as multisets; numbers within relative tolerance 1e-6."""
    if len(a) != len(b):
        return False
    if not ordered:
        a, b = sorted(a, key=_sort_key), sorted(b, key=_sort_key)
    return all(_row_equal(x, y) for x, y in zip(a, b))


def _sqlite_run(sql: str, tables: dict[str, tuple[list[str], list[str], list[tuple]]], order: str, seed: int):
    con = sqlite3.connect(":memory:")
    try:
        for name, (cols, types, rows) in tables.items():
            con.execute(f"CREATE TABLE {quote_ident(name)} "
                        f"({', '.join(f'{quote_ident(c)} {t}' for c, t in zip(cols, types))})")
            rs = list(rows)
            if order == "reverse":
                rs.reverse()
            elif order == "shuffle":
                random.Random(seed).shuffle(rs)
            con.executemany(f"INSERT INTO {quote_ident(name)} VALUES ({', '.join('?' for _ in cols)})", rs)
        return _norm_rows(con.execute(sql).fetchall())
    finally:
        con.close()


def _duck_con(tables: dict[str, tuple[list[str], list[str], list[tuple]]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SET threads TO 1")  # one thread: the same input gives the same row order, run after run
    for name, (cols, types, rows) in tables.items():
        arrays = [pa.array([r[i] for r in rows], type=_DUCK_TYPES.get(types[i], pa.string()))
                  for i in range(len(cols))]
        at = pa.Table.from_arrays(arrays, names=cols)
        con.register("__t", at)
        con.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM __t")
        con.unregister("__t")
    return con


def _duck_run(con: duckdb.DuckDBPyConnection, sql: str) -> list[list[Any]]:
    try:
        return _norm_rows(con.execute(sql).fetchall())
    except duckdb.Error:
        # SQLite-only syntax: run sqlglot's DuckDB translation instead
        return _norm_rows(con.execute(sqlglot.transpile(sql, read="sqlite", write="duckdb")[0]).fetchall())


def _order_info(sql: str) -> tuple[bool, int | None, str | None]:
    """(ordered at top level, LIMIT k, SQL selecting the ORDER BY keys of every result row before the LIMIT)."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    if not isinstance(tree, exp.Select) or not tree.args.get("order"):
        return False, None, None
    limit = tree.args.get("limit")
    k = None
    if limit is not None:
        lim = limit.expression if isinstance(limit, exp.Limit) else None
        if isinstance(lim, exp.Literal) and lim.is_int:
            k = int(lim.this)
    if tree.args.get("distinct") or tree.args.get("offset"):
        return True, k, None
    aliases = {e.alias: e.this for e in tree.expressions if isinstance(e, exp.Alias)}
    keys = []
    for o in tree.args["order"].expressions:
        e = o.this
        if isinstance(e, exp.Column) and not e.table and e.name in aliases:
            e = aliases[e.name]
        elif isinstance(e, exp.Literal) and e.is_int and 1 <= int(e.this) <= len(tree.expressions):
            sel = tree.expressions[int(e.this) - 1]
            e = sel.this if isinstance(sel, exp.Alias) else sel
        keys.append(e.copy())
    q = tree.copy()
    q.set("limit", None)
    q.set("expressions", [exp.alias_(k_, f"__k{i}") for i, k_ in enumerate(keys)])
    return True, k, q.sql(dialect="sqlite")


def _tied_rows_differ(sql: str, tables, seed: int, k: int | None) -> list | None:
    """For a top-level ORDER BY query: the first group of result rows (within the first ``k``) whose sort keys
    are equal but whose selected values differ, else None."""
    ordered, _, keys_sql = _order_info(sql)
    if not ordered or keys_sql is None:
        return None
    tree = sqlglot.parse_one(sql, read="sqlite")
    nkeys = len(tree.args["order"].expressions)
    q = sqlglot.parse_one(keys_sql, read="sqlite")
    q.set("expressions", [*q.expressions, *(e.copy() for e in tree.expressions)])
    rows = _sqlite_run(q.sql(dialect="sqlite"), tables, "insert", seed)
    rows = rows[:k] if k is not None else rows
    for a, b in zip(rows, rows[1:]):
        if _row_equal(a[:nkeys], b[:nkeys]) and not _row_equal(a[nkeys:], b[nkeys:]):
            return [a[nkeys:], b[nkeys:]]
    return None


def compute_gold(sql: str, tables: dict[str, tuple[list[str], list[str], list[tuple]]], seed: int = 0,
                 strict_order: bool = False) -> GoldResult:
    """Execute ``sql`` over ``tables`` (name -> (columns, SQLite types, rows)) and run the checks above.

    Returns a GoldResult whose ``rows`` is DuckDB's answer (numbers as int/float, text as str, NULL as None).
    Never raises for a bad answer: a rejected instance has ``ok=False`` and a reason naming the check.
    ``strict_order`` adds check 5 (module docstring).
    """
    try:
        con = _duck_con(tables)
        try:
            duck = _duck_run(con, sql)
        finally:
            con.close()
    except Exception as e:  # noqa: BLE001
        return GoldResult(None, False, f"DuckDB cannot run the SQL: {e}")
    try:
        lite = _sqlite_run(sql, tables, "insert", seed)
    except sqlite3.Error as e:
        return GoldResult(None, False, f"SQLite cannot run the SQL: {e}")
    ordered, k, keys_sql = _order_info(sql)
    if not results_equal(duck, lite, ordered):
        if not (ordered and k is None and results_equal(duck, lite, False)):
            return GoldResult(None, False, "SQLite and DuckDB disagree (integer division, NULL ordering or dialect)",
                              {"duckdb": duck[:20], "sqlite": lite[:20]})
    for order in ("reverse", "shuffle"):
        other = _sqlite_run(sql, tables, order, seed)
        if not results_equal(lite, other, ordered and k is not None) and not results_equal(lite, other, False):
            return GoldResult(None, False, "answer depends on the order of rows (ties at LIMIT or an unordered "
                                           "row choice)", {"insert": lite[:20], order: other[:20]})
        if ordered and k is not None and not results_equal(lite, other, True):
            return GoldResult(None, False, "answer depends on the order of rows (ties at LIMIT)",
                              {"insert": lite[:20], order: other[:20]})
    if keys_sql is not None:
        try:
            keys = _sqlite_run(keys_sql, tables, "insert", seed)
        except sqlite3.Error:
            keys = None
        if keys is not None:
            if any(v is None for r in keys for v in r):
                return GoldResult(None, False, "answer depends on NULL ordering (a sort key is NULL)")
            if k is not None and len(keys) > k > 0 and _row_equal(keys[k - 1], keys[k]):
                return GoldResult(None, False, f"tie at LIMIT {k}: rows {k} and {k + 1} have equal sort keys",
                                  {"keys": keys[: k + 1]})
        if strict_order:
            try:
                tied = _tied_rows_differ(sql, tables, seed, k)
            except sqlite3.Error:
                tied = None
            if tied is not None:
                return GoldResult(None, False, "order undefined: rows with equal ORDER BY keys differ",
                                  {"rows": tied})
    if not ordered:
        duck = sorted(duck, key=_sort_key)  # an unordered answer is stored in one canonical order
    if not duck:
        return GoldResult([], False, "empty gold answer")
    if all(v is None for r in duck for v in r):
        return GoldResult(duck, False, "gold answer is NULL (e.g. an aggregate over no matching row)")
    return GoldResult(duck, True)
