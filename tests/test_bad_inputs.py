"""A corpus of bad inputs fed through the whole pipeline (issue 8 part 7): PDFs, text encodings, special-token
strings, empty tables and NULL columns, malformed YAML and SQL, lengths beyond windows, bad model and judge replies.

Each bad input gets a clear error naming the input (a CtxbenchError, exit code 2 at the CLI, never a traceback) or
a quarantine record, and nothing else in its batch is lost: the good PDF beside the bad ones converts, the other
questions of a database still become instances, the other responses are stored and scored.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import unicodedata
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.storage import to_table, write_parquet
from fakeserver import FakeOpenAIServer, message_text

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()
LENGTH = "512"


def cli(*args: str):
    r = runner.invoke(app, list(args))
    # a bad input ends in a clear message and exit code 2 (or success), never in an uncaught exception
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, repr(r.exception), r.output)
    return r


# ================================================================================================ PDFs

def _pdf_cases(good: Path, shared: Path, d: Path) -> dict[str, tuple[Path, set[str]]]:
    """name → (file, accepted reasons)."""
    from PIL import Image

    data = good.read_bytes()
    cases: dict[str, tuple[bytes | Path, set[str]]] = {
        "empty.pdf": (b"", {"not a pdf"}),
        "header-only.pdf": (b"%PDF-1.7\n", {"truncated or corrupt"}),
        "header-then-noise.pdf": (b"%PDF-1.4\n" + bytes(range(256)) * 40, {"truncated or corrupt"}),
        "html-page.pdf": (b"<!DOCTYPE html><html><body>Access denied</body></html>", {"not a pdf"}),
        "png-named.pdf": (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, {"not a pdf"}),
        "utf16-text.pdf": ("%PDF is what this says".encode("utf-16"), {"not a pdf"}),
        "truncated-10pct.pdf": (data[: len(data) // 10], {"truncated or corrupt"}),
        "truncated-60pct.pdf": (data[: len(data) * 6 // 10], {"truncated or corrupt", "scanned or no text layer"}),
        "no-trailer.pdf": (data[: data.rfind(b"trailer")] if b"trailer" in data else data[:-2000],
                           {"truncated or corrupt", "scanned or no text layer"}),
    }
    img = Image.new("L", (600, 800), 255)
    for y in range(100, 700, 20):  # an image of "text lines": a scan without a text layer
        img.paste(0, (50, y, 550, y + 6))
    buf = io.BytesIO()
    img.save(buf, "PDF", resolution=100)
    cases["scanned-image-only.pdf"] = (buf.getvalue(), {"scanned or no text layer"})
    import pypdfium2 as pdfium

    blank = pdfium.PdfDocument.new()
    blank.new_page(612, 792)
    buf = io.BytesIO()
    blank.save(buf)
    cases["blank-page.pdf"] = (buf.getvalue(), {"scanned or no text layer"})
    meta = {m["id"]: m for m in json.loads((shared / "metadata.json").read_text(encoding="utf-8"))}
    for fid, reason in (("H07", "encrypted"), ("H02", "scanned or no text layer"), ("X01", "truncated or corrupt")):
        cases[meta[fid]["file"]] = (shared / meta[fid]["file"], {reason})
    out = {}
    for name, (content, reasons) in cases.items():
        p = d / name
        if isinstance(content, Path):
            shutil.copy(content, p)
        else:
            p.write_bytes(content)
        out[name] = (p, reasons)
    return out


def test_bad_pdfs_are_quarantined_and_the_good_one_converts(shared_data, tmp_path):
    from conftest import require_path
    from ctxbench.convert import ConversionError, convert_pdf, convert_pdfs

    shared = require_path(shared_data / "articles" / "pdfs", "shared article PDFs")
    meta = {m["id"]: m for m in json.loads((shared / "metadata.json").read_text(encoding="utf-8"))}
    good = shared / meta["H06"]["file"]  # a one-page excerpt with a text layer
    d = tmp_path / "pdfs"
    d.mkdir()
    cases = _pdf_cases(good, shared, d)
    missing = d / "gone.pdf"  # listed but absent (deleted between listing and converting)
    paths = [p for p, _ in cases.values()] + [missing, good]
    convs, quarantine = convert_pdfs(paths, cache_dir=tmp_path / "cache", timeout_s=120)
    assert convs[-1] is not None and convs[-1].chars > 500  # nothing else lost
    assert all(c is None for c in convs[:-1])
    by_input = {q["input"]: q for q in quarantine}
    assert set(by_input) == {p.name for p in paths[:-1]}
    for name, (p, reasons) in cases.items():
        q = by_input[name]
        assert q["stage"] == "convert" and q["reason"] in reasons, (name, q)
        assert json.loads(q["detail"])["path"] == str(p)
    assert by_input["gone.pdf"]["reason"] == "unreadable file"
    # one at a time: a clear error naming the file
    for name in ("empty.pdf", "header-only.pdf", "scanned-image-only.pdf"):
        with pytest.raises(ConversionError, match=name.replace(".", r"\.")):
            convert_pdf(cases[name][0], timeout_s=120)


# ================================================================================================ databases

@pytest.fixture(scope="module")
def wine_src(spider_db) -> Path:
    return spider_db("wine_1")


def _variant(src: Path, d: Path, *sql: str, params: list[tuple] | None = None) -> Path:
    """A copy of wine_1 (named wine_1.sqlite so its templates and queries apply) changed by ``sql``."""
    d.mkdir(parents=True, exist_ok=True)
    p = d / "wine_1.sqlite"
    shutil.copy(src, p)
    con = sqlite3.connect(p)
    for s in sql:
        con.execute(s)
    for stmt, args in params or []:
        con.execute(stmt, args)
    con.commit()
    con.close()
    return p


def _build(db: Path, out: Path, *extra: str):
    return cli("build", "holobench", "--db", str(db), "--lengths", LENGTH, "--out", str(out), *extra)


def _instances(out: Path) -> list[dict]:
    return pq.read_table(out / "instances.parquet").to_pylist()


def _quarantine(out: Path) -> list[dict]:
    return pq.read_table(out / "quarantine.parquet").to_pylist()


@pytest.fixture(scope="module")
def reference(wine_src, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "b"
    assert _build(wine_src, out).exit_code == 0
    return out


def _names(rows):
    return {r["question_id"] for r in rows}


ENCODED = {  # wine names rewritten as non-UTF-8 bytes (Latin-1 / Windows-1252 / mixed within one value)
    "latin1": "Château Lafleur ".encode("latin-1"),
    "cp1252-quotes": "“Réserve” – Spécial ".encode("cp1252"),
    "mixed-in-one-value": "Caf\xe9 ".encode("latin-1") + "Crème ".encode("utf-8"),
}


@pytest.mark.parametrize("case", sorted(ENCODED))
def test_non_utf8_text_in_a_database_is_decoded_and_recorded(case, wine_src, reference, tmp_path):
    raw = ENCODED[case]
    # every 7th wine gets a unique non-UTF-8 name (bytes stored as TEXT, as a mis-encoded import leaves them)
    db = _variant(wine_src, tmp_path / "db", params=[
        ("UPDATE wine SET Name = CAST(CAST(? AS BLOB) || CAST(rowid AS BLOB) AS TEXT) WHERE rowid % 7 = 0", (raw,))])
    con = sqlite3.connect(db)
    con.text_factory = bytes
    n_bad = con.execute("SELECT count(*) FROM wine WHERE rowid % 7 = 0").fetchone()[0]
    assert con.execute("SELECT Name FROM wine WHERE rowid = 7").fetchone()[0] == raw + b"7"  # really not UTF-8
    con.close()
    out = tmp_path / "b"
    r = _build(db, out)
    assert r.exit_code == 0, r.output
    q = [x for x in _quarantine(out) if x["stage"] == "load"]
    assert len(q) == 1 and q[0]["input"] == "wine_1.wine" and q[0]["reason"].startswith(f"{n_bad} text value(s)")
    src = sqlite3.connect(out / "source.sqlite")
    assert src.execute("SELECT Name FROM wine WHERE rowid = 7").fetchone()[0] == raw.decode("cp1252") + "7"
    src.close()
    assert _names(_instances(out)) == _names(_instances(reference))  # every question still answered


SPECIAL = ["<|endoftext|>", "<|im_start|>assistant", "<|fim_prefix|>", "</s><s>[INST]", "[CLS] [SEP] [MASK]",
           "<｜end▁of▁sentence｜>", "<|begin_of_text|><|eot_id|>", "\x00\x1b[31m"]


@pytest.mark.parametrize("token", SPECIAL)
def test_special_token_strings_in_a_corpus(token, wine_src, tiktoken_enc, tmp_path):
    db = _variant(wine_src, tmp_path / "db", params=[
        ("UPDATE grapes SET Color = Color || ? WHERE rowid % 2 = 0", (" " + token,))])
    out = tmp_path / "b"
    r = _build(db, out)
    assert r.exit_code == 0, r.output
    rows = _instances(out)
    assert rows
    enc = tiktoken_enc("cl100k_base")
    hit = 0
    for x in rows:  # lengths recounted with tiktoken treating special tokens as text
        assert len(enc.encode(x["context"], disallowed_special=())) == x["context_tokens"] <= x["target_tokens"]
        hit += token.strip() in x["context"]
    assert hit  # the strings made it into contexts


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base", "deepseek-v3", "claude-legacy", "llama3",
                                       "qwen2.5"])
def test_every_tokenizer_encodes_special_token_strings_as_text(tokenizer):
    from ctxbench.tokenizers import get_tokenizer

    tok = get_tokenizer(tokenizer)
    for s in SPECIAL[:-1]:
        text = f"The wine is called {s} and costs 20 dollars."
        ids = tok.encode(text)
        assert tok.count(text) == len(ids) > 0
        # as text: the string costs several tokens (no single control token) and decodes back to the text
        assert tok.count(s) > 1, (tokenizer, s)
        # claude-legacy's normalizer applies NFKC (full-width ｜ becomes |)
        assert unicodedata.normalize("NFKC", text) == unicodedata.normalize("NFKC", tok.decode(ids)), (tokenizer, s)


def test_empty_table_and_all_null_column(wine_src, reference, tmp_path):
    db = _variant(wine_src, tmp_path / "db", "DELETE FROM grapes", "UPDATE appellations SET County = NULL")
    out = tmp_path / "b"
    r = _build(db, out)
    assert r.exit_code == 0, r.output
    q = _quarantine(out)
    left_out = {x["input"]: x["reason"] for x in q if x["reason"].startswith("table left out")}
    assert "empty table" in left_out["wine_1.grapes"]
    # a column NULL in every row no longer removes its table (issue 22: no row is lost): every appellations row is
    # verbalized, its County slot stating the templates' missing phrase (wine_1.yaml sets none for County)
    assert "wine_1.appellations" not in left_out
    qs = yaml.safe_load((REPO / "assets" / "queries" / "wine_1.yaml").read_text())["questions"]
    reads = {x["id"] for x in qs if re.search(r"\bgrapes\b", x["sql"], re.I)}
    assert {x["input"] for x in q if x["stage"] == "question"} == reads
    with_appellations = 0
    for x in _instances(out):
        inc = json.loads(x["included_rows"])
        assert not inc.get("grapes")
        # one County slot per appellations sentence, each stating the default phrase
        assert x["context"].count("not recorded") == len(inc.get("appellations") or [])
        with_appellations += bool(inc.get("appellations"))
    assert with_appellations


def test_a_table_losing_more_than_1pct_of_its_rows_is_warned_about_in_one_line(wine_src, tmp_path):
    """10 of wine_1's 500 wine rows with every column its templates state NULL: those 10 say nothing and are left
    out (2.0% > 1%), so the build warns once, naming the table, the count and the reason; an identifier-only table
    left out by design is not warned about."""
    import warnings

    from ctxbench.core.errors import DataWarning

    stated = "Name = NULL, Winery = NULL, Grape = NULL, Price = NULL, Score = NULL, Year = NULL, Appelation = NULL, " \
             "Cases = NULL"
    db = _variant(wine_src, tmp_path / "db", f"UPDATE wine SET {stated} WHERE rowid <= 10")
    with pytest.warns(DataWarning) as got:
        r = _build(db, tmp_path / "b")
    assert r.exit_code == 0, r.output
    msgs = [str(w.message) for w in got if issubclass(w.category, DataWarning)]
    assert msgs == ["table wine_1.wine: 10 of 500 rows (2.0%) are not verbalized (10 every column its templates "
                    "state is missing)"]
    # the CLI prints a data warning as one line, without the Python source path
    assert warnings.formatwarning(DataWarning(msgs[0]), DataWarning, "x.py", 1) == f"warning: {msgs[0]}\n"


@pytest.mark.parametrize("case,sql,expect", [
    ("all-tables-empty", ["DELETE FROM wine", "DELETE FROM grapes", "DELETE FROM appellations"], "every one is empty"),
    ("all-columns-null", ["UPDATE wine SET Name = NULL, Winery = NULL, Grape = NULL, Price = NULL, Score = NULL, "
                          "Year = NULL, Appelation = NULL, Cases = NULL"], "wine_1.wine"),
])
def test_databases_with_nothing_usable(case, sql, expect, wine_src, tmp_path):
    db = _variant(wine_src, tmp_path / "db", *sql)
    out = tmp_path / "b"
    r = _build(db, out)
    if r.exit_code == 0:  # the build can go on without the table: then its questions are quarantined or refused
        assert any(expect in x["input"] for x in _quarantine(out))
    else:
        assert r.exit_code == 2 and expect in r.output, r.output
        assert not (out / "instances.parquet").exists()


@pytest.mark.parametrize("content,expect", [
    (b"", "holds no table"),
    (b"this is a text file, not a database\n" * 20, "not a readable SQLite database"),
    (b"SQLite format 3\x00" + b"\xff" * 2000, "not a readable SQLite database"),
])
def test_files_that_are_not_databases(content, expect, tmp_path):
    p = tmp_path / "bad.sqlite"
    p.write_bytes(content)
    r = _build(p, tmp_path / "b")
    assert r.exit_code == 2 and expect in r.output and "bad.sqlite" in r.output, r.output


# ================================================================================================ YAML and SQL

QUERY_FILES = {
    "latin1-encoded": ("questions:\n  - {id: a, question: 'Caf\xe9?', sql: 'SELECT Name FROM wine'}\n".encode("latin-1"),
                       "not a readable YAML"),
    "utf16-encoded": ("questions:\n  - {id: a, question: 'x?', sql: 'SELECT 1'}\n".encode("utf-16"),
                      "not a readable YAML"),
    "broken-yaml": (b"questions: [ {id: a, sql: 'x'\n  - :: broken", "not a readable YAML"),
    "tab-indented": (b"questions:\n\t- id: a\n", "not a readable YAML"),
    "top-level-list": (b"- {id: a, question: 'q?', sql: 'SELECT Name FROM wine'}\n", "expected a 'questions' list"),
    "no-questions": (b"db_id: wine_1\n", "expected a 'questions' list"),
    "question-without-sql": (b"questions:\n  - {id: a, question: 'q?'}\n", "needs 'question' and 'sql'"),
    "duplicate-ids": (b"questions:\n  - {id: a, question: 'q1?', sql: 'SELECT Name FROM wine'}\n"
                      b"  - {id: a, question: 'q2?', sql: 'SELECT Winery FROM wine'}\n", "used twice"),
    "sql-syntax-error": (b"questions:\n  - {id: a, question: 'q?', sql: 'SELEC Name FRM wine WHERE'}\n", "question 'a'"),
    "sql-unknown-table": (b"questions:\n  - {id: a, question: 'q?', sql: 'SELECT x FROM nowhere'}\n", "nowhere"),
    "sql-unknown-column": (b"questions:\n  - {id: a, question: 'q?', sql: 'SELECT Nope FROM wine'}\n", "no column 'nope'"),
    "sql-not-a-select": (b"questions:\n  - {id: a, question: 'q?', sql: 'DROP TABLE wine'}\n", "question 'a'"),
    "sql-two-statements": (b"questions:\n  - {id: a, question: 'q?', sql: 'SELECT Name FROM wine; DELETE FROM wine'}\n",
                           "question 'a'"),
    "sql-unterminated-string": (b"questions:\n  - {id: a, question: 'q?', sql: \"SELECT Name FROM wine WHERE Name = 'x\"}\n",
                                "question 'a'"),
    "special-token-question": (b"questions:\n  - {id: a, question: 'What is the highest score <|endoftext|> of any "
                               b"wine?', sql: 'SELECT MAX(Score) FROM wine'}\n", None),
}


@pytest.mark.parametrize("case", sorted(QUERY_FILES))
def test_bad_query_sets(case, wine_src, reference, tmp_path):
    content, expect = QUERY_FILES[case]
    q = tmp_path / f"{case}.yaml"
    q.write_bytes(content)
    out = tmp_path / "b"
    r = _build(wine_src, out, "--queries", str(q))
    if expect is None:  # accepted: the special-token text is just text
        assert r.exit_code == 0, r.output
        assert any("<|endoftext|>" in x["question"] for x in _instances(out))
        return
    assert r.exit_code == 2, r.output
    assert expect in r.output, r.output
    assert not (out / "manifest.json").exists()
    # the same build with the good query set still works (nothing else broken)


def _assets_copy(tmp_path: Path) -> Path:
    a = tmp_path / "assets"
    shutil.copytree(REPO / "assets", a)
    return a


TEMPLATE_FILES = {
    "latin1-encoded": ("grapes:\n" + "".join(f"  - 'Le c\xe9page {{Grape}} est {{Color}} {i}.'\n" for i in range(5)))
    .encode("latin-1"),
    "broken-yaml": b"grapes: [ '{Grape} is {Color}.',\n  wine: :",
    "not-a-mapping": b"- '{Grape} is {Color}.'\n",
    "unknown-column": b"grapes:\n" + b"".join(b"  - '{Grape} is {Colour} %d.'\n" % i for i in range(5)),
    "unbalanced-brace": b"grapes:\n" + b"".join(b"  - '{Grape is {Color} %d.'\n" % i for i in range(5)),
    "too-few-templates": b"grapes:\n  - '{Grape} is {Color}.'\n",
    "unknown-table": b"vineyards:\n" + b"".join(b"  - '{Grape} is {Color} %d.'\n" % i for i in range(5)),
    "attribute-field": b"grapes:\n" + b"".join(b"  - '{Grape.__class__} is {Color} %d.'\n" % i for i in range(5)),
}


@pytest.mark.parametrize("case", sorted(TEMPLATE_FILES))
def test_bad_template_files(case, wine_src, tmp_path, monkeypatch):
    assets = _assets_copy(tmp_path)
    tpl = assets / "templates" / "wine_1.yaml"
    if case in ("unknown-column", "unbalanced-brace", "too-few-templates", "attribute-field"):
        # replace only the grapes templates; the other tables keep theirs
        data = yaml.safe_load(tpl.read_text(encoding="utf-8"))
        bad = yaml.safe_load(TEMPLATE_FILES[case].decode())
        data["grapes"] = bad["grapes"]
        tpl.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    else:
        tpl.write_bytes(TEMPLATE_FILES[case])
    monkeypatch.setenv("CTXBENCH_ASSETS", str(assets))
    r = _build(wine_src, tmp_path / "b")
    assert r.exit_code == 2, r.output
    assert "wine_1.yaml" in r.output or "template" in r.output, r.output
    assert not (tmp_path / "b" / "manifest.json").exists()


# ================================================================================================ lengths

@pytest.mark.parametrize("args,expect", [
    (["--lengths", "11m"], "outside 64..10485760"),
    (["--lengths", "10"], "outside 64..10485760"),
    (["--lengths", "-4096"], "outside"),
    (["--lengths", "4k,abc"], "comma-separated integers"),
    (["--lengths", "512", "--setting", "amount", "--amount-tokens", "4096"], "smaller than the relevant"),
    (["--lengths", "512", "--density", "1.5"], "--density"),
    (["--lengths", "512", "--tokenizer", "gpt-17-tokenizer"], "unknown tokenizer"),
])
def test_lengths_and_options_beyond_limits(args, expect, wine_src, tmp_path):
    r = cli("build", "holobench", "--db", str(wine_src), "--out", str(tmp_path / "b"), *args)
    assert r.exit_code == 2 and expect in r.output, r.output


# ================================================================================================ model replies

def _toy_build(d: Path, contexts: list[str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"instance_id": f"toy-{i:02d}", "benchmark": "holobench", "source_id": "toy", "question_id": f"q{i}",
             "question": f"What is the code of item {i}?", "sql": None, "gold": json.dumps([[1000 + i]]),
             "context": c, "tokenizer": "cl100k_base", "target_tokens": 1024, "context_tokens": 10,
             "setting": "amount", "context_format": "full_text", "position": "end", "query_types": "[]",
             "difficulty": "easy", "evidence_spans": "[]", "build_hash": "toy"} for i, c in enumerate(contexts)]
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "toy", "track": "holobench"}), encoding="utf-8")
    return d


REPLIES = {  # instance index → the model's reply
    0: "",                                            # empty
    1: "The code is 1001. " * 150_000,                # enormous (about 2.7 MB)
    2: "Answer: 1002 \ud800 and \udfff",              # lone surrogates (valid JSON escapes, not UTF-8)
    3: "Answer: <|endoftext|> 1003 <|im_end|>",       # special-token strings in an answer
    4: "Answer:\x00\x01\x1b[0m 1004",                 # control characters
    5: "Answer: 1005",                                # a plain good answer
    6: "  \n\t  ",                                     # whitespace only
    7: "Réponse : 一千零七 (1007) ✓ 🍷",               # non-ASCII and astral characters
}


def _item(body: dict) -> int:
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return int(re.search(r"Question: What is the code of item (\d+)\?", user).group(1))


def test_bad_model_replies_are_stored_and_scored(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.run.score import score_build

    b = _toy_build(tmp_path / "b", [f"The code of item {i} is {1000 + i}." for i in range(len(REPLIES))])
    with FakeOpenAIServer(answer_fn=lambda body: REPLIES[_item(body)]) as srv:
        s = evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=2))
        # a whitespace-only reply with tokens generated is no answer (issue 30: empty_reply, asked once more, never
        # scored); every other odd reply is the model's answer
        assert srv.count == len(REPLIES) + 1
        assert (s.errors, s.empty_generated, s.unfinished, s.new_rows) == (0, 1, 0, len(REPLIES))
        resp = {r["instance_id"]: r for r in pq.read_table(b / "responses.parquet").to_pylist()}
        assert len(resp) == len(REPLIES)
        assert {i: r["status"] for i, r in resp.items() if r["status"] != "ok"} == {"toy-06": "empty_reply"}
        assert len(resp["toy-01"]["response"]) == len(REPLIES[1])
        assert resp["toy-02"]["response"] == "Answer: 1002 \ufffd and \ufffd"
        assert resp["toy-03"]["response"] == REPLIES[3] and resp["toy-04"]["response"] == REPLIES[4]
        assert resp["toy-07"]["response"] == REPLIES[7]
        score_build(b)
        sc = {r["instance_id"]: r for r in pq.read_table(b / "scores.parquet").to_pylist()}
        assert sc["toy-00"]["score"] == 0.0 and "null_answer" in json.loads(sc["toy-00"]["tags"])
        assert "toy-06" not in sc  # empty_reply: never scored
        for i in (2, 3, 4, 5, 7):
            assert sc[f"toy-{i:02d}"]["score"] == 1.0, (i, resp[f"toy-{i:02d}"]["response"])
        # a rerun sends only the empty_reply again: every answer, however odd, was cached and stored (the same
        # server; one at another base URL is another endpoint, with answers of its own)
        srv.answer_fn = lambda body: "Answer: 0"
        srv.reset_counts()
        s2 = evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url))
        assert srv.count == 1 and s2.already_stored == len(REPLIES) - 1 and s2.replaced_errors == 1


def test_odd_content_shapes_become_text():
    from ctxbench.models.gateway import CallResult, clean_text

    assert clean_text([{"type": "text", "text": "Answer: "}, {"type": "text", "text": "7"}]) == "Answer: 7"
    assert clean_text({"answer": 7}) == '{"answer": 7}' and clean_text(7) == "7" and clean_text(None) is None
    r = CallResult("ok", response="a\ud83db", reasoning=["x", {"text": "y"}])
    assert (r.response, r.reasoning) == ("a\ufffdb", "xy")
    to_table("responses", [{"request_key": "k", "instance_id": "i", "model": "m", "mode": "lc", "sample": 0,
                            "prompt_variant": "cot", "status": "ok", "cached": False, "retries": 0, **r.payload()}])


def test_prompts_beyond_the_window_are_over_length_not_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.run.score import score_build
    from ctxbench.tokenizers import get_tokenizer

    long_ctx = "The code of item 1 is 1001. " + "Filler sentence about nothing. " * 2000  # ~10k tokens
    b = _toy_build(tmp_path / "b", ["The code of item 0 is 1000.", long_ctx, "The code of item 2 is 1002."])
    with FakeOpenAIServer(answer_fn=lambda body: f"Answer: {1000 + _item(body)}",
                          rule=lambda body: "ctx400" if _item(body) == 2 else None) as srv:
        # a registry model with an 8,192-token window: the long prompt is never sent
        s = evaluate_build(b, EvalConfig(model="smollm2-135m-instruct", base_url=srv.base_url),
                           count_tokens=get_tokenizer("cl100k_base").count)
        asked = sorted(_item(x) for x in srv.requests)
    assert asked == [0, 2]  # item 1 pre-checked as over length; item 2 refused by the provider (400)
    assert s.over_length == 2 and s.errors == 0
    resp = {r["instance_id"]: r for r in pq.read_table(b / "responses.parquet").to_pylist()}
    assert resp["toy-01"]["status"] == "over_length" and "exceeds the window of 8192" in resp["toy-01"]["error"]
    assert resp["toy-02"]["status"] == "over_length"
    score_build(b)
    scored = {r["instance_id"] for r in pq.read_table(b / "scores.parquet").to_pylist()}
    assert scored == {"toy-00"}  # over-length calls are never scored as wrong answers


JUDGE_REPLIES = {  # instance → the judge's reply
    0: "I think the answer is correct.",                  # no JSON at all
    1: '{"verdicts": ["exact", "none"]}',                 # wrong number of verdicts
    2: '{"verdicts": ["perfect"]}',                       # unknown verdict
    3: "",                                                # empty
    4: '{"verdicts": ["exact"',                           # truncated JSON
    5: "{" + '"x": 1, ' * 200_000 + '"verdicts": []}',    # enormous and wrong
    6: '["exact"]',                                       # JSON, wrong shape
    7: 'Sure! ```json\n{"verdicts": ["exact"]}\n```',     # parseable inside prose
}


def test_bad_judge_replies_are_counted_never_scored(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.run.score import score_build

    b = _toy_build(tmp_path / "b", [f"The code of item {i} is {1000 + i}." for i in range(len(JUDGE_REPLIES))])

    def answer(body: dict) -> str:
        if body.get("response_format"):  # the judge; asked again with the repair prompt, it replies the same
            return JUDGE_REPLIES[_item({"messages": body["messages"][:2]})]
        return f"Answer: {1000 + _item(body)}"

    with FakeOpenAIServer(answer_fn=answer) as srv:
        evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url))
        s = score_build(b, judge="openai/judge", judge_base_url=srv.base_url)
    assert (s.judged, s.unparseable_verdicts) == (8, 7)
    rows = pq.read_table(b / "scores.parquet").to_pylist()
    judged = {r["instance_id"]: r["score"] for r in rows if r["matcher"] == "judge:openai/judge"}
    assert judged == {"toy-07": 1.0}
    assert {r["instance_id"] for r in rows if r["matcher"] == "row_match"} == {f"toy-{i:02d}" for i in range(8)}
