"""SQLite SQL read the way SQLite reads it, and its faithful DuckDB transpilation (sqlglot).

Query sets, Spider/BIRD gold SQL and SciTrek's released templates are SQLite SQL, so SQLite's own rules define
what they mean (SQLite documentation: "Quirks, Caveats, and Gotchas in SQLite" section 8 on double-quoted string
literals; "Datatypes In SQLite" section 4.2 on comparison affinity; "The SELECT statement" section 2.5 on bare
columns in an aggregate query; "Built-in Aggregate Functions" on ``min()``/``max()``). This module:

* parses SQL with sqlglot's ``sqlite`` dialect (:func:`parse_sqlite`);
* resolves double-quoted names the way SQLite does (:func:`resolve_double_quoted`): ``"France"`` is a column
  when a table in scope has one by that name (or a SELECT alias is so named), else the string ``'France'``;
* finds non-deterministic SQL (:func:`nondeterministic`): ``random()``, ``CURRENT_DATE``, ``date('now')``, a
  ``'localtime'`` modifier, ``date()`` without a time value, ... whose answer changes from run to run or machine to
  machine;
* finds bare columns of aggregate queries (:func:`bare_columns`), with the ``min()``/``max()`` row they come from
  under SQLite's rule when the query has exactly one such aggregate;
* writes the DuckDB SQL (:func:`Transpiled.duckdb`) that means the same: SQLite's integer division stays integer
  (``7/2 = 3``, by type annotation), division by zero is NULL, ``LIKE``, ``lower``, ``upper`` and the ``NOCASE`` collation fold ASCII letters only (``translate``) and
  reads numbers as text, a numeric literal compared with a TEXT column is compared as text (TEXT affinity), NULLs
  sort first in ascending order, a bare column becomes ``ANY_VALUE`` (or ``arg_max_null``/``arg_min_null`` under the
  ``min()``/``max()`` rule; the gold engine accepts it only where the rows leave one value), ``CAST(real AS
  INTEGER)`` truncates toward zero, a negative ``LIMIT`` is no limit, and backtick or bracket identifiers become
  DuckDB's double-quoted ones.
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope, walk_in_scope

from ctxbench.core.errors import InputError

# table -> column -> SQLite type (INTEGER, REAL, TEXT) or, for names only, table -> list of columns
Schema = dict[str, dict[str, str]]

_CMP = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_ORDER_CMP = (exp.GT, exp.GTE, exp.LT, exp.LTE)
_PATTERN = (exp.Like, exp.ILike, exp.Glob)

# functions whose value changes from run to run (or with the machine's clock, time zone or connection state)
_NONDET_CLASSES = tuple(c for c in (getattr(exp, n, None) for n in (
    "Rand", "Randn", "Random", "Uuid", "CurrentDate", "CurrentDatetime", "CurrentTime", "CurrentTimestamp",
    "CurrentTimestampLTZ", "CurrentTimezone", "Localtime", "Localtimestamp", "UnixSeconds")) if c is not None)
_NONDET_FUNCS = {"random", "randomblob", "changes", "total_changes", "last_insert_rowid", "current_date",
                 "current_time", "current_timestamp", "now", "uuid", "gen_random_uuid", "sqlite_source_id",
                 "sqlite_version"}
# SQLite's date and time functions: 'now' (or no time value at all) reads the clock, 'localtime'/'utc' the
# machine's time zone
_DATE_FUNCS = {"date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff"}
_CLOCK_WORDS = {"now", "localtime", "utc"}


def parse_sqlite(sql: str) -> exp.Expression:
    """Parse one SQLite SELECT statement (sqlglot's ``sqlite`` dialect: backtick and bracket identifiers, ``LIMIT
    a, b``, ``||``, ...). Raises InputError naming the SQL when it is not text, does not parse, holds more than one
    statement or is not a query."""
    if not isinstance(sql, str):
        raise InputError(f"SQL must be text, got {type(sql).__name__}: {sql!r}")
    try:
        stmts = [s for s in sqlglot.parse(sql, read="sqlite") if s is not None]
    except sqlglot.errors.SqlglotError as e:
        raise InputError(f"SQL does not parse: {sql!r} ({str(e).splitlines()[0][:200]})") from None
    except RecursionError:
        raise InputError(f"SQL is nested too deeply to parse: {sql[:80]!r}...") from None
    if len(stmts) != 1:
        raise InputError(f"expected exactly one SQL statement, got {len(stmts)}: {sql!r}")
    tree = stmts[0]
    if not isinstance(tree, (exp.Select, exp.Union, exp.Except, exp.Intersect, exp.Subquery)):
        raise InputError(f"only SELECT queries are supported: {sql!r}")
    return tree


def _scopes(tree: exp.Expression) -> list[Scope]:
    try:
        return traverse_scope(tree)
    except Exception:  # noqa: BLE001 - sqlglot cannot scope every query; callers fall back
        return []


def _star_select(e: exp.Expression) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))


def _visible_names(scope: Scope, low: dict[str, set[str]]) -> set[str] | None:
    """Lower-case column names a name in ``scope`` may refer to (its sources, enclosing scopes' sources for a
    correlated subquery, SELECT aliases); None when unknown (a table not in the schema, a ``*`` subquery)."""
    names: set[str] = set()
    s: Scope | None = scope
    while s is not None:
        for src in s.sources.values():
            if isinstance(src, exp.Table):
                cols = low.get(src.name.lower())
                if cols is None:
                    return None
                names |= cols
            else:
                e = src.expression
                if not isinstance(e, exp.Query) or any(_star_select(x) for x in e.selects):
                    return None
                names |= {n.lower() for n in e.named_selects}
        e = s.expression
        if s is scope and isinstance(e, exp.Select):  # its own SELECT aliases (ORDER BY, WHERE may use them)
            names |= {x.alias.lower() for x in e.expressions if isinstance(x, exp.Alias)}
        elif s is scope and isinstance(e, exp.SetOperation):  # ORDER BY of a UNION: its output names
            names |= {n.lower() for n in e.named_selects}
        s = s.parent
    return names


def _value_position(col: exp.Column) -> bool:
    """A place where a value, not a column, is expected when nothing else tells: the right side of a comparison
    or pattern match, an IN-list item, a BETWEEN bound."""
    p, key = col.parent, col.arg_key
    if isinstance(p, _CMP + _PATTERN) and key == "expression":
        return True
    if isinstance(p, exp.In) and key == "expressions":
        return True
    return isinstance(p, exp.Between) and key in ("low", "high")


def _dq_string(col: exp.Column) -> bool:
    ident = col.this
    return (isinstance(ident, exp.Identifier) and ident.args.get("quoted") and not col.table
            and not isinstance(col.parent, (exp.Dot,)))


def resolve_double_quoted(tree: exp.Expression, columns: dict[str, list[str]] | Schema | None = None
                          ) -> exp.Expression:
    """A copy of ``tree`` with every double-quoted name that SQLite would read as a string literal turned into one.

    SQLite (Quirks section 8): a double-quoted identifier that matches no column in scope is a string literal.
    With ``columns`` (table -> column names or types) the rule is applied exactly, scope by scope (a table not in
    ``columns`` keeps its names as columns). Without it, a double-quoted name is a literal where a value is expected
    (right side of a comparison or LIKE, IN list, BETWEEN bound): ``WHERE city = "Mountain View"``.
    """
    tree = tree.copy()
    low = {t.lower(): {c.lower() for c in cols} for t, cols in (columns or {}).items()}
    todo: list[exp.Column] = []
    scopes = _scopes(tree) if columns is not None else []
    if columns is not None and scopes:
        for scope in scopes:
            names = _visible_names(scope, low)
            if names is None:
                continue
            for node in walk_in_scope(scope.expression):
                if isinstance(node, exp.Column) and _dq_string(node) and node.name.lower() not in names:
                    todo.append(node)
    elif columns is not None:  # sqlglot could not scope the query: every known column of the query's tables
        names = {c for t in tree.find_all(exp.Table) for c in low.get(t.name.lower(), set())}
        names |= {a.alias.lower() for a in tree.find_all(exp.Alias)}
        unknown = any(t.name.lower() not in low for t in tree.find_all(exp.Table))
        todo = [] if unknown else [c for c in tree.find_all(exp.Column) if _dq_string(c) and c.name.lower() not in names]
    else:
        todo = [c for c in tree.find_all(exp.Column) if _dq_string(c) and _value_position(c)]
    for c in todo:
        c.replace(exp.Literal.string(c.this.this))
    return tree


def _func_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql(dialect="sqlite").split("(", 1)[0].strip().lower()


def nondeterministic(tree: exp.Expression) -> str | None:
    """Why ``tree``'s answer can change from run to run (or machine to machine), or None.

    The class: random values (``random()``, ``randomblob()``), the clock (``CURRENT_DATE``/``TIME``/``TIMESTAMP``,
    ``date('now')``, ``strftime('%Y')`` or ``date()`` with no time value), the machine's time zone (``'localtime'``,
    ``'utc'`` modifiers) and connection state (``changes()``, ``last_insert_rowid()``).
    """
    for node in tree.walk():
        if isinstance(node, _NONDET_CLASSES):
            return f"non-deterministic SQL: {node.sql(dialect='sqlite')} changes from run to run"
        if not isinstance(node, exp.Func):
            continue
        name = _func_name(node)
        if name in _NONDET_FUNCS:
            return f"non-deterministic SQL: {name}() changes from run to run"
        if name in _DATE_FUNCS:
            args = [a for a in node.iter_expressions()]
            words = {a.name.strip().lower() for a in node.find_all(exp.Literal) if a.is_string}
            clock = words & _CLOCK_WORDS
            if clock or not args or (name == "strftime" and len(args) < 2):
                what = f"'{sorted(clock)[0]}'" if clock else "no time value (the current time)"
                return (f"non-deterministic SQL: {node.sql(dialect='sqlite')} reads the clock or time zone "
                        f"({what}), so its answer changes with when and where it runs")
    return None


@dataclass
class Bare:
    """A bare column of an aggregate query: ``column`` (a node of the qualified tree) in ``select``; ``extreme`` the
    only ``min()``/``max()`` aggregate of that SELECT, from whose row SQLite takes the value, else None."""

    select: exp.Select
    column: exp.Column
    extreme: exp.Expression | None = None


def _in_aggregate(node: exp.Expression, stop: exp.Expression) -> bool:
    p = node.parent
    while p is not None and p is not stop:
        if isinstance(p, (exp.AggFunc, exp.Window)):
            return True
        p = p.parent
    return False


def _aggregates(sel: exp.Select) -> list[exp.AggFunc]:
    out = []
    for part in [*sel.expressions, sel.args.get("having"), sel.args.get("order")]:
        if part is None:
            continue
        for n in walk_in_scope(part):
            if isinstance(n, exp.AggFunc) and n.find_ancestor(exp.Window) is None:
                out.append(n)
    return out


def _key(e: exp.Expression) -> str:
    return e.sql(dialect="sqlite").lower()


def bare_columns(tree: exp.Expression) -> list[Bare]:
    """Bare columns of every aggregate SELECT (GROUP BY, or an aggregate in its SELECT list, HAVING or ORDER BY) of
    a qualified tree: columns of the SELECT's own sources outside any aggregate and not (inside) a GROUP BY term."""
    out: list[Bare] = []
    for scope in _scopes(tree):
        sel = scope.expression
        if not isinstance(sel, exp.Select):
            continue
        aggs = _aggregates(sel)
        group = sel.args.get("group")
        if not aggs and group is None:
            continue
        gkeys = set()
        for g in (group.expressions if group is not None else []):
            if isinstance(g, exp.Literal) and g.is_int and 1 <= int(g.this) <= len(sel.expressions):
                g = sel.expressions[int(g.this) - 1]
                g = g.this if isinstance(g, exp.Alias) else g
            gkeys.add(_key(g))
        mm = [a for a in aggs if isinstance(a, (exp.Max, exp.Min)) and not a.expressions]
        extreme = mm[0] if len(mm) == 1 else None
        local = set(scope.sources)
        seen = set()
        for part in [*sel.expressions, sel.args.get("having"), sel.args.get("order")]:
            if part is None:
                continue
            for c in walk_in_scope(part):
                if not isinstance(c, exp.Column) or not c.table or c.table not in local or id(c) in seen:
                    continue
                if _in_aggregate(c, sel):
                    continue
                node, grouped = c, False
                while node is not None and node is not sel:
                    if _key(node) in gkeys:
                        grouped = True
                        break
                    node = node.parent
                if not grouped:
                    seen.add(id(c))
                    out.append(Bare(sel, c, extreme))
    return out


