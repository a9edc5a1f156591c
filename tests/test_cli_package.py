"""The CLI as a package (issue 33): one module per command group, no file over 400 lines, imports at module top
(the engines and optional clients excepted, each saying why), and the logic the commands used to hold now in
library functions, tested here directly."""

from __future__ import annotations

import ast
import os
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxbench.analysis.agreement import append_label, labelled_keys, read_labels
from ctxbench.core.errors import DataWarning, InputError, one_line_data_warnings
from ctxbench.core.track import PLUGIN_ENV, load_plugins
from ctxbench.run.calibration import check_calibration_out
from ctxbench.run.outcome import build_counts, engine_summary, failed_calls, why_no_instances

CLI = Path(__file__).resolve().parents[1] / "ctxbench" / "cli"


def test_no_cli_module_over_400_lines_and_the_package_init_is_small():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in CLI.glob("*.py")}
    assert max(sizes.values()) <= 400, sizes
    assert sizes["__init__.py"] <= 20
    for name in ("main.py", "common.py", "progress.py", "logfilter.py", "run.py", "evaluate.py"):
        assert name in sizes


def test_cli_imports_sit_at_module_top_unless_they_say_why():
    for p in CLI.glob("*.py"):
        src = p.read_text(encoding="utf-8")
        lines = src.splitlines()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        assert "# lazy:" in lines[inner.lineno - 1], f"{p.name}:{inner.lineno}: {lines[inner.lineno - 1]}"


def test_app_is_the_entry_point():
    from ctxbench.cli import app
    from ctxbench.cli.main import app as main_app

    assert app is main_app


def test_engine_summary_reads_both_engines_shapes():
    # Prefect's nightly flow: evaluations[model]["workers"][0]; luigi: evaluations[model]; keys that are no field
    # of EvalSummary (e.g. "model") are left out
    prefect = {"evaluations": {"m": {"workers": [{"selected": 3, "errors": 1, "model": "m"}]}}}
    luigi = {"evaluations": {"m": {"selected": 5, "cut_off": 2}}}
    s = engine_summary(prefect, "m")
    assert (s.selected, s.errors) == (3, 1)
    s = engine_summary(luigi, "m")
    assert (s.selected, s.cut_off) == (5, 2)
    assert engine_summary(luigi, "other") is None
    assert engine_summary({"evaluations": {"m": {"done": True}}}, "m") is None  # a luigi task already complete
    assert engine_summary(None, "m") is None


def test_failed_calls_names_only_this_models_failed_rows(tmp_path):
    rows = [{"instance_id": "a", "model": "m", "status": "ok", "error": None, "request_key": "1"},
            {"instance_id": "b", "model": "m", "status": "error", "error": "HTTP 500", "request_key": "2"},
            {"instance_id": "c", "model": "m", "status": "empty_reply", "error": None, "request_key": "3"},
            {"instance_id": "d", "model": "x", "status": "error", "error": "HTTP 500", "request_key": "4"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "responses.parquet")
    # b failed with its error text, c with no text (named by its status); a answered, d is another model's
    assert failed_calls(tmp_path, "m") == ["b: HTTP 500", "c: empty_reply"]


def test_why_no_instances_counts_reason_classes(tmp_path):
    pq.write_table(pa.table({"id": ["q1"]}).slice(0, 0), tmp_path / "instances.parquet")
    reasons = ["gold empty: q1", "gold empty: q2", "sql error: near x", None]
    pq.write_table(pa.table({"reason": reasons}), tmp_path / "quarantine.parquet")
    assert build_counts(tmp_path) == (0, 4)
    msg = why_no_instances(tmp_path, 4)
    # classes: the text before the first colon, most frequent first: gold empty 2, sql error 1, no reason 1
    assert "holds 4 row(s): gold empty (2); sql error (1); no reason (1)" in msg
    assert "quarantined nothing" in why_no_instances(tmp_path, 0)


def test_labels_append_and_resume(tmp_path):
    out = tmp_path / "labels.jsonl"
    assert labelled_keys(out) == set()
    item = {"instance_id": "i1", "request_key": "k1", "model": "m", "response": "42"}
    append_label(out, item, "partial")
    append_label(out, {**item, "request_key": "k2"}, "correct")
    assert labelled_keys(out) == {"k1", "k2"}
    assert [x["value"] for x in read_labels(out)] == [0.5, 1.0]  # VERDICTS: partial 0.5, correct 1.0
    with pytest.raises(InputError):
        append_label(out, item, "maybe")


def test_load_plugins_puts_the_variable_back_on_failure(tmp_path, monkeypatch):
    monkeypatch.delenv(PLUGIN_ENV, raising=False)
    with pytest.raises((InputError, ImportError)):
        load_plugins([str(tmp_path / "missing.py")])
    assert PLUGIN_ENV not in os.environ
    monkeypatch.setenv(PLUGIN_ENV, "")
    with pytest.raises((InputError, ImportError)):
        load_plugins([str(tmp_path / "missing.py")])
    assert os.environ[PLUGIN_ENV] == ""


def test_data_warnings_print_as_one_line(monkeypatch):
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # put back after the test
    one_line_data_warnings()
    one_line_data_warnings()  # idempotent: not wrapped twice
    assert warnings.formatwarning(DataWarning("3 rows dropped"), DataWarning, "/x.py", 1) == "warning: 3 rows dropped\n"
    assert "UserWarning" in warnings.formatwarning(UserWarning("u"), UserWarning, "/x.py", 1)


def test_calibration_out_refuses_a_file_in_a_build(tmp_path):
    (tmp_path / "manifest.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="immutable"):
        check_calibration_out(tmp_path / "calibration.json")
    other = tmp_path / "sub"
    other.mkdir()
    (other / "notes.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(InputError, match="not an earlier calibration"):
        check_calibration_out(other / "notes.json")
    check_calibration_out(other / "new.json")  # a new file is fine
