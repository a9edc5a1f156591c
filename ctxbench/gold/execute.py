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

Where the parts live: this module holds :class:`GoldResult` and :func:`compute_gold`, which runs the checks in the
order above; the engines are :mod:`ctxbench.gold.engines`, the checks :mod:`ctxbench.gold.checks`, and the
comparison of results (:func:`~ctxbench.gold.compare.results_equal`, tie groups) :mod:`ctxbench.gold.compare`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ctxbench.core.errors import InputError
from ctxbench.gold.checks import (INTEGER_DIVISION, bare_issue, collation_issue, exact_division, int_arg,
                                  null_comparison_issue, numeric_text_issue, order_issue)
from ctxbench.gold.compare import equal_in_tie_groups, norm_rows, results_equal, sort_key, tie_groups
from ctxbench.gold.dialect import parse_sqlite, transpile
from ctxbench.gold.engines import GoldEngines, Tables

__all__ = ["INTEGER_DIVISION", "GoldEngines", "GoldResult", "compute_gold", "equal_in_tie_groups", "norm_rows",
           "results_equal", "sort_key", "tie_groups"]


@dataclass
class GoldResult:
    """``rows``: the gold answer (list of rows, values in SELECT order); ``ok`` False with ``reason`` when rejected.
    ``detail``: what a rejection found; for an accepted ordered answer ``{"tie_groups": [...]}`` (:func:`tie_groups`
    of its rows: rows of one group are tied and may come in any order)."""

    rows: list[list[Any]] | None
    ok: bool
    reason: str = ""
    detail: dict = field(default_factory=dict)


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
    for check in (lambda: null_comparison_issue(tr, {k.lower(): v for k, v in (null_columns or {}).items()}),
                  lambda: numeric_text_issue(tr, tables, con, engines.kinds()), lambda: order_issue(tr, con, strict_order, window),
                  lambda: bare_issue(tr, con), lambda: collation_issue(tr, engines, lite)):
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
            return results_equal(a, b, True) or (int_arg(root, "limit") is None and results_equal(a, b, False))
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
        exact = exact_division(parse_sqlite(sql))
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
                        one = norm_rows(con.execute(exact_division(tree, k).sql(dialect="sqlite")).fetchall())
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

# the names that moved to the modules beside this one, still importable from here for one release (CHANGELOG.md)
from ctxbench.gold.checks import text_number  # noqa: E402,F401
from ctxbench.gold.compare import REL_TOL  # noqa: E402,F401