def _types_schema(schema: Schema) -> dict[str, dict[str, str]]:
    return {t: {c: (ty or "TEXT") for c, ty in cols.items()} for t, cols in schema.items()}


def _is_text(e: exp.Expression) -> bool:
    return e.type is not None and e.is_type(*exp.DataType.TEXT_TYPES)


def _is_number_literal(e: exp.Expression) -> bool:
    if isinstance(e, exp.Neg):
        return _is_number_literal(e.this)
    return isinstance(e, exp.Literal) and e.is_number


def _as_text_literal(e: exp.Expression) -> exp.Literal:
    """A numeric literal as SQLite's TEXT affinity renders it (``-5`` -> ``'-5'``, ``2.50`` -> ``'2.5'``)."""
    neg = isinstance(e, exp.Neg)
    lit = e.this if neg else e
    text = str(lit.this)
    try:
        v = int(text)
        s = str(v)
    except ValueError:
        s = repr(float(text))
    return exp.Literal.string(("-" if neg else "") + s)


# SQLite's date and time functions, run in DuckDB as SQLite itself computes them (user functions that call SQLite:
# the modifiers, formats and lenient parsing have no DuckDB equivalent); name -> DuckDB return type
SQLITE_UDFS = {"date": "VARCHAR", "time": "VARCHAR", "datetime": "VARCHAR", "julianday": "DOUBLE",
               "strftime": "VARCHAR", "unixepoch": "BIGINT", "timediff": "VARCHAR"}


