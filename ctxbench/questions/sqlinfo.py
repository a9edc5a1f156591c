"""SQL analysis with sqlglot: tables, columns, query types and difficulty, never hand-labelled.

Query types follow HoloBench section 3.3 and appendix A.3.1, difficulty appendix A.3.2:

* **Aggregation**: an aggregate other than MAX/MIN (COUNT, SUM, AVG, ...) or a GROUP BY.
* **Max/Min**: MAX() or MIN().
* **Join**: a JOIN, or more than one table in one FROM.
* **Comparison**: a *numeric* comparison against a literal (``>``, ``<``, ``>=``, ``<=``, ``=``, ``!=``,
  BETWEEN, IN over numeric literals). An equality with a string or with a subquery is not one (appendix A.3.3).
* **Ranking**: ORDER BY (with or without LIMIT).

Difficulty (A.3.2): *components 1* are the distinct keywords WHERE, GROUP BY, ORDER BY, JOIN, OR, LIKE, HAVING,
BETWEEN used anywhere in the query; *components 2* are EXCEPT, UNION, INTERSECT and nested subqueries; the *other
factors* are more than one aggregate, more than two SELECT columns, more than one WHERE condition, more than one
JOIN, more than one GROUP BY column. Easy: ≤1 component-1 keyword, no component 2, no factor. Medium: ≤2
component-1 keywords, no component 2, ≤1 factor. Hard: everything else.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import sqlglot
from sqlglot import exp

from ctxbench.gold.dialect import parse_sqlite, resolve_double_quoted
from ctxbench.sources import Database, load_database
from ctxbench.sources.preprocess import DatabaseSpec, preprocess

QUERY_TYPES = ["Aggregation", "Max/Min", "Join", "Comparison", "Ranking"]
_CMP = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ)


def parse_sql(sql: str) -> exp.Expression:
    """Parse one SQLite SELECT statement (:func:`ctxbench.gold.dialect.parse_sqlite`). Raises InputError naming the
    SQL when it does not parse."""
    return parse_sqlite(sql)


def _is_numeric_literal(e: exp.Expression) -> bool:
    if isinstance(e, exp.Paren):
        return _is_numeric_literal(e.this)
    if isinstance(e, exp.Neg):
        return _is_numeric_literal(e.this)
    return isinstance(e, exp.Literal) and e.is_number


def _is_value_side(e: exp.Expression) -> bool:
    """A side that reads data: contains a column or an aggregate, and no subquery."""
    return (e.find(exp.Column) is not None or e.find(exp.AggFunc) is not None) and e.find(exp.Select) is None


def _numeric_comparison(node: exp.Expression) -> bool:
    if isinstance(node, _CMP):
        left, r = node.left, node.right
        return (_is_value_side(left) and _is_numeric_literal(r)) or (_is_value_side(r) and _is_numeric_literal(left))
    if isinstance(node, exp.Between):
        return _is_value_side(node.this) and _is_numeric_literal(node.args["low"]) and _is_numeric_literal(node.args["high"])
    if isinstance(node, exp.In):
        exprs = node.expressions
        return bool(exprs) and not node.args.get("query") and _is_value_side(node.this) and all(
            _is_numeric_literal(x) for x in exprs)
    return False


def _atomic_conditions(e: exp.Expression | None) -> int:
    if e is None:
        return 0
    if isinstance(e, exp.Paren):
        return _atomic_conditions(e.this)
    if isinstance(e, (exp.And, exp.Or)):
        return _atomic_conditions(e.left) + _atomic_conditions(e.right)
    return 1


def _selects(tree: exp.Expression) -> list[exp.Select]:
    return list(tree.find_all(exp.Select))


def _nearest_select(node: exp.Expression) -> exp.Select | None:
    """The closest enclosing SELECT of a node (not the node itself)."""
    p = node.parent
    while p is not None and not isinstance(p, exp.Select):
        p = p.parent
    return p


def _top_select(tree: exp.Expression) -> exp.Select | None:
    if isinstance(tree, exp.Select):
        return tree
    return tree.find(exp.Select)


def query_types(tree: exp.Expression) -> list[str]:
    """Query types of a parsed query, in the fixed order of ``QUERY_TYPES``."""
    found = set()
    aggs = list(tree.find_all(exp.AggFunc))
    if any(not isinstance(a, (exp.Max, exp.Min)) for a in aggs) or tree.find(exp.Group) is not None:
        found.add("Aggregation")
    if any(isinstance(a, (exp.Max, exp.Min)) for a in aggs):
        found.add("Max/Min")
    if tree.find(exp.Join) is not None:
        found.add("Join")
    if any(_numeric_comparison(n) for n in tree.find_all(*_CMP, exp.Between, exp.In)):
        found.add("Comparison")
    if tree.find(exp.Order) is not None:
        found.add("Ranking")
    return [t for t in QUERY_TYPES if t in found]


def difficulty_components(tree: exp.Expression) -> dict[str, Any]:
    """The counts appendix A.3.2 decides difficulty from (see module docstring)."""
    kw = set()
    if tree.find(exp.Where) is not None:
        kw.add("WHERE")
    if tree.find(exp.Group) is not None:
        kw.add("GROUP BY")
    if tree.find(exp.Order) is not None:
        kw.add("ORDER BY")
    if tree.find(exp.Join) is not None:
        kw.add("JOIN")
    if tree.find(exp.Or) is not None:
        kw.add("OR")
    if tree.find(exp.Like, exp.ILike) is not None:
        kw.add("LIKE")
    if tree.find(exp.Having) is not None:
        kw.add("HAVING")
    if tree.find(exp.Between) is not None:
        kw.add("BETWEEN")
    comp2 = set()
    for cls, name in ((exp.Except, "EXCEPT"), (exp.Union, "UNION"), (exp.Intersect, "INTERSECT")):
        if tree.find(cls) is not None:
            comp2.add(name)
    selects = _selects(tree)
    top = _top_select(tree)
    # a nested subquery: any SELECT below another SELECT (set operations' own branches are not nested)
    if any(_nearest_select(s) is not None for s in selects):
        comp2.add("NESTED")
    factors = []
    if len(list(tree.find_all(exp.AggFunc))) > 1:
        factors.append("aggregates>1")
    if top is not None and len(top.expressions) > 2:
        factors.append("select_columns>2")
    if top is not None and _atomic_conditions(top.args.get("where") and top.args["where"].this) > 1:
        factors.append("where_conditions>1")
    if len(list(tree.find_all(exp.Join))) > 1:
        factors.append("joins>1")
    if any(len(g.expressions) > 1 for g in tree.find_all(exp.Group)):
        factors.append("group_by_columns>1")
    return {"components1": sorted(kw), "components2": sorted(comp2), "factors": factors}


def difficulty(tree: exp.Expression) -> str:
    """``easy``, ``medium`` or ``hard`` by HoloBench appendix A.3.2."""
    c = difficulty_components(tree)
    n1, n2, nf = len(c["components1"]), len(c["components2"]), len(c["factors"])
    if n1 <= 1 and n2 == 0 and nf == 0:
        return "easy"
    if n1 <= 2 and n2 == 0 and nf <= 1:
        return "medium"
    return "hard"


def tables_and_columns(tree: exp.Expression, schema: dict[str, list[str]] | None = None) -> tuple[list[str], list[str]]:
    """Sorted lower-case table names and ``table.column`` names the query reads.

    Aliases are resolved; an unqualified column belongs to the only table in its SELECT's scope, or, with
    ``schema`` (table -> columns), to the table that has it. SELECT-list aliases are not columns.
    """
    cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = sorted({t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() not in cte_names})
    low_schema = {t.lower(): {c.lower() for c in cols} for t, cols in (schema or {}).items()}
    cols: set[str] = set()
    alias_maps: dict[int, dict[str, str]] = {}
    scopes: dict[int, list[str]] = {}
    for sel in _selects(tree):
        alias_map, scope_tables = {}, []
        for t in sel.find_all(exp.Table):
            if _nearest_select(t) is not sel:  # only tables whose nearest SELECT is this one
                continue
            name = t.name.lower()
            scope_tables.append(name)
            alias_map[(t.alias or t.name).lower()] = name
            alias_map[name] = name
        alias_maps[id(sel)], scopes[id(sel)] = alias_map, scope_tables
    for sel in _selects(tree):
        scope_tables = scopes[id(sel)]
        select_aliases = {e.alias.lower() for e in sel.expressions if isinstance(e, exp.Alias)}
        for c in sel.find_all(exp.Column):
            if _nearest_select(c) is not sel:
                continue
            cname = c.name.lower()
            if c.table:
                # the alias may belong to an enclosing SELECT (a correlated subquery)
                q, outer = c.table.lower(), sel
                t = q
                while outer is not None:
                    if q in alias_maps.get(id(outer), {}):
                        t = alias_maps[id(outer)][q]
                        break
                    outer = _nearest_select(outer)
                cols.add(f"{t}.{cname}")
            elif cname in select_aliases and not any(cname in low_schema.get(t, set()) for t in scope_tables):
                continue
            elif len(set(scope_tables)) == 1:
                cols.add(f"{scope_tables[0]}.{cname}")
            else:
                owners = [t for t in dict.fromkeys(scope_tables) if cname in low_schema.get(t, set())]
                cols.add(f"{owners[0]}.{cname}" if len(owners) == 1 else cname)
    return tables, sorted(cols)


def sql_info(sql: str, schema: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The JSON object ``ctxbench sql-info`` prints: tables, columns, query_types, difficulty (SCHEMA.md).

    The SQL is read as SQLite reads it: a double-quoted name that is no column (``WHERE city = "Mountain View"``)
    is a string literal, never listed as a column (:func:`ctxbench.gold.dialect.resolve_double_quoted`; exact with
    ``schema``, by position without it). Raises InputError when the SQL does not parse."""
    tree = resolve_double_quoted(parse_sql(sql), schema)
    tables, columns = tables_and_columns(tree, schema)
    return {"tables": tables, "columns": columns, "query_types": query_types(tree), "difficulty": difficulty(tree)}


