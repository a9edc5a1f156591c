"""Instance difficulty properties of LURCH ("Beyond Context Length: Characterising the Difficulty of Long-Context
Reasoning", section 3): evidence scope, evidence dispersion and reasoning depth, computed exactly from how an
instance was built (no model annotation).

**Scope and dispersion.** Spans are half-open token intervals ``[start, end)`` in the context (SCHEMA.md
``evidence_spans``; LURCH writes closed intervals ``[a, b]``, i.e. ``[a, b + 1)`` here). Overlapping or adjacent
intervals are merged first, so the merged intervals are disjoint and separated by at least one non-evidence token.
With L context tokens, S evidence tokens and H the evidence span (start of the first to end of the last merged
interval):

* scope = S / L, the proportion of the context covered by evidence;
* dispersion = (H − S) / (L − S), the fraction of all non-evidence text that lies inside the evidence span. It is
  0 for a single merged interval (H = S), including one covering the whole context (L − S = 0, where the ratio
  would be 0/0), and 1 when several intervals span the whole context (H = L).

**Reasoning depth** is the number of nodes on the longest path of the derivation graph (a DAG whose nodes are
atomic operations and whose edges are direct dependencies) ending in the answer-producing node; an answer read
directly from the evidence has depth 1, and parallel lookups do not add depth. ctxbench knows the derivation from
construction:

* SQL questions (verbalized-database and article tracks): :func:`sql_derivation_graph` builds the graph from the
  query's structure (see there); node kinds are ``lookup``, ``filter``, ``join``, ``aggregate``, ``compare`` and
  ``order``.
* Needle chains (``variant == "chain"``): a chain of k hops is k lookups, each needing the previous one's result,
  so depth = k (the instance's ``hops``; without it, the number of evidence spans, one per planted needle).
* Single needles (``variant`` real or altered): one lookup, depth 1.
* Imports without a known derivation (e.g. LaRA): null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from sqlglot import exp

from ctxbench.core.errors import InputError
from ctxbench.questions.sqlinfo import parse_sql


def merge_spans(spans: list[list[int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint, non-adjacent half-open intervals covering the same tokens as ``spans`` (a list of
    ``[start, end)`` token offsets; empty intervals are dropped). LURCH section 3: overlapping or adjacent
    intervals are merged."""
    out: list[list[int]] = []
    for s, e in sorted((int(a), int(b)) for a, b in spans if b > a):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def scope_and_dispersion(spans: list[list[int]], context_tokens: int) -> tuple[float | None, float | None]:
    """``(scope, dispersion)`` of evidence spans (``[start, end)`` token offsets) in a context of
    ``context_tokens`` tokens (module docstring; LURCH section 3). ``(None, None)`` when the spans are unknown
    (empty) or the context is empty. Raises InputError when a span lies outside ``[0, context_tokens]``."""
    merged = merge_spans(spans)
    if not merged or context_tokens <= 0:
        return None, None
    if merged[0][0] < 0 or merged[-1][1] > context_tokens:
        raise InputError(f"evidence span outside the context of {context_tokens} tokens: {merged[0][0]}..."
                         f"{merged[-1][1]} (spans are [start, end) token offsets in the context)")
    S = sum(e - s for s, e in merged)
    H = merged[-1][1] - merged[0][0]
    scope = S / context_tokens
    non_evidence = context_tokens - S
    dispersion = (H - S) / non_evidence if non_evidence > 0 else 0.0
    return scope, dispersion


# --------------------------------------------------------------------------------------------------------------
# derivation graphs

NODE_KINDS = ("lookup", "filter", "join", "aggregate", "compare", "order")