def _udf_call(name: str, args: list[exp.Expression]) -> exp.Expression:
    return exp.Anonymous(this=f"sqlite_{name}_{len(args)}",
                         expressions=[exp.cast(a.copy(), exp.DType.TEXT) for a in args])


def _ascii_fold(e: exp.Expression, upper: bool = False) -> exp.Expression:
    """``e`` as text with its ASCII letters lower-cased (upper-cased with ``upper``) and every other character as it
    is: SQLite's case folding (``lower``, ``upper``, ``LIKE``), in DuckDB's ``translate``."""
    up, low = string.ascii_uppercase, string.ascii_lowercase
    src, dst = (low, up) if upper else (up, low)
    out = exp.Anonymous(this="TRANSLATE", expressions=[exp.cast(e.copy(), exp.DType.TEXT), exp.Literal.string(src),
                                                       exp.Literal.string(dst)])
    out.type = exp.DataType.build("TEXT")
    return out


def _duckdb_rewrite(q: exp.Expression) -> exp.Expression:
    """Mutate a qualified, type-annotated tree so that DuckDB reads it as SQLite would (module docstring)."""
    for node in reversed(list(q.find_all(exp.Anonymous, exp.Date, exp.TimeToStr))):
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in SQLITE_UDFS:
            node.replace(_udf_call(str(node.this).lower(), list(node.expressions)))
        elif isinstance(node, exp.Date) and node.this is not None and not node.expressions:
            node.replace(_udf_call("date", [node.this]))
        elif isinstance(node, exp.TimeToStr) and isinstance(node.this, exp.TsOrDsToTimestamp):
            node.replace(_udf_call("strftime", [node.args["format"], node.this.this]))
    for node in list(q.find_all(exp.Collate)):
        # SQLite's NOCASE collation folds ASCII letters only, like lower(); DuckDB's folds every letter. Where the
        # collation decides a comparison (both sides), an IN list (the value and the list) or a sort key, the
        # folded values are compared instead; elsewhere it is left to the engines' disagreement check.
        collation = node.expression.name.lower()
        if collation in ("binary", "rtrim"):
            # binary: SQLite's default collation (byte order), which DuckDB's parser does not know; rtrim: DuckDB
            # has none, and compute_gold keeps only answers that do not depend on it (checked in SQLite)
            node.replace(node.this.copy())
            continue
        if collation != "nocase":
            continue
        parent = node.parent
        if isinstance(parent, _CMP):
            other = parent.right if parent.left is node else parent.left
            other.replace(_ascii_fold(other))
        elif isinstance(parent, exp.In) and parent.this is node and not parent.args.get("query"):
            for x in list(parent.expressions):
                x.replace(_ascii_fold(x))
        elif not isinstance(parent, exp.Ordered):
            continue
        node.replace(_ascii_fold(node.this))
    for node in list(q.find_all(exp.Lower, exp.Upper)):
        # SQLite's lower()/upper() fold ASCII letters only ('É' stays); DuckDB folds every letter: ASCII by translate
        node.replace(_ascii_fold(node.this, upper=isinstance(node, exp.Upper)))
    for node in list(q.find_all(exp.Cast)):
        # SQLite: CAST(real AS INTEGER) truncates toward zero (3.7 -> 3, -3.7 -> -3); DuckDB rounds
        inner = node.this
        if (node.to.is_type(*exp.DataType.INTEGER_TYPES) and inner.type is not None
                and inner.is_type(*exp.DataType.REAL_TYPES)):
            inner.replace(exp.Anonymous(this="TRUNC", expressions=[inner.copy()]))
    limit = q.args.get("limit")
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Neg) and isinstance(
            limit.expression.this, exp.Literal):
        q.set("limit", None)  # SQLite: a negative LIMIT is no limit (LIMIT -1 OFFSET 2)
    for node in reversed(list(q.find_all(exp.Div))):  # innermost first
        left, r = node.left, node.right
        if left.type is not None and r.type is not None and left.is_type(*exp.DataType.INTEGER_TYPES) and r.is_type(
                *exp.DataType.INTEGER_TYPES):
            # SQLite: integer / integer is integer division, truncated toward zero; x / 0 is NULL
            new = exp.IntDiv(this=exp.cast(left.copy(), exp.DType.BIGINT), expression=exp.Nullif(
                this=exp.cast(r.copy(), exp.DType.BIGINT), expression=exp.Literal.number(0)))
            new.type = exp.DataType.build("BIGINT")
            node.replace(new)
    for b in bare_columns(q):
        col = b.column
        if b.extreme is not None:
            fn = "ARG_MAX_NULL" if isinstance(b.extreme, exp.Max) else "ARG_MIN_NULL"
            col.replace(exp.Anonymous(this=fn, expressions=[col.copy(), b.extreme.this.copy()]))
        else:
            col.replace(exp.AnyValue(this=col.copy()))
    for node in list(q.find_all(exp.Like)):
        # SQLite's LIKE ignores the case of ASCII letters only ('É' LIKE 'é' is false); DuckDB's ILIKE folds every
        # letter: a case-sensitive LIKE of both sides folded to ASCII lower case (% and _ are not letters)
        node.set("this", _ascii_fold(node.this))
        node.set("expression", _ascii_fold(node.expression))
    for node in list(q.find_all(exp.Glob)):
        for key in ("this", "expression"):
            side = node.args.get(key)
            if side is not None and side.type is not None and not _is_text(side) and not side.is_type(
                    exp.DType.UNKNOWN, exp.DType.NULL):
                side.replace(exp.cast(side.copy(), exp.DType.TEXT))
    for node in list(q.find_all(*_CMP)):
        left, r = node.left, node.right
        if isinstance(left, exp.Column) and _is_text(left) and _is_number_literal(r):
            r.replace(_as_text_literal(r))
        elif isinstance(r, exp.Column) and _is_text(r) and _is_number_literal(left):
            left.replace(_as_text_literal(left))
    for node in list(q.find_all(exp.In)):
        if isinstance(node.this, exp.Column) and _is_text(node.this):
            for x in list(node.expressions):
                if _is_number_literal(x):
                    x.replace(_as_text_literal(x))
    for node in list(q.find_all(exp.Between)):
        if isinstance(node.this, exp.Column) and _is_text(node.this):
            for key in ("low", "high"):
                if _is_number_literal(node.args[key]):
                    node.args[key].replace(_as_text_literal(node.args[key]))
    return q


