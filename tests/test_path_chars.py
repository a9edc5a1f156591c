"""Issue 31, defect 1: a path is a path, whatever its characters. A SQLite ``file:`` URI built from the path as it is
reads ``dir/x`` for ``dir/x#frag.sqlite`` (``#`` starts a fragment; ``?`` a query, ``%`` an escape) and loses
``mode=ro``, so a missing file is created empty; a DuckDB ``read_parquet('...')`` breaks at ``'`` and globs at
``?``/``*``/``[``. Each test puts the real file at the odd name and a *decoy* at the name the broken URI or glob
would read, and proves the real one was read and no file was created."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.sources import load_database
from ctxbench.core.userfiles import duckdb_path, open_sqlite_readonly, sqlite_readonly_uri

# each odd name and the file the unescaped URI `file:{path}?mode=ro` would have opened instead (None: no decoy
# makes sense, the name is still checked to be read and nothing created)
ODD = [("x#frag.sqlite", "x"), ("x?mode=rwc.sqlite", "x"), ("x%23y.sqlite", "x#y.sqlite"), ("a b.sqlite", None),
       ("q'uote.sqlite", None), ("ünï—cöde.sqlite", None), ("-lead#x.sqlite", "-lead"), ("p%2Fq.sqlite", "p/q.sqlite")]


def tiny_db(path: Path, table: str, n: int = 3) -> Path:
    """A SQLite file with one table ``table`` (id, name) of ``n`` rows named after the table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)  # a plain path (no URI): the name is taken as it is
    con.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, name TEXT)')
    con.executemany(f'INSERT INTO "{table}" VALUES (?, ?)', [(i, f"{table}-{i}") for i in range(n)])
    con.commit()
    con.close()
    return path


