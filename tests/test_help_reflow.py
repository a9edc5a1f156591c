"""``--help`` paragraphs reflow to the terminal's width: no line is broken where the source string happened to have
a line break (a docstring written over several lines). For EVERY command of the CLI (the click tree walked, the
generated track commands and the group listings included) at 80 and 120 columns, wherever a line of a paragraph
(a command's description, one option's help, one command's summary in a group's list) is followed by a line of
the same paragraph, the next line's first word did not fit on it, which is what greedy wrapping to the width
gives and what a hard break in the source does not. Intended breaks stay: a blank line between paragraphs and a
click ``\\b`` block keep their lines (checked on a small app of its own)."""

from __future__ import annotations

import re

import pytest
import typer
from rich.cells import cell_len
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.cli.help_format import reflow
from test_help_width import COMMANDS


def _help(the_app, path: list[str], width: int) -> str:
    r = CliRunner().invoke(the_app, [*path, "--help"], env={"COLUMNS": str(width), "TERMINAL_WIDTH": None,
                                                           "NO_COLOR": "1"})
    assert r.exit_code == 0, (path, r.output)
    return r.output


def _first_word(s: str) -> str:
    return s.split(" ", 1)[0]


def ragged_breaks(text: str, width: int, secondary: set[str]) -> tuple[list[tuple[str, str]], int]:
    """The pairs (line, next line of the same paragraph) of a rendered help ``text`` at ``width`` columns where
    the next line's first word would have fitted on the line (a break not made by wrapping), and how many pairs
    were checked. Paragraphs: the description's lines between blank lines (outside the panels, each line
    indented by one space of a width ``width - 2``), and in each panel (a table of names and help) the help column's
    lines of one row: a line whose name cell is empty or holds a secondary name (``--no-x``, listed in
    ``secondary``) continues the row above."""
    bad, checked = [], 0
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("╭"):  # a panel: up to its bottom border
            j = i + 1
            while not lines[j].startswith("╰"):
                j += 1
            rows = [ln[1:ln.rindex("│")] for ln in lines[i + 1:j]]  # inside the borders
            i = j + 1
            x = help_column(rows)
            if x is None:  # no name with its help beside it (the help under each name, at narrow widths)
                continue
            avail = len(rows[0]) - 1 - x  # the help column's width (the panel's right padding excluded)
            for a, b in zip(rows, rows[1:]):
                name_b = b[:x].strip().lstrip("*").strip()
                seg_a, seg_b = a[x:].rstrip(), b[x:].rstrip()
                if not seg_a or not seg_b or (name_b and name_b not in secondary) or a[x - 1] != " ":
                    continue
                checked += 1
                if cell_len(seg_a) + 1 + cell_len(_first_word(seg_b)) <= avail:
                    bad.append((a.rstrip(), b.rstrip()))
            continue
        if line.startswith(" ") and line.strip() and not line.lstrip().startswith("Usage:") \
                and i + 1 < len(lines) and lines[i + 1].startswith(" ") and lines[i + 1].strip():
            a, b = line[1:].rstrip(), lines[i + 1][1:].rstrip()
            checked += 1
            if cell_len(a) + 1 + cell_len(_first_word(b.lstrip())) <= width - 2:
                bad.append((a, b))
        i += 1
    return bad, checked


def help_column(rows: list[str]) -> int | None:
    """Where the help column of a panel's ``rows`` (the text inside its borders) begins: after the first name
    cell (a ``*`` mark for a required option, then the names, which end at two spaces) whose help is beside it;
    None when no row has both."""
    for r in rows:
        r = r[:3].replace("*", " ") + r[3:]
        s = len(r) - len(r.lstrip())
        e = r.find("  ", s)
        if s < len(r) and e > 0 and r[e:].strip():
            return e + len(r[e:]) - len(r[e:].lstrip())
    return None


def _secondary(cmd) -> set[str]:
    return {", ".join(p.secondary_opts) for p in cmd.params if getattr(p, "secondary_opts", None)}


