"""`ctxbench questions import` (issue 14 part 1): Spider-format questions → query sets and a report, on Spider's dev
questions for the shared databases (world_1, car_1, flight_2) and on hand-made question files. Expected answers
are worked out with the sqlite3 shell on Spider's files, stating the meaning explicitly (TRIM, CAST)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.questions.importer import REPORT, import_questions
from ctxbench.questions.queryset import load_queryset
from ctxbench.questions.sqlinfo import sql_info
from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

# rejection classes that are real ambiguities of the answer (never a dialect artefact or an engine gap)
AMBIGUITIES = {"tie", "null_order", "empty", "null_answer", "nondeterministic", "bare_column", "row_order",
               "numbers_as_text", "null_comparison", "stripped_text", "integer_division"}


@pytest.fixture(scope="module")
def dev_import(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("imp") / "out"
    dev = shared_data / "spider" / "dev.json"
    res = import_questions(dev, shared_data / "spider" / "database", out)
    return dev, out, res


def test_dev_report_one_line_per_input_in_order(dev_import):
    dev, out, res = dev_import
    items = json.loads(dev.read_text())
    lines = [json.loads(x) for x in (out / REPORT).read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(items) == len(res.report)
    for i, (item, line) in enumerate(zip(items, lines)):
        assert line["index"] == i
        assert (line["db_id"], line["question"], line["sql"]) == (item["db_id"], item["question"], item["query"])
        assert {"db_id", "question", "sql", "accepted", "reason", "answer"} <= set(line)
        assert (line["reason"] is None) == line["accepted"] and (line["answer"] is None) == (not line["accepted"])


def test_dev_acceptance_and_reasons(dev_import, shared_data):
    dev, out, res = dev_import
    present = {p.name for p in (shared_data / "spider" / "database").iterdir()}
    mine = [r for r in res.report if r["db_id"] in present]
    assert {r["db_id"] for r in mine} == {"world_1", "car_1", "flight_2"}
    accepted = sum(r["accepted"] for r in mine)
    # 204 of 292 (69.9%) since issue 22: an answer must equal sqlite3's on the original file, so flight_2's padded
    # codes (' APG') and car_1's numbers stored as text are rejected (46 + 8 + 4 of the 88 rejections)
    assert accepted / len(mine) >= 0.65, (accepted, len(mine))
    # every rejection on a present database is a real ambiguity, with its reason
    kinds = {r["reason_kind"] for r in mine if not r["accepted"]}
    assert kinds <= AMBIGUITIES, kinds
    # questions on databases that are not there are rejected as such, not dropped
    others = [r for r in res.report if r["db_id"] not in present]
    assert others and all(r["reason_kind"] == "missing_database" and "not found" in r["reason"] for r in others)


def _line(res, sql: str) -> dict:
    return next(r for r in res.report if r["sql"] == sql)


def test_dev_answers_worked_out_with_sqlite3(dev_import, spider_db):
    _, _, res = dev_import
    con = sqlite3.connect(spider_db("world_1"))
    n_rep = con.execute("SELECT count(*) FROM country WHERE GovernmentForm = 'Republic'").fetchone()[0]
    con.close()
    # a double-quoted string literal: the SQL runs as SQLite reads it
    assert _line(res, 'SELECT count(*) FROM country WHERE GovernmentForm  =  "Republic"')["answer"] == [[n_rep]]
    con = sqlite3.connect(spider_db("car_1"))
    hp, make = con.execute("SELECT CAST(T2.horsepower AS INTEGER), T1.Make FROM CAR_NAMES T1 JOIN CARS_DATA T2 ON "
                           "T1.MakeId = T2.Id WHERE T2.cylinders = 3 AND T2.horsepower != 'null' "
                           "ORDER BY CAST(T2.horsepower AS INTEGER) DESC LIMIT 1").fetchone()
    n150 = con.execute("SELECT count(*) FROM CARS_DATA WHERE horsepower != 'null' AND "
                       "CAST(horsepower AS INTEGER) > 150").fetchone()[0]
    con.close()
    # Horsepower is stored as text: sqlite3 on the original file orders and compares it as text ('97' beats '110'),
    # the value rule's database as numbers; the answers differ, so the questions are rejected (issue 22)
    assert (hp, make, n150) == (110, "mazda rx-4", 49)
    r = _line(res, "SELECT T2.horsepower ,  T1.Make FROM CAR_NAMES AS T1 JOIN CARS_DATA AS T2 ON T1.MakeId  =  "
                   "T2.Id WHERE T2.cylinders  =  3 ORDER BY T2.horsepower DESC LIMIT 1;")
    assert not r["accepted"] and r["reason_kind"] == "numbers_as_text", r["reason"]
    assert "cars_data.Horsepower" in r["reason"] and "[['97', 'mazda rx2 coupe']]" in r["reason"]
    # `horsepower > 150`: the six 'null' texts the rule made NULL are greater than 150 for sqlite3 (text after
    # numbers; 281 on the file): a NULL comparison
    r = _line(res, "SELECT count(*) FROM CARS_DATA WHERE horsepower  >  150;")
    assert not r["accepted"] and r["reason"].startswith("NULL comparison: cars_data.horsepower"), r["reason"]
    con = sqlite3.connect(spider_db("flight_2"))
    nos = [r[0] for r in con.execute("SELECT FlightNo FROM flights WHERE trim(SourceAirport) = 'APG' ORDER BY FlightNo")]
    plain = con.execute("SELECT count(*) FROM flights WHERE SourceAirport = 'APG'").fetchone()[0]
    con.close()
    # ' APG' is padded in Spider's file: sqlite3 matches no row, the stripped value 11; rejected as stripped text
    assert (len(nos), plain) == (11, 0)
    r = _line(res, 'SELECT FlightNo FROM FLIGHTS WHERE SourceAirport  =  "APG"')
    assert not r["accepted"] and r["reason_kind"] == "stripped_text" and "flights.SourceAirport" in r["reason"]
    # a tie at LIMIT 1 (every airline has 100 flights) is rejected as a tie
    r = _line(res, "SELECT T1.Airline FROM AIRLINES AS T1 JOIN FLIGHTS AS T2 ON T1.uid  =  T2.Airline GROUP BY "
                   "T1.Airline ORDER BY count(*) DESC LIMIT 1")
    assert not r["accepted"] and r["reason_kind"] == "tie" and r["reason"].startswith("tie at LIMIT 1")


def test_dev_query_sets_are_readable(dev_import):
    _, out, res = dev_import
    assert set(res.written) == {"world_1", "car_1", "flight_2"}
    for db_id, path in res.written.items():
        assert path == out / f"{db_id}.yaml"
        qs = load_queryset(db_id, path)
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        acc = [r for r in res.report if r["db_id"] == db_id and r["id"]]
        assert [q.id for q in qs] == [r["id"] for r in acc]
        for q, raw, r in zip(qs, doc["questions"], acc):
            assert raw["sql"] == r["sql"]  # exactly as given
            info = sql_info(raw["sql"])
            assert (raw["query_types"], raw["difficulty"]) == (info["query_types"], info["difficulty"])


WINE_QUESTIONS = [
    {"db_id": "wine_1", "question": "How many wines scored above 90?", "query": "SELECT count(*) FROM wine WHERE Score > 90"},
    {"db_id": "wine_1", "question": "Which wines come from Zinfandel grapes made by Carlisle?",
     "query": 'SELECT Name FROM wine WHERE Grape = "Zinfandel" AND Winery = "Carlisle"'},
    {"db_id": "wine_1", "question": "What is the best-rated wine?", "SQL": "SELECT Name FROM wine ORDER BY Score DESC LIMIT 1"},
    {"db_id": "wine_1", "question": "What is the average price of wines, in whole dollars?",
     "query": "SELECT SUM(Price) / COUNT(*) FROM wine"},
    {"db_id": "wine_1", "question": "How many wines scored above 90?", "query": "SELECT count(*) FROM wine WHERE Score > 90"},
    {"db_id": "wine_1", "question": "When was this asked?", "query": "SELECT date('now') FROM wine LIMIT 1"},
    {"db_id": "nope_db", "question": "Anything?", "query": "SELECT 1"},
    {"db_id": "wine_1", "question": "No SQL"},
    "not an object",
]


def test_import_cli_then_build(spider_db, tmp_path):
    wine = spider_db("wine_1")
    con = sqlite3.connect(wine)
    n90 = con.execute("SELECT count(*) FROM wine WHERE Score > 90").fetchone()[0]
    carlisle = sorted(r[0] for r in con.execute("SELECT Name FROM wine WHERE Grape = 'Zinfandel' AND Winery = 'Carlisle'"))
    top = con.execute("SELECT Score FROM wine ORDER BY Score DESC LIMIT 2").fetchall()
    total, n = con.execute("SELECT SUM(Price), COUNT(*) FROM wine").fetchone()
    con.close()
    assert top[0] == top[1] and len(carlisle) == 6  # two wines share the highest score: a tie
    qfile = tmp_path / "mine.json"
    qfile.write_text(json.dumps(WINE_QUESTIONS))
    out = tmp_path / "out"
    # "in whole dollars": SQLite's integer division is what the question asks for, kept with the flag
    res = CliRunner().invoke(app, ["questions", "import", "--spider", str(qfile), "--db-dir", str(Path(wine).parent.parent),
                                   "--out", str(out), "--integer-division", "sqlite"])
    assert res.exit_code == 0, res.output
    assert "4 accepted, 5 rejected" in " ".join(res.output.split())
    assert yaml.safe_load((out / "wine_1.yaml").read_text())["source"]["integer_division"] == "sqlite"
    # by default the truncated average is rejected, naming the division (SUM(Price) / COUNT(*) is not whole)
    assert total % n
    exact = import_questions(qfile, Path(wine).parent.parent, tmp_path / "exact")
    assert exact.report[3]["reason"].startswith("integer division: `SUM(Price) / COUNT(*)`"), exact.report[3]
    assert exact.report[3]["reason_kind"] == "integer_division"
    assert yaml.safe_load((tmp_path / "exact" / "wine_1.yaml").read_text())["source"]["integer_division"] == "exact"
    lines = [json.loads(x) for x in (out / REPORT).read_text().splitlines()]
    assert [x["accepted"] for x in lines] == [True, True, False, True, True, False, False, False, False]
    assert lines[0]["answer"] == [[n90]] and lines[4]["answer"] == [[n90]]
    assert lines[1]["answer"] == [[x] for x in carlisle]
    assert lines[2]["reason"].startswith("tie at LIMIT 1") and lines[2]["sql"] == WINE_QUESTIONS[2]["SQL"]
    assert lines[3]["answer"] == [[total // n]]  # SQLite's integer division
    assert lines[5]["reason_kind"] == "nondeterministic"
    assert lines[6]["reason_kind"] == "missing_database"
    assert lines[7]["reason_kind"] == "bad_input" and "query" in lines[7]["reason"]
    assert lines[8]["reason_kind"] == "bad_input" and lines[8]["db_id"] is None
    # the repeated question is accepted but written once
    assert lines[4]["id"] is None and lines[4]["note"].startswith("same question text")
    qs = load_queryset("wine_1", out / "wine_1.yaml")
    assert [q.id for q in qs] == ["wine_1-mine-0000", "wine_1-mine-0001", "wine_1-mine-0003"]
    # the query set builds
    b = build_holobench(HoloBenchConfig(db=str(wine), queries=str(out / "wine_1.yaml"), lengths=[4096]), tmp_path / "b")
    inst = pq.read_table(b.out / "instances.parquet").to_pylist()
    quar = pq.read_table(b.out / "quarantine.parquet").to_pylist()
    built = {r["question_id"] for r in inst} | {json.loads(q["detail"])["question_id"] for q in quar
                                                if q["stage"] == "gold"}
    assert built == {q.id for q in qs}


@pytest.mark.parametrize("content,words", [
    ("{not json", "not a JSON file"),
    ('{"db_id": "x"}', "not a list"),
])
def test_bad_question_file_is_a_clear_error(tmp_path, content, words):
    f = tmp_path / "q.json"
    f.write_text(content)
    with pytest.raises(InputError, match=words):
        import_questions(f, tmp_path, tmp_path / "out")
    res = CliRunner().invoke(app, ["questions", "import", "--spider", str(f), "--db-dir", str(tmp_path), "--out",
                                   str(tmp_path / "o")])
    assert res.exit_code == 2 and words in " ".join(res.output.split())
    assert "Traceback" not in res.output


def test_missing_db_dir_and_file(tmp_path):
    f = tmp_path / "q.json"
    f.write_text("[]")
    with pytest.raises(InputError, match="--db-dir"):
        import_questions(f, tmp_path / "none", tmp_path / "out")
    with pytest.raises(InputError, match="does not exist"):
        import_questions(tmp_path / "absent.json", tmp_path, tmp_path / "out")


FLIGHT_QUESTIONS = [
    # reads a column the generated templates leave out (airlines.Country): the templates must state it
    {"db_id": "flight_2", "question": "How many airlines are based in the USA?",
     "query": "SELECT count(*) FROM airlines WHERE Country = 'USA'"},
    # reads flights.DestAirport, a foreign key the build resolves to the airport's name (the column is renamed);
    # TRIM: the file pads the codes (' APG'), and without it sqlite3 on the file matches no row (stripped_text)
    {"db_id": "flight_2", "question": "How many flights arrive at APG?",
     "query": "SELECT count(*) FROM flights WHERE TRIM(DestAirport) = 'APG'"},
]


def test_import_for_a_database_without_templates_builds(spider_db, tmp_path):
    """A database with no shipped templates (flight_2): the imported query set carries a templates: section that
    states every column its questions read, holds only questions the build can ask (the others are reported with
    a note), and `build holobench --queries` builds it."""
    db = spider_db("flight_2")
    con = sqlite3.connect(db)
    n_usa = con.execute("SELECT count(*) FROM airlines WHERE TRIM(Country) = 'USA'").fetchone()[0]
    n_apg = con.execute("SELECT count(*) FROM flights WHERE TRIM(DestAirport) = 'APG'").fetchone()[0]
    con.close()
    assert n_usa > 0 and n_apg > 0
    qfile = tmp_path / "fl.json"
    qfile.write_text(json.dumps(FLIGHT_QUESTIONS))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["questions", "import", "--spider", str(qfile), "--db-dir", str(Path(db).parent.parent),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "2 accepted, 0 rejected" in text and "1 accepted question(s) written; 1 left out" in text
    lines = [json.loads(x) for x in (out / REPORT).read_text().splitlines()]
    assert [x["accepted"] for x in lines] == [True, True]
    assert lines[0]["answer"] == [[n_usa]] and lines[1]["answer"] == [[n_apg]]
    assert lines[0]["id"] == "flight_2-fl-0000"
    assert lines[1]["id"] is None and lines[1]["note"].startswith("not buildable")
    assert "destairport" in lines[1]["note"].lower()
    doc = yaml.safe_load((out / "flight_2.yaml").read_text(encoding="utf-8"))
    assert [q["id"] for q in doc["questions"]] == ["flight_2-fl-0000"]
    assert len(doc["templates"]["airlines"]) == 5
    assert all("{Country}" in t for t in doc["templates"]["airlines"])
    b = build_holobench(HoloBenchConfig(db=str(db), queries=str(out / "flight_2.yaml"), lengths=[2048]), tmp_path / "b")
    inst = pq.read_table(b.out / "instances.parquet").to_pylist()
    assert {r["question_id"] for r in inst} == {"flight_2-fl-0000"}
    con = sqlite3.connect(b.out / "source.sqlite")
    assert con.execute("SELECT count(*) FROM airlines WHERE Country = 'USA'").fetchone()[0] == n_usa
    con.close()


def _odd_db(root: Path) -> Path:
    """A user database with odd names: spaces and quotes in identifiers, reserved words, no primary key, a
    WITHOUT ROWID table, a view, numbers stored as text, unicode values."""
    d = root / "odd_1"
    d.mkdir(parents=True)
    con = sqlite3.connect(d / "odd_1.sqlite")
    con.executescript('''
        CREATE TABLE "order items" ("item id" INTEGER, "select" TEXT, "qty""x" INTEGER);
        CREATE TABLE "Table" (id INTEGER PRIMARY KEY, name TEXT, "from" TEXT, score TEXT) WITHOUT ROWID;
        CREATE VIEW v_names AS SELECT name FROM "Table";''')
    names = ["Zoë", "Łukasz", "東京", "José", "Ана", "Ömer"]
    con.executemany('INSERT INTO "Table" VALUES (?, ?, ?, ?)',
                    [(i + 1, n, ["Paris", "München"][i % 2], str(10 + 7 * i)) for i, n in enumerate(names)])
    con.executemany('INSERT INTO "order items" VALUES (?, ?, ?)', [(i + 1, "abç"[i % 3], i % 4) for i in range(12)])
    con.commit()
    con.close()
    return d / "odd_1.sqlite"


def test_bird_evidence_blank_fields_views_and_exit_status(tmp_path):
    """BIRD's evidence reaches the question asked; a blank question or SQL, a non-text evidence and a question on
    a view are bad inputs with a reason naming what to fix; the rest is imported; the report has one line per
    input; nothing written is exit status 1."""
    db = _odd_db(tmp_path / "dbs")
    con = sqlite3.connect(db)
    paris = [r[0] for r in con.execute('SELECT name FROM "Table" WHERE "from" = \'Paris\' ORDER BY name')]
    con.close()
    assert paris == ["Zoë", "Ана", "東京"]  # binary order of the UTF-8 text
    items = [
        {"db_id": "odd_1", "question": "Which people come from Paris?", "evidence": "Paris refers to \"from\" = 'Paris'",
         "SQL": 'SELECT name FROM "Table" WHERE "from" = \'Paris\' ORDER BY name', "difficulty": "simple"},
        {"db_id": "odd_1", "question": "   ", "query": 'SELECT count(*) FROM "Table"'},
        {"db_id": "odd_1", "question": "Blank SQL?", "SQL": " \n"},
        {"db_id": "odd_1", "question": "Odd evidence", "evidence": ["x"], "SQL": 'SELECT count(*) FROM "Table"'},
        {"db_id": "odd_1", "question": "How many names?", "query": "SELECT count(*) FROM v_names"},
        {"db_id": "odd_1", "question": "Total of qty\"x?", "query": 'SELECT sum("qty""x") FROM "order items"'},
    ]
    qfile = tmp_path / "bird.json"
    qfile.write_bytes(b"\xef\xbb\xbf" + json.dumps(items, ensure_ascii=False).encode("utf-8"))  # with a BOM
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["questions", "import", "--spider", str(qfile), "--db-dir", str(tmp_path / "dbs"),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in (out / REPORT).read_text(encoding="utf-8").splitlines()]
    assert [x["index"] for x in lines] == list(range(6))
    assert [x["accepted"] for x in lines] == [True, False, False, False, False, True]
    assert lines[0]["answer"] == [[n] for n in paris] and lines[0]["evidence"] == items[0]["evidence"]
    assert lines[0]["question"] == items[0]["question"] and lines[0]["sql"] == items[0]["SQL"]
    assert lines[1]["reason_kind"] == "bad_input" and "question" in lines[1]["reason"]
    assert lines[2]["reason_kind"] == "bad_input" and "SQL" in lines[2]["reason"]
    assert lines[3]["reason_kind"] == "bad_input" and "evidence" in lines[3]["reason"]
    assert lines[4]["reason_kind"] == "view" and "v_names" in lines[4]["reason"] and "tables" in lines[4]["reason"]
    assert lines[5]["answer"] == [[sum(i % 4 for i in range(12))]]
    doc = yaml.safe_load((out / "odd_1.yaml").read_text(encoding="utf-8"))
    asked = {q["id"]: q["question"] for q in doc["questions"]}
    assert asked[lines[0]["id"]] == f"{items[0]['question']} (External knowledge: {items[0]['evidence']})"
    b = build_holobench(HoloBenchConfig(db=str(db), queries=str(out / "odd_1.yaml"), lengths=[2048]), tmp_path / "b")
    assert {r["question_id"] for r in pq.read_table(b.out / "instances.parquet").to_pylist()} == set(asked)
    # nothing importable: the report is written, the exit status says so
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(items[1:5]))
    res = CliRunner().invoke(app, ["questions", "import", "--spider", str(bad), "--db-dir", str(tmp_path / "dbs"),
                                   "--out", str(tmp_path / "o2")])
    assert res.exit_code == 1 and "no question" in res.output and "Traceback" not in res.output
    assert len((tmp_path / "o2" / REPORT).read_text().splitlines()) == 4


def test_json_lines_question_file_keeps_a_corrupt_line(tmp_path):
    """JSON Lines: each line one input; a line that is not JSON (the first one too) is a report line, not a lost
    input or a failed import."""
    db = _odd_db(tmp_path / "dbs")
    con = sqlite3.connect(db)
    top = con.execute('SELECT max(CAST(score AS INTEGER)) FROM "Table"').fetchone()[0]
    con.close()
    qfile = tmp_path / "qs.jsonl"
    qfile.write_text('{"db_id": "odd_1", "question": "broken\n\n'
                     '{"db_id": "odd_1", "question": "Top score?", "query": "SELECT max(score) FROM \\"Table\\""}\n'
                     '[1, 2]\n', encoding="utf-8")
    res = import_questions(qfile, tmp_path / "dbs", tmp_path / "out")
    assert [(x["index"], x["accepted"]) for x in res.report] == [(0, False), (1, True), (2, False)]
    assert res.report[0]["reason"].startswith("line 1 is not JSON") and res.report[0]["reason_kind"] == "bad_input"
    assert res.report[1]["answer"] == [[top]] and top == 45
    with pytest.raises(InputError, match="is empty"):
        (tmp_path / "e.json").write_text(" \n")
        import_questions(tmp_path / "e.json", tmp_path / "dbs", tmp_path / "o")


def test_question_on_binary_blob_column_is_rejected_with_its_column(tmp_path):
    """A question reading a column of binary BLOBs is rejected naming the column (its answer would be bytes no
    context states); the other questions on the same table are imported."""
    d = tmp_path / "dbs" / "pics_1"
    d.mkdir(parents=True)
    con = sqlite3.connect(d / "pics_1.sqlite")
    con.execute("CREATE TABLE picture (id INTEGER PRIMARY KEY, title TEXT, image BLOB, year INTEGER)")
    con.executemany("INSERT INTO picture VALUES (?, ?, ?, ?)",
                    [(i, f"Picture {i}", bytes([137, 80, i, 255]), 1900 + i) for i in range(1, 11)])
    con.commit()
    con.close()
    qfile = tmp_path / "q.json"
    qfile.write_text(json.dumps([
        {"db_id": "pics_1", "question": "Image of picture 3?", "query": "SELECT image FROM picture WHERE id = 3"},
        {"db_id": "pics_1", "question": "Latest picture?", "query": "SELECT title FROM picture ORDER BY year DESC LIMIT 1"},
    ]))
    res = import_questions(qfile, tmp_path / "dbs", tmp_path / "out")
    assert [x["accepted"] for x in res.report] == [False, True]
    assert res.report[0]["reason_kind"] == "binary_column" and "picture.image" in res.report[0]["reason"]
    assert res.report[1]["answer"] == [["Picture 10"]]


def test_dev_accepted_answers_equal_sqlite3_on_the_original_files(dev_import, shared_data):
    """bench/check_original.py, an independent checker: every accepted dev answer equals the sqlite3 module's answer on
    Spider's own file, up to how projected values are shown (issue 22)."""
    import subprocess
    import sys

    _, out, res = dev_import
    script = Path(__file__).resolve().parents[1] / "bench" / "check_original.py"
    p = subprocess.run([sys.executable, str(script), str(out / REPORT), "--db-dir",
                        str(shared_data / "spider" / "database")], capture_output=True, text=True, timeout=600)
    n = sum(r["accepted"] for r in res.report)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"{n} accepted answer(s) of {len(res.report)} checked" in p.stdout and ": 0 differ" in p.stdout


