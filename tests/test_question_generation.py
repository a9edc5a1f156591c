"""Questions generated from a schema (issue 14 part 2), tried as a new user would: `ctxbench questions generate`
on Spider databases with no shipped query set or templates (flight_2, chinook_1, world_1), then `ctxbench build
holobench --queries` on the file. Every gold answer of the build is recomputed independently with plain sqlite3
over source.sqlite restricted to the instance's included rows; query types and difficulty are recomputed with
sql-info's rules. Also: same seed → same bytes (in another process, another hash seed), the templates generator,
numbers stored as text, the template source of the build, and the LLM round trip against a local fake server."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.questions.sqlinfo import QUERY_TYPES, sql_info
from ctxbench.verbalize.templates import template_fields

REPO = Path(__file__).resolve().parent.parent
DATABASES = ["flight_2", "chinook_1", "world_1"]


# ------------------------------------------------------------------------------------------ words and templates
def test_identifiers_become_words():
    from ctxbench.verbalize.words import article, plural, schema_vocabulary, singular, words

    vocab = schema_vocabulary(["country", "city", "countrylanguage", "Language", "FirstName", "LastName"])
    assert words("SurfaceArea") == "surface area"
    assert words("FlightNo") == "flight number"
    assert words("IndepYear") == "independence year"
    assert words("GNPOld") == "GNP old"
    assert words("countrylanguage", vocab) == "country language"
    assert words("IsOfficial") == "official flag"
    assert words("customer_id") == "customer id"
    assert words("DestAirport") == "destination airport"
    assert [singular(x) for x in ("airlines", "cities", "countries", "class", "status", "matches")] == \
        ["airline", "city", "country", "class", "status", "match"]
    assert [plural(x) for x in ("city", "country", "class", "day", "invoice line")] == \
        ["cities", "countries", "classes", "days", "invoice lines"]
    assert [article(x) for x in ("airline", "unit price", "GNP", "hour", "year")] == ["an", "a", "a", "an", "a"]


@pytest.fixture(scope="module")
def world(spider_db):
    from ctxbench.sources import load_database

    return load_database(spider_db("world_1"))


def test_templates_from_schema(world):
    """Five templates per table, all stating the same columns, identifiers resolved to names along foreign keys
    (city.CountryCode → the country's name), surrogate keys left out, deterministic."""
    from ctxbench.verbalize.generate import generate_templates
    from ctxbench.verbalize.templates import template_fields, templates_from_mapping

    g = generate_templates(world)
    assert set(g.templates) == {"city", "country", "countrylanguage"}
    for table, temps in g.templates.items():
        assert len(temps) == 5 and len(set(temps)) == 5
        fields = [set(template_fields(t)) for t in temps]
        assert all(f == fields[0] for f in fields), table
        for t in temps:
            sentence = t.format(**{c: "VALUE" for c in fields[0]})
            assert "{" not in sentence and sentence.endswith(".") and sentence.count("VALUE") == len(fields[0])
    city = set(template_fields(g.templates["city"][0]))
    assert "CountryCode_name" in city and "CountryCode" not in city and "ID" not in city
    assert {"Name", "Population"} <= city
    assert "Capital" not in set(template_fields(g.templates["country"][0]))  # an id of a city, not a number
    assert {(e.table, e.column, e.ref_table, e.ref_column) for e in g.edges} == {
        ("city", "CountryCode_name", "country", "Name"), ("countrylanguage", "CountryCode_name", "country", "Name")}
    # the sentence of a real row: the country's name, not its code
    row = dict(zip(world.tables["city"].columns, world.tables["city"].rows[0]))
    assert row["Name"] == "Kabul" and row["CountryCode"] == "AFG"
    sentence = g.templates["city"][0].format(Name="Kabul", CountryCode_name="Afghanistan", District="Kabol",
                                             Population=1780000)
    assert "Afghanistan" in sentence and "AFG" not in sentence and "country" in sentence
    assert generate_templates(world).templates == g.templates
    assert templates_from_mapping(g.templates, "world_1", "x").templates == g.templates


# ------------------------------------------------------------------------------------------ real databases
def _ordered(sql: str) -> bool:
    return "Ranking" in sql_info(sql)["query_types"]


def _recompute(source: Path, sql: str, included: dict[str, list[int]]) -> list[list]:
    con = sqlite3.connect(":memory:")
    try:
        con.execute("ATTACH DATABASE ? AS src", (str(source),))
        for t in sql_info(sql)["tables"]:
            real = con.execute("SELECT name FROM src.sqlite_master WHERE type='table' AND lower(name)=?",
                               (t,)).fetchone()[0]
            con.execute(f'CREATE TABLE main."{real}" AS SELECT * FROM src."{real}" WHERE rowid IN '
                        f'(SELECT value FROM json_each(?)) ORDER BY rowid', (json.dumps(included.get(real, [])),))
        return [list(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def _same(a: list[list], b: list[list], ordered: bool) -> bool:
    def key(row):
        return tuple((0, "") if v is None else (1, f"{float(v):.6g}") if isinstance(v, (int, float)) else (2, v)
                     for v in row)

    if len(a) != len(b):
        return False
    if not ordered:
        a, b = sorted(a, key=key), sorted(b, key=key)
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                if not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True


@pytest.fixture(scope="module", params=DATABASES)
def generated(request, spider_db, tmp_path_factory):
    """`ctxbench questions generate` then `ctxbench build holobench --queries` on one database, through the CLI."""
    db_id = request.param
    db = spider_db(db_id)
    assert not (REPO / "assets" / "queries" / f"{db_id}.yaml").exists()
    assert not (REPO / "assets" / "templates" / f"{db_id}.yaml").exists()
    d = tmp_path_factory.mktemp(db_id)
    home = d / "home"
    runner = CliRunner()
    env = {"CTXBENCH_HOME": str(home)}
    qfile = d / f"{db_id}.yaml"
    r = runner.invoke(app, ["questions", "generate", "--db", str(db), "--out", str(qfile)], env=env)
    assert r.exit_code == 0, r.output
    out = d / "build"
    r2 = runner.invoke(app, ["build", "holobench", "--db", str(db), "--queries", str(qfile), "--lengths",
                             "4096,8192", "--out", str(out)], env=env)
    assert r2.exit_code == 0, r2.output
    return db_id, db, qfile, out, r.output


@pytest.mark.slow
def test_generated_query_set_covers_types_and_difficulties(generated):
    db_id, _, qfile, _, output = generated
    doc = yaml.safe_load(qfile.read_text(encoding="utf-8"))
    qs = doc["questions"]
    # flight_2 has no quantity: FlightNo is a numbered identifier and uid a key, which questions never compare,
    # rank or aggregate (issue 22), so it cannot cover Comparison, Max/Min and Ranking
    measures = db_id != "flight_2"
    assert len(qs) >= (18 if measures else 8), len(qs)
    assert len({q["sql"] for q in qs}) == len(qs) and len({q["question"] for q in qs}) == len(qs)
    assert len({q["id"] for q in qs}) == len(qs)
    # column names that are not plain words (CountryCode_name, SurfaceArea) never appear in a question
    identifiers = {f for temps in doc["templates"].values() for t in temps for f in template_fields(t)
                   if "_" in f or re.search(r"[a-z][A-Z]", f)}
    assert identifiers
    types, diffs = set(), set()
    for q in qs:
        info = sql_info(q["sql"])  # sql-info's rules, recomputed
        assert info["query_types"] == q["query_types"] and info["difficulty"] == q["difficulty"], q
        types.update(info["query_types"])
        diffs.add(info["difficulty"])
        outside_quotes = "".join(q["question"].split('"')[::2])
        assert not [c for c in identifiers if re.search(rf"\b{re.escape(c)}\b", outside_quotes)], q["question"]
    if measures:
        assert types == set(QUERY_TYPES) and diffs == {"easy", "medium", "hard"}
    else:
        assert {"Aggregation", "Join"} <= types
        for q in qs:
            assert not re.search(r"(SUM|AVG|MIN|MAX)\(\s*\S*FlightNo|FlightNo\S*\s*(<|>)|ORDER BY\s+\S*FlightNo",
                                 q["sql"], flags=re.IGNORECASE), q["sql"]
    gen = doc["generator"]
    assert gen["seed"] == 0 and gen["version"] >= 1 and gen["name"] == "ctxbench questions generate"
    assert doc["report"]["kept"] == len(qs)
    assert sum(doc["report"]["left_out"].values()) == doc["report"]["checked"] - doc["report"]["passed"]
    assert set(doc["templates"]) and all(len(v) == 5 for v in doc["templates"].values())
    assert f"{len(qs)} questions for {db_id}" in output


def test_generated_questions_build_and_every_gold_answer_passes(generated):
    db_id, _, qfile, out, _ = generated
    qs = {q["id"]: q for q in yaml.safe_load(qfile.read_text(encoding="utf-8"))["questions"]}
    rows = pq.read_table(out / "instances.parquet").to_pylist()
    quarantine = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert not [q for q in quarantine if q["stage"] in ("gold", "question")], quarantine
    assert {(r["question_id"], r["target_tokens"]) for r in rows} == {(q, t) for q in qs for t in (4096, 8192)}
    for r in rows:
        q = qs[r["question_id"]]
        assert r["sql"] == q["sql"] and r["question"] == q["question"]
        gold = json.loads(r["gold"])
        assert gold and not all(v is None for row in gold for v in row)
        again = _recompute(out / "source.sqlite", r["sql"], json.loads(r["included_rows"]))
        assert _same(again, gold, _ordered(r["sql"])), (r["sql"], again, gold)
        assert json.loads(r["query_types"]) == q["query_types"] and r["difficulty"] == q["difficulty"]


@pytest.mark.parametrize("generated", ["flight_2"], indirect=True)  # one database (the smallest) is enough
def test_same_seed_same_bytes_in_another_process(generated, tmp_path):
    """The file of the module's run, regenerated by a new process with a different hash seed."""
    db_id, db, qfile, _, _ = generated
    again = tmp_path / "again.yaml"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "CTXBENCH_HOME": str(tmp_path / "home"),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-m", "ctxbench.cli", "questions", "generate", "--db", str(db), "--out",
                        str(again)], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    assert again.read_bytes() == qfile.read_bytes()


# ------------------------------------------------------------------------------------------ a small user database
CAPACITY = [800, 9500, 12000, 45000, 3100, 70000, 950, 21000]  # text order differs from number order
TEAMS = [f"Team {c}" for c in "ABCDEFG"] + ["1860"]  # a name that looks like a number (TSV 1860)


def _league(path: Path) -> Path:
    """A small user database: teams (stadium capacity stored as text, as user databases do) and players with a
    foreign key to their team; values are a deterministic function of the row number."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE team (team_id INTEGER PRIMARY KEY, name TEXT, city TEXT, capacity TEXT)")
    con.execute("CREATE TABLE player (player_id INTEGER PRIMARY KEY, name TEXT, team_id INTEGER REFERENCES "
                "team(team_id), position TEXT, goals INTEGER, height REAL)")
    cities = ["Lyon", "Porto", "Turin", "Leeds"]
    for i in range(1, 9):
        con.execute("INSERT INTO team VALUES (?, ?, ?, ?)",
                    (i, TEAMS[i - 1], cities[i % 4], str(CAPACITY[i - 1])))
    positions = ["goalkeeper", "defender", "midfielder", "forward"]
    for i in range(1, 121):
        con.execute("INSERT INTO player VALUES (?, ?, ?, ?, ?, ?)",
                    (i, f"Player {i:03d}", 1 + i % 8, positions[i % 4], (i * 37) % 23, 160.5 + (i * 13) % 40))
    con.commit()
    con.close()
    return path


def test_numbers_stored_as_text_and_the_build_takes_the_generated_templates(tmp_path, monkeypatch):
    """A capacity stored as text is compared, ranked and aggregated as the number it is: every question over it
    gives the same answer as on an independent copy of the teams with capacities as integers."""
    from ctxbench.tracks.holobench.generate import GenerateConfig, generate_questions, write_generated
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    db = _league(tmp_path / "league.sqlite")
    r = generate_questions(GenerateConfig(db=str(db), n=20))
    qfile = write_generated(r, tmp_path / "league.yaml")
    assert len(r.questions) == 20
    assert any(" JOIN " in q["sql"] for q in r.questions)
    # player.team_id became the team's name in the templates
    assert all("{team_name}" in t and "team_id" not in t for t in r.templates["player"])
    res = build_holobench(HoloBenchConfig(db=str(db), queries=str(qfile), lengths=[4096]), tmp_path / "b")
    assert res.n_instances == 20  # the simulated contexts include the build's own (seed 0, 4096 tokens)
    source = tmp_path / "b" / "source.sqlite"
    con = sqlite3.connect(source)
    assert con.execute("SELECT team_name FROM player WHERE rowid = 1").fetchone() == ("Team B",)
    # the prepared source holds the capacities as numbers, and the manifest records the conversion (issue 13)
    assert con.execute("SELECT COUNT(*) FROM team WHERE typeof(capacity) != 'integer'").fetchone() == (0,)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert {"column": "team.capacity", "from": "TEXT", "to": "INTEGER", "declared": "TEXT", "count": 8} in \
        manifest["preprocessing"]["numbers_from_text"]
    con.close()
    numeric = sqlite3.connect(":memory:")
    numeric.execute("CREATE TABLE team (name TEXT, city TEXT, capacity INTEGER)")
    cities = ["Lyon", "Porto", "Turin", "Leeds"]
    numeric.executemany("INSERT INTO team VALUES (?, ?, ?)",
                        [(TEAMS[i - 1], cities[i % 4], CAPACITY[i - 1]) for i in range(1, 9)])
    on_capacity = [q for q in r.questions if "capacity" in q["sql"] and sql_info(q["sql"])["tables"] == ["team"]]
    assert on_capacity and {t for q in on_capacity for t in q["query_types"]} & {"Comparison", "Max/Min", "Ranking"}
    rows = pq.read_table(tmp_path / "b" / "instances.parquet").to_pylist()
    for q in on_capacity:
        expected = [list(x) for x in numeric.execute(q["sql"]).fetchall()]
        inst = next(x for x in rows if x["question_id"] == q["id"])
        if json.loads(inst["included_rows"]).get("team") == list(range(1, 9)):  # every team in the context
            assert _same(json.loads(inst["gold"]), expected, _ordered(q["sql"])), q["sql"]
    for row in rows:
        assert _same(_recompute(source, row["sql"], json.loads(row["included_rows"])),
                     json.loads(row["gold"]), _ordered(row["sql"]))


def test_text_tie_breaker_with_a_numeric_looking_name(tmp_path, monkeypatch):
    """Team names are text, one of them "1860": a ranking broken by name sorts names as text, as its question
    says (alphabetical order), and says so in the SQL, so the gold engine's numbers-as-text check accepts it."""
    from ctxbench.tracks.holobench.candidates import draw_candidates
    from ctxbench.tracks.holobench.checker import Checker
    from ctxbench.tracks.holobench.generate import GenerateConfig, _usable_columns, prepare
    from ctxbench.tracks.holobench.sqlparts import Table
    from ctxbench.core.hashing import seeded_rng
    from ctxbench.verbalize.generate import profile_database

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    cfg = GenerateConfig(db=str(_league(tmp_path / "league.sqlite")))
    raw, src, _ = prepare(cfg)
    profiles, edges = profile_database(raw, src.pre)
    usable = _usable_columns(src.templates, src.db.tables)
    tables = {n: Table(profiles[n], usable[n], t.rows, t.columns) for n, t in src.db.tables.items()}
    pool = draw_candidates(tables, edges, seeded_rng("test"))
    ranked = [c for c in pool if c.family in ("top", "top_where", "top_compare") and c.signature[1] == "team"]
    assert ranked and all("CAST(name AS TEXT)" in c.sql for c in ranked)
    checker = Checker(src, cfg)
    try:
        assert [checker.check(c) for c in ranked] == [None] * len(ranked)
        top = next(c for c in ranked if c.family == "top")
        # every team has a different capacity, so the answer is the team with the extreme capacity
        want = TEAMS[CAPACITY.index(max(CAPACITY) if "DESC" in top.sql else min(CAPACITY))]
        assert checker.answer(top.sql) == [[want]]
    finally:
        checker.close()


def test_identifiers_that_are_keywords_spaces_and_accents(tmp_path, monkeypatch):
    """Tables and columns named like SQL keywords (order, group, when), with spaces, dashes and accents: every
    candidate query runs (identifiers quoted where they must be), questions name them in words, the build passes."""
    from ctxbench.tracks.holobench.generate import GenerateConfig, generate_questions, write_generated
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    db = tmp_path / "shop.sqlite"
    con = sqlite3.connect(db)
    con.execute('CREATE TABLE "Order Items" ("Item Id" INTEGER PRIMARY KEY, "order" TEXT, "Unit Price" REAL, '
                '"group" TEXT, "when" TEXT, "Région" TEXT)')
    regions = ["Île-de-France", "Bretagne", "Occitanie"]
    con.executemany('INSERT INTO "Order Items" VALUES (?, ?, ?, ?, ?, ?)',
                    [(i, f"order {i % 40}", round(1 + (i * 7.3) % 90, 2), "ABC"[i % 3], f"2023-0{1 + i % 9}-1{i % 9}",
                      regions[i % 3]) for i in range(1, 241)])
    con.commit()
    con.close()
    r = generate_questions(GenerateConfig(db=str(db), n=15))
    assert not [k for k in r.report["left_out"] if "cannot run" in k], r.report["left_out"]
    assert len(r.questions) == 15
    text = " ".join(q["question"] for q in r.questions)
    assert "région" in text and "Région" not in text.replace('"', "")
    assert any('"group"' in q["sql"] or '"Région"' in q["sql"] for q in r.questions)
    qfile = write_generated(r, tmp_path / "shop.yaml")
    res = build_holobench(HoloBenchConfig(db=str(db), queries=str(qfile), lengths=[4096]), tmp_path / "b")
    assert res.n_instances == 15


def test_template_source_order(tmp_path):
    """assets/templates/<db_id>.yaml first, else the --queries file's templates: section, else a clear error."""
    from ctxbench.tracks.holobench.source import source_templates

    q = tmp_path / "q.yaml"
    q.write_text(yaml.safe_dump({"questions": [], "templates": {"t": [f"row {{a}} {i}" for i in range(5)]}}))
    assert source_templates("wine_1", q).path.endswith("assets/templates/wine_1.yaml")
    ts = source_templates("league", q)
    assert ts.templates == {"t": [f"row {{a}} {i}" for i in range(5)]} and "q.yaml" in ts.path
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump({"questions": []}))
    with pytest.raises(InputError, match="ctxbench questions generate"):
        source_templates("league", bare)
    latin = tmp_path / "latin.yaml"  # a broken query set is named as such, not as missing templates
    latin.write_bytes("questions:\n  - {id: a, question: 'Caf\xe9?', sql: 'SELECT 1'}\n".encode("latin-1"))
    with pytest.raises(InputError, match="latin.yaml is not a readable YAML query set"):
        source_templates("league", latin)
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump({"templates": {"t": ["only {a}"]}}))
    with pytest.raises(InputError, match="short.yaml.*at least 5"):
        source_templates("league", short)


