"""LURCH scope, dispersion and reasoning depth, worked out by hand (LURCH section 3)."""

import json

import pytest

from ctxbench.features.difficulty import (difficulty_columns, merge_spans, reasoning_depth, scope_and_dispersion,
                                          sql_derivation_graph, sql_reasoning_depth)
from ctxbench.core.errors import InputError


def test_merge_overlapping_and_adjacent():
    # [0,5) and [5,8) touch (half-open: token 5 follows token 4) -> one interval; [10,20) and [15,25) overlap
    assert merge_spans([[10, 20], [0, 5], [5, 8], [15, 25]]) == [(0, 8), (10, 25)]
    # one non-evidence token (5) between them: not adjacent, kept apart
    assert merge_spans([[0, 5], [6, 8]]) == [(0, 5), (6, 8)]
    assert merge_spans([[5, 5], [7, 6]]) == []  # empty intervals carry no evidence


def test_single_interval_has_zero_dispersion():
    assert scope_and_dispersion([[40, 60]], 100) == (0.2, 0.0)
    # overlapping intervals merge into one [10,40): S=30, one interval -> dispersion 0
    assert scope_and_dispersion([[10, 30], [20, 40]], 100) == (0.3, 0.0)


def test_single_interval_covering_whole_context():
    # S = L: no non-evidence text at all, (H-S)/(L-S) = 0/0 -> 0 (a single interval)
    assert scope_and_dispersion([[0, 100]], 100) == (1.0, 0.0)
    # several intervals that merge into one covering everything are still a single interval
    assert scope_and_dispersion([[0, 50], [50, 100]], 100) == (1.0, 0.0)


def test_several_intervals_spanning_whole_context_have_dispersion_one():
    # LURCH: a_1 = 0 and b_N = L-1 (closed) is [0, ...) ... [..., L) here; all non-evidence lies inside
    assert scope_and_dispersion([[0, 10], [90, 100]], 100) == (0.2, 1.0)
    # three intervals: S=30, H=100, L-S=70, H-S=70 -> 1
    assert scope_and_dispersion([[0, 10], [50, 60], [90, 100]], 100) == (pytest.approx(0.3), 1.0)


def test_two_intervals():
    # evidence [10,20) and [30,40): S=20, H=30, 10 non-evidence tokens inside of 80 -> 0.125
    sc, di = scope_and_dispersion([[10, 20], [30, 40]], 100)
    assert sc == pytest.approx(0.2) and di == pytest.approx(10 / 80)
    # L=50, [0,10) and [20,30): S=20, H=30, inside 10 of 30 non-evidence tokens -> 1/3
    sc, di = scope_and_dispersion([[20, 30], [0, 10]], 50)
    assert sc == pytest.approx(0.4) and di == pytest.approx(1 / 3)


def test_unknown_spans_and_bad_spans():
    assert scope_and_dispersion([], 100) == (None, None)
    assert scope_and_dispersion([[0, 10]], 0) == (None, None)
    with pytest.raises(InputError, match="outside the context"):
        scope_and_dispersion([[90, 120]], 100)


