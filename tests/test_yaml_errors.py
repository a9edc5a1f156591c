"""Errors that point at the mistake (issue 32 item 7): a YAML syntax error names its file, line and column, for
every YAML a user gives (query sets, templates, needle sets, settings, YAML option values), through the one reader
``ctxbench.core.config.read_yaml``; an unknown top-level key is named with the key it probably meant."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.config import check_keys, read_yaml, yaml_error_message
from ctxbench.core.errors import InputError

# line 3 holds `question: a: b`; the second ':' is its 16th character (4 spaces, 'question: a' = 11, ':' at 16)
BROKEN = "db_id: x\nquestions:\n    question: a: b\n"


def test_read_yaml_names_file_line_and_column(tmp_path):
    p = tmp_path / "q.yaml"
    p.write_text(BROKEN, encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_yaml(p, "query set")
    msg = str(e.value)
    assert msg.startswith(f"{p}, line 3, column 16: not a readable YAML query set: mapping values are not allowed")
    assert "the line reads 'question: a: b'" in msg and "\n" not in msg


def test_unterminated_quote_names_where_it_began(tmp_path):
    p = tmp_path / "q.yaml"
    p.write_text('questions:\n  - id: a\n    question: "How many?\n    sql: SELECT 1\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"q\.yaml, line 5, column 1: .*quoted scalar at line 3"):
        read_yaml(p)


def test_unknown_key_names_the_key_meant():
    with pytest.raises(InputError, match=r"f\.yaml: unknown top-level key 'question' \(did you mean 'questions'\?\)"):
        check_keys({"question": []}, ("db_id", "questions", "templates"), "f.yaml")
    with pytest.raises(InputError, match=r"unknown top-level key 'zzz' \(the top-level keys are: db_id, questions"):
        check_keys({"zzz": 1}, ("db_id", "questions"), "f.yaml")
    check_keys({"questions": []}, ("questions",), "f.yaml")  # known: nothing raised


def test_yaml_option_value_error_has_its_position():
    try:
        yaml.safe_load("a: [1, 2")
    except yaml.YAMLError as e:
        assert yaml_error_message(e, "--x", "a: [1, 2", "value").startswith("--x, line 1, column 9: not a readable YAML value")


@pytest.fixture
def wine(spider_db) -> str:
    return str(spider_db("wine_1"))


def _build(wine, q, tmp_path):
    return CliRunner().invoke(app, ["build", "holobench", "--db", wine, "--queries", str(q), "--lengths", "2048",
                                    "--out", str(tmp_path / "o")])


def test_build_names_the_line_of_a_broken_query_set(tmp_path, wine):
    q = tmp_path / "mine.yaml"
    q.write_text("questions:\n  - id: a\n    question: What wine: the best?\n    sql: SELECT Name FROM wine\n",
                 encoding="utf-8")
    r = _build(wine, q, tmp_path)
    assert r.exit_code == 2, r.output
    assert "mine.yaml, line 3, column 24: not a readable YAML query set" in r.output, r.output
    assert "Traceback" not in r.output and "ScannerError" not in r.output


def test_build_names_a_misspelt_key_not_missing_templates(tmp_path, wine):
    """`question:` for `questions:` was reported as "no verbalization templates" (the database has none of its
    own under this name): now the key is named with the one meant."""
    q = tmp_path / "mine.yaml"
    q.write_text("question:\n  - {id: a, question: 'Which wine?', sql: 'SELECT Name FROM wine'}\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["build", "holobench", "--db", wine, "--queries", str(q), "--lengths", "2048",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    assert "unknown top-level key 'question' (did you mean 'questions'?)" in r.output, r.output
    assert "verbalization templates" not in r.output


def test_needle_set_syntax_error_and_unknown_key(tmp_path):
    from ctxbench.tracks.needles.questions import load_needle_set

    p = tmp_path / "n.yaml"
    p.write_text("needles:\n  - id: a\n    statement: x: {value}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"n\.yaml, line 3, column 17: not a readable YAML needle set"):
        load_needle_set(str(p))
    p.write_text("needle:\n  - id: a\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"unknown top-level key 'needle' \(did you mean 'needles'\?\)"):
        load_needle_set(str(p))


def test_templates_file_syntax_error(tmp_path):
    from ctxbench.verbalize.templates import load_templates

    p = tmp_path / "t.yaml"
    p.write_text("wine:\n  - 'The wine {Name}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.yaml, line 3, column 1: not a readable YAML templates file"):
        load_templates("wine_1", p)