def files_under(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


@pytest.mark.parametrize("name,decoy", ODD)
def test_open_readonly_reads_the_named_file(tmp_path, name, decoy):
    d = tmp_path / "dir"
    tiny_db(d / name, "real")
    if decoy:
        tiny_db(d / decoy, "decoy")
    before = files_under(d)
    con = open_sqlite_readonly(d / name)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["real"]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # read-only survives the odd name
        con.execute("CREATE TABLE t (x)")
    con.close()
    # the loader every command's --db goes through
    assert list(load_database(d / name).tables) == ["real"]
    assert files_under(d) == before


@pytest.mark.parametrize("name,decoy", ODD)
def test_a_missing_file_is_one_line_and_creates_nothing(tmp_path, name, decoy):
    d = tmp_path / "dir"
    d.mkdir()
    with pytest.raises(InputError) as e:
        open_sqlite_readonly(d / name, what="--db")
    assert "\n" not in str(e.value) and name in str(e.value) and "does not exist" in str(e.value)
    with pytest.raises(InputError):
        load_database(d / name)
    assert files_under(d) == set()


def test_uri_escapes_every_meaningful_character(tmp_path):
    # worked out by hand: '#' -> %23, '?' -> %3F, '%' -> %25, ' ' -> %20, "'" -> %27, 'é' -> UTF-8 C3 A9
    uri = sqlite_readonly_uri(tmp_path / "a#b?c%d e'fé.sqlite")
    assert uri.endswith("/a%23b%3Fc%25d%20e%27f%C3%A9.sqlite?mode=ro&immutable=1"), uri
    assert uri.startswith("file:///") and uri.count("?") == 1


def test_rows_still_in_a_wal_file_are_read(tmp_path):
    """A user database in WAL mode whose writer is still open: its committed rows are in ``x#y.sqlite-wal``, which
    ``immutable=1`` would skip; they are read (3 rows + 2 committed in the WAL = 5)."""
    f = tiny_db(tmp_path / "x#y.sqlite", "real", 3)
    w = sqlite3.connect(f)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("PRAGMA wal_autocheckpoint=0")
    w.executemany('INSERT INTO "real" VALUES (?, ?)', [(10, "a"), (11, "b")])
    w.commit()
    assert (tmp_path / "x#y.sqlite-wal").stat().st_size > 0
    con = open_sqlite_readonly(f)
    assert con.execute('SELECT count(*) FROM "real"').fetchone() == (5,)
    con.close()
    w.close()
    assert "immutable=1" in sqlite_readonly_uri(f)  # the writer closed: the WAL was checkpointed and removed


def test_not_sqlite_is_one_line(tmp_path):
    f = tmp_path / "x#y.sqlite"
    f.write_text("not a database\n" * 100)
    with pytest.raises(InputError, match="not a readable SQLite database") as e:
        open_sqlite_readonly(f)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("build", ["a?b", "a*b", "a[1]b", "q'uote", "h#x"])
def test_duckdb_catalogue_reads_the_named_build_only(tmp_path, build):
    from ctxbench.core.storage import builds_catalogue, catalogue

    real, decoy = tmp_path / build / "b", tmp_path / "a1b" / "b"  # 'a1b' matches the globs a?b, a*b, a[1]b
    for d, v in ((real, "real"), (decoy, "decoy")):
        d.mkdir(parents=True)
        pq.write_table(pa.table({"instance_id": [v]}), d / "instances.parquet")
    assert catalogue(real).sql("SELECT instance_id FROM instances").fetchall() == [("real",)]
    con = builds_catalogue([{"build_dir": str(real)}])
    assert con.sql("SELECT build_dir, instance_id FROM instances").fetchall() == [(str(real), "real")]
    # the literal is exact: DuckDB reads the file through the escaped glob
    assert duckdb_path(Path("/r/a?b/[x]*.parquet")) == "'/r/a[?]b/[[]x][*].parquet'"


# ---- every command that takes a database path ----

@pytest.fixture
def wine_at_odd_path(spider_db, tmp_path):
    """Spider's wine_1 at ``q/x#frag.sqlite`` with a decoy database (table ``decoy``) at ``q/x``."""
    q = tmp_path / "q"
    q.mkdir()
    (q / "x#frag.sqlite").write_bytes(spider_db("wine_1").read_bytes())
    tiny_db(q / "x", "decoy", 30)
    return q


def cli(*args: str, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, list(args))
    finally:
        os.chdir(old)


def test_questions_generate_build_verify_sql_info(wine_at_odd_path, tmp_path):
    q = wine_at_odd_path
    before = files_under(q)
    r = cli("questions", "generate", "--db", "q/x#frag.sqlite", "--out", "gen.yaml", "--n", "3", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    sqls = [x["sql"] for x in yaml.safe_load((tmp_path / "gen.yaml").read_text())["questions"]]
    assert len(sqls) == 3 and all("wine" in s.lower() and "decoy" not in s.lower() for s in sqls), sqls
    r = cli("sql-info", "--db", "q/x#frag.sqlite", "SELECT AVG(Score) FROM wine", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["unknown"] == [], r.output  # Score found in wine: the real file was read
    r = cli("build", "holobench", "--db", "q/x#frag.sqlite", "--queries", "gen.yaml", "--lengths", "1024",
            "--out", "b/o#u?t", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert "3 instances" in r.output
    build = tmp_path / "b" / "o#u?t"
    ctx = pq.read_table(build / "instances.parquet", columns=["context"]).column(0).to_pylist()
    assert all("decoy-" not in c for c in ctx)
    # verify reads the build's own source.sqlite, under a directory named with '#' and '?'
    r = cli("verify", "--build", "b/o#u?t", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert "3 certified, 0 failed" in r.output
    assert files_under(q) == before  # nothing created beside the database (today's code created q/x when absent)


def test_build_does_not_create_the_truncated_name(spider_db, tmp_path):
    q = tmp_path / "q"
    q.mkdir()
    (q / "x#frag.sqlite").write_bytes(spider_db("wine_1").read_bytes())
    r = cli("questions", "generate", "--db", "q/x#frag.sqlite", "--out", "gen.yaml", "--n", "2", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    r = cli("build", "holobench", "--db", "q/x#frag.sqlite", "--queries", "gen.yaml", "--lengths", "1024",
            "--out", "b", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert files_under(q) == {"x#frag.sqlite"}


@pytest.mark.parametrize("cmd", [
    ["questions", "generate", "--out", "gen.yaml"],
    ["build", "holobench", "--out", "b"],
    ["sql-info", "SELECT 1 FROM t"],
    ["run", "--out", "r"],
])
@pytest.mark.parametrize("name", ["q/y#frag.sqlite", "q/y?mode=rwc", "q/-y.sqlite"])
def test_missing_db_is_one_line_and_creates_nothing(tmp_path, cmd, name):
    (tmp_path / "q").mkdir()
    r = cli(*cmd, f"--db={name}", cwd=tmp_path)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "y" in r.output.splitlines()[-1]
    assert files_under(tmp_path / "q") == set()


def test_questions_import_odd_db_dir(spider_db, tmp_path):
    """``questions import`` opens DIR/<db_id>/<db_id>.sqlite (db_id is checked to be a plain name; the directory
    is the user's): under ``--db-dir "d#x y'z"`` it reads that file, not the decoy ``d`` the URI's fragment left."""
    dbs = tmp_path / "d#x y'z"
    (dbs / "w1").mkdir(parents=True)
    (dbs / "w1" / "w1.sqlite").write_bytes(spider_db("wine_1").read_bytes())
    tiny_db(tmp_path / "d", "wine", 2)  # a decoy with a table of the same name, 2 rows and no Score column
    con = sqlite3.connect(spider_db("wine_1"))
    n = con.execute("SELECT count(*) FROM wine WHERE Score > 90").fetchone()[0]
    con.close()
    assert n > 2  # the decoy could not give n
    qfile = tmp_path / "q.json"
    qfile.write_text(json.dumps([{"db_id": "w1", "question": "How many wines score above 90?",
                                  "query": "SELECT count(*) FROM wine WHERE Score > 90"}]))
    before = files_under(tmp_path)
    r = cli("questions", "import", "--spider", "q.json", "--db-dir", "d#x y'z", "--out", "imp", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in (tmp_path / "imp" / "import_report.jsonl").read_text().splitlines()]
    assert lines[0]["accepted"] and lines[0]["answer"] == [[n]], lines
    assert {f for f in files_under(tmp_path) if not f.startswith("imp")} == before
