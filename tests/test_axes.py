"""Issue 25's axes: near-miss distractors (verbalized databases), look-alike needles, lexical overlap and reasoning
effort. Every expected value is worked out here independently: predicates evaluated by plain sqlite3 over
source.sqlite, gold answers recomputed by sqlite3 over the included rows only, overlaps counted by hand."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

from test_holobench_build import _recompute, _same

# wine_1 questions whose WHERE has predicates: q14 two on appellations, q17 one on grapes and one on wine
Q14_PREDICATES = {"appellations": ["Area = 'North Coast'", "isAVA = 'Yes'"]}
Q17_PREDICATES = {"grapes": ["Color = 'White'"], "wine": ["Score > 92"]}


@pytest.fixture(scope="module")
def wine(spider_db) -> str:
    return str(spider_db("wine_1"))


@pytest.fixture(scope="module")
def nm_builds(wine, tmp_path_factory):
    out = {}
    for d in ("random", "near-miss"):
        cfg = HoloBenchConfig(db=wine, lengths=[512, 1024], positions=["uniform", "end"], distractors=d,
                              question_ids=["wine_1-q14", "wine_1-q17", "wine_1-q02"])
        out[d] = build_holobench(cfg, tmp_path_factory.mktemp(d.replace("-", "")) / "b").out
    return out


def _misses(source: Path, table: str, preds: list[str]) -> dict[int, int]:
    con = sqlite3.connect(source)
    try:
        expr = " + ".join(f"(CASE WHEN {p} THEN 0 ELSE 1 END)" for p in preds)
        return dict(con.execute(f'SELECT rowid, {expr} FROM "{table}"').fetchall())
    finally:
        con.close()


def _share(row: dict, source: Path, preds: dict[str, list[str]]) -> tuple[int, int]:
    inc = json.loads(row["included_rows"])
    one = non = 0
    for t, ps in preds.items():
        m = _misses(source, t, ps)
        for rid in inc.get(t, []):
            if m[rid]:
                non += 1
                one += m[rid] == 1
    return one, non


def test_near_miss_rows_fail_exactly_one_predicate_and_gold_is_exact(nm_builds):
    out = nm_builds["near-miss"]
    rows = pq.read_table(out / "instances.parquet").to_pylist()
    source = out / "source.sqlite"
    q14 = [r for r in rows if r["question_id"] == "wine_1-q14"]
    assert q14
    m = _misses(source, "appellations", Q14_PREDICATES["appellations"])
    n_one = sum(v == 1 for v in m.values())
    for r in rows:
        assert r["distractors"] == "near-miss"
        # the gold answer over exactly the included rows, by plain sqlite3
        got = _recompute(source, r["sql"], json.loads(r["included_rows"]))
        assert _same(json.loads(r["gold"]), got, ordered="ORDER BY" in r["sql"].upper())
    for r in q14:
        one, non = _share(r, source, Q14_PREDICATES)
        assert non > 0
        if non <= n_one:  # the table has enough one-predicate misses: every non-matching row is one
            assert one == non
        assert one / non >= 0.8 or non > n_one
        assert r["near_miss_share"] == pytest.approx(one / non, abs=1e-6)
    for r in (r for r in rows if r["question_id"] == "wine_1-q17"):
        one, non = _share(r, source, Q17_PREDICATES)
        assert r["near_miss_share"] == (pytest.approx(one / non, abs=1e-6) if non else None)
    # a question without WHERE has no predicate: no share
    assert all(r["near_miss_share"] is None for r in rows if r["question_id"] == "wine_1-q02")


def test_near_miss_keeps_the_matching_rows_of_random_sampling_and_raises_the_share(nm_builds):
    def by_key(out):
        return {(r["question_id"], r["target_tokens"], r["position"]): r
                for r in pq.read_table(out / "instances.parquet").to_pylist()}

    rnd, nm = by_key(nm_builds["random"]), by_key(nm_builds["near-miss"])
    assert rnd.keys() == nm.keys()
    source = nm_builds["random"] / "source.sqlite"
    m = _misses(source, "appellations", Q14_PREDICATES["appellations"])
    lower = 0
    for k in rnd:
        if k[0] != "wine_1-q14":
            continue
        a, b = json.loads(rnd[k]["included_rows"]), json.loads(nm[k]["included_rows"])
        # the matching rows come from the same draws (only the non-matching draws are filled differently, so the
        # budget may stop one draw earlier or later): one set holds the other
        ma = {x for x in a.get("appellations", []) if m[x] == 0}
        mb = {x for x in b.get("appellations", []) if m[x] == 0}
        assert ma <= mb or mb <= ma
        one_r, non_r = _share(rnd[k], source, Q14_PREDICATES)
        assert rnd[k]["near_miss_share"] == pytest.approx(one_r / non_r, abs=1e-6)
        lower += one_r / non_r < nm[k]["near_miss_share"]
    assert lower >= 1  # random sampling includes rows failing both predicates; near-miss replaces them
    assert all(r["distractors"] == "random" for r in rnd.values())


def test_random_default_keeps_build_hash_and_ids(wine, tmp_path):
    from ctxbench.tracks.holobench.build import _config_dump

    a = HoloBenchConfig(db=wine, lengths=[512])
    assert "distractors" not in _config_dump(a)  # a build made before the field keeps its hash and instance ids
    assert _config_dump(HoloBenchConfig(db=wine, lengths=[512], distractors="near-miss"))["distractors"] == \
        "near-miss"


def test_table_predicates_from_sql():
    from ctxbench.tracks.holobench.nearmiss import table_predicates

    cols = {"flights": ["origin", "month", "dep_delay"], "airports": ["faa", "name"]}
    p = table_predicates("SELECT COUNT(*) FROM flights WHERE origin = 'JFK' AND month = 3", {"flights": cols["flights"]})
    assert p == {"flights": ('"origin" = \'JFK\'', '"month" = 3')}
    p = table_predicates("SELECT a.name FROM flights AS f JOIN airports AS a ON f.origin = a.faa "
                         "WHERE f.month = 1 AND a.name LIKE 'J%' AND f.dep_delay > (SELECT AVG(dep_delay) FROM flights)",
                         cols)
    assert p == {"flights": ('"month" = 1',), "airports": ('"name" LIKE \'J%\'',)}
    assert table_predicates("SELECT MAX(month) FROM flights", {"flights": cols["flights"]}) == {}
