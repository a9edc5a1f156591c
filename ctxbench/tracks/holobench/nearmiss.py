"""SQL-aware near-miss distractors for the verbalized-database track (issue 25; Context Rot's finding that
distractors similar to the evidence hurt more than length, applied to HoloBench's row sampling).

A question's *predicates* are the conjuncts of its top-level WHERE (``a AND b AND c`` → ``a``, ``b``, ``c``;
an ``OR`` is one predicate) that read the columns of one queried table and hold no subquery, found with sqlglot
(:func:`table_predicates`). Each row of a queried table *misses* the predicates of its table that are false (or
NULL) for it: 0 misses is a matching row, 1 a *one-predicate miss* (a near miss: same origin, another month), 2 or
more an ordinary non-matching row (:func:`miss_counts`, evaluated by SQLite over the table's rows).

``build holobench --distractors near-miss`` keeps the random order in which the relevant rows are drawn (the same
seeded permutation as ``random``) and changes only what fills the draws of non-matching rows: the k-th non-matching
draw of a table is the k-th row of that table's one-predicate misses (shuffled from a seed of the configuration),
and only once those run out one of its other non-matching rows (:class:`NearMissPool`). So matching rows are those
``random`` would include, every non-matching row included is a one-predicate miss while the table has any left
(the share is 1.0 where the table has enough, well over the issue's 80%), and the gold answer, computed on exactly
the rows included, is unaffected in kind. The share of one-predicate misses among the non-matching rows of the
queried tables included is stored per instance (``near_miss_share``; null where the question has no predicate or
no non-matching row was included), for ``random`` builds too (their base rate).
"""

from __future__ import annotations

import sqlite3

from sqlglot import exp

from ctxbench.features.difficulty import conjuncts
from ctxbench.core.hashing import seeded_rng
from ctxbench.questions.sqlinfo import parse_sql

DISTRACTORS = ("random", "near-miss")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_predicates(sql: str, tables: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    """The predicates of ``sql``'s top-level WHERE per queried table (module docstring), each as SQLite text over
    the table's unqualified columns, in query order. ``tables`` maps each queried table's name (as in the
    database) to its column names. A conjunct whose columns cannot be attributed to exactly one of these tables, or
    that holds a subquery, is no predicate. Raises InputError when the SQL does not parse."""
    q = parse_sql(sql)
    while isinstance(q, exp.Subquery):
        q = q.this
    if not isinstance(q, exp.Select) or q.args.get("where") is None:
        return {}
    low = {t.lower(): t for t in tables}
    cols = {t: {c.lower() for c in cs} for t, cs in tables.items()}
    alias: dict[str, str] = {}
    frm = q.args.get("from_") or q.args.get("from")
    sources = ([frm.this, *frm.expressions] if frm is not None else []) + [j.this for j in q.args.get("joins") or []]
    in_from = []
    for s in sources:
        if isinstance(s, exp.Table) and s.name.lower() in low:
            t = low[s.name.lower()]
            alias[s.name.lower()] = alias[s.alias_or_name.lower()] = t
            in_from.append(t)
    out: dict[str, list[str]] = {}
    for c in conjuncts(q.args["where"].this):
        if c.find(exp.Select) is not None:
            continue
        owners = set()
        for col in c.find_all(exp.Column):
            t = col.table.lower()
            if t:
                owners.add(alias.get(t))
            else:
                having = [x for x in dict.fromkeys(in_from) if col.name.lower() in cols[x]]
                owners.add(having[0] if len(having) == 1 else None)
        if len(owners) != 1 or None in owners:
            continue
        t = owners.pop()
        bare = c.copy().transform(lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
        out.setdefault(t, []).append(bare.sql(dialect="sqlite"))
    return {t: tuple(ps) for t, ps in out.items()}


class MissCounter:
    """Miss counts of rows against predicates (:meth:`counts`), evaluated by SQLite: each table's rows are loaded
    once into an in-memory database (with the column types given), and every predicate set is one query over it.
    Close it with :meth:`close` (or use it as a context manager)."""

    def __init__(self) -> None:
        self.con = sqlite3.connect(":memory:")
        self.loaded: dict[str, str] = {}

    def counts(self, table: str, columns: list[str], types: list[str], rows: list,
               predicates: tuple[str, ...]) -> tuple[int, ...]:
        """For each row of ``table`` (``rows``, in order), the number of ``predicates`` (SQLite text over
        ``columns``) that are not true for it (false or NULL)."""
        if not predicates:
            return (0,) * len(rows)
        if table not in self.loaded:
            name = self.loaded[table] = f"t{len(self.loaded)}"
            self.con.execute(f"CREATE TABLE {name} (" + ", ".join(f"{_quote(c)} {ty}" for c, ty in zip(columns, types))
                             + ")")
            self.con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(columns))})", rows)
        miss = " + ".join(f"(CASE WHEN ({p}) THEN 0 ELSE 1 END)" for p in predicates)
        return tuple(r[0] for r in self.con.execute(f"SELECT {miss} FROM {self.loaded[table]} ORDER BY rowid"))

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "MissCounter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def miss_counts(columns: list[str], types: list[str], rows: list[tuple], predicates: tuple[str, ...]) -> list[int]:
    """For each row (in order), the number of ``predicates`` (SQLite text over ``columns``) that are not true for
    it (false or NULL), evaluated by SQLite over a table of these rows with the given column types."""
    with MissCounter() as mc:
        return list(mc.counts("t", columns, types, rows, predicates))


class NearMissPool:
    """Remaps the draws of a :class:`~ctxbench.tracks.holobench.build._Rows` pool (module docstring): ``remap(ks)``
    keeps a matching row's index and replaces the k-th non-matching draw of each table by the k-th of that table's
    one-predicate misses, then its other non-matching rows, each list shuffled from ``seed_parts``. ``classes[k]``
    is pool row k's miss count (0 matching)."""

    def __init__(self, offsets: list[int], tables: list[str], counts: dict[str, tuple[int, ...]], seed_parts: tuple,
                 n: int):
        self.offsets, self.tables = offsets, tables
        self.queues: list[list[int]] = []
        self.used: list[int] = []
        self.classes: list[int] = []
        for t, off, end in zip(tables, offsets, [*offsets[1:], n]):
            c = counts.get(t) or (0,) * (end - off)
            self.classes.extend(c)
            one = [off + i for i, m in enumerate(c) if m == 1]
            other = [off + i for i, m in enumerate(c) if m >= 2]
            rng = seeded_rng("near-miss", *seed_parts, t)
            rng.shuffle(one)
            rng.shuffle(other)
            self.queues.append(one + other)
            self.used.append(0)

    def remap(self, ks: list[int]) -> list[int]:
        """The pool indices to include for the draws ``ks`` (called once per draw, in draw order)."""
        from bisect import bisect_right

        out = []
        for k in ks:
            if not self.classes[k]:
                out.append(k)
                continue
            ti = bisect_right(self.offsets, k) - 1
            out.append(self.queues[ti][self.used[ti]])
            self.used[ti] += 1
        return out


def near_miss_share(included: dict[str, list[int]], predicates: dict[str, tuple[str, ...]],
                    counts: dict[str, tuple[int, ...]]) -> float | None:
    """Share of one-predicate misses among the non-matching rows included (``included``: table → 1-based row ids
    of the context), over the tables with predicates; None when there is none."""
    one = non = 0
    for t in predicates:
        c = counts[t]
        for rid in included.get(t, []):
            m = c[rid - 1]
            if m:
                non += 1
                one += m == 1
    return round(one / non, 6) if non else None