# reasoning depth: each expected graph drawn by hand from sql_derivation_graph's rules
@pytest.mark.parametrize("sql,kinds,depth", [
    # the answer read directly from the evidence: one lookup
    ("SELECT name FROM airports", ["lookup"], 1),
    # lookup -> filter -> aggregate
    ("SELECT COUNT(*) FROM flights WHERE origin = 'JFK'", ["lookup", "filter", "aggregate"], 3),
    # lookup -> aggregate (MAX)
    ("SELECT MAX(distance) FROM flights", ["lookup", "aggregate"], 2),
    # lookup -> order (ORDER BY ... LIMIT)
    ("SELECT name FROM airports ORDER BY alt DESC LIMIT 1", ["lookup", "order"], 2),
    # lookup -> filter -> aggregate -> compare (HAVING) -> order
    ("SELECT airline, AVG(arr_delay) AS d FROM flights WHERE distance > 1000 GROUP BY airline "
     "HAVING COUNT(*) >= 2 ORDER BY d DESC", ["lookup", "filter", "aggregate", "compare", "order"], 5),
    # two lookups, each filtered in parallel (depth 2), join (3), aggregate (4)
    ("SELECT COUNT(*) FROM a JOIN b ON a.k = b.k WHERE a.x > 1 AND b.y < 2",
     ["lookup", "lookup", "filter", "filter", "join", "aggregate"], 4),
    # subquery: lookup t -> AVG (2); outer lookup t (1); compare x > avg (3)
    ("SELECT name FROM t WHERE x > (SELECT AVG(x) FROM t)", ["lookup", "lookup", "aggregate", "compare"], 3),
    # three sources, left-deep: (a JOIN b) = 2, then JOIN c = 3
    ("SELECT a.n FROM a JOIN b ON a.k = b.k JOIN c ON b.j = c.j", ["lookup", "lookup", "join", "lookup", "join"], 3),
    # implicit join through WHERE equality of two sources' columns: lookup, lookup, join
    ("SELECT a.n FROM a, b WHERE a.k = b.k", ["lookup", "lookup", "join"], 2),
    # UNION of a filtered branch (2) and a plain one (1): join node at 3
    ("SELECT n FROM a WHERE x > 1 UNION SELECT n FROM b", ["lookup", "filter", "lookup", "join"], 3),
    # IN (subquery): weather lookup -> filter temp (2) -> membership filter on flights (3) -> count per group (4)
    ("SELECT origin, COUNT(*) FROM flights WHERE month IN (SELECT month FROM weather WHERE temp < 32) "
     "GROUP BY origin", ["lookup", "lookup", "filter", "filter", "aggregate"], 4),
    # a sort key computed by a correlated subquery: citing_cited lookup (1) -> filter on the outer article (2) ->
    # COUNT (3) -> order of the articles (4)
    ("SELECT article_title FROM articles ORDER BY (SELECT COUNT(*) FROM citing_cited WHERE "
     "citing_cited.article_id_cited = articles.article_id) DESC",
     ["lookup", "lookup", "filter", "aggregate", "order"], 4),
])
def test_sql_reasoning_depth(sql, kinds, depth):
    g = sql_derivation_graph(sql)
    assert sorted(g.kinds()) == sorted(kinds)
    assert g.depth() == depth == sql_reasoning_depth(sql)


def test_sql_reasoning_depth_bad_sql():
    with pytest.raises(InputError):
        sql_reasoning_depth("SELEC nothing")


def test_chain_and_needle_depth():
    assert reasoning_depth({"benchmark": "needles", "variant": "chain", "hops": 3}) == 3
    # no hop count stored: one evidence span per planted needle of the chain
    assert reasoning_depth({"benchmark": "needles", "variant": "chain",
                            "evidence_spans": "[[0, 5], [40, 45], [80, 85], [90, 95]]"}) == 4
    assert reasoning_depth({"benchmark": "needles", "variant": "real", "evidence_spans": "[[0, 5]]"}) == 1
    assert reasoning_depth({"benchmark": "lara", "evidence_spans": "[]"}) is None


def test_difficulty_columns():
    row = {"benchmark": "holobench", "sql": "SELECT COUNT(*) FROM flights WHERE origin = 'JFK'",
           "evidence_spans": json.dumps([[0, 10], [90, 100]]), "context_tokens": 100}
    assert difficulty_columns(row) == {"scope": 0.2, "dispersion": 1.0, "reasoning_depth": 3}
    # an import without evidence spans or derivation: all null
    assert difficulty_columns({"benchmark": "lara", "evidence_spans": "[]", "context_tokens": 5000}) == {
        "scope": None, "dispersion": None, "reasoning_depth": None}


def test_spans_as_json_text_measured_once_per_text():
    """Instances sharing a context pass the same spans' JSON text: measured once, the same values as from the
    list; a text that is not JSON is an error naming the instance."""
    from ctxbench.features import difficulty as d
    d._scope_and_dispersion_of_json.cache_clear()
    spans = [[20, 30], [0, 10]]
    text = json.dumps(spans)
    row = {"instance_id": "i1", "evidence_spans": text, "context_tokens": 50}
    for _ in range(3):
        got = difficulty_columns(row)
        assert (got["scope"], got["dispersion"]) == scope_and_dispersion(spans, 50) == (0.4, pytest.approx(1 / 3))
    assert d._scope_and_dispersion_of_json.cache_info().misses == 1
    with pytest.raises(InputError, match="instance i2: evidence_spans is not JSON"):
        difficulty_columns({"instance_id": "i2", "evidence_spans": "[[0, 1", "context_tokens": 5})
    with pytest.raises(InputError, match="outside the context"):
        difficulty_columns({"instance_id": "i3", "evidence_spans": "[[0, 90]]", "context_tokens": 50})
