"""Gold answers by executing the question's SQL over exactly the included relevant rows (HoloBench section 3.2,
step 4), with the checks that make a gold answer trustworthy before an instance is kept.

The SQL is SQLite SQL and means what SQLite makes of it (:mod:`ctxbench.gold.dialect`): SQLite runs it as written,
DuckDB runs its faithful transpilation, and a question is rejected, with a reason, when its answer is not one
well-defined set of rows:

1. **Non-deterministic SQL** (``random()``, ``CURRENT_DATE``, ``date('now')``, ...): rejected before it runs.
2. **Numbers stored as text**: MIN/MAX, ORDER BY or a ``<``/``>``/BETWEEN comparison over a TEXT column whose
   numeric-looking values (or the literal compared with them) order differently as text than as numbers (``'9' >
   '10'``), also formatted numbers SQLite keeps as text (``'1,234'``, ``'$5'``, ``'5%'``: :func:`text_number`), and
   columns of numbers with placeholder words (``'n/a'``) among the rows compared (as text every word sorts after
   every number). Sources are prepared so that such columns hold numbers (:mod:`ctxbench.sources.preprocess`); what
   remains are columns mixing numbers and other text, where a text comparison would give a wrong answer. The
   column is followed through derived tables; ORDER BY and MIN/MAX read the values of the rows the query reads.
3. **Ties**: in every ordered (sub)query with a LIMIT/OFFSET (and the top-level ORDER BY), rows with equal sort keys
   but different values on both sides of the cut ("tie at LIMIT"); with ``strict_order`` (answers scored as ordered
   lists, e.g. SciTrek's exact match) also tied rows inside the answer, whose order is undefined.
4. **NULL order**: the answer changes when NULL sort keys are placed at the other end.
5. **Bare columns** of an aggregate query (SQLite picks one row's value): accepted only when the rows used leave
   one value per group; under SQLite's ``min()``/``max()`` rule, only when one row (or rows with one value) reaches
   the extreme ("tie" otherwise).
6. **Engines agree**: DuckDB's answer equals SQLite's, compared as multisets, or as lists where the query orders
   them, numbers within a relative tolerance of 1e-6. Since DuckDB reads the SQL as SQLite does, a disagreement is
   a real one (an engine difference the transpilation does not cover), not a dialect artefact.
7. **Order independence**: SQLite reruns the query with the rows inserted in reverse and in a shuffled order; a
   different answer means it depends on an unordered row choice.
8. **Empty or NULL answers** are rejected ("empty answers are flagged").
9. **Collations**: the tables keep the collations their columns declare (``city TEXT COLLATE NOCASE``: the loader
   keeps the clause with the declared type), SQLite reads them as the user's file does, and DuckDB's form follows
   NOCASE where SQLite's comparisons, IN lists and sort keys read it (:mod:`ctxbench.gold.dialect`). DuckDB has no
   RTRIM (nor a user's collation): SQLite answers again with those collations as BINARY, and an answer that
   changes is rejected naming the collation (``collation RTRIM cannot be reproduced by DuckDB ...``); a question
   whose answer does not depend on it is kept.

An answer without a top-level ORDER BY is stored sorted (NULL, numbers, text), so equal inputs give equal bytes.
"""

from __future__ import annotations

import math
import random
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.scope import walk_in_scope

from ctxbench.core.errors import InputError
from ctxbench.sources.database import collation_of, looks_numeric, quote_ident
from ctxbench.gold.dialect import (SQLITE_UDFS, Transpiled, bare_columns, parse_expression, parse_sqlite, scope_index, source_table,
                      transpile)

REL_TOL = 1e-6
_DUCK_TYPES = {"INTEGER": pa.int64(), "REAL": pa.float64(), "TEXT": pa.string()}


@dataclass
class GoldResult:
    """``rows``: the gold answer (list of rows, values in SELECT order); ``ok`` False with ``reason`` when rejected.
    ``detail``: what a rejection found; for an accepted ordered answer ``{"tie_groups": [...]}`` (:func:`tie_groups`
    of its rows: rows of one group are tied and may come in any order)."""

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


def norm_rows(rows) -> list[list[Any]]:
    """Result rows as lists of plain Python values (SQLite/DuckDB types converted as gold answers store them)."""
    return [[_py(v) for v in r] for r in rows]


def _value_equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-9)
    return str(a) == str(b)


def _value_equal_strict(a: Any, b: Any) -> bool:
    """:func:`_value_equal` without its leniencies: two integers equal only exactly, a number never equals a
    text ("10" is not 10), floats within the same tolerance."""
    if a is None or b is None:
        return a is None and b is None
    na = isinstance(a, (int, float)) and not isinstance(a, bool)
    nb = isinstance(b, (int, float)) and not isinstance(b, bool)
    if na and nb:
        if type(a) is int and type(b) is int:
            return a == b
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-9)
    if na or nb:
        return False
    return type(a) is type(b) and a == b if isinstance(a, (str, bytes)) else str(a) == str(b)


def _row_equal(a: list, b: list, eq=_value_equal) -> bool:
    return len(a) == len(b) and all(eq(x, y) for x, y in zip(a, b))


