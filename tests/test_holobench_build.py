"""End-to-end builds of the verbalized-database track on Spider's wine_1, every instance checked independently:
lengths recounted with tiktoken, evidence spans decoded, gold answers recomputed with plain sqlite3 over
source.sqlite restricted to the instance's included rows."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError, TokenizerError, ValidationError
from ctxbench.core.storage import to_table
from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench
from ctxbench.tracks.validate import validate_build

REPO = Path(__file__).resolve().parent.parent
POSITIONS = ["beginning", "middle", "end", "uniform", "bimodal"]
AMOUNT = 2048


def _n_questions() -> int:
    return len(yaml.safe_load((REPO / "assets" / "queries" / "wine_1.yaml").read_text())["questions"])


def _dummy_docs() -> set[str]:
    docs = yaml.safe_load((REPO / "assets" / "dummy" / "wine_1.yaml").read_text())
    return {" ".join(str(d).split()) for d in docs}


@pytest.fixture(scope="module")
def wine(spider_db) -> str:
    return str(spider_db("wine_1"))


@pytest.fixture(scope="module")
def density_cfg(wine):
    return HoloBenchConfig(db=wine, lengths=[4096, 8192], setting="density", positions=["uniform"])


@pytest.fixture(scope="module")
def density_build(density_cfg, tmp_path_factory):
    out = tmp_path_factory.mktemp("density_a") / "build"
    return build_holobench(density_cfg, out)


@pytest.fixture(scope="module")
def amount_build(wine, tmp_path_factory):
    cfg = HoloBenchConfig(db=wine, lengths=[8192], setting="amount", amount_tokens=AMOUNT, positions=POSITIONS)
    out = tmp_path_factory.mktemp("amount") / "build"
    return build_holobench(cfg, out)


# ---------------------------------------------------------------- independent recomputation helpers

def _source_tables(source: Path) -> list[str]:
    con = sqlite3.connect(source)
    try:
        return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    finally:
        con.close()


def _query_tables(sql: str, names: list[str]) -> list[str]:
    return [t for t in names if re.search(rf"\b{re.escape(t)}\b", sql, flags=re.IGNORECASE)]


def _recompute(source: Path, sql: str, included: dict[str, list[int]]) -> list[list]:
    """Run ``sql`` with sqlite3 over copies of its tables holding only the included rowids."""
    con = sqlite3.connect(":memory:")
    try:
        con.execute("ATTACH DATABASE ? AS src", (str(source),))
        for t in _query_tables(sql, _source_tables(source)):
            con.execute(f'CREATE TABLE main."{t}" AS SELECT * FROM src."{t}" WHERE rowid IN '
                        f'(SELECT value FROM json_each(?)) ORDER BY rowid', (json.dumps(included.get(t, [])),))
        return [list(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def _key(row):
    return tuple((0, "") if v is None else (1, f"{float(v):.6g}") if isinstance(v, (int, float)) else (2, v)
                 for v in row)


def _same(a: list[list], b: list[list], ordered: bool) -> bool:
    if len(a) != len(b):
        return False
    if not ordered:
        a, b = sorted(a, key=_key), sorted(b, key=_key)
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                if not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True


def _check_instances(out: Path, enc, setting: str) -> list[dict]:
    rows = pq.read_table(out / "instances.parquet").to_pylist()
    assert rows
    source = out / "source.sqlite"
    names = _source_tables(source)
    con = sqlite3.connect(source)
    totals = {t: con.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in names}
    con.close()
    dummy = _dummy_docs()
    for r in rows:
        ctx = r["context"]
        ids = enc.encode(ctx, disallowed_special=())
        assert r["context_tokens"] <= r["target_tokens"]
        assert len(ids) == r["context_tokens"]
        lines = ctx.split("\n")
        assert lines[-1] == ""
        lines = lines[:-1]
        spans = json.loads(r["evidence_spans"])
        line_set = set(lines)
        for s, e in spans:
            assert 0 <= s < e <= len(ids)
            assert enc.decode(ids[s:e]).strip() in line_set
        included = json.loads(r["included_rows"])
        qtables = _query_tables(r["sql"], names)
        assert qtables
        n_rel = sum(len(included.get(t, [])) for t in qtables)
        assert len(spans) == n_rel  # one span per relevant row
        # every line is either an included row's sentence or a dummy document
        n_rows = sum(len(v) for v in included.values())
        assert len(lines) - sum(1 for ln in lines if ln in dummy) == n_rows
        for t, rids in included.items():
            assert len(set(rids)) == len(rids) and all(1 <= x <= totals[t] for x in rids)
        # gold: the SQL over exactly the included relevant rows
        gold = json.loads(r["gold"])
        ordered = "ORDER BY" in r["sql"].upper()
        assert _same(gold, _recompute(source, r["sql"], included), ordered), (r["question_id"], gold)
        # density
        d = r["achieved_density"]
        rel_tokens = sum(e - s for s, e in spans)
        assert 0 <= d <= 1
        assert d == pytest.approx(rel_tokens / r["context_tokens"], abs=1e-5)
        exhausted = n_rel == sum(totals[t] for t in qtables)
        if setting == "density":
            assert d <= 0.5 + 0.01
            if not exhausted:
                assert abs(d - 0.5) < 0.05, (r["question_id"], r["target_tokens"], d)
        else:
            assert rel_tokens <= AMOUNT
            if not exhausted:
                assert rel_tokens >= AMOUNT - 150, (r["question_id"], rel_tokens)
    return rows


# ---------------------------------------------------------------- density build

def test_density_build_instances(density_build, tiktoken_enc):
    out = density_build.out
    rows = _check_instances(out, tiktoken_enc("cl100k_base"), "density")
    assert len(rows) == density_build.n_instances
    assert {r["target_tokens"] for r in rows} == {4096, 8192}
    assert {r["position"] for r in rows} == {"uniform"}
    assert {r["setting"] for r in rows} == {"density"}
    assert {r["tokenizer"] for r in rows} == {"cl100k_base"}
    assert len({r["instance_id"] for r in rows}) == len(rows)
    # instances + gold rejections account for every question x length x position
    quar = pq.read_table(out / "quarantine.parquet").to_pylist()
    n_gold = sum(1 for q in quar if q["stage"] == "gold")
    assert len(rows) + n_gold == _n_questions() * 2 * 1
    # in density mode with enough relevant rows, the wine-only questions are close to 50 %
    names = _source_tables(out / "source.sqlite")
    wine_only = [r for r in rows if _query_tables(r["sql"], names) == ["wine"]]
    assert wine_only and all(abs(r["achieved_density"] - 0.5) < 0.05 for r in wine_only)


def test_amount_build_instances(amount_build, tiktoken_enc):
    out = amount_build.out
    enc = tiktoken_enc("cl100k_base")
    rows = _check_instances(out, enc, "amount")
    assert {r["position"] for r in rows} == set(POSITIONS)
    assert {r["target_tokens"] for r in rows} == {8192}
    quar = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert len(rows) + sum(1 for q in quar if q["stage"] == "gold") == _n_questions() * 1 * len(POSITIONS)
    for r in rows:
        spans = json.loads(r["evidence_spans"])
        n = r["context_tokens"]
        if r["position"] == "beginning":
            assert spans[0][0] == 0
        elif r["position"] == "end":
            assert n - spans[-1][1] <= 1
        elif r["position"] == "uniform":
            assert spans[0][0] < 0.2 * n and spans[-1][1] > 0.8 * n


def test_instances_parquet_matches_schema(density_build):
    spec = json.loads((REPO / "schemas" / "instances.schema.json").read_text())
    sch = pq.read_schema(density_build.out / "instances.parquet")
    assert sch.names == [c["name"] for c in spec["columns"]]
    arrow = {"string": "string", "int64": "int64", "float64": "double", "bool": "bool"}
    for c in spec["columns"]:
        f = sch.field(c["name"])
        assert str(f.type) == arrow[c["type"]], c["name"]
        assert f.nullable == c["nullable"], c["name"]


def test_quarantine_and_layout(density_build):
    out = density_build.out
    for name in ("manifest.json", "instances.parquet", "quarantine.parquet", "source.sqlite"):
        assert (out / name).is_file(), name
    q = pq.read_table(out / "quarantine.parquet")
    assert q.column_names == ["input", "stage", "reason", "detail"]
    rows = q.to_pylist()
    assert rows == [r for r in rows if r["stage"] and r["reason"]]
    assert density_build.n_quarantined == len(rows)
    # Spider's wine.Cases 'NULL' strings are NULL by the value rule: the 14 rows are kept and verbalized
    # ("not recorded"), not dropped (issue 22); the manifest counts the rows verbalized per table
    assert not [r for r in rows if r["stage"] == "verbalize" and r["input"] == "wine_1.wine"]
    pre = json.loads((out / "manifest.json").read_text())["preprocessing"]
    assert pre["rows_verbalized"]["wine"] == {"rows": 500, "verbalized": 500, "left_out": {}}
    assert pre["made_null"]["wine.Cases"] == 14 and pre["integer_division"] == "exact"
    for r in rows:
        if r["stage"] == "gold":
            assert json.loads(r["detail"])["question_id"].startswith("wine_1-")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["build_hash"] == density_build.build_hash


def test_source_sqlite_holds_preprocessed_values(density_build, wine):
    con = sqlite3.connect(density_build.out / "source.sqlite")
    raw = sqlite3.connect(wine)
    try:
        n_raw = raw.execute("SELECT COUNT(*) FROM wine").fetchone()[0]
        n_null = raw.execute("SELECT COUNT(*) FROM wine WHERE Cases = 'NULL'").fetchone()[0]
        assert (n_raw, n_null) == (500, 14)
        assert con.execute("SELECT COUNT(*) FROM wine").fetchone()[0] == n_raw  # every row kept (issue 22)
        assert con.execute("SELECT COUNT(*) FROM wine WHERE Cases IS NULL").fetchone()[0] == n_null
        assert con.execute("SELECT COUNT(*) FROM wine WHERE Cases IS NOT NULL AND typeof(Cases) != 'integer'"
                           ).fetchone()[0] == 0
        from ctxbench.verbalize.templates import load_templates
        ts = load_templates("wine_1")
        cols = [r[1] for r in con.execute('PRAGMA table_info("wine")')]
        rid, *row = con.execute('SELECT rowid, * FROM wine WHERE Cases IS NULL LIMIT 1').fetchone()
        assert ts.missing_phrase("wine", "Cases") == "an unrecorded number of"
        assert "an unrecorded number of cases" in ts.verbalize("wine", cols, tuple(row), rid, 0)
        for t in _source_tables(density_build.out / "source.sqlite"):
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            for c in cols:
                bad = con.execute(f'SELECT COUNT(*) FROM "{t}" WHERE typeof("{c}") = \'text\' AND '
                                  f'("{c}" != trim("{c}") OR upper("{c}") = \'NULL\')').fetchone()[0]
                assert bad == 0, (t, c)
    finally:
        con.close()
        raw.close()


def test_same_config_is_byte_identical_elsewhere(density_build, density_cfg, tmp_path_factory):
    other = tmp_path_factory.mktemp("density_b") / "somewhere" / "else"
    r = build_holobench(density_cfg, other)
    assert not r.skipped
    assert r.build_hash == density_build.build_hash
    for name in ("instances.parquet", "quarantine.parquet"):
        assert (other / name).read_bytes() == (density_build.out / name).read_bytes(), name


def test_rebuild_same_dir_is_skipped(density_build, density_cfg):
    before = {n: (density_build.out / n).read_bytes() for n in ("instances.parquet", "quarantine.parquet")}
    r = build_holobench(density_cfg, density_build.out)
    assert r.skipped
    assert r.build_hash == density_build.build_hash
    assert r.n_instances == density_build.n_instances
    for n, b in before.items():
        assert (density_build.out / n).read_bytes() == b


def test_different_config_into_existing_dir_is_refused(density_build, wine):
    cfg = HoloBenchConfig(db=wine, lengths=[4096], setting="density", positions=["uniform"],
                          question_ids=["wine_1-q02"])
    before = (density_build.out / "instances.parquet").read_bytes()
    with pytest.raises(InputError) as ei:
        build_holobench(cfg, density_build.out)
    assert str(density_build.out) in str(ei.value)
    assert (density_build.out / "instances.parquet").read_bytes() == before


def test_force_replaces_a_different_build(wine, tmp_path):
    a = HoloBenchConfig(db=wine, lengths=[4096], positions=["uniform"], question_ids=["wine_1-q02"])
    b = HoloBenchConfig(db=wine, lengths=[4096], positions=["uniform"], question_ids=["wine_1-q07"])
    ra = build_holobench(a, tmp_path)
    with pytest.raises(InputError):
        build_holobench(b, tmp_path)
    rb = build_holobench(b, tmp_path, force=True)
    assert not rb.skipped and rb.build_hash != ra.build_hash
    assert json.loads((tmp_path / "manifest.json").read_text())["build_hash"] == rb.build_hash
    assert {r["question_id"] for r in pq.read_table(tmp_path / "instances.parquet").to_pylist()} == {"wine_1-q07"}


def test_amount_larger_than_target_raises(wine, tmp_path):
    cfg = HoloBenchConfig(db=wine, lengths=[1024], setting="amount", amount_tokens=AMOUNT, positions=["uniform"])
    with pytest.raises(InputError) as ei:
        build_holobench(cfg, tmp_path / "b")
    assert "1024" in str(ei.value) and str(AMOUNT) in str(ei.value)


def test_unknown_tokenizer_raises(wine, tmp_path):
    cfg = HoloBenchConfig(db=wine, lengths=[4096], tokenizer="no-such-tokenizer-xyz")
    with pytest.raises(TokenizerError) as ei:
        build_holobench(cfg, tmp_path / "b")
    assert "no-such-tokenizer-xyz" in str(ei.value)


@pytest.mark.parametrize("sql,column", [
    ("SELECT Vintage FROM wine WHERE Price > 10", "vintage"),
    ("SELECT w.Name FROM wine AS w WHERE w.Bottles > 10", "bottles"),
])
def test_query_set_with_missing_column(wine, tmp_path, sql, column):
    qpath = tmp_path / "queries.yaml"
    qpath.write_text(yaml.safe_dump({"questions": [
        {"id": "ok-1", "question": "What is the highest score?", "sql": "SELECT MAX(Score) FROM wine"},
        {"id": "bad-1", "question": "A question about a column the table lacks?", "sql": sql},
    ]}))
    cfg = HoloBenchConfig(db=wine, queries=str(qpath), lengths=[4096])
    with pytest.raises(InputError) as ei:
        build_holobench(cfg, tmp_path / "b")
    msg = str(ei.value)
    assert column in msg.lower()
    assert "bad-1" in msg


def test_cli_build(wine, tmp_path):
    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["build", "holobench", "--db", wine, "--tokenizer", "cl100k_base", "--lengths", "4096",
                                   "--setting", "density", "--position", "uniform", "--out", str(out)])
    assert res.exit_code == 0, res.output
    for name in ("manifest.json", "instances.parquet", "quarantine.parquet", "source.sqlite"):
        assert (out / name).is_file(), name
    rows = pq.read_table(out / "instances.parquet").to_pylist()
    assert rows and {r["target_tokens"] for r in rows} == {4096}
    assert all(r["context_tokens"] <= 4096 for r in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["lengths"] == [4096]


# ---------------------------------------------------------------- validation failure

def test_validation_names_failed_expectation(density_build):
    rows = pq.read_table(density_build.out / "instances.parquet").to_pylist()[:2]
    assert len(rows) == 2
    validate_build(to_table("instances", rows))  # unmodified rows pass
    rows[1]["context_tokens"] = rows[1]["target_tokens"] + 7
    with pytest.raises(ValidationError) as ei:
        validate_build(to_table("instances", rows))
    assert "ExpectColumnPairValuesAToBeGreaterThanB" in str(ei.value)


def test_difficulty_and_language_columns(density_build):
    """Every instance carries LURCH's properties recomputed here from its own columns, and the language."""
    from ctxbench.features.difficulty import merge_spans, sql_reasoning_depth

    rows = pq.read_table(density_build.out / "instances.parquet").to_pylist()
    for r in rows:
        m = merge_spans(json.loads(r["evidence_spans"]))
        L, S = r["context_tokens"], sum(e - s for s, e in m)
        assert r["scope"] == pytest.approx(S / L)
        assert r["dispersion"] == pytest.approx(((m[-1][1] - m[0][0]) - S) / (L - S) if L > S else 0.0)
        assert r["reasoning_depth"] == sql_reasoning_depth(r["sql"]) >= 1
        assert (r["language"], r["question_language"]) == ("en", "en")
    # wine_1's query set includes single-table counts (depth 3) and a HAVING + ORDER BY join (depth 5)
    assert {1, 2, 3} & {r["reasoning_depth"] for r in rows} and max(r["reasoning_depth"] for r in rows) >= 4