@dataclass
class DerivationGraph:
    """A derivation DAG: ``nodes[i] = (kind, label)``, ``parents[i]`` the nodes node i directly depends on, and
    ``answer`` the answer-producing node. Nodes are added after their parents, so indices are a topological order."""

    nodes: list[tuple[str, str]] = field(default_factory=list)
    parents: list[list[int]] = field(default_factory=list)
    answer: int = -1

    def add(self, kind: str, label: str, parents: list[int] | tuple[int, ...] = ()) -> int:
        assert kind in NODE_KINDS, kind
        self.nodes.append((kind, label))
        self.parents.append(sorted(set(parents)))
        return len(self.nodes) - 1

    def depth(self) -> int:
        """Number of nodes on the longest path ending at the answer node (LURCH section 3)."""
        longest: list[int] = []
        for ps in self.parents:  # topological order
            longest.append(1 + max((longest[p] for p in ps), default=0))
        return longest[self.answer]

    def kinds(self) -> list[str]:
        return [k for k, _ in self.nodes]


_SET_OPS = (exp.Union, exp.Except, exp.Intersect)
_QUERY = (exp.Select, *_SET_OPS)
_CMP = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ, exp.Between)


def _direct_queries(e: exp.Expression | None) -> list[exp.Expression]:
    """Queries (SELECT or set operation) inside ``e`` that are not inside another query within ``e``."""
    if e is None:
        return []
    if isinstance(e, _QUERY):
        return [e]
    out = []
    for c in e.iter_expressions():
        out.extend(_direct_queries(c))
    return out


def _own_columns(e: exp.Expression) -> list[exp.Column]:
    """Columns of ``e`` outside any subquery."""
    if isinstance(e, exp.Column):
        return [e]
    if isinstance(e, _QUERY):
        return []
    out = []
    for c in e.iter_expressions():
        out.extend(_own_columns(c))
    return out


def _own_aggregates(e: exp.Expression | None) -> bool:
    if e is None or isinstance(e, _QUERY):
        return False
    if isinstance(e, exp.AggFunc):
        return True
    return any(_own_aggregates(c) for c in e.iter_expressions())


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    """The AND-ed predicates of a sqlglot condition (parentheses unwrapped, nested ANDs flattened); [] for None."""
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return conjuncts(e.this)
    if isinstance(e, exp.And):
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


