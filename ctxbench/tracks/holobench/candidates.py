"""Candidate generation for generated questions (:mod:`ctxbench.tracks.holobench.generate`, module docstring step
2): the query *families* (:data:`FAMILIES`: lookups, comparisons against literals from the column's values,
aggregates, MIN/MAX, joins along foreign keys, GROUP BY, HAVING, nested subqueries, ranking with the label as
tie-breaker), each yielding SQL and its template question over a :class:`~ctxbench.tracks.holobench.sqlparts.Table`,
and :func:`draw_candidates`, which runs every family in a seeded order and derives each candidate's query types and
difficulty (HoloBench appendix A.3.1-A.3.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import Any, Callable, Iterator

from ctxbench.questions.sqlinfo import sql_info
from ctxbench.tracks.holobench.sqlparts import Table, literal
from ctxbench.verbalize.generate import ColumnProfile, JoinEdge
from ctxbench.verbalize.templates import format_value
from ctxbench.verbalize.words import article, looks_plural, plural

__all__ = ["FAMILIES", "MAX_GROUPS_LISTED", "Candidate", "draw_candidates"]

MAX_GROUPS_LISTED = 12  # a GROUP BY whose every group is in the answer: at most this many groups


@dataclass
class Candidate:
    """One drawn query: its family, SQL, template question, the columns that make it distinct, and sql_info."""

    family: str
    sql: str
    question: str
    signature: tuple
    info: dict = field(default_factory=dict)

    @property
    def difficulty(self) -> str:
        return self.info["difficulty"]

    @property
    def types(self) -> list[str]:
        return self.info["query_types"]


def _w(c: ColumnProfile) -> str:
    return c.words


def _a(w: str) -> str:
    """``a population``, ``an area``, ``bytes`` (no article before a plural-looking name)."""
    return w if looks_plural(w) else f"{article(w)} {w}"


def _v(v: Any) -> str:
    """A value as a question quotes it: text in double quotes, numbers as the context writes them."""
    return format_value(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else f'"{v}"'


# ------------------------------------------------------------------------------------------------ families
# Each family draws candidates for one table (or one join edge). Text: readable English over the columns' words;
# SQL: the tie-breaker of every ranking is the table's label, so no LIMIT cuts between equal keys.

def _single(fn: Callable[[Table, Any], Iterator[tuple]]) -> Callable:
    fn.join = False
    return fn


def _joined(fn: Callable) -> Callable:
    fn.join = True
    return fn


@_single
def f_extreme(t: Table, rng) -> Iterator[tuple]:
    for c in t.numbers():
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({t.expr(c)}) FROM {t.q}", f"What is the {word} {_w(t.col(c))} of any {t.tp.noun}?", (c,))


@_single
def f_average(t: Table, rng) -> Iterator[tuple]:
    for c in t.measures():
        if rng.random() < 0.5:
            yield (f"SELECT AVG({t.expr(c)}) FROM {t.q}", f"What is the average {_w(t.col(c))} of the {t.tp.nouns}?",
                   (c,))
        else:
            yield (f"SELECT SUM({t.expr(c)}) FROM {t.q}",
                   f"What is the sum of the {_w(t.col(c))} of all {t.tp.nouns}?", (c,))


@_single
def f_count_distinct(t: Table, rng) -> Iterator[tuple]:
    for c in t.groups():
        yield (f"SELECT COUNT(DISTINCT {t.expr(c)}) FROM {t.q}",
               f"How many different {plural(_w(t.col(c)))} do the {t.tp.nouns} have?", (c,))


@_single
def f_list_compare(t: Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        op, word, q = rng.choice([(">", "greater than", 0.9), ("<", "less than", 0.1)])
        x = t.threshold(c, q)
        if x is not None:
            yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(c)} {op} {literal(x)}",
                   f"List the {t.label_words()} of every {t.tp.noun} whose {_w(t.col(c))} is {word} {format_value(x)}.",
                   (c, op))


@_single
def f_count_compare(t: Table, rng) -> Iterator[tuple]:
    for c in t.numbers():
        op, word, q = rng.choice([(">", "greater than", 0.5), ("<", "less than", 0.5), (">", "greater than", 0.75)])
        x = t.threshold(c, q)
        if x is not None:
            w = _w(t.col(c))
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(c)} {op} {literal(x)}",
                   f"How many {t.tp.nouns} have {_a(w)} {word} {format_value(x)}?", (c, op))


@_single
def f_count_value(t: Table, rng) -> Iterator[tuple]:
    for c in t.groups():
        for v in t.frequent(c)[:1]:
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(c)} = {literal(v)}",
                   f"How many {t.tp.nouns} have the {_w(t.col(c))} {_v(v)}?", (c,))


@_single
def f_count_distinct_compare(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.5)
        if x is not None and g != c:
            yield (f"SELECT COUNT(DISTINCT {t.expr(g)}) FROM {t.q} WHERE {t.expr(c)} > {literal(x)}",
                   f"How many different {plural(_w(t.col(g)))} do the {t.tp.nouns} whose {_w(t.col(c))} is greater "
                   f"than {format_value(x)} have?", (g, c))


@_single
def f_aggregate_value(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        vals = t.frequent(g)
        if not vals:
            continue
        v = rng.choice(vals[:3])
        if t.col(c).role == "measure" and rng.random() < 0.5:
            fn, word = "AVG", "average"
        else:
            fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({t.expr(c)}) FROM {t.q} WHERE {t.expr(g)} = {literal(v)}",
               f"What is the {word} {_w(t.col(c))} of the {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)}?", (g, c, fn))


@_single
def f_max_where(t: Table, rng) -> Iterator[tuple]:
    for a, b in product(t.numbers(), t.numbers()):
        if a == b:
            continue
        x = t.threshold(b, 0.5)
        if x is None:
            continue
        yield (f"SELECT MAX({t.expr(a)}) FROM {t.q} WHERE {t.expr(b)} > {literal(x)}",
               f"What is the highest {_w(t.col(a))} among the {t.tp.nouns} whose {_w(t.col(b))} is greater than "
               f"{format_value(x)}?", (a, b))


@_single
def f_top(t: Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        d, word = rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        yield (f"SELECT {t.sel()} FROM {t.q} ORDER BY {t.order(c, d)} LIMIT 1",
               f"Which {t.tp.noun} has the {word} {_w(t.col(c))}? Give its {t.label_words()} ({t.tie()}).", (c,))


@_single
def f_group_count(t: Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        if t.col(g).distinct <= MAX_GROUPS_LISTED:
            yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} GROUP BY {t.expr(g)}",
                   f"How many {t.tp.nouns} are there for each {_w(t.col(g))}?", (g,))


@_single
def f_group_extreme(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        if t.col(g).distinct <= MAX_GROUPS_LISTED:
            fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
            yield (f"SELECT {t.expr(g)}, {fn}({t.expr(c)}) FROM {t.q} GROUP BY {t.expr(g)}",
                   f"For each {_w(t.col(g))}, what is the {word} {_w(t.col(c))} of its {t.tp.nouns}?", (g, c))


@_single
def f_count_value_compare(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        vals, x = t.frequent(g), t.threshold(c, 0.5)
        if vals and x is not None:
            v = rng.choice(vals[:3])
            w = _w(t.col(c))
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(g)} = {literal(v)} AND {t.expr(c)} > {literal(x)}",
                   f"How many {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)} have {_a(w)} greater than "
                   f"{format_value(x)}?", (g, c))


@_single
def f_group_count_compare(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.25)
        if x is not None and g != c and t.col(g).distinct <= MAX_GROUPS_LISTED:
            yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} WHERE {t.expr(c)} > {literal(x)} GROUP BY {t.expr(g)}",
                   f"For each {_w(t.col(g))}, how many {t.tp.nouns} have {_a(_w(t.col(c)))} greater than "
                   f"{format_value(x)}?", (g, c))


@_single
def f_between(t: Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        lo, hi = t.threshold(c, 0.45), t.threshold(c, 0.55)
        if lo is None or hi is None or not lo < hi:
            continue
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(c)} BETWEEN {literal(lo)} AND {literal(hi)}",
               f"List the {t.label_words()} of every {t.tp.noun} whose {_w(t.col(c))} is between {format_value(lo)} "
               f"and {format_value(hi)} (inclusive).", (c,))


@_single
def f_top_where(t: Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for g, c in product(t.groups(), t.numbers()):
        vals = t.frequent(g)
        if not vals or g == c:
            continue
        v = rng.choice(vals[:3])
        d, word = rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(g)} = {literal(v)} ORDER BY {t.order(c, d)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)}, which has the {word} {_w(t.col(c))}? Give "
               f"its {t.label_words()} ({t.tie()}).", (g, c))


@_single
def f_top_compare(t: Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for a, b in product(t.numbers(), t.numbers()):
        if a == b:
            continue
        x = t.threshold(b, 0.5)
        if x is None:
            continue
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(b)} > {literal(x)} ORDER BY {t.order(a, 'DESC')} LIMIT 3",
               f"Among the {t.tp.nouns} whose {_w(t.col(b))} is greater than {format_value(x)}, which three have the "
               f"highest {_w(t.col(a))}? Give their {t.label_words()}, highest first ({t.tie()}).", (a, b))


@_single
def f_group_top(t: Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        d, word = rng.choice([("DESC", "most"), ("ASC", "fewest")])
        yield (f"SELECT {t.expr(g)} FROM {t.q} GROUP BY {t.expr(g)} ORDER BY COUNT(*) {d}, {t.key(g)} LIMIT 1",
               f"Which {_w(t.col(g))} has the {word} {t.tp.nouns}? If several tie, give the first in "
               f"{'alphabetical' if t.col(g).kind == 'text' else 'ascending'} order.", (g,))


@_single
def f_group_average_top(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.measures()):
        yield (f"SELECT {t.expr(g)} FROM {t.q} GROUP BY {t.expr(g)} ORDER BY AVG({t.expr(c)}) DESC, {t.key(g)} "
               f"LIMIT 1",
               f"Which {_w(t.col(g))} has the highest average {_w(t.col(c))} over its {t.tp.nouns}? If several tie, "
               f"give the first in alphabetical order.", (g, c))


@_single
def f_having(t: Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        if t.col(g).distinct < 4:
            continue
        k = rng.choice([2, 3])
        yield (f"SELECT {t.expr(g)} FROM {t.q} GROUP BY {t.expr(g)} HAVING COUNT(*) >= {k}",
               f"Which {plural(_w(t.col(g)))} have at least {k} {t.tp.nouns}?", (g,))


@_single
def f_either(t: Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        vals = t.frequent(g)
        if len(vals) >= 2:
            v1, v2 = vals[:2]
            e = t.expr(g)
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {e} = {literal(v1)} OR {e} = {literal(v2)}",
                   f"How many {t.tp.nouns} have the {_w(t.col(g))} {_v(v1)} or {_v(v2)}?", (g,))


@_single
def f_top_details(t: Table, rng) -> Iterator[tuple]:
    if len(t.label) != 1:
        return
    for g, a, b in product(t.groups(), t.numbers(), t.numbers()):
        vals, x = t.frequent(g), t.threshold(b, 0.25)
        if a == b or not vals or x is None or a in t.label or b in t.label:
            continue
        v = rng.choice(vals[:3])
        wa, wb = _w(t.col(a)), _w(t.col(b))
        yield (f"SELECT {t.sel()}, {t.expr(a)}, {t.expr(b)} FROM {t.q} WHERE {t.expr(g)} = {literal(v)} AND "
               f"{t.expr(b)} > {literal(x)} ORDER BY {t.order(a, 'DESC')} LIMIT 1",
               f"Among the {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)} and whose {wb} is greater than "
               f"{format_value(x)}, which has the highest {wa}? Give its {t.label_words()}, {wa} and {wb} "
               f"({t.tie()}).", (g, a, b))


@_single
def f_top_nested(t: Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(c)} = (SELECT {fn}({t.expr(c)}) FROM {t.q})",
               f"Which {t.tp.nouns} have the {word} {_w(t.col(c))}? List the {t.label_words()} of every {t.tp.noun} "
               f"that has it.", (c,))


@_single
def f_above_average(t: Table, rng) -> Iterator[tuple]:
    for c in t.measures():
        w = _w(t.col(c))
        yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(c)} > (SELECT AVG({t.expr(c)}) FROM {t.q})",
               f"How many {t.tp.nouns} have {_a(w)} above the average {w} of all {t.tp.nouns}?", (c,))


@_single
def f_group_stats(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.measures()):
        if t.col(g).distinct <= MAX_GROUPS_LISTED:
            yield (f"SELECT {t.expr(g)}, COUNT(*), AVG({t.expr(c)}) FROM {t.q} GROUP BY {t.expr(g)} ORDER BY "
                   f"{t.key(g)}",
                   f"For each {_w(t.col(g))}, in alphabetical order, how many {t.tp.nouns} are there and what is "
                   f"their average {_w(t.col(c))}?", (g, c))


@_single
def f_group_top_where(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.25)
        if x is None:
            continue
        yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} WHERE {t.expr(c)} > {literal(x)} GROUP BY {t.expr(g)} "
               f"ORDER BY COUNT(*) DESC, {t.key(g)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {_w(t.col(c))} is greater than {format_value(x)}, which "
               f"{_w(t.col(g))} has the most, and how many? If several tie, give the first in alphabetical order.",
               (g, c))


@_single
def f_group_top_extreme(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.25)
        if x is None or g == c:
            continue
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        w = _w(t.col(c))
        yield (f"SELECT {t.expr(g)}, COUNT(*), {fn}({t.expr(c)}) FROM {t.q} WHERE {t.expr(c)} > {literal(x)} "
               f"GROUP BY {t.expr(g)} ORDER BY COUNT(*) DESC, {t.key(g)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {w} is greater than {format_value(x)}, which {_w(t.col(g))} has the "
               f"most? Give it, how many it has and their {word} {w}. If several tie, give the first in "
               f"{'alphabetical' if t.col(g).kind == 'text' else 'ascending'} order.", (g, c))


@_single
def f_group_top_above_average(t: Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        if g == c:
            continue
        w = _w(t.col(c))
        yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} WHERE {t.expr(c)} > (SELECT AVG({t.expr(c)}) FROM {t.q}) "
               f"GROUP BY {t.expr(g)} ORDER BY COUNT(*) DESC, {t.key(g)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {w} is above the average {w} of all {t.tp.nouns}, which "
               f"{_w(t.col(g))} has the most, and how many? If several tie, give the first in "
               f"{'alphabetical' if t.col(g).kind == 'text' else 'ascending'} order.", (g, c))


def _on(a: Table, b: Table, e: JoinEdge) -> str:
    return f"{a.q} JOIN {b.q} ON {a.expr(e.column, True)} = {b.expr(e.ref_column, True)}"


def _via(a: Table, e: JoinEdge) -> str:
    """How a question names the joined row: the joining column's words (``country``, ``airline``)."""
    return a.col(e.column).words