# ---------------------------------------------------------------- numbers stored as text (issue 13 item 1)

def test_numbers_stored_as_text_are_numbers_in_source(wine, tmp_path):
    # a copy of wine_1 whose Price column is declared TEXT and holds its prices as text ('9', '10', '2014' ...)
    d = tmp_path / "db"
    d.mkdir()
    path = d / "wine_1.sqlite"
    src = sqlite3.connect(wine)
    src.backup(dst := sqlite3.connect(path))
    src.close()
    cols = [r[1] for r in dst.execute('PRAGMA table_info("wine")')]
    decl = ", ".join(f'"{c}" {"TEXT" if c == "Price" else t}' for _, c, t, *_ in dst.execute('PRAGMA table_info("wine")'))
    dst.executescript(f'CREATE TABLE w2 ({decl}, FOREIGN KEY (Grape) REFERENCES grapes(Grape), FOREIGN KEY '
                      f'(Appelation) REFERENCES appellations(Appelation)); INSERT INTO w2 SELECT '
                      f'{", ".join("CAST(Price AS TEXT)" if c == "Price" else f"{chr(34)}{c}{chr(34)}" for c in cols)} '
                      f'FROM wine; DROP TABLE wine; ALTER TABLE w2 RENAME TO wine;')
    assert dst.execute("SELECT COUNT(*) FROM wine WHERE typeof(Price) != 'text'").fetchone()[0] == 0
    n_text = dst.execute("SELECT COUNT(*) FROM wine").fetchone()[0]
    # as text, MAX and ORDER BY are wrong: '99' > '100'
    assert dst.execute("SELECT MAX(Price) FROM wine").fetchone()[0] != str(
        dst.execute("SELECT MAX(CAST(Price AS INTEGER)) FROM wine").fetchone()[0])
    dst.close()
    qpath = tmp_path / "queries.yaml"
    qpath.write_text(yaml.safe_dump({"questions": [
        {"id": "p1", "question": "What is the highest price of a wine?", "sql": "SELECT MAX(Price) FROM wine"},
        {"id": "p2", "question": "Which wines cost more than 100 dollars?", "sql": "SELECT Name FROM wine WHERE Price > 100"},
        {"id": "p3", "question": "Which wine is the most expensive (by name when prices tie)?",
         "sql": "SELECT Name FROM wine ORDER BY Price DESC, Name LIMIT 1"},
    ]}))
    r = build_holobench(HoloBenchConfig(db=str(path), queries=str(qpath), lengths=[4096]), tmp_path / "b")
    manifest = json.loads((r.out / "manifest.json").read_text())
    conv = manifest["preprocessing"]["numbers_from_text"]
    assert conv == [{"column": "wine.Price", "from": "TEXT", "to": "INTEGER", "declared": "TEXT", "count": n_text}]
    con = sqlite3.connect(r.out / "source.sqlite")
    assert con.execute("SELECT COUNT(*) FROM wine WHERE typeof(Price) != 'integer'").fetchone()[0] == 0
    con.close()
    rows = pq.read_table(r.out / "instances.parquet").to_pylist()
    assert {x["question_id"] for x in rows} == {"p1", "p2", "p3"}
    for x in rows:
        inc = json.loads(x["included_rows"])
        want = _recompute(r.out / "source.sqlite", x["sql"], inc)
        assert _same(json.loads(x["gold"]), want, "ORDER BY" in x["sql"]), x["question_id"]
        if x["question_id"] == "p1":  # the numeric maximum of the included prices
            con = sqlite3.connect(r.out / "source.sqlite")
            prices = [p for (p,) in con.execute(f"SELECT Price FROM wine WHERE rowid IN ({','.join(map(str, inc['wine']))})")]
            con.close()
            assert json.loads(x["gold"]) == [[max(prices)]] and isinstance(max(prices), int)