class _Builder:
    def __init__(self) -> None:
        self.g = DerivationGraph()

    def query(self, q: exp.Expression, ctes: dict[str, int]) -> int:
        if isinstance(q, exp.Subquery):
            return self.query(q.this, ctes)
        ctes = dict(ctes)
        w = q.args.get("with_") or q.args.get("with")
        if w is not None:
            for cte in w.expressions:
                ctes[cte.alias_or_name.lower()] = self.query(cte.this, ctes)
        if isinstance(q, _SET_OPS):
            left, right = self.query(q.this, ctes), self.query(q.expression, ctes)
            kind = "join" if isinstance(q, exp.Union) else "compare"  # EXCEPT/INTERSECT compare two row sets
            head = self.g.add(kind, type(q).__name__.upper(), [left, right])
            if q.args.get("order") is not None:
                head = self.g.add("order", "ORDER BY", [head])
            return head
        if isinstance(q, exp.Select):
            return self.select(q, ctes)
        raise InputError(f"not a query: {q.sql()[:80]!r}")

    def _source(self, src: exp.Expression, ctes: dict[str, int]) -> tuple[list[str], int]:
        """Names a source is referred to by, and the node producing its rows."""
        if isinstance(src, exp.Table):
            name = src.name.lower()
            node = ctes[name] if name in ctes else self.g.add("lookup", name)
            return [name, src.alias_or_name.lower()], node
        if isinstance(src, exp.Subquery):
            return [src.alias_or_name.lower()], self.query(src.this, ctes)
        # a table-valued expression (VALUES, UNNEST, ...): its rows are read like a table
        return [src.alias_or_name.lower()], self.g.add("lookup", src.sql()[:40])

    def select(self, sel: exp.Select, ctes: dict[str, int]) -> int:
        g = self.g
        frm = sel.args.get("from_") or sel.args.get("from")
        sources: list[tuple[list[str], int]] = []
        join_conds: list[exp.Expression] = []
        if frm is not None:
            for s in [frm.this, *frm.expressions]:
                sources.append(self._source(s, ctes))
        for j in sel.args.get("joins") or []:
            sources.append(self._source(j.this, ctes))
            join_conds.extend(conjuncts(j.args.get("on")))
        names = {n: i for i, (ns, _) in enumerate(sources) for n in ns}
        heads = [node for _, node in sources]

        def source_of(c: exp.Expression) -> set[int] | None:
            """Sources whose columns the condition reads (None when a column cannot be attributed)."""
            found = set()
            for col in _own_columns(c):
                t = col.table.lower()
                if t:
                    if t not in names:  # an outer query's alias (correlated subquery): a parameter here
                        continue
                    found.add(names[t])
                elif len(sources) == 1:
                    found.add(0)
                else:
                    return None
            return found

        # conditions on one source's rows are a filter on that branch, before any join
        post: list[exp.Expression] = []
        per_source: dict[int, list[exp.Expression]] = {}
        conds = conjuncts(sel.args["where"].this) if sel.args.get("where") is not None else []
        for c, in_on in [(c, True) for c in join_conds] + [(c, False) for c in conds]:
            srcs = source_of(c)
            if not _direct_queries(c) and srcs is not None and len(srcs) == 1:
                per_source.setdefault(next(iter(srcs)), []).append(c)
            elif in_on or (not _direct_queries(c) and srcs is not None and len(srcs) >= 2
                           and isinstance(c, exp.EQ) and all(isinstance(x, exp.Column) for x in (c.left, c.right))):
                continue  # a join condition: part of the join node
            else:
                post.append(c)
        for i, cs in sorted(per_source.items()):
            heads[i] = g.add("filter", " AND ".join(c.sql() for c in cs), [heads[i]])
        head: int | None = heads[0] if heads else None
        for h in heads[1:]:  # left-deep: each further source joins the rows joined so far
            head = g.add("join", "JOIN", [head, h])
        if post:
            subs = [self.query(q, ctes) for c in post for q in _direct_queries(c)]
            kind = "compare" if any(isinstance(c, _CMP) and _direct_queries(c) for c in post) else "filter"
            head = g.add(kind, " AND ".join(c.sql() for c in post), [*([head] if head is not None else []), *subs])
        if sel.args.get("group") is not None or any(_own_aggregates(e) for e in sel.expressions) \
                or _own_aggregates(sel.args.get("having")) or _own_aggregates(sel.args.get("order")):
            head = g.add("aggregate", "GROUP BY" if sel.args.get("group") is not None else "aggregate",
                         [] if head is None else [head])
        if sel.args.get("having") is not None:
            hv = sel.args["having"].this
            subs = [self.query(q, ctes) for q in _direct_queries(hv)]
            head = g.add("compare", hv.sql(), [*([head] if head is not None else []), *subs])
        scalar = [self.query(q, ctes) for e in sel.expressions for q in _direct_queries(e)]
        if scalar:  # values computed by subqueries in the SELECT list are combined in the projection
            head = g.add("compare", "SELECT-list subqueries", [*([head] if head is not None else []), *scalar])
        if sel.args.get("order") is not None:  # a sort key computed by a subquery is its parent too
            subs = [self.query(q, ctes) for q in _direct_queries(sel.args["order"])]
            head = g.add("order", "ORDER BY", [*([head] if head is not None else []), *subs])
        if head is None:  # SELECT of constants only
            head = g.add("lookup", sel.sql()[:40])
        return head