def _strict_key(row: list) -> tuple:
    """:func:`sort_key` with each integer's exact value as a tie-break (integers beyond 2**53 that round to one
    float still sort apart)."""
    return tuple((k[0], k[1], v if type(v) is int else 0, k[2]) for k, v in zip(sort_key(row), row))


def sort_key(row: list) -> tuple:
    """A total order key for a result row of mixed values (None first, then numbers, then text, as SQLite sorts
    its storage classes), used to compare and store unordered answers canonically."""
    out = []
    for v in row:
        if v is None:
            out.append((0, 0.0, ""))
        elif isinstance(v, (int, float)):
            out.append((1, round(float(v), 6), ""))
        else:
            out.append((2, 0.0, str(v)))
    return tuple(out)


def results_equal(a: list[list[Any]], b: list[list[Any]], ordered: bool, strict: bool = False) -> bool:
    """Equal as lists (``ordered``) or as multisets; numbers within relative tolerance 1e-6. ``strict`` (a stored
    gold against an answer re-derived by the same engine, :func:`ctxbench.verify.gold_mismatch`): integers equal
    only exactly and a number never equals a text; floats keep the tolerance (a sum's last bits depend on the rows'
    order)."""
    if len(a) != len(b):
        return False
    if not ordered:
        key = _strict_key if strict else sort_key
        a, b = sorted(a, key=key), sorted(b, key=key)
    eq = _value_equal_strict if strict else _value_equal
    return all(_row_equal(x, y, eq) for x, y in zip(a, b))



def tie_groups(keys: list[list[Any]]) -> list[int]:
    """The tie group of each row of an ordered answer, from its rows' ORDER BY keys in answer order: consecutive
    rows with equal keys (numbers within 1e-6) share a group number (0, 1, ...). Rows of one group are tied: no
    engine's order among them is the answer's (``ORDER BY AVG(total) DESC`` with two equal averages)."""
    out: list[int] = []
    for i, k in enumerate(keys):
        out.append(0 if i == 0 else out[-1] + (not _row_equal(keys[i - 1], k)))
    return out


def equal_in_tie_groups(a: list[list[Any]], b: list[list[Any]], groups: list[int], equal) -> bool:
    """Whether the ordered answers ``a`` and ``b`` are the same rows in the same order except inside tie groups
    (``groups``: :func:`tie_groups` of ``a``'s rows), where they are compared as multisets:
    ``equal(rows_a, rows_b, False)`` is called per group (e.g. :func:`results_equal`; the build's gold check and
    ``questions import``'s check against the original file share this). False when the lengths differ."""
    if len(a) != len(b) or len(groups) != len(a):
        return False
    i = 0
    while i < len(a):
        j = i + 1
        while j < len(a) and groups[j] == groups[i]:
            j += 1
        if not equal(a[i:j], b[i:j], False):
            return False
        i = j
    return True



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
    """``declared`` without a collation DuckDB cannot reproduce (:data:`_DUCKDB_COLLATIONS`); others kept."""
    coll = collation_of(declared)
    if coll is None or coll in _DUCKDB_COLLATIONS:
        return declared
    return re.sub(r"\s*\bCOLLATE\s+\"?\w+\"?\s*$", "", declared, flags=re.IGNORECASE)


# the collations DuckDB reproduces (NOCASE: by SQLite's ASCII folding, ctxbench.gold.dialect); BINARY is the default
_DUCKDB_COLLATIONS = {"NOCASE", "BINARY"}


def _collation_issue(tr: Transpiled, engines: "GoldEngines", lite: list) -> tuple[str, dict] | None:
    """A question whose answer depends on a collation DuckDB cannot reproduce (RTRIM, a user collation), declared
    on a column the tables hold or written in the SQL (``COLLATE RTRIM``): SQLite answers it again with those
    collations as BINARY, and a different answer is a rejection naming the collation. None when the answer does
    not depend on one (or none is used)."""
    read = {c.name.lower() for c in tr.tree.find_all(exp.Column)}
    declared = {f"{t}.{c}": v for t, cols in engines.collations().items() for c, v in cols.items()
                if v not in _DUCKDB_COLLATIONS and c.lower() in read}
    written = sorted({n.expression.name.upper() for n in tr.tree.find_all(exp.Collate)} - _DUCKDB_COLLATIONS)
    if not declared and not written:
        return None
    tree = tr.tree.copy()
    for n in list(tree.find_all(exp.Collate)):
        if n.expression.name.upper() not in _DUCKDB_COLLATIONS:
            n.replace(n.this.copy())
    try:
        plain = norm_rows(engines.sqlite("reproducible").execute(tree.sql(dialect="sqlite")).fetchall())
    except sqlite3.Error:
        return None
    if results_equal(lite, plain, tr.tree.args.get("order") is not None):
        return None
    where = [f"{k} is declared COLLATE {v}" for k, v in sorted(declared.items())]
    where += [f"the SQL writes COLLATE {v}" for v in written]
    names = sorted(set(declared.values()) | set(written))
    return (f"collation {', '.join(names)} cannot be reproduced by DuckDB and the answer depends on it: "
            f"{'; '.join(where)} (SQLite with it: {lite[:3]}; with BINARY comparisons: {plain[:3]})",
            {"collations": names, "sqlite": lite[:20], "binary": plain[:20]})


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


# --- NULL comparison: the value rule's NULLs under a comparison that treats NULL apart ---------------------------

