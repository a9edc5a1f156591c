"""``--help`` readable at any width and in a pipe (issue 32 item 5): for EVERY command of the CLI (the click tree
walked, generated ``build``/``import`` track commands included) at 40, 60, 80 and 120 columns and with no width
given (a pipe: rich's 80), every option name is printed whole (never ``--prompt-varia…``), no line is wider than
the terminal, and a long option list is grouped into titled panels."""

from __future__ import annotations

import re

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from ctxbench.cli import app


def _commands():
    root = get_command(app)
    out = []

    def walk(cmd, path, ctx):
        if hasattr(cmd, "list_commands"):
            out.append((path, cmd))  # a group's help too
            for n in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, n)
                walk(sub, [*path, n], typer.Context(sub, parent=ctx, info_name=n))
        else:
            out.append((path, cmd))

    walk(root, [], typer.Context(root, info_name="ctxbench"))
    return out


COMMANDS = _commands()


def _help(path: list[str], width: int | None) -> str:
    env = {"COLUMNS": str(width) if width else None, "TERMINAL_WIDTH": None, "NO_COLOR": "1"}
    r = CliRunner().invoke(app, [*path, "--help"], env=env)
    assert r.exit_code == 0, (path, r.output)
    return r.output


@pytest.mark.parametrize("width", [40, 60, 80, 120, None])
def test_no_option_name_is_cut_at_any_width(width):
    assert len(COMMANDS) > 20  # the walk reached the generated track commands too
    for path, cmd in COMMANDS:
        text = _help(path, width)
        assert "…" not in text, (path, width, text)
        w = width or 80
        wide = [line for line in text.splitlines() if len(line.rstrip()) > w]
        assert not wide, (path, width, wide)
        for p in cmd.params:
            for name in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]:
                if not name.startswith("-"):
                    continue
                assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), (path, width, name, text)
        for sub in (cmd.list_commands(None) if hasattr(cmd, "list_commands") and path else []):
            assert re.search(rf"(?<![\w-]){re.escape(sub)}(?![\w-])", text), (path, width, sub)


def test_evaluate_help_is_grouped_and_short_at_80_columns():
    """Typer's own table gave 186 lines at 80 columns (measured before this change); the names column as wide as
    the longest name leaves the help about 50 characters, and the 32 options sit in titled panels."""
    text = _help(["evaluate"], 80)
    for title in ("What to evaluate", "Model to call", "Retrieval (RAG)", "Budgets and cost", "Statistics"):
        assert f"─ {title} ─" in text, title
    assert "--prompt-variant" in text and "--reasoning-effort" in text
    assert len(text.splitlines()) <= 110, len(text.splitlines())
    # the panel an option is in: --max-cost under budgets, --target-ci under statistics
    budgets = text.split("─ Budgets and cost ─")[1].split("╰")[0]
    assert "--max-cost" in budgets and "--price" in budgets and "--target-ci" not in budgets


def test_a_short_option_list_stays_in_one_panel():
    """`verify` has 3 options with --help: no panels beyond typer's "Options"."""
    text = _help(["verify"], 80)
    assert "─ Options ─" in text and "─ What to evaluate ─" not in text and "--source-data" in text


def test_a_name_wider_than_the_box_is_printed_whole_without_a_box():
    """At 20 columns not even a box around `--exclude-closed-book` (21 characters) fits: the panel is printed
    without its box, the names whole."""
    text = _help(["evaluate"], 20)
    assert "--no-exclude-closed-book" in text and "--question-api-key-env" not in text
    assert "…" not in text
