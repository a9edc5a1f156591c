"""Tables the CLI prints (the results table of `ctxbench run`, calibrate, kappa) never cut a value: not in a log
file or pipe (rich's default there is 80 columns), not in a narrow terminal."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from ctxbench.cli import common, results

LONG = "anthropic/claude-sonnet-4-20250514"


def _rows():
    return [{"model": LONG, "mode": "lc", "matcher": "row_match", "context_length": 2048, "n": 8, "score": 0.021,
             "ci_low": 0.0, "ci_high": 0.092},
            {"model": LONG, "mode": "lc", "matcher": "row_match", "context_length": 4096, "n": 8, "score": 0.031,
             "ci_low": 0.0, "ci_high": 0.107}]


def test_results_table_in_a_log_keeps_every_value(monkeypatch, capsys, tmp_path):

    # where print_results looks it up
    monkeypatch.setattr(results, "results_table", lambda build, primary_only=False, only=None: _rows())
    results.print_results(tmp_path)
    out = capsys.readouterr().out
    assert "…" not in out
    assert LONG in out
    assert "0.000–0.092" in out and "0.000–0.107" in out
    assert "0.026" in out  # Avg of 0.021 and 0.031
    body = [ln for ln in out.splitlines() if LONG in ln]
    assert len(body) == 3  # both lengths and the Avg row, each on one line


def test_narrow_terminal_wraps_instead_of_cutting(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(common, "out_console", Console(file=buf, force_terminal=True, width=40, color_system=None))
    t = Table(title="t")
    for c in ("model", "score"):
        t.add_column(c)
    t.add_row(LONG, "0.500")
    common.print_table(t)
    out = buf.getvalue()
    assert "…" not in out
    joined = "".join(ln.split("│")[1].strip() for ln in out.splitlines() if ln.count("│") >= 3)
    assert LONG in joined