def _null_sensitive(col: exp.Column) -> str | None:
    """The SQL around ``col`` that answers differently for NULL than for the value the rule made NULL (``''``):
    ``!=``/``<>``, anything under NOT (``NOT IN``, ``NOT LIKE``, ``NOT (x = ...)``), ``IS``/``IS NOT``,
    ``COALESCE``/``IFNULL``/``NULLIF``, ``COUNT(x)``, ``MIN``/``MAX``/``GROUP_CONCAT``, ``length``, ``||``, and
    ``<``/``>``/BETWEEN (``''`` sorts before every text and after every number in sqlite3); None when no such
    context holds it (``x = 'a'``, ``x LIKE ...``, ``x IN (...)`` read NULL as ``''`` is read)."""
    node, child = col.parent, col
    while node is not None and not isinstance(node, (exp.Select, exp.SetOperation)):
        if isinstance(node, exp.NEQ):
            return node.sql(dialect="sqlite")
        if isinstance(node, exp.Not) or node.args.get("negate"):  # NOT ..., or x NOT LIKE / NOT IN (negate)
            return node.sql(dialect="sqlite")
        if isinstance(node, (exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ)):
            return node.sql(dialect="sqlite")
        if isinstance(node, (exp.Coalesce, exp.Nullif, exp.Length, exp.GroupConcat, exp.DPipe, exp.Concat)):
            return node.sql(dialect="sqlite")
        if isinstance(node, (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)):
            # '' sorts before every text and after every number: x < 'F' or x > 5 holds for it in sqlite3
            return node.sql(dialect="sqlite")
        if isinstance(node, (exp.Count, exp.Min, exp.Max)) and not isinstance(child, exp.Star):
            return node.sql(dialect="sqlite")
        if isinstance(node, exp.Subquery):
            break
        node, child = node.parent, node
    # NOT IN (SELECT col ...): the subquery's NULL makes NOT IN unknown for every row
    sel = node if isinstance(node, exp.Select) else None
    if sel is not None and col in [e.this if isinstance(e, exp.Alias) else e for e in sel.expressions]:
        up = sel.parent
        while isinstance(up, (exp.Subquery, exp.Paren)):
            up = up.parent
        if isinstance(up, exp.In) and (isinstance(up.parent, exp.Not) or up.args.get("negate")):
            return (up if up.args.get("negate") else up.parent).sql(dialect="sqlite")
    return None


def _null_comparison_issue(tr: Transpiled, null_columns: dict[str, int]) -> tuple[str, dict] | None:
    """``NULL comparison: ...`` when the SQL reads a column holding NULLs made by the value rule (``null_columns``:
    lower-case ``table.column`` -> values made NULL) in a NULL-sensitive context (:func:`_null_sensitive`): its
    answer would leave out (or count apart) the rows whose value was empty text in the source, which sqlite3 keeps
    on the original file."""
    if not null_columns:
        return None
    idx = scope_index(tr.qualified)
    for col in tr.qualified.find_all(exp.Column):
        base = _base_column(col, idx)
        if base is None:
            continue
        key = f"{base[0]}.{base[1]}".lower()
        n = null_columns.get(key)
        if not n:
            continue
        ctx = _null_sensitive(col)
        if ctx is None:
            continue
        return (f"NULL comparison: {base[0]}.{base[1]} holds {n} value(s) that the value rule made NULL (empty text "
                f"or 'NULL' text; a verbalized row says \"not recorded\"), and `{ctx.replace(chr(34), '')}` treats "
                f"NULL apart from every value, so those rows would leave the answer while sqlite3 keeps them on the "
                f"source database; ask with =, IN or LIKE (which read a missing value as no match, as sqlite3 reads "
                f"empty text)",
                {"column": f"{base[0]}.{base[1]}", "values_made_null": n})
    return None


# --- integer division -------------------------------------------------------------------------------------------

def _exact_division(tree: exp.Expression, only: int | None = None) -> exp.Expression | None:
    """``tree`` with every ``a / b`` (or only the ``only``-th, in ``find_all`` order) written ``CAST(a AS REAL) /
    b`` (the exact quotient), or None when it has no division."""
    if not any(True for _ in tree.find_all(exp.Div)):
        return None
    q = tree.copy()
    for k, d in enumerate(list(q.find_all(exp.Div))):
        if only is None or k == only:
            d.set("this", exp.cast(d.this.copy(), exp.DType.DOUBLE))
    return q


INTEGER_DIVISION = ("exact", "sqlite")


# --- 2. numbers stored as text ---------------------------------------------------------------------------------

# text that reads as a number with the formatting people type (thousands separators, a currency sign, a percent
# sign, a Unicode minus): SQLite's affinity keeps it as text, so MIN/MAX, ORDER BY and < / > compare it as text
_FORMATTED_NUMBER = re.compile(r"\s*(?P<c1>[$€£¥]\s*)?(?P<sign>[+\-\u2212])?(?P<c2>[$€£¥]\s*)?"
                               r"(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?\s*(?P<pct>%)?\s*\Z")


