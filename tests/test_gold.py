"""Gold answers (ctxbench.gold.compute_gold): untrustworthy answers are rejected with a reason; clean ones are the
rows worked out by hand. Cases use small hand-made tables and a few real wine_1 rows."""

from __future__ import annotations

import sqlite3

import pytest

from ctxbench.gold import compute_gold

PEOPLE = {"t": (["name", "v", "g"], ["TEXT", "INTEGER", "TEXT"],
                [("a", 1, "x"), ("b", None, "x"), ("c", 3, "y"), ("d", 4, "y"), ("e", 3, "z")])}


def test_integer_division_is_sqlite_integer_division():
    # the SQL is SQLite's: SUM 3 / COUNT 2 is 1 (DuckDB's own '/' would say 1.5; the transpilation keeps it integer)
    # (kept with integer_division="sqlite"; by default a truncated quotient is rejected, issue 22)
    tables = {"t": (["v"], ["INTEGER"], [(1,), (2,)])}
    r = compute_gold("SELECT SUM(v) / COUNT(*) FROM t", tables, integer_division="sqlite")
    assert r.ok, r.reason
    assert r.rows == [[1]]
    r = compute_gold("SELECT SUM(v) / COUNT(*) FROM t", tables)
    assert not r.ok and r.reason.startswith("integer division: `SUM(v) / COUNT(*)`") and r.detail["exact"] == [[1.5]]
    # truncated toward zero, as SQLite does: -7 / 2 = -3; a REAL operand makes it real division
    tables = {"t": (["v", "w"], ["INTEGER", "REAL"], [(-7, 2.0)])}
    r = compute_gold("SELECT v / 2, v / w, 7 / 2, v / 0 FROM t", tables, integer_division="sqlite")
    assert r.ok, r.reason
    assert r.rows == [[-3, -3.5, 3, None]]
    # the division named is the one that truncates (v / w is real division)
    r = compute_gold("SELECT v / w, v / 2 FROM t", tables)
    assert not r.ok and r.reason.startswith("integer division: `v / 2`"), r.reason