def _invoices_db(tmp_path):
    """A hand-made database whose ordered answers tie inside the answer: average totals per customer are
    1: (4 + 16) / 2 = 10, 2: 5, 3: (10 + 10) / 2 = 10, 4: 1, 5: 10 (three customers tied at 10)."""
    d = tmp_path / "dbs" / "shop_1"
    d.mkdir(parents=True)
    con = sqlite3.connect(d / "shop_1.sqlite")
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer_id INTEGER, city TEXT, total REAL)")
    con.executemany("INSERT INTO invoices VALUES (?, ?, ?, ?)",
                    [(1, 3, " Lyon", 10.0), (2, 1, "Paris", 4.0), (3, 1, "Paris", 16.0), (4, 2, "Nice", 5.0),
                     (5, 4, "Nice", 1.0), (6, 3, " Lyon", 10.0), (7, 5, "Paris", 10.0)])
    con.commit()
    con.close()
    return tmp_path / "dbs"


def test_ordered_answer_differing_from_sqlite3_only_inside_ties_is_accepted(tmp_path):
    """Issue 30 kind 12: `ORDER BY AVG(total) DESC LIMIT 4` ranks customers 1, 3, 5 (all 10, tied) then 2 (5);
    the fifth, 4 (1), is below the cut, so the answer is well defined up to the order of the three tied rows.
    DuckDB (the gold engine's rows) and sqlite3 on the file order the tie differently; the answer is accepted,
    compared in tie groups as the build's gold check compares the engines. A tie at the cut (LIMIT 2: three rows
    at 10 for two places) is still rejected as a tie."""
    dbs = _invoices_db(tmp_path)
    q = tmp_path / "q.json"
    q.write_text(json.dumps([
        {"db_id": "shop_1", "question": "Top 4 customers by average invoice?",
         "query": "SELECT customer_id, AVG(total) FROM invoices GROUP BY customer_id ORDER BY AVG(total) DESC LIMIT 4"},
        {"db_id": "shop_1", "question": "Top 2 customers by average invoice?",
         "query": "SELECT customer_id, AVG(total) FROM invoices GROUP BY customer_id ORDER BY AVG(total) DESC LIMIT 2"},
    ]))
    res = import_questions(q, dbs, tmp_path / "out")
    top4, top2 = res.report
    assert top4["accepted"], top4["reason"]
    assert sorted(map(tuple, top4["answer"][:3])) == [(1, 10.0), (3, 10.0), (5, 10.0)]
    assert top4["answer"][3] == [2, 5.0]
    assert not top2["accepted"] and top2["reason_kind"] == "tie"