def text_number(v: Any) -> float | None:
    """The number a text cell states: SQLite's numeric text (``'2014'``, ``' 9 '``, ``'-3.5e2'``) or a formatted
    number (``'1,234'``, ``'$5'``, ``'-$1,200.50'``, ``'12%'``, ``'−7'``); None for other text."""
    if not isinstance(v, str):
        return None
    if looks_numeric(v):
        return float(v)
    m = _FORMATTED_NUMBER.match(v)
    if m is None or (m.group("c1") and m.group("c2")):
        return None
    n = float(m.group("int").replace(",", "") + (m.group("frac") or ""))
    return -n if m.group("sign") in ("-", "\u2212") else n


def _is_word(v: Any) -> bool:
    """A text cell that is no number and does not start like one (``'n/a'``, ``'unknown'``, ``'-'``; not
    ``'94040-1724'``): as text it sorts apart from every number, whatever its meaning."""
    return (isinstance(v, str) and text_number(v) is None
            and re.match(r"\s*[+\-\u2212]?[$€£¥]?\s*\d", v) is None)


def _literal_number(e: exp.Expression) -> tuple[str, float] | None:
    """(text, number) of a numeric literal, or of a string literal that looks numeric."""
    neg = isinstance(e, exp.Neg)
    lit = e.this if neg else e
    if not isinstance(lit, exp.Literal):
        return None
    text = str(lit.this)
    if lit.is_string and text_number(text) is None:
        return None
    if not lit.is_string and not looks_numeric(text):
        return None
    text = ("-" if neg else "") + text.strip()
    return text, (text_number(text) if lit.is_string else float(text))


def _order_consistent(items: set[tuple[str, float]]) -> tuple[str, str] | None:
    """Two numeric-looking texts whose order as text differs from their order as numbers, else None."""
    srt = sorted(items)
    for (t1, n1), (t2, n2) in zip(srt, srt[1:]):
        if not n1 < n2:  # text order t1 < t2, numbers not: '9' > '10' as text
            return t1, t2
    return None


def _base_column(col: exp.Column, idx: dict, depth: int = 0) -> tuple[str, str] | None:
    """(table, column) a qualified column reads, followed through derived tables (``SELECT x FROM (SELECT v AS x
    FROM t)`` reads t.v); None for a computed value or an unknown source."""
    t = source_table(col, idx)
    if t is not None:
        return t, col.name
    node = col
    while node is not None and id(node) not in idx:
        node = node.parent
    scope = idx.get(id(node)) if node is not None else None
    src = None
    while scope is not None and src is None:
        src = scope.sources.get(col.table)
        scope = scope.parent
    e = getattr(src, "expression", None)
    if depth > 8 or not isinstance(e, exp.Select):
        return None
    for x in e.expressions:
        if x.alias_or_name.lower() == col.name.lower():
            inner = x.this if isinstance(x, exp.Alias) else x
            return _base_column(inner, idx, depth + 1) if isinstance(inner, exp.Column) else None
    return None


def _values_used(select: exp.Expression, col: exp.Column, con: sqlite3.Connection | None) -> list | None:
    """The distinct values of ``col`` in the rows ``select`` reads (its FROM and WHERE), or None when that query
    cannot run alone (a correlated subquery)."""
    if con is None or not isinstance(select, exp.Select):
        return None
    q = select.copy()
    for k in ("group", "having", "order", "limit", "offset", "distinct", "qualify", "windows"):
        q.set(k, None)
    q.set("expressions", [col.copy()])
    q.set("distinct", exp.Distinct())
    try:
        return [r[0] for r in con.execute(q.sql(dialect="sqlite")).fetchall()]
    except sqlite3.Error:
        return None