@pytest.mark.parametrize("width", [80, 120])
def test_every_help_paragraph_is_reflowed(width):
    """No help of the CLI has a ``\\b`` block, so every break within a paragraph is a wrap. Before the fix the
    group listings failed (``ctxbench --help``: backfill's summary ran "rebuilds" / "nothing; answers..."); at
    least 60 line pairs are checked (309 at 80 columns, 105 at 120 when written)."""
    total, bad_all = 0, []
    for path, cmd in COMMANDS:
        helps = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        assert not any("\b" in h for h in helps), path  # a \b block would be an intended break: check it apart
        text = _help(app, path, width)
        bad, checked = ragged_breaks(text, width, _secondary(cmd))
        total += checked
        bad_all += [(" ".join(path) or "ctxbench", *pair) for pair in bad]
    assert not bad_all, "\n".join(f"{p}:\n  {a}\n  {b}" for p, a, b in bad_all)
    assert total >= 60, total


def test_the_check_finds_a_hard_break():
    """The check itself, on a panel whose help column is 30 characters wide: "default." did not fit after "...the
    embedded" (28 + 1 + 8 > 30: a wrap), "option" would have fitted after "Takes every" (a hard break); in a
    description likewise."""
    def row(name: str, text: str) -> str:
        return "│" + (" " + name.ljust(6) + text).ljust(37) + " │"

    panel = "\n".join(["╭─ Commands " + "─" * 27 + "╮", row("run", "The main job on the embedded"),
                       row("", "default. Takes every"), row("", "option of the track."), "╰" + "─" * 38 + "╯"])
    bad, checked = ragged_breaks(panel, 40, set())
    assert checked == 2 and len(bad) == 1, (bad, checked)
    assert bad[0][0].endswith("Takes every") and bad[0][1].endswith("option of the track.")
    desc = " Usage: x\n\n Evaluate a model on a\n build; appends.\n"
    assert ragged_breaks(desc, 80, set()) == ([("Evaluate a model on a", "build; appends.")], 1)
    assert ragged_breaks(" Evaluate a model on a build;\n appends.\n", 30, set()) == ([], 1)


def test_reflow_keeps_paragraphs_and_b_blocks():
    """Single line breaks of a paragraph become spaces; a blank line between paragraphs and the lines of a
    ``\\b`` block (click's marker for text not to rewrap) stay."""
    src = """First paragraph written
    over two lines.

    Second one,
    also two.

    \b
    ctxbench run --out runs/a
      --lengths 2048
    """
    assert reflow(src) == ("First paragraph written over two lines.\n\nSecond one, also two.\n\n"
                           "ctxbench run --out runs/a\n  --lengths 2048")


def test_a_commands_paragraphs_and_example_block_render_as_written():
    """A command of a small typer app (the help format is installed for every typer app of the process): its
    description and its summary in the group's list are reflowed, the second paragraph keeps its blank line
    and the example block its lines."""
    demo = typer.Typer(rich_markup_mode="rich")

    @demo.command("go")
    def go(n: int = typer.Option(1, help="how many\ntimes")) -> None:
        """Do the thing described here in a sentence that is
        broken in the source.

        A second paragraph, written over
        two lines.

        \b
        ctxbench go --n 2
        ctxbench go --n 3
        """

    @demo.command("stop")
    def stop() -> None:
        """Stop it."""

    page = _help(demo, ["go"], 120)
    assert "Do the thing described here in a sentence that is broken in the source." in page
    assert re.search(r"source\.\s*\n\s*\n A second paragraph, written over two lines\.\s*\n\s*\n"
                     r" ctxbench go --n 2\s*\n ctxbench go --n 3", page), page
    assert "how many times" in page
    listing = _help(demo, [], 120)
    assert "Do the thing described here in a sentence that is broken in the source." in listing, listing
    assert "second paragraph" not in listing