def test_tie_groups_compare_inside_groups_only():
    """The shared tie-group comparison: rows swapped inside a group are equal, across groups they are not."""
    from ctxbench.gold.compare import equal_in_tie_groups, results_equal, tie_groups

    groups = tie_groups([[10.0], [10.0], [5.0], [1.0]])
    assert groups == [0, 0, 1, 2]
    a = [[1, 10.0], [3, 10.0], [2, 5.0], [4, 1.0]]
    assert equal_in_tie_groups(a, [[3, 10.0], [1, 10.0], [2, 5.0], [4, 1.0]], groups, results_equal)
    assert not equal_in_tie_groups(a, [[1, 10.0], [2, 5.0], [3, 10.0], [4, 1.0]], groups, results_equal)
    assert not equal_in_tie_groups(a, a[:3], groups, results_equal)


def test_stripped_text_rejection_cites_the_databases_own_padded_value(tmp_path):
    """The stripped-text reason cites a padded value of this database (' Lyon', row 1), never another database's:
    `city = 'Lyon'` matches no row in sqlite3 on the file (both are ' Lyon'), 2 after stripping."""
    dbs = _invoices_db(tmp_path)
    q = tmp_path / "q.json"
    q.write_text(json.dumps([{"db_id": "shop_1", "question": "Invoices from Lyon?",
                              "query": "SELECT count(*) FROM invoices WHERE city = 'Lyon'"}]))
    line = import_questions(q, dbs, tmp_path / "out").report[0]
    assert line["reason_kind"] == "stripped_text"
    assert "invoices.city holds ' Lyon'" in line["reason"] and "APG" not in line["reason"]
    assert "sqlite3: [[0]]" in line["reason"] and "after the rule: [[2]]" in line["reason"]