def _b_groups(b: Table, e: JoinEdge) -> list[str]:
    """Columns of the referenced table to filter or group the joined rows by (its label included when it is a name
    and not the join column itself)."""
    out = b.groups()
    if b.tp.label_is_name and len(b.label) == 1 and b.label[0] != e.ref_column and b.label[0] not in out:
        out.append(b.label[0])
    return out


def _bw(b: Table, c: str) -> str:
    return "name" if c in b.label and b.tp.label_is_name else b.col(c).words


@_joined
def f_join_count(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    v = _via(a, e)
    yield (f"SELECT COUNT(*) FROM {_on(a, b, e)}",
           f"How many {a.tp.nouns} have {_a(v)} that is one of the listed {b.tp.nouns}?", ())


@_joined
def f_join_count_compare(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for c in a.numbers():
        if c == e.column:
            continue
        x = a.threshold(c, 0.5)
        if x is not None:
            v = _via(a, e)
            yield (f"SELECT COUNT(*) FROM {_on(a, b, e)} WHERE {a.expr(c, True)} > {literal(x)}",
                   f"How many {a.tp.nouns} whose {_w(a.col(c))} is greater than {format_value(x)} have {_a(v)} that is "
                   f"one of the listed {b.tp.nouns}?", (c,))


@_joined
def f_join_count_nested(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for c in a.numbers():
        if c == e.column:
            continue
        w, v = _w(a.col(c)), _via(a, e)
        yield (f"SELECT COUNT(*) FROM {_on(a, b, e)} WHERE {a.expr(c, True)} > (SELECT AVG({a.expr(c)}) FROM {a.q})",
               f"How many {a.tp.nouns} have {_a(w)} above the average {w} of all {a.tp.nouns} and {_a(v)} that is one "
               f"of the listed {b.tp.nouns}?", (c,))


@_joined
def f_join_extreme(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for c in b.numbers():
        if c == e.ref_column:
            continue
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({b.expr(c, True)}) FROM {_on(a, b, e)}",
               f"What is the {word} {_w(b.col(c))} of {_a(b.tp.noun)} that is the {_via(a, e)} of "
               f"at least one listed {a.tp.noun}?", (c,))


@_joined
def f_join_count_value(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g in _b_groups(b, e):
        vals = b.frequent(g) or ([v for v, _ in b.col(g).top[:3]] if g in b.label else [])
        if vals:
            v = rng.choice(vals[:3])
            yield (f"SELECT COUNT(*) FROM {_on(a, b, e)} WHERE {b.expr(g, True)} = {literal(v)}",
                   f"How many {a.tp.nouns} have {_a(_via(a, e))} whose {_bw(b, g)} is {_v(v)}?", (g,))


@_joined
def f_join_list_compare(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    if not a.label:
        return
    for c in b.numbers():
        if c == e.ref_column:
            continue
        x = b.threshold(c, 0.9)
        if x is not None:
            w = _w(b.col(c))
            yield (f"SELECT {a.sel(True)} FROM {_on(a, b, e)} WHERE {b.expr(c, True)} > {literal(x)}",
                   f"List the {a.label_words()} of every {a.tp.noun} whose {_via(a, e)} has {_a(w)} greater than "
                   f"{format_value(x)}.", (c,))


@_joined
def f_join_group(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g in _b_groups(b, e):
        if b.col(g).distinct <= MAX_GROUPS_LISTED + 2:
            yield (f"SELECT {b.expr(g, True)}, COUNT(*) FROM {_on(a, b, e)} GROUP BY {b.expr(g, True)}",
                   f"For each {_bw(b, g)} of the listed {b.tp.nouns}, how many {a.tp.nouns} have a {_via(a, e)} with "
                   f"that {_bw(b, g)}?", (g,))


@_joined
def f_join_extreme_value(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g, c in product(_b_groups(b, e), a.numbers()):
        vals = b.frequent(g) or ([v for v, _ in b.col(g).top[:3]] if g in b.label else [])
        if not vals or c == e.column:
            continue
        v = rng.choice(vals[:3])
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({a.expr(c, True)}) FROM {_on(a, b, e)} WHERE {b.expr(g, True)} = {literal(v)}",
               f"What is the {word} {_w(a.col(c))} of {_a(a.tp.noun)} whose {_via(a, e)} has the {_bw(b, g)} "
               f"{_v(v)}?", (g, c))


@_joined
def f_join_top(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    if not a.label:
        return
    for g, c in product(_b_groups(b, e), a.numbers()):
        vals = b.frequent(g) or ([v for v, _ in b.col(g).top[:3]] if g in b.label else [])
        if not vals or c == e.column:
            continue
        v = rng.choice(vals[:3])
        d, word = rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        yield (f"SELECT {a.sel(True)} FROM {_on(a, b, e)} WHERE {b.expr(g, True)} = {literal(v)} ORDER BY "
               f"{a.order(c, d, True)} LIMIT 1",
               f"Among the {a.tp.nouns} whose {_via(a, e)} has the {_bw(b, g)} {_v(v)}, which has the {word} "
               f"{_w(a.col(c))}? Give its {a.label_words()} ({a.tie()}).", (g, c))


@_joined
def f_join_group_top(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g in _b_groups(b, e):
        yield (f"SELECT {b.expr(g, True)}, COUNT(*) FROM {_on(a, b, e)} GROUP BY {b.expr(g, True)} ORDER BY "
               f"COUNT(*) DESC, {b.key(g, True)} LIMIT 1",
               f"Which {_bw(b, g)} among the listed {b.tp.nouns} has the most {a.tp.nouns} (counted through their "
               f"{_via(a, e)}), and how many? If several tie, give the first in alphabetical order.", (g,))


@_joined
def f_join_top_compare(a: Table, b: Table, e: JoinEdge, rng) -> Iterator[tuple]:
    if not a.label:
        return
    for c, n in product(b.numbers(), a.numbers()):
        if c == e.ref_column or n == e.column:
            continue
        x = b.threshold(c, 0.5)
        if x is None:
            continue
        w = _w(b.col(c))
        yield (f"SELECT {a.sel(True)} FROM {_on(a, b, e)} WHERE {b.expr(c, True)} > {literal(x)} ORDER BY "
               f"{a.order(n, 'DESC', True)} LIMIT 1",
               f"Among the {a.tp.nouns} whose {_via(a, e)} has {_a(w)} greater than {format_value(x)}, which "
               f"has the highest {_w(a.col(n))}? Give its {a.label_words()} ({a.tie()}).", (c, n))


FAMILIES = [f_extreme, f_average, f_count_distinct, f_list_compare, f_count_compare, f_count_value,
            f_count_distinct_compare, f_aggregate_value, f_max_where, f_top, f_group_count, f_group_extreme,
            f_count_value_compare, f_group_count_compare, f_between, f_top_where, f_top_compare, f_group_top,
            f_group_average_top, f_having, f_either, f_top_details, f_top_nested, f_above_average, f_group_stats,
            f_group_top_where, f_group_top_extreme, f_group_top_above_average, f_join_count, f_join_count_compare,
            f_join_count_nested, f_join_extreme, f_join_count_value, f_join_list_compare, f_join_group,
            f_join_extreme_value, f_join_top, f_join_group_top, f_join_top_compare]


def draw_candidates(tables: dict[str, Table], edges: list[JoinEdge], rng) -> list[Candidate]:
    """Every family over every table (or join edge), each family's candidates in a seeded random order."""
    schema = {n: t.columns for n, t in tables.items()}
    out: list[Candidate] = []
    for fam in FAMILIES:
        name = fam.__name__.removeprefix("f_")
        got = []
        if fam.join:
            for e in edges:
                a, b = tables.get(e.table), tables.get(e.ref_table)
                if a is None or b is None:
                    continue
                for sql, q, sig in fam(a, b, e, rng):
                    got.append(Candidate(name, sql, q, (name, e.table, e.column, *sig)))
        else:
            for t in tables.values():
                for sql, q, sig in fam(t, rng):
                    got.append(Candidate(name, sql, q, (name, t.name, *sig)))
        rng.shuffle(got)
        for c in got:
            c.info = sql_info(c.sql, schema)  # as the build derives them (check_question)
        out.extend(got)
    return out