@lru_cache(maxsize=4096)
def sql_is_ordered(sql: str | None) -> bool:
    """Whether the query orders its result at the top level (sqlglot); False for no or unparseable SQL."""
    if not sql:
        return False
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return False
    return isinstance(tree, exp.Select) and bool(tree.args.get("order"))


def sql_info_on_db(sql: str, db: Any) -> dict[str, Any]:
    """:func:`sql_info` with each column resolved against a database (``ctxbench sql-info --db FILE``): the database
    as stored, and its preprocessed view (:func:`ctxbench.sources.preprocess.preprocess`: identifiers replaced by
    the referenced row's name, e.g. ``flights.DestAirport`` becomes ``DestAirport_airportname``), in which the
    questions of ``ctxbench questions generate`` are written. ``db``: a path :func:`ctxbench.sources.load_database`
    reads, or a loaded :class:`~ctxbench.sources.Database`.

    Returns sql_info's object plus ``resolved`` (``{"table.column": {"in": "database" | "preprocessed view",
    "column": its spelling there, "stands_for": "flights.DestAirport -> airports.AirportName" for a replaced
    identifier}}``) and ``unknown`` (the ``table.column`` names found in neither). Raises InputError when the SQL
    does not parse or the database cannot be read."""
    raw = db if isinstance(db, Database) else load_database(db)
    view = preprocess(raw, None, DatabaseSpec.load(raw.db_id))
    stands = {f"{r['table']}.{r['as']}".lower(): f"{r['table']}.{r['column']} -> {r['ref_table']}."
              f"{'+'.join(r['name_columns'])} (the referenced row's name)" for r in view.replaced}
    schema: dict[str, list[str]] = {n: list(t.columns) for n, t in raw.tables.items()}
    for n, t in view.db.tables.items():
        schema.setdefault(n, [])
        schema[n] += [c for c in t.columns if c not in schema[n]]
    info = sql_info(sql, schema)
    raw_cols = {f"{n}.{c}".lower(): c for n, t in raw.tables.items() for c in t.columns}
    view_cols = {f"{n}.{c}".lower(): c for n, t in view.db.tables.items() for c in t.columns}
    resolved, unknown = {}, []
    for c in info["columns"]:
        if "." not in c:
            unknown.append(c)
        elif c in raw_cols:
            resolved[c] = {"in": "database", "column": raw_cols[c]}
        elif c in view_cols:
            resolved[c] = {"in": "preprocessed view", "column": view_cols[c], **(
                {"stands_for": stands[c]} if c in stands else {})}
        else:
            unknown.append(c)
    return {**info, "resolved": resolved, "unknown": unknown}