def test_import_follows_declared_collations(tmp_path):
    """Issue 30 kind 6 through `questions import`: city is declared COLLATE NOCASE, code COLLATE RTRIM.
    Rows (city, code): (Paris, a1), (paris, a1), (PARIS, b2), (Lyon, a1), (lyon, c3).
    `city = 'Paris'` counts 3 (sqlite3 on the file; 1 byte for byte), accepted with 3; `code = 'a1 '` (a
    trailing space in the literal) counts 3 under RTRIM and 0 byte for byte: DuckDB has no RTRIM, rejected as
    `collation`; `code = 'c3'` does not depend on RTRIM: accepted with 1."""
    d = tmp_path / "dbs" / "trips_1"
    d.mkdir(parents=True)
    con = sqlite3.connect(d / "trips_1.sqlite")
    con.execute("CREATE TABLE trip (id INTEGER PRIMARY KEY, city TEXT COLLATE NOCASE, code TEXT COLLATE RTRIM)")
    con.executemany("INSERT INTO trip VALUES (?, ?, ?)", [(1, "Paris", "a1"), (2, "paris", "a1"), (3, "PARIS", "b2"),
                                                          (4, "Lyon", "a1"), (5, "lyon", "c3")])
    con.commit()
    con.close()
    q = tmp_path / "q.json"
    q.write_text(json.dumps([
        {"db_id": "trips_1", "question": "Trips to Paris?", "query": "SELECT count(*) FROM trip WHERE city = 'Paris'"},
        {"db_id": "trips_1", "question": "Trips coded a1?", "query": "SELECT count(*) FROM trip WHERE code = 'a1 '"},
        {"db_id": "trips_1", "question": "Trips coded c3?", "query": "SELECT count(*) FROM trip WHERE code = 'c3'"},
    ]))
    paris, a1, c3 = import_questions(q, tmp_path / "dbs", tmp_path / "out").report
    assert paris["accepted"] and paris["answer"] == [[3]], paris["reason"]
    assert not a1["accepted"] and a1["reason_kind"] == "collation" and "trip.code is declared COLLATE RTRIM" in a1["reason"]
    assert c3["accepted"] and c3["answer"] == [[1]], c3["reason"]