def _numeric_text_issue(tr: Transpiled, tables: Tables, con: sqlite3.Connection | None = None,
                        kinds: dict[str, dict[str, str]] | None = None) -> tuple[str, dict] | None:
    q = tr.qualified
    idx = scope_index(q)
    low = {n.lower(): (cols, types, rows) for n, (cols, types, rows) in tables.items()}
    # (column, literals compared with it, what compares it, the SELECT whose rows it orders, or None: every row)
    uses: list[tuple[exp.Column, list, str, exp.Expression | None]] = []
    for scope_expr_id, scope in idx.items():
        node0 = scope.expression
        aliases = ({e.alias.lower(): e.this for e in node0.expressions if isinstance(e, exp.Alias)}
                   if isinstance(node0, exp.Select) else {})
        for node in walk_in_scope(node0):
            if isinstance(node, exp.Ordered) and isinstance(node.parent, exp.Order) and node.parent.parent is node0:
                e = node.this
                if isinstance(e, exp.Column) and not e.table and e.name.lower() in aliases:
                    e = aliases[e.name.lower()]
                if isinstance(e, exp.Column):
                    uses.append((e, [], "ORDER BY", node0))
            elif isinstance(node, (exp.Max, exp.Min)) and not node.expressions:
                arg = node.this
                if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1:   # MAX(DISTINCT v)
                    arg = arg.expressions[0]
                if isinstance(arg, exp.Column):
                    uses.append((arg, [], node.sql_name(), node0))
            elif isinstance(node, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
                for a, b in ((node.left, node.right), (node.right, node.left)):
                    if isinstance(a, exp.Column):
                        lit = _literal_number(b)
                        uses.append((a, [lit] if lit else [], "a comparison", None))
            elif isinstance(node, exp.Between) and isinstance(node.this, exp.Column):
                lits = [x for x in (_literal_number(node.args["low"]), _literal_number(node.args["high"])) if x]
                uses.append((node.this, lits, "BETWEEN", None))
    for col, lits, what, select in uses:
        base = _base_column(col, idx)
        if base is None or base[0].lower() not in low:
            continue
        tname = base[0]
        cols, types, rows = low[tname.lower()]
        ci = next((i for i, c in enumerate(cols) if c.lower() == base[1].lower()), None)
        if ci is None:
            continue
        if kinds is not None and tname in kinds:   # the storage class SQLite gives the column's values
            text_col = kinds[tname].get(cols[ci]) == "TEXT"
        else:
            text_col = ci < len(types) and types[ci] not in ("INTEGER", "REAL")
        used = _values_used(select, col, con) if select is not None else None
        values = [r[ci] for r in rows] if used is None else used
        items: set[tuple[str, float]] = set()
        for v in values:
            if isinstance(v, str):
                n = text_number(v)
                if n is not None:
                    items.add((v.strip(), n))
            elif text_col and isinstance(v, (int, float)) and not isinstance(v, bool):
                items.add((str(v), float(v)))     # numbers in a TEXT column are text
        if not items:
            continue
        words = sorted({v.strip() for v in values if _is_word(v)})
        bad = _order_consistent(items | set(lits))
        if bad is not None:
            return (f"numbers stored as text: {tname}.{cols[ci]} holds numeric-looking text that {what} orders as "
                    f"text, not as numbers ({bad[0]!r} < {bad[1]!r} as text); store the column as numbers or CAST "
                    f"it in the SQL", {"column": f"{tname}.{cols[ci]}", "examples": sorted(t for t, _ in items)[:5]})
        if words and len({t for t, _ in items}) >= len(words):
            # a column of numbers with placeholder words ('n/a', 'unknown'): as text every word sorts after every
            # number, so MAX, ORDER BY ... DESC and v > 50 pick the word
            return (f"numbers stored as text: {tname}.{cols[ci]} mixes numbers with words ({words[0]!r}) that "
                    f"{what} orders as text, apart from every number; store the words as NULL or filter them out",
                    {"column": f"{tname}.{cols[ci]}", "examples": sorted(t for t, _ in items)[:3] + words[:2]})
    return None


# --- 3./4. ties and NULL order ---------------------------------------------------------------------------------

def _int_arg(node: exp.Expression, key: str) -> int | None:
    a = node.args.get(key)
    if a is None:
        return None
    e = a.expression if isinstance(a, (exp.Limit, exp.Offset)) else a
    if isinstance(e, exp.Literal) and e.is_int:
        return int(e.this)
    return -1  # a LIMIT that is not a literal: treated as unknown


def _keys_query(node: exp.Expression) -> tuple[exp.Select, int] | None:
    """A query selecting, for an ordered SELECT or set operation, its ORDER BY keys (``__k*``) then its output
    values (``__o*``) for every row before LIMIT/OFFSET, ordered the same way. Returns (query, number of keys)."""
    order = node.args.get("order")
    if isinstance(node, exp.Select):
        outs = [e.this if isinstance(e, exp.Alias) else e for e in node.expressions]
        aliases = {e.alias.lower(): e.this for e in node.expressions if isinstance(e, exp.Alias)}
        keys = []
        for o in order.expressions:
            e = o.this
            if isinstance(e, exp.Column) and not e.table and e.name.lower() in aliases:
                e = aliases[e.name.lower()]
            elif isinstance(e, exp.Literal) and e.is_int and 1 <= int(e.this) <= len(outs):
                e = outs[int(e.this) - 1]
            keys.append(e)
        q = node.copy()
        for k in ("limit", "offset"):
            q.set(k, None)
        q.set("expressions", [exp.alias_(k.copy(), f"__k{i}") for i, k in enumerate(keys)]
              + [exp.alias_(o.copy(), f"__o{j}") for j, o in enumerate(outs)])
        q.set("order", exp.Order(expressions=[exp.Ordered(this=k.copy(), desc=o.args.get("desc"),
                                                           nulls_first=o.args.get("nulls_first"))
                                              for k, o in zip(keys, order.expressions)]))
        return q, len(keys)
    if isinstance(node, exp.SetOperation):
        names = node.named_selects
        inner = node.copy()
        for k in ("order", "limit", "offset"):
            inner.set(k, None)
        keys = []
        for o in order.expressions:
            e = o.this
            if isinstance(e, exp.Literal) and e.is_int and 1 <= int(e.this) <= len(names):
                e = exp.column(names[int(e.this) - 1], quoted=True)
            elif isinstance(e, exp.Column):
                e = exp.column(e.name, quoted=True)
            else:
                return None
            keys.append(e)
        q = exp.select(*[exp.alias_(k.copy(), f"__k{i}") for i, k in enumerate(keys)],
                       *[exp.alias_(exp.column(n, quoted=True), f"__o{j}") for j, n in enumerate(names)])
        q = q.from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__u"))))
        q.set("order", exp.Order(expressions=[exp.Ordered(this=k.copy(), desc=o.args.get("desc"),
                                                           nulls_first=o.args.get("nulls_first"))
                                              for k, o in zip(keys, order.expressions)]))
        return q, len(keys)
    return None


def _flip_nulls(q: exp.Select) -> exp.Select:
    q = q.copy()
    for o in q.args["order"].expressions:
        o.set("nulls_first", not o.args.get("nulls_first"))
    return q


def _order_issue(tr: Transpiled, con: sqlite3.Connection, strict_order: bool,
                 window: dict | None = None) -> tuple[str, dict] | None:
    """The first tie or NULL-order ambiguity of an ordered (sub)query (module docstring, checks 3-4), else None.
    ``window["keys"]`` receives the sort keys of the top-level answer's rows, in order (their tie blocks)."""
    root = tr.qualified
    nodes = [n for n in root.find_all(exp.Select, exp.SetOperation) if n.args.get("order") is not None
             and isinstance(n.args["order"], exp.Order)]
    for node in nodes:
        top = node is root
        limit, offset = _int_arg(node, "limit"), _int_arg(node, "offset") or 0
        if not top and limit is None:
            continue  # the order of a subquery without LIMIT is not part of any answer
        if limit == -1 or offset == -1:
            continue
        kq = _keys_query(node)
        if kq is None:
            continue
        q, nk = kq
        try:
            rows = norm_rows(con.execute(q.sql(dialect="sqlite")).fetchall())
        except sqlite3.Error:
            # a correlated subquery cannot run alone; the engine comparison and the row-order reruns still check
            # it, and name a difference they find a tie
            if window is not None and not top and limit is not None:
                window["correlated_limit"] = True
            continue
        where = "" if top else " (in a subquery)"
        if node.args.get("distinct"):
            first: dict = {}
            several = None
            for r in rows:
                sk = sort_key(r[nk:])
                if sk in first and several is None and not _row_equal(first[sk][:nk], r[:nk]):
                    several = (r[nk:], first[sk][:nk], r[:nk])
                first.setdefault(sk, r)
            if several is not None:
                # SELECT DISTINCT ordered by a value the selected columns do not determine: the row has no single
                # place. Harmless for a whole answer scored as a set; anything else depends on the choice
                if top and limit is None and not offset and not strict_order:
                    if window is not None:
                        window["unordered"] = True
                    continue
                return (f"tie: a DISTINCT row{where} has several ORDER BY values ({several[0]} at {several[1]} and "
                        f"{several[2]}), so its place in the order is undefined", {"row": several[0]})
            rows = list(first.values())
        keys, outs = [r[:nk] for r in rows], [r[nk:] for r in rows]
        end = len(rows) if limit is None else min(len(rows), offset + limit)
        if top and window is not None:
            window["keys"] = keys[offset:end]
        # NULL order: put NULL sort keys at the other end; a different window of keys is a different answer
        if any(v is None for k in keys for v in k):
            try:
                flipped = norm_rows(con.execute(_flip_nulls(q).sql(dialect="sqlite")).fetchall())
            except sqlite3.Error:
                flipped = None
            if flipped is not None:
                fk = [r[:nk] for r in flipped]
                if node.args.get("distinct"):
                    fk = keys if len(fk) != len(rows) else fk
                if not all(_row_equal(a, b) for a, b in zip(keys[offset:end], fk[offset:end])):
                    return (f"answer depends on NULL ordering{where}: a sort key is NULL, and SQLite and other "
                            f"engines place NULLs at different ends", {"keys": keys[:20]})
        # ties across the cut(s)
        for cut, label in ((offset, "OFFSET"), (end, "LIMIT")):
            if not 0 < cut < len(rows) or (label == "LIMIT" and limit is None):
                continue
            if not _row_equal(keys[cut - 1], keys[cut]):
                continue
            i, j = cut - 1, cut
            while i > 0 and _row_equal(keys[i - 1], keys[cut]):
                i -= 1
            while j < len(rows) and _row_equal(keys[j], keys[cut]):
                j += 1
            group = outs[i:j]
            if any(not _row_equal(group[0], g) for g in group[1:]):
                n = limit if label == "LIMIT" else offset
                return (f"tie at {label} {n}{where}: rows {cut} and {cut + 1} have equal ORDER BY keys "
                        f"{keys[cut]} but different values, so either could be in the answer",
                        {"keys": keys[i:j][:20], "rows": group[:20]})
        if strict_order and top:
            for a in range(offset, end - 1):
                if _row_equal(keys[a], keys[a + 1]) and not _row_equal(outs[a], outs[a + 1]):
                    return ("tie in ORDER BY: rows with equal sort keys differ, so their order in the answer is "
                            "undefined", {"rows": [outs[a], outs[a + 1]]})
    return None


# --- 5. bare columns -------------------------------------------------------------------------------------------

def _bare_issue(tr: Transpiled, con: sqlite3.Connection) -> tuple[str, dict] | None:
    by_select: dict[int, list] = {}
    for b in bare_columns(tr.qualified):
        by_select.setdefault(id(b.select), []).append(b)
    for bs in by_select.values():
        sel, extreme = bs[0].select, bs[0].extreme
        group = sel.args.get("group")
        gexprs = []
        for g in (group.expressions if group is not None else []):
            if isinstance(g, exp.Literal) and g.is_int and 1 <= int(g.this) <= len(sel.expressions):
                g = sel.expressions[int(g.this) - 1]
                g = g.this if isinstance(g, exp.Alias) else g
            gexprs.append(g)
        cols = []
        for b in bs:
            if not any(c.sql() == b.column.sql() for c in cols):
                cols.append(b.column)
        if extreme is None:
            q = sel.copy()
            for k in ("order", "limit", "offset", "distinct"):
                q.set(k, None)
            counts = [exp.alias_(parse_expression(f"COUNT(DISTINCT {c.sql(dialect='sqlite')}) + "
                                               f"MAX({c.sql(dialect='sqlite')} IS NULL)"), f"__n{i}")
                      for i, c in enumerate(cols)]
            q.set("expressions", [*q.expressions, *counts])
            sql = q.sql(dialect="sqlite")
            width = len(sel.expressions)
        else:
            fn = "MAX" if isinstance(extreme, exp.Max) else "MIN"
            x = extreme.this.sql(dialect="sqlite")
            part = ", ".join(g.sql(dialect="sqlite") for g in gexprs)
            inner = sel.copy()
            for k in ("group", "having", "order", "limit", "offset", "distinct"):
                inner.set(k, None)
            inner.set("expressions", [
                *[exp.alias_(g.copy(), f"__g{i}") for i, g in enumerate(gexprs)],
                exp.alias_(extreme.this.copy(), "__x"),
                *[exp.alias_(c.copy(), f"__c{i}") for i, c in enumerate(cols)],
                exp.alias_(parse_expression(f"{fn}({x}) OVER ({'PARTITION BY ' + part if part else ''})"), "__m")])
            gb = f" GROUP BY {', '.join(f'__g{i}' for i in range(len(gexprs)))}" if gexprs else ""
            sql = (f"SELECT {', '.join(f'COUNT(DISTINCT __c{i}) + MAX(__c{i} IS NULL)' for i in range(len(cols)))} "
                   f"FROM ({inner.sql(dialect='sqlite')}) AS __b WHERE __x = __m OR __m IS NULL{gb}")
            width = 0
        try:
            rows = con.execute(sql).fetchall()
        except sqlite3.Error:
            continue  # a correlated subquery cannot run alone; the row-order reruns still check it
        for r in rows:
            for i, n in enumerate(r[width:]):
                if n is not None and n > 1:
                    c = cols[i].sql(dialect="sqlite").replace('"', "")
                    if extreme is not None:
                        fn = "MAX" if isinstance(extreme, exp.Max) else "MIN"
                        return (f"tie at {fn}({extreme.this.sql(dialect='sqlite').replace(chr(34), '')}): several "
                                f"rows reach it with different values of the bare column {c}, and SQLite takes the "
                                f"value from one of them", {"column": c})
                    return (f"bare column {c} is not determined by the GROUP BY: a group holds several values and "
                            f"SQLite returns one of them arbitrarily", {"column": c})
    return None


def compute_gold(sql: str, tables: Tables, seed: int = 0, strict_order: bool = False,
                 engines: GoldEngines | None = None, null_columns: dict[str, int] | None = None,
                 integer_division: str = "exact") -> GoldResult:
    """Execute ``sql`` (SQLite SQL) over ``tables`` (name -> (columns, declared SQLite types, rows)) and run the
    checks above.

    The declared types are the columns' types as the database declares them: SQLite applies their type affinity
    to the rows (a word in an INTEGER column stays text, a number stays a number, "Datatypes In SQLite" section
    3), and DuckDB reads the values SQLite stored (a column of numbers and text is a UNION there).

    Returns a GoldResult whose ``rows`` is DuckDB's answer (numbers as int/float, text as str, NULL as None).
    Never raises for a bad answer: a rejected instance has ``ok=False`` and a reason naming the check (reasons
    start with ``non-deterministic SQL``, ``numbers stored as text``, ``NULL comparison``, ``integer division``,
    ``tie``, ``answer depends on NULL ordering``, ``bare column``, ``collation``, ``SQLite and DuckDB disagree``, ``answer
    depends on the order of rows``, ``empty gold answer``, ``gold answer is NULL``, or say which engine cannot run
    the SQL). ``strict_order`` adds the in-answer tie check (check 3). ``engines``: the engines already loaded with
    ``tables`` (:class:`GoldEngines`, made with the same ``seed``), shared by the queries over the same rows; the
    answer is the one engines loaded for this query alone give. ``null_columns``: lower-case ``table.column`` ->
    number of values the value rule made NULL (:func:`ctxbench.sources.preprocess.normalize_database` records
    them); the SQL may not compare them in a NULL-sensitive way (``NULL comparison``). ``integer_division``:
    ``"exact"`` (default) rejects an answer that changes when every ``a / b`` is the exact quotient (SQLite
    truncates integer division: ``SUM(score)/COUNT(score)`` over 3, 3, 1, 2 is 2, a reader computes 2.25);
    ``"sqlite"`` keeps SQLite's integer result (to reproduce a question set published that way, e.g. SciTrek's).
    Raises InputError for another ``integer_division``.
    """
    if integer_division not in INTEGER_DIVISION:
        raise InputError(f"integer_division {integer_division!r}: use one of {', '.join(INTEGER_DIVISION)}")
    if engines is None:
        with GoldEngines(tables, seed) as eng:
            return compute_gold(sql, tables, seed, strict_order, eng, null_columns, integer_division)
    try:
        tr = transpile(sql, engines.schema(), engines.collations())
    except InputError as e:
        return GoldResult(None, False, str(e))
    if tr.nondeterministic:
        return GoldResult(None, False, tr.nondeterministic)
    con = engines.sqlite("insert")
    try:
        lite = norm_rows(con.execute(sql).fetchall())
    except sqlite3.Error as e:
        return GoldResult(None, False, f"SQLite cannot run the SQL: {e}")
    window: dict = {}
    for check in (lambda: _null_comparison_issue(tr, {k.lower(): v for k, v in (null_columns or {}).items()}),
                  lambda: _numeric_text_issue(tr, tables, con, engines.kinds()), lambda: _order_issue(tr, con, strict_order, window),
                  lambda: _bare_issue(tr, con), lambda: _collation_issue(tr, engines, lite)):
        issue = check()
        if issue is not None:
            return GoldResult(None, False, issue[0], issue[1])
    if tr.duckdb is None:
        return GoldResult(None, False, f"DuckDB cannot run the SQL: {'; '.join(tr.notes)}")
    try:
        duck = norm_rows(engines.duckdb(tr.udfs).execute(tr.duckdb).fetchall())
    except Exception as e:  # noqa: BLE001
        return GoldResult(None, False, f"DuckDB cannot run the SQL (transpiled from SQLite: {tr.duckdb}): "
                                       f"{str(e).splitlines()[0]}")
    root = tr.qualified
    ordered = root.args.get("order") is not None
    keys = window.get("keys")

    groups = tie_groups(keys) if ordered and not window.get("unordered") and keys is not None else None

    def same(a: list, b: list) -> bool:
        # an ordered answer: the same rows in the same order, except that rows with equal sort keys (a tie inside
        # the answer, which no answer order can settle) may come in any order; an unordered one: the same multiset
        if not ordered or window.get("unordered"):
            return results_equal(a, b, False)
        if groups is None or len(groups) != len(a):
            return results_equal(a, b, True) or (_int_arg(root, "limit") is None and results_equal(a, b, False))
        return equal_in_tie_groups(a, b, groups, results_equal)

    # with an ORDER BY ... LIMIT in a correlated subquery, different answers come from rows tied at that LIMIT
    tie = ("tie at LIMIT in a correlated subquery: rows with equal ORDER BY keys give different answers"
           if window.get("correlated_limit") else None)
    if not same(duck, lite):
        nocase = sorted(f"{t}.{c}" for t, cols in engines.collations().items() for c, v in cols.items()
                        if v == "NOCASE" and c.lower() in {x.name.lower() for x in tr.tree.find_all(exp.Column)})
        why = ("SQLite and DuckDB disagree on the answer" + (
            f" (the SQL reads {', '.join(nocase)}, declared COLLATE NOCASE: DuckDB follows it in comparisons, IN "
            f"lists and sort keys, not in GROUP BY, DISTINCT, MIN/MAX or set operations, where SQLite merges values "
            f"that differ in case)" if nocase else ""))
        return GoldResult(None, False, tie or why,
                          {"duckdb": duck[:20], "sqlite": lite[:20], "duckdb_sql": tr.duckdb})
    if integer_division == "exact":
        exact = _exact_division(parse_sqlite(sql))
        if exact is not None:
            try:
                real = norm_rows(con.execute(exact.sql(dialect="sqlite")).fetchall())
            except sqlite3.Error:
                real = None
            if real is not None and not same(lite, real):
                tree = parse_sqlite(sql)
                divs = [d.sql(dialect="sqlite") for d in tree.find_all(exp.Div)]
                culprit = divs[0]
                for k, d in enumerate(divs):  # the division whose exact quotient changes the answer
                    try:
                        one = norm_rows(con.execute(_exact_division(tree, k).sql(dialect="sqlite")).fetchall())
                    except sqlite3.Error:
                        continue
                    if not same(lite, one):
                        culprit = d
                        break
                return GoldResult(None, False, f"integer division: `{culprit}` divides integers, and SQLite "
                                               f"truncates the quotient (answer {lite[:3]}; with the exact quotient "
                                               f"{real[:3]}), while a reader of the context computes the exact "
                                               f"value; write CAST(x AS REAL) (or 1.0 * x) in the SQL, or keep "
                                               f"SQLite's integer result on purpose (--integer-division sqlite)",
                                  {"sqlite": lite[:20], "exact": real[:20], "divisions": divs, "division": culprit})
    for order in ("reverse", "shuffle"):
        other = norm_rows(engines.sqlite(order).execute(sql).fetchall())
        if not same(lite, other):
            return GoldResult(None, False, tie or "answer depends on the order of rows (an unordered choice of rows)",
                              {"insert": lite[:20], order: other[:20]})
    if not ordered or window.get("unordered"):
        duck = sorted(duck, key=sort_key)  # an unordered answer is stored in one canonical order
    if not duck:
        return GoldResult([], False, "empty gold answer")
    if all(v is None for r in duck for v in r):
        return GoldResult(duck, False, "gold answer is NULL (e.g. an aggregate over no matching row)")
    return GoldResult(duck, True, detail={"tie_groups": groups} if groups is not None and len(groups) == len(duck)
                      else {})