def test_integer_division_on_real_wine_rows(spider_db):
    con = sqlite3.connect(spider_db("wine_1"))
    rows = con.execute("SELECT Name, Price, Cases FROM wine WHERE Cases != 'NULL' ORDER BY rowid LIMIT 7").fetchall()
    con.close()
    rows = [(n, int(p), int(c)) for n, p, c in rows]
    total = sum(c for _, _, c in rows)
    assert total % len(rows) != 0  # so integer and real division differ
    tables = {"wine": (["Name", "Price", "Cases"], ["TEXT", "INTEGER", "INTEGER"], rows)}
    r = compute_gold("SELECT SUM(Cases) / COUNT(*) FROM wine", tables, integer_division="sqlite")
    assert r.ok, r.reason
    assert r.rows == [[total // len(rows)]]
    # written as real division, both engines agree on total / n
    r = compute_gold("SELECT SUM(Cases) * 1.0 / COUNT(*) FROM wine", tables)
    assert r.ok, r.reason
    assert r.rows == [[pytest.approx(total / len(rows), rel=1e-9)]]


def test_null_ordering_is_rejected():
    # ORDER BY v ASC: SQLite puts NULL first ('b'), other engines last ('a')
    r = compute_gold("SELECT name FROM t ORDER BY v LIMIT 1", PEOPLE)
    assert not r.ok
    assert r.rows is None
    assert "NULL ordering" in r.reason


def test_null_sort_key_is_rejected_even_when_engines_agree():
    # ORDER BY v DESC LIMIT 2: both engines answer [d, c] (NULL sorts last in both), but a NULL sort key means
    # the answer depends on NULL ordering, so it is rejected
    tables = {"t": (["name", "v"], ["TEXT", "INTEGER"], [("a", 1), ("b", None), ("d", 4), ("c", 3)])}
    r = compute_gold("SELECT name FROM t ORDER BY v DESC LIMIT 2", tables)
    assert not r.ok
    assert "NULL" in r.reason


def test_tie_at_limit_is_rejected():
    tables = {"t": (["name", "score"], ["TEXT", "INTEGER"], [("a", 5), ("b", 9), ("c", 9), ("d", 2)])}
    r = compute_gold("SELECT name FROM t ORDER BY score DESC LIMIT 1", tables)  # b or c
    assert not r.ok
    assert r.rows is None
    assert r.reason.startswith("tie at LIMIT 1")


def test_tie_broken_by_second_key_is_kept():
    tables = {"t": (["name", "score"], ["TEXT", "INTEGER"], [("a", 5), ("b", 9), ("c", 9), ("d", 2)])}
    r = compute_gold("SELECT name FROM t ORDER BY score DESC, name DESC LIMIT 1", tables)
    assert r.ok, r.reason
    assert r.rows == [["c"]]


def test_tie_below_the_cut_is_kept():
    tables = {"t": (["name", "score"], ["TEXT", "INTEGER"], [("a", 5), ("b", 9), ("c", 5), ("d", 2)])}
    r = compute_gold("SELECT name FROM t ORDER BY score DESC LIMIT 1", tables)
    assert r.ok, r.reason
    assert r.rows == [["b"]]


def test_empty_answer_is_rejected():
    r = compute_gold("SELECT name FROM t WHERE v > 100", PEOPLE)
    assert not r.ok
    assert r.rows == []
    assert "empty" in r.reason


def test_null_aggregate_is_rejected():
    r = compute_gold("SELECT MAX(v) FROM t WHERE v > 100", PEOPLE)
    assert not r.ok
    assert "NULL" in r.reason


def test_count_over_no_rows_is_zero_not_null():
    r = compute_gold("SELECT COUNT(*) FROM t WHERE v > 100", PEOPLE)
    assert r.ok, r.reason
    assert r.rows == [[0]]


def test_clean_group_by():
    r = compute_gold("SELECT g, COUNT(*), SUM(v) FROM t GROUP BY g", PEOPLE)
    assert r.ok, r.reason
    # x: a(1), b(NULL) -> 2 rows, sum 1; y: c(3), d(4) -> 2, 7; z: e(3) -> 1, 3
    assert sorted(r.rows) == [["x", 2, 1], ["y", 2, 7], ["z", 1, 3]]


def test_clean_average_and_ranking():
    r = compute_gold("SELECT AVG(v) FROM t", PEOPLE)
    assert r.ok, r.reason
    assert r.rows == [[pytest.approx((1 + 3 + 4 + 3) / 4)]]
    r = compute_gold("SELECT name, v FROM t WHERE v IS NOT NULL ORDER BY v DESC, name LIMIT 3", PEOPLE)
    assert r.ok, r.reason
    assert r.rows == [["d", 4], ["c", 3], ["e", 3]]


def test_clean_join():
    tables = {
        "wine": (["Name", "Grape", "Price"], ["TEXT", "TEXT", "INTEGER"],
                 [("W1", "Zinfandel", 30), ("W2", "Chardonnay", 20), ("W3", "Zinfandel", 50)]),
        "grapes": (["Grape", "Color"], ["TEXT", "TEXT"], [("Zinfandel", "Red"), ("Chardonnay", "White")]),
    }
    r = compute_gold("SELECT g.Color, MAX(w.Price) FROM wine AS w JOIN grapes AS g ON w.Grape = g.Grape "
                     "GROUP BY g.Color", tables)
    assert r.ok, r.reason
    assert sorted(r.rows) == [["Red", 50], ["White", 20]]


def test_sql_that_does_not_run_is_rejected_not_raised():
    r = compute_gold("SELECT nope FROM t", PEOPLE)
    assert not r.ok
    assert r.reason


def test_shared_engines_answer_as_engines_loaded_per_query():
    """Instances sharing their included rows share one load of both engines (GoldEngines): every answer,
    rejection and reason is the one a fresh load gives, whatever ran before on the shared engines (a query DuckDB
    cannot run, SQLite's date functions, a tie, an order-dependent choice)."""
    from ctxbench.gold import GoldEngines

    tables = {"t": (["name", "v", "g", "d"], ["TEXT", "INTEGER", "TEXT", "TEXT"],
                    [("a", 1, "x", "2013-01-05"), ("b", None, "x", "2013-02-01"), ("c", 3, "y", "2013-01-31"),
                     ("d", 4, "y", "2014-06-01"), ("e", 3, "z", "2013-12-24")])}
    sqls = ["SELECT name FROM t WHERE v IS NOT NULL ORDER BY v DESC LIMIT 1",
            "SELECT nope FROM t",
            "SELECT g, COUNT(*), SUM(v) FROM t GROUP BY g",
            "SELECT name FROM t ORDER BY v LIMIT 2",  # a NULL sort key
            "SELECT strftime('%m', d), COUNT(*) FROM t GROUP BY 1",
            "SELECT name FROM t GROUP BY g",  # bare column: one of several
            "SELECT COUNT(*) FROM t WHERE v > 1",
            "SELECT name FROM t WHERE v IS NULL",
            "SELECT julianday(d) - julianday('2013-01-01') FROM t WHERE name = 'c'"]
    fresh = [compute_gold(s, tables, seed=3) for s in sqls]
    assert [r.ok for r in fresh] == [True, False, True, False, True, False, True, True, True]
    with GoldEngines(tables, seed=3) as eng:
        shared = [compute_gold(s, tables, seed=3, engines=eng) for s in sqls * 2]
    for a, b in zip(fresh * 2, shared):
        assert (a.ok, a.rows, a.reason) == (b.ok, b.rows, b.reason)
    assert fresh[0].rows == [["d"]] and fresh[2].rows == [["x", 2, 1], ["y", 2, 7], ["z", 1, 3]]
    assert fresh[4].rows == [["01", 2], ["02", 1], ["06", 1], ["12", 1]]
    assert fresh[8].rows == [[30.0]]


def test_shared_engines_only_read():
    from ctxbench.gold import GoldEngines

    tables = {"t": (["v"], ["INTEGER"], [(1,), (2,)])}
    with GoldEngines(tables) as eng:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            eng.sqlite("insert").execute("DELETE FROM t")
        assert compute_gold("SELECT SUM(v) FROM t", tables, engines=eng).rows == [[3]]


# ---------------------------------------------------------------------------------------------- collations (issue 30)

def _collation_db(path):
    """A user's file with declared collations: city NOCASE, code RTRIM, tag (and name) BINARY.

    id  name  city   code    tag
    1   Ann   Paris  'ab'    x
    2   Bo    paris  'ab  '  X
    3   Cy    PARIS  'cd'    x
    4   Di    Lyon   'ab '   y
    5   Ed    lyon   'ef'    Y
    6   Fa    Nice   'cd  '  y
    """
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, city TEXT COLLATE NOCASE, "
                "code TEXT COLLATE RTRIM, tag TEXT COLLATE BINARY)")
    con.executemany("INSERT INTO people VALUES (?, ?, ?, ?, ?)",
                    [(1, "Ann", "Paris", "ab", "x"), (2, "Bo", "paris", "ab  ", "X"), (3, "Cy", "PARIS", "cd", "x"),
                     (4, "Di", "Lyon", "ab ", "y"), (5, "Ed", "lyon", "ef", "Y"), (6, "Fa", "Nice", "cd  ", "y")])
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("sql, want", [
    # NOCASE column: Paris, paris, PARIS (3; without the collation only row 1)
    ("SELECT count(*) FROM people WHERE city = 'Paris'", [[3]]),
    ("SELECT count(*) FROM people WHERE 'Paris' = city", [[3]]),  # the column's collation from the right side too
    ("SELECT count(*) FROM people WHERE city IN ('paris', 'NICE')", [[4]]),  # 3 + Nice
    ("SELECT count(*) FROM people WHERE city BETWEEN 'LYON' AND 'lyon'", [[2]]),  # Lyon, lyon
    # an explicit COLLATE wins over the column's: BINARY on the NOCASE column counts row 1 only
    ("SELECT count(*) FROM people WHERE city = 'Paris' COLLATE BINARY", [[1]]),
    # BINARY tag: x in rows 1 and 3; with COLLATE NOCASE in the SQL also X (row 2)
    ("SELECT count(*) FROM people WHERE tag = 'x'", [[2]]),
    ("SELECT count(*) FROM people WHERE tag = 'x' COLLATE NOCASE", [[3]]),
    # sort by city NOCASE (lyon = Lyon < nice < paris), then name: Di Ed Fa Ann Bo Cy
    ("SELECT name FROM people ORDER BY city, name", [["Di"], ["Ed"], ["Fa"], ["Ann"], ["Bo"], ["Cy"]]),
    # RTRIM that does not change the answer: only row 5 holds 'ef', padded or not
    ("SELECT count(*) FROM people WHERE code = 'ef'", [[1]]),
])
def test_gold_follows_declared_collations(tmp_path, sql, want):
    """The gold follows the collations the user's file declares, as sqlite3 on that file answers (each count by
    hand from the table in _collation_db)."""
    from ctxbench.questions.importer import gold_tables_of
    from ctxbench.sources.loaders import load_sqlite

    p = _collation_db(tmp_path / "people.sqlite")
    con = sqlite3.connect(p)
    assert [list(r) for r in con.execute(sql)] == want  # sqlite3 on the user's file agrees with the hand count
    con.close()
    g = compute_gold(sql, gold_tables_of(load_sqlite(p)))
    assert g.ok, g.reason
    assert g.rows == want


@pytest.mark.parametrize("sql, sqlite_says, binary_says", [
    # RTRIM column: 'ab', 'ab  ', 'ab ' all equal 'ab' (3); byte for byte only row 1
    ("SELECT count(*) FROM people WHERE code = 'ab'", 3, 1),
    # COLLATE RTRIM written in the SQL: 'x ' equals x in rows 1 and 3 (2); byte for byte none
    ("SELECT count(*) FROM people WHERE tag = 'x ' COLLATE RTRIM", 2, 0),
])
def test_answer_depending_on_rtrim_is_rejected_naming_it(tmp_path, sql, sqlite_says, binary_says):
    """DuckDB has no RTRIM collation: a question whose answer depends on it is rejected with that reason (the
    counts by hand: with RTRIM and byte for byte)."""
    from ctxbench.questions.importer import gold_tables_of
    from ctxbench.sources.loaders import load_sqlite

    p = _collation_db(tmp_path / "people.sqlite")
    g = compute_gold(sql, gold_tables_of(load_sqlite(p)))
    assert not g.ok
    assert g.reason.startswith("collation RTRIM cannot be reproduced by DuckDB"), g.reason
    assert f"SQLite with it: [[{sqlite_says}]]; with BINARY comparisons: [[{binary_says}]]" in g.reason


def test_loader_and_source_copy_keep_declared_collations(tmp_path):
    """The loader keeps each column's collation with its declared type, and a copy written from it (the build's
    source.sqlite) declares the same collations: sqlite3 on the copy counts 3 Paris rows as on the original."""
    from ctxbench.sources.database import declared_collations, write_sqlite
    from ctxbench.sources.loaders import load_sqlite

    db = load_sqlite(_collation_db(tmp_path / "people.sqlite"))
    assert db.tables["people"].types == ["INTEGER", "TEXT", "TEXT COLLATE NOCASE", "TEXT COLLATE RTRIM", "TEXT"]
    write_sqlite(db, tmp_path / "source.sqlite")
    con = sqlite3.connect(tmp_path / "source.sqlite")
    assert declared_collations(con, "people") == {"city": "NOCASE", "code": "RTRIM"}
    assert con.execute("SELECT count(*) FROM people WHERE city = 'Paris'").fetchone() == (3,)
    con.close()