def sql_derivation_graph(sql: str) -> DerivationGraph:
    """The derivation graph of an SQL question (sqlite dialect), built from the query's structure:

    1. every table the query reads is a ``lookup`` node (finding its rows in the context); a subquery in FROM or a
       CTE is its own graph, whose answer node stands in for the lookup;
    2. WHERE (and JOIN ... ON) conjuncts that read one source's columns only are one ``filter`` node on that
       source's branch (the branches are parallel, so filtering two tables adds one level, not two);
    3. each further source of FROM/JOIN adds a ``join`` node over the rows joined so far and its branch (left-deep,
       so k sources give k − 1 sequential joins); column equalities between two sources are the join's condition;
    4. the remaining WHERE conjuncts (over several sources, or unattributable columns) are one node after the join:
       ``compare`` when one compares against a subquery's value (whose graph is a parent), otherwise ``filter``;
    5. GROUP BY or an aggregate function (COUNT, SUM, AVG, MAX, MIN, ...) adds an ``aggregate`` node;
    6. HAVING adds a ``compare`` node (aggregated values against a threshold or a subquery's value);
    7. subqueries in the SELECT list are combined in one ``compare`` node;
    8. ORDER BY (with or without LIMIT) adds an ``order`` node (a subquery in a sort key is its parent);
       DISTINCT, LIMIT alone and projection add none;
    9. UNION joins two row sets (``join``), EXCEPT and INTERSECT compare them (``compare``).

    E.g. ``SELECT COUNT(*) FROM flights WHERE origin = 'JFK'`` is lookup → filter → aggregate (depth 3), and
    ``SELECT name FROM airports`` a single lookup (depth 1: the answer is read from the evidence). Raises
    InputError when the SQL does not parse.
    """
    b = _Builder()
    b.g.answer = b.query(parse_sql(sql), {})
    return b.g


@lru_cache(maxsize=4096)  # a question's SQL recurs at every tier and position
def sql_reasoning_depth(sql: str) -> int:
    """Reasoning depth of an SQL question: the longest path of :func:`sql_derivation_graph`, in nodes."""
    return sql_derivation_graph(sql).depth()


def reasoning_depth(instance: Mapping[str, Any]) -> int | None:
    """Reasoning depth of an instance row (module docstring): from ``sql`` where present; ``hops`` (else the
    number of evidence spans) for needle chains; 1 for a single needle (``variant`` real or altered, or a
    ``needle_id``); None where the derivation is unknown."""
    if instance.get("sql"):
        return sql_reasoning_depth(instance["sql"])
    if instance.get("variant") == "chain":
        hops = instance.get("hops")
        if hops is None:
            hops = len(_spans(instance))
        return int(hops) if hops else None
    if instance.get("variant") in ("real", "altered") or instance.get("needle_id") is not None:
        return 1  # a single planted fact (SCHEMA.md ``variant``): one lookup
    return None


def _spans(instance: Mapping[str, Any]) -> list[list[int]]:
    spans = instance.get("evidence_spans")
    if spans is None:
        return []
    if isinstance(spans, str):
        try:
            spans = json.loads(spans)
        except ValueError:
            raise InputError(f"instance {instance.get('instance_id')}: evidence_spans is not JSON: {spans[:80]!r}") \
                from None
    return [list(s) for s in spans]


@lru_cache(maxsize=64)  # instances sharing a context share its spans' JSON text (one object: hashed once)
def _scope_and_dispersion_of_json(spans: str, context_tokens: int) -> tuple[float | None, float | None]:
    return scope_and_dispersion([list(s) for s in json.loads(spans)], context_tokens)


def difficulty_columns(instance: Mapping[str, Any]) -> dict[str, Any]:
    """The LURCH columns of an instance row: ``{"scope", "dispersion", "reasoning_depth"}``, each None where
    unknown. Reads ``evidence_spans`` (a list or its JSON text of ``[start, end)`` token offsets),
    ``context_tokens``, and the row's own ``reasoning_depth`` where the track set one (e.g. 1 for a single
    lookup), else ``sql`` / ``variant`` / ``hops`` for the depth (:func:`reasoning_depth`). Every track calls this
    when it writes its instances (``row.update(difficulty_columns(row))``); instances sharing a context (the same
    spans' JSON text) are measured once."""
    spans, n = instance.get("evidence_spans"), int(instance.get("context_tokens") or 0)
    if isinstance(spans, str):
        try:
            scope, dispersion = _scope_and_dispersion_of_json(spans, n)
        except ValueError:
            _spans(instance)  # raises InputError naming the instance when the text is not JSON
            raise
    else:
        scope, dispersion = scope_and_dispersion(_spans(instance), n)
    depth = instance.get("reasoning_depth")  # a track that knows its derivation sets it itself
    return {"scope": scope, "dispersion": dispersion,
            "reasoning_depth": int(depth) if depth is not None else reasoning_depth(instance)}