@dataclass
class Transpiled:
    """One SQLite query prepared for the gold engine: ``tree`` (double-quoted strings resolved), ``qualified``
    (every column qualified by its source, types annotated; the tree the checks read), ``duckdb`` (the DuckDB SQL;
    None when it cannot be written, see ``notes``), ``udfs`` (the ``sqlite_<name>_<arity>`` functions it calls) and
    ``nondeterministic`` (the reason, or None)."""

    sql: str
    tree: exp.Expression
    qualified: exp.Expression
    duckdb: str | None
    nondeterministic: str | None = None
    notes: list[str] = field(default_factory=list)
    udfs: list[tuple[str, int]] = field(default_factory=list)


def _qualify(tree: exp.Expression, types: dict[str, dict[str, str]]) -> exp.Expression:
    q = qualify(tree.copy(), dialect="sqlite", schema=types, validate_qualify_columns=False,
                quote_identifiers=True, identify=True)
    return annotate_types(q, schema=types, dialect="sqlite")


def _sqlite_aggregates(tree: exp.Expression) -> exp.Expression:
    """SQLite's own aggregates written with standard ones, so that both engines and the bare-column check read them
    as aggregates: ``total(x)`` (SQLite "Built-in Aggregate Functions": the sum as a floating-point value, 0.0 over
    no row) is ``COALESCE(CAST(SUM(x) AS REAL), 0.0)``."""
    for node in list(tree.find_all(exp.Anonymous)):
        if str(node.this).lower() == "total" and len(node.expressions) == 1:
            node.replace(exp.Coalesce(this=exp.cast(exp.Sum(this=node.expressions[0].copy()), exp.DType.DOUBLE),
                                      expressions=[exp.Literal.number("0.0")]))
    return tree


