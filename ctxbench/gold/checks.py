"""The checks of the gold engine (:func:`ctxbench.gold.execute.compute_gold`) that find a question whose answer is
not one well-defined set of rows (HoloBench section 3.2, step 4; the numbered list of :mod:`ctxbench.gold.execute`):
collations DuckDB cannot reproduce (9), the value rule's NULLs under a NULL-sensitive comparison, integer division
(:func:`exact_division`), numbers stored as text (2, :func:`text_number`), ties and NULL order (3, 4) and bare
columns (5). Each ``*_issue`` function returns ``(reason, detail)`` for a rejection, None otherwise."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.scope import walk_in_scope

from ctxbench.gold.compare import norm_rows, results_equal, row_equal, sort_key
from ctxbench.gold.dialect import Transpiled, bare_columns, parse_expression, scope_index, source_table
from ctxbench.gold.engines import DUCKDB_COLLATIONS, GoldEngines, Tables
from ctxbench.sources.database import looks_numeric

__all__ = ["INTEGER_DIVISION", "bare_issue", "collation_issue", "exact_division", "int_arg", "null_comparison_issue",
           "numeric_text_issue", "order_issue", "text_number"]


def collation_issue(tr: Transpiled, engines: "GoldEngines", lite: list) -> tuple[str, dict] | None:
    """A question whose answer depends on a collation DuckDB cannot reproduce (RTRIM, a user collation), declared
    on a column the tables hold or written in the SQL (``COLLATE RTRIM``): SQLite answers it again with those
    collations as BINARY, and a different answer is a rejection naming the collation. None when the answer does
    not depend on one (or none is used)."""
    read = {c.name.lower() for c in tr.tree.find_all(exp.Column)}
    declared = {f"{t}.{c}": v for t, cols in engines.collations().items() for c, v in cols.items()
                if v not in DUCKDB_COLLATIONS and c.lower() in read}
    written = sorted({n.expression.name.upper() for n in tr.tree.find_all(exp.Collate)} - DUCKDB_COLLATIONS)
    if not declared and not written:
        return None
    tree = tr.tree.copy()
    for n in list(tree.find_all(exp.Collate)):
        if n.expression.name.upper() not in DUCKDB_COLLATIONS:
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


def null_comparison_issue(tr: Transpiled, null_columns: dict[str, int]) -> tuple[str, dict] | None:
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

def exact_division(tree: exp.Expression, only: int | None = None) -> exp.Expression | None:
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


def numeric_text_issue(tr: Transpiled, tables: Tables, con: sqlite3.Connection | None = None,
                       kinds: dict[str, dict[str, str]] | None = None) -> tuple[str, dict] | None:
    """``numbers stored as text: ...`` for check 2 of :mod:`ctxbench.gold.execute` (MIN/MAX, ORDER BY or a
    comparison over a column whose text values order differently as text than as numbers), else None."""
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

def int_arg(node: exp.Expression, key: str) -> int | None:
    """The integer literal of a query's ``limit`` or ``offset`` (``key``); None without one, -1 when it is not a
    literal."""
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


def order_issue(tr: Transpiled, con: sqlite3.Connection, strict_order: bool,
                window: dict | None = None) -> tuple[str, dict] | None:
    """The first tie or NULL-order ambiguity of an ordered (sub)query (module docstring, checks 3-4), else None.
    ``window["keys"]`` receives the sort keys of the top-level answer's rows, in order (their tie blocks)."""
    root = tr.qualified
    nodes = [n for n in root.find_all(exp.Select, exp.SetOperation) if n.args.get("order") is not None
             and isinstance(n.args["order"], exp.Order)]
    for node in nodes:
        top = node is root
        limit, offset = int_arg(node, "limit"), int_arg(node, "offset") or 0
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
                if sk in first and several is None and not row_equal(first[sk][:nk], r[:nk]):
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
                if not all(row_equal(a, b) for a, b in zip(keys[offset:end], fk[offset:end])):
                    return (f"answer depends on NULL ordering{where}: a sort key is NULL, and SQLite and other "
                            f"engines place NULLs at different ends", {"keys": keys[:20]})
        # ties across the cut(s)
        for cut, label in ((offset, "OFFSET"), (end, "LIMIT")):
            if not 0 < cut < len(rows) or (label == "LIMIT" and limit is None):
                continue
            if not row_equal(keys[cut - 1], keys[cut]):
                continue
            i, j = cut - 1, cut
            while i > 0 and row_equal(keys[i - 1], keys[cut]):
                i -= 1
            while j < len(rows) and row_equal(keys[j], keys[cut]):
                j += 1
            group = outs[i:j]
            if any(not row_equal(group[0], g) for g in group[1:]):
                n = limit if label == "LIMIT" else offset
                return (f"tie at {label} {n}{where}: rows {cut} and {cut + 1} have equal ORDER BY keys "
                        f"{keys[cut]} but different values, so either could be in the answer",
                        {"keys": keys[i:j][:20], "rows": group[:20]})
        if strict_order and top:
            for a in range(offset, end - 1):
                if row_equal(keys[a], keys[a + 1]) and not row_equal(outs[a], outs[a + 1]):
                    return ("tie in ORDER BY: rows with equal sort keys differ, so their order in the answer is "
                            "undefined", {"rows": [outs[a], outs[a + 1]]})
    return None


# --- 5. bare columns -------------------------------------------------------------------------------------------

def bare_issue(tr: Transpiled, con: sqlite3.Connection) -> tuple[str, dict] | None:
    """``bare column ...`` or ``tie ...`` for check 5 of :mod:`ctxbench.gold.execute` (a bare column of an
    aggregate query that the rows used do not determine), else None."""
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
