"""Bad input through the CLI: a clear error naming the input (exit 2), never a traceback; nothing lost."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxbench.cli import app

runner = CliRunner()


@pytest.fixture
def wine(spider_db) -> str:
    return str(spider_db("wine_1"))


def run(*args):
    r = runner.invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r


def test_unterminated_string_in_sql_info():
    r = run("sql-info", "SELECT a FROM t WHERE b = 'x")
    assert r.exit_code == 2 and "does not parse" in r.output


def test_queries_file_that_is_not_yaml(tmp_path, wine):
    q = tmp_path / "q.yaml"
    q.write_text("questions: [ {id: a, sql: 'x'\n  - :: broken", encoding="utf-8")
    r = run("build", "holobench", "--db", wine, "--queries", str(q), "--lengths", "2048", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "q.yaml" in r.output and "YAML" in r.output


def test_question_reading_no_table(tmp_path, wine):
    q = tmp_path / "q.yaml"
    q.write_text("questions:\n  - {id: a, question: 'One?', sql: 'SELECT 1'}\n", encoding="utf-8")
    r = run("build", "holobench", "--db", wine, "--queries", str(q), "--lengths", "2048", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "reads no table" in r.output


def test_out_is_a_file(tmp_path, wine):
    f = tmp_path / "afile"
    f.write_text("x", encoding="utf-8")
    r = run("build", "holobench", "--db", wine, "--lengths", "2048", "--out", str(f))
    assert r.exit_code == 2 and "is a file" in r.output


def test_brackets_in_paths_are_printed_as_they_are(tmp_path, wine):
    out = tmp_path / "run[exp1]"
    r = run("build", "holobench", "--db", wine, "--lengths", "2048", "--out", str(out))
    assert r.exit_code == 0 and "run[exp1]" in r.output
    assert (out / "instances.parquet").exists()


def test_force_with_bad_new_input_keeps_the_old_build(tmp_path, wine):
    out = tmp_path / "b"
    assert run("build", "holobench", "--db", wine, "--lengths", "2048", "--out", str(out)).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    q = tmp_path / "bad.yaml"
    q.write_text("questions:\n  - {id: a, question: 'Broken?', sql: 'SELECT nope FROM wine'}\n", encoding="utf-8")
    r = run("build", "holobench", "--db", wine, "--lengths", "4096", "--queries", str(q), "--force", "--out", str(out))
    assert r.exit_code == 2 and "nope" in r.output
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before  # nothing removed or changed by the failed --force build


def test_corrupt_manifest_is_named(tmp_path, wine):
    out = tmp_path / "b"
    out.mkdir()
    (out / "manifest.json").write_text("{not json", encoding="utf-8")
    r = run("build", "holobench", "--db", wine, "--lengths", "2048", "--out", str(out))
    assert r.exit_code == 2 and "manifest" in r.output
    r = run("build", "holobench", "--db", wine, "--lengths", "2048", "--out", str(out), "--force")
    assert r.exit_code == 0
    assert json.loads((out / "manifest.json").read_text())["track"] == "holobench"


def test_evaluate_option_bounds(tmp_path):
    r = run("evaluate", "--build", str(tmp_path), "--model", "m", "--samples", "0")
    assert r.exit_code == 2 and "--samples" in r.output
    r = run("evaluate", "--build", str(tmp_path), "--model", "m", "--dry-run")
    assert r.exit_code == 2 and "not a build directory" in r.output


def test_a_run_root_given_as_a_build_names_its_newest_build(tmp_path):
    """`--build runs/default` (the run root `ctxbench run` prints its paths under): the error says it is a run root
    and gives ROOT/latest, not "run `ctxbench build` first"."""
    import os

    root = tmp_path / "runs"
    (root / "abc123").mkdir(parents=True)
    (root / "abc123" / "manifest.json").write_text("{}", encoding="utf-8")
    (root / "abc123" / "instances.parquet").write_bytes(b"")
    os.symlink("abc123", root / "latest")
    for cmd in (["evaluate", "--build", str(root), "--model", "m", "--dry-run"], ["score", "--build", str(root)]):
        r = run(*cmd)
        text = " ".join(r.output.split())
        assert r.exit_code == 2 and f"{root} is a run root, not a build directory: give one of its builds, e.g. " \
                                    f"{root / 'latest'} (the newest)" in text, r.output