def _declared_collation(col: exp.Expression, collations: dict[str, dict[str, str]], scope_of: dict,
                        aliases: dict[str, exp.Expression] | None = None) -> str | None:
    """The collation (lower case) a column operand carries by its declaration (``collations``: lower-case table ->
    lower-case column -> collation), None for an operand that is not a column of a base table; an unqualified
    ORDER BY name reads the select expression of that alias (``aliases``)."""
    if not isinstance(col, exp.Column):
        return None
    if not col.table and aliases and col.name.lower() in aliases:
        return _declared_collation(aliases[col.name.lower()], collations, scope_of)
    src = source_table(col, scope_of)
    return collations.get((src or "").lower(), {}).get(col.name.lower(), "binary") if src else None


def _column_collations(q: exp.Expression, collations: dict[str, dict[str, str]]) -> exp.Expression:
    """Mutate ``q`` (qualified) so that each comparison, IN list, BETWEEN and sort key that SQLite reads with a
    column's declared NOCASE collation says so with an explicit ``COLLATE NOCASE`` (which :func:`_duckdb_rewrite`
    then writes as SQLite's ASCII folding): DuckDB's tables carry no collation. SQLite's rules ("Datatypes In
    SQLite" section 7.1): an explicit COLLATE on either operand wins; else the left operand's column collation,
    else the right one's (a column declared without one is BINARY). RTRIM is left out (DuckDB has no RTRIM: the
    gold engine checks that the answer does not depend on it, :func:`ctxbench.gold.compute_gold`)."""
    if not any(v == "nocase" for cols in collations.values() for v in cols.values()):
        return q
    scope_of = scope_index(q)

    def nocase(e: exp.Expression) -> exp.Expression:
        return exp.Collate(this=e.copy(), expression=exp.Var(this="NOCASE"))

    for node in list(q.find_all(*_CMP)):
        left, right = node.left, node.right
        if isinstance(left, exp.Collate) or isinstance(right, exp.Collate):
            continue
        for side in (left, right):
            c = _declared_collation(side, collations, scope_of)
            if c is not None:
                if c == "nocase":
                    side.replace(nocase(side))
                break
    for node in list(q.find_all(exp.In)):
        if not node.args.get("query") and _declared_collation(node.this, collations, scope_of) == "nocase":
            node.set("this", nocase(node.this))
    for node in list(q.find_all(exp.Between)):
        if _declared_collation(node.this, collations, scope_of) == "nocase":
            for key in ("this", "low", "high"):
                node.set(key, _ascii_fold(node.args[key]))
    for sel in list(q.find_all(exp.Select)):
        order = sel.args.get("order")
        if order is None:
            continue
        aliases = {e.alias.lower(): e.this for e in sel.expressions if isinstance(e, exp.Alias)}
        for o in order.expressions:
            if _declared_collation(o.this, collations, scope_of, aliases) == "nocase":
                o.set("this", nocase(o.this))
    return q