def test_cli_errors_are_clear(tmp_path):
    runner = CliRunner()
    db = _league(tmp_path / "league.sqlite")
    r = runner.invoke(app, ["questions", "generate", "--db", str(db), "--out", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["questions", "generate", "--db", str(tmp_path / "none.sqlite"), "--out",
                            str(tmp_path / "x.yaml")])
    assert r.exit_code == 2 and "not found" in r.output and not (tmp_path / "x.yaml").exists()


# ------------------------------------------------------------------------------------------ LLM round trip
def test_llm_phrasing_round_trip_against_fake_server(tmp_path, monkeypatch):
    """--question-model: the fake model phrases an SQL as a question carrying it and translates a question back to
    the SQL it carries, except that its first phrasing of a COUNT query means something else (MIN), and it never
    translates a question about an average back. Questions are kept only when the round trip gives
    the same answer; dropped queries are replaced; a rerun is served by the response cache, byte for byte."""
    from fakeserver import FakeOpenAIServer, message_text

    from ctxbench.tracks.holobench.generate import GenerateConfig, generate_questions

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    db = _league(tmp_path / "league.sqlite")

    def answer(body):
        text = message_text(body["messages"][-1]["content"])
        if "Write one English question" in text:
            assert "written out as one English sentence" in text  # the verbalized-database prompts
            sql = text.split("SQL: ", 1)[1].split("\n", 1)[0]
            if "COUNT(" in sql and body.get("seed") == 0:
                sql = sql.replace("COUNT(", "MIN(", 1)
            return f"Question: Please compute <<{sql}>>"
        sql = text.split("Question: ", 1)[1].split("\n", 1)[0].split("<<", 1)[1].split(">>", 1)[0]
        if "AVG(" in sql:
            return "I cannot write that query."
        return f"```sql\n{sql}\n```"

    cfg = GenerateConfig(db=str(db), n=12, question_model="fake-coder", max_attempts=2)
    with FakeOpenAIServer(answer_fn=answer) as srv:
        cfg = cfg.model_copy(update={"question_base_url": srv.base_url})
        r = generate_questions(cfg)
        n = srv.count
        again = generate_questions(cfg)
        assert srv.count == n  # every call came from the response cache
    assert again.text == r.text
    assert len(r.questions) == 12
    for q in r.questions:
        assert q["question"] == f"Please compute <<{q['sql']}>>"
        assert "AVG(" not in q["sql"]
    counts = [q for q in r.questions if "COUNT(" in q["sql"]]
    assert counts  # kept on the second attempt
    dropped = r.report["roundtrip_dropped"]
    assert dropped >= 1  # the AVG queries
    assert "roundtrip_dropped: " in r.text and "question_model: fake-coder" in r.text


def test_binary_blobs_are_never_stated_and_text_blobs_are_text(tmp_path, monkeypatch):
    """A BLOB column of binary data (images) is no name and no fact: no template or question reads it and no
    replacement character reaches a context; a BLOB that holds UTF-8 text is that text."""
    from ctxbench.tracks.holobench.generate import GenerateConfig, generate_questions, write_generated
    from ctxbench.sources.preprocess import normalize_value
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    assert normalize_value(png) is None and normalize_value(b"\x00\x01\x02") is None
    assert normalize_value("Zoë ".encode("utf-8")) == "Zoë"
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    db = tmp_path / "pics.sqlite"
    con = sqlite3.connect(db)
    # the image column comes first and is unique per row: the name column must still be `title`
    con.execute("CREATE TABLE picture (image BLOB, title TEXT, painter BLOB, year INTEGER, width REAL)")
    painters = ["Monet", "Émile Bernard", "Kahlo", "Hokusai"]
    con.executemany("INSERT INTO picture VALUES (?, ?, ?, ?, ?)",
                    [(png + bytes([i, 255 - i]), f"Picture {i}", painters[i % 4].encode("utf-8"), 1850 + 3 * i,
                      40.0 + (i * 7) % 31) for i in range(60)])
    con.commit()
    con.close()
    r = generate_questions(GenerateConfig(db=str(db), n=12))
    assert r.questions and not [q for q in r.questions if "image" in q["sql"]]
    assert all("{image}" not in t for t in r.templates["picture"])
    assert all(t.count("{title}") == 1 for t in r.templates["picture"])
    qfile = write_generated(r, tmp_path / "pics.yaml")
    build_holobench(HoloBenchConfig(db=str(db), queries=str(qfile), lengths=[2048]), tmp_path / "b")
    contexts = [x["context"] for x in pq.read_table(tmp_path / "b" / "instances.parquet").to_pylist()]
    assert contexts and not [c for c in contexts if "\ufffd" in c or "\x00" in c]
    assert any("Émile Bernard" in c for c in contexts)


def test_identifier_names_with_spaces_and_words_ending_in_id(tmp_path, monkeypatch):
    """``item id`` (a space before id) is an identifier: never summed, averaged or compared; ``paid`` and
    ``valid`` are words that end in "id", not identifiers: their values are asked about."""
    from ctxbench.tracks.holobench.generate import GenerateConfig, generate_questions

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    db = tmp_path / "bills.sqlite"
    con = sqlite3.connect(db)
    con.execute('CREATE TABLE bill ("item id" INTEGER, customer TEXT, paid REAL, valid TEXT, city TEXT)')
    con.executemany("INSERT INTO bill VALUES (?, ?, ?, ?, ?)",
                    [(1000 + i, f"Customer {i}", round(5 + (i * 13) % 97 + 0.25, 2), "yes" if i % 3 else "no",
                      ["Oslo", "Bergen", "Tromsø"][i % 3]) for i in range(80)])
    con.commit()
    con.close()
    r = generate_questions(GenerateConfig(db=str(db), n=20))
    sqls = [q["sql"] for q in r.questions]
    assert not [s for s in sqls if re.search(r'(SUM|AVG|MIN|MAX)\("item id"\)|"item id" [<>]', s)], sqls
    assert [s for s in sqls if "paid" in s] and [s for s in sqls if "valid" in s]


def _shops(path: Path) -> Path:
    """A user database without foreign keys: stores with a zip code and a phone number, products with a code that has
    leading zeros, and sales rows labelled by the store and product codes."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE stores (store_code TEXT, name TEXT, zip INTEGER, phone TEXT, floor_area INTEGER)")
    con.execute("CREATE TABLE products (product_code TEXT, title TEXT, price REAL)")
    con.execute("CREATE TABLE sales (sale_no INTEGER, store_code TEXT, product_code TEXT, quantity INTEGER)")
    for i in range(1, 9):
        con.execute("INSERT INTO stores VALUES (?, ?, ?, ?, ?)",
                    (f"S{i:02d}", f"Shop {chr(64 + i)}", 94100 + 3 * i, f"555-01{i:02d}", 100 + 37 * i))
    for i in range(1, 13):
        con.execute("INSERT INTO products VALUES (?, ?, ?)", (f"{i:04d}", f"Item {i}", 1.5 * i + 0.25))
    for i in range(1, 61):
        con.execute("INSERT INTO sales VALUES (?, ?, ?, ?)", (i, f"S{1 + i % 8:02d}", f"{1 + i % 12:04d}", 1 + i % 7))
    con.commit()
    con.close()
    return path


def test_codes_are_never_aggregated_and_codes_link_tables_without_foreign_keys(tmp_path, monkeypatch):
    """Issue 22: zip codes, phone numbers and codes with leading zeros are codes (never summed, averaged, compared
    or ranked), and sales.store_code / sales.product_code link to the tables they name by name and values."""
    from ctxbench.tracks.holobench.generate import GenerateConfig, generate_questions, prepare
    from ctxbench.verbalize.generate import is_code_column, profile_database

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    db = _shops(tmp_path / "shops.sqlite")
    cfg = GenerateConfig(db=str(db), n=20)
    raw, src, _ = prepare(cfg)
    profiles, edges = profile_database(raw, src.pre)
    assert {c: profiles["stores"].columns[c].role for c in ("zip", "phone", "floor_area")} == {
        "zip": "code", "phone": "code", "floor_area": "measure"}
    assert is_code_column("product_code", "product code", ["0001"]) and is_code_column("ref", "ref", ["00123"])
    assert not is_code_column("quantity", "quantity", [3, 4])
    links = {(e.table, e.column, e.ref_table, e.ref_column) for e in edges}
    assert {("sales", "store_code", "stores", "store_code"), ("sales", "product_code", "products", "product_code")} \
        <= links, links
    r = generate_questions(cfg)
    assert r.questions
    codes = ("zip", "phone", "store_code", "product_code", "sale_no")
    for q in r.questions:
        sql = q["sql"]
        for c in codes:
            for pat in (rf"(SUM|AVG|MIN|MAX|TOTAL)\(\s*(\w+\.)?\"?{c}\b", rf"\b{c}\"?\s*(<|>|<=|>=|BETWEEN)",
                        rf"ORDER BY\s+(\w+\.)?\"?{c}\b"):
                assert not re.search(pat, sql, flags=re.IGNORECASE), (c, sql)
    assert "PREPROCESSED view" in r.text and "ctxbench sql-info --db" in r.text