@functools.lru_cache(maxsize=4096)
def _transpile_cached(sql: str, schema_key: tuple, collation_key: tuple = ()) -> Transpiled:
    types = {t: dict(cols) for t, cols in schema_key}
    collations = {t: dict(cols) for t, cols in collation_key}
    tree = _sqlite_aggregates(resolve_double_quoted(parse_sqlite(sql), types))
    nondet = nondeterministic(tree)
    notes: list[str] = []
    try:
        q = _qualify(tree, types)
    except Exception as e:  # noqa: BLE001 - sqlglot's optimizer cannot qualify every query: the plain tree
        notes.append(f"not qualified ({type(e).__name__}: {str(e)[:120]})")
        q = None
    if q is None:
        try:
            q = annotate_types(tree.copy(), schema=types, dialect="sqlite")
        except Exception:  # noqa: BLE001
            q = tree.copy()
    duck_sql = None
    if nondet is None:  # a non-deterministic query is rejected before it runs
        try:
            duck = _duckdb_rewrite(_column_collations(annotate_types(q.copy(), schema=types, dialect="sqlite"),
                                                      collations))
            duck = annotate_types(duck, schema=types, dialect="sqlite")
            duck_sql = duck.sql(dialect="duckdb")
        except Exception as e:  # noqa: BLE001 - reported as the reason the question is rejected
            notes.append(f"cannot write the DuckDB form ({type(e).__name__}: {str(e).splitlines()[0][:160]})")
    udfs = sorted({(m.group(1), int(m.group(2))) for m in re.finditer(r"\bSQLITE_(\w+?)_(\d+)\(",
                                                                        duck_sql or "", flags=re.IGNORECASE)})
    return Transpiled(sql, tree, q, duck_sql, nondet, notes, [(n.lower(), k) for n, k in udfs])


def transpile(sql: str, schema: Schema, collations: dict[str, dict[str, str]] | None = None) -> Transpiled:
    """Read ``sql`` as SQLite over ``schema`` (table -> column -> SQLite type) and write its DuckDB form.
    ``collations``: table -> column -> the collation its declaration gives it (``NOCASE``, ``RTRIM``; none:
    BINARY), which the DuckDB form follows where SQLite's comparison or sort reads it
    (:func:`_column_collations`).

    Raises InputError when the SQL does not parse (:func:`parse_sqlite`). The returned trees are shared by calls
    with the same arguments: copy before changing them.
    """
    key = tuple(sorted((t, tuple(cols.items())) for t, cols in _types_schema(schema).items()))
    ckey = tuple(sorted((t.lower(), tuple(sorted((c.lower(), v.lower()) for c, v in cols.items())))
                        for t, cols in (collations or {}).items() if cols))
    return _transpile_cached(sql, key, ckey)


def source_table(col: exp.Column, scope_of: dict[int, Scope]) -> str | None:
    """The base table a qualified column reads (None for a derived table or an unknown source)."""
    sel = col
    while sel is not None and id(sel) not in scope_of:
        sel = sel.parent
    scope = scope_of.get(id(sel)) if sel is not None else None
    while scope is not None:
        src = scope.sources.get(col.table)
        if isinstance(src, exp.Table):
            return src.name
        if src is not None:
            return None
        scope = scope.parent
    return None


def scope_index(tree: exp.Expression) -> dict[int, Scope]:
    """id(scope expression) -> scope, for :func:`source_table`."""
    return {id(s.expression): s for s in _scopes(tree)}



def parse_expression(sql: str) -> exp.Expression:
    """One SQLite expression (not a statement), e.g. ``COUNT(DISTINCT "t"."c")``."""
    return sqlglot.parse_one(sql, read="sqlite")
