"""Shared pieces of the commands: the two consoles (messages on stderr, results on stdout), option checks, the
progress bar and the table printer. Light to import (typer, rich, ctxbench.core): the commands' options
(:mod:`ctxbench.cli.commands`) use it, and ``--help`` imports nothing heavier (issue 36); the one-line user error and
its exit status are in :mod:`ctxbench.cli.errors`."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxbench.cli.options import parse_ints
from ctxbench.core.errors import InputError
from ctxbench.core.progress import listening
from ctxbench.core.values import parse_efforts, parse_price

console = Console(stderr=True, soft_wrap=True)
out_console = Console(soft_wrap=True, markup=False)  # paths and messages may hold [brackets]


def print_table(t: Table) -> None:
    """Print a table to stdout without cutting any value: cells wrap (never an ellipsis) in a terminal narrower than
    the table, and where stdout is not a terminal (a log file, a pipe, a nightly job) the table is printed at its
    natural width instead of rich's default 80 columns, so model names and intervals stay whole and greppable."""
    for c in t.columns:
        c.overflow = "fold"
    if out_console.is_terminal:
        out_console.print(t)
        return
    natural = Measurement.get(out_console, out_console.options.update(width=10_000), t).maximum
    Console(file=out_console.file, soft_wrap=True, markup=False, width=max(natural, out_console.width)).print(t)


def check_positive_ints(value: str | None) -> str | None:
    """Option check: comma-separated token counts, each at least 1 (``4k`` = 4,096)."""
    if value is None:
        return value
    xs = parse_ints(value, "the value")
    if not xs:
        raise typer.BadParameter("needs at least one number of tokens, e.g. 2048,4096")
    bad = [x for x in xs if x < 1]
    if bad:
        raise typer.BadParameter(f"{bad[0]} is not a number of tokens (>= 1)")
    return value


def check_mode(value: str | None) -> str | None:
    """Option check: lc, rag, repl or several comma-separated (lc,rag,repl)."""
    if value is None:
        return value
    ms = [m.strip().lower() for m in value.split(",") if m.strip()]
    if not ms or any(m not in ("lc", "rag", "repl") for m in ms):
        raise typer.BadParameter(f"{value!r}: use lc, rag, repl or several comma-separated, e.g. lc,rag,repl")
    return value


def check_words(value: str | None) -> str | None:
    """Option check: a comma-separated list with at least one item."""
    if value is not None and not [x for x in value.split(",") if x.strip()]:
        raise typer.BadParameter("needs at least one comma-separated value")
    return value


@contextlib.contextmanager
def say_retries(con):
    """Print every timeout and retry of a model call (:func:`ctxbench.core.progress.retrying`) above the progress bar
    while the block runs."""
    def say(ev) -> None:
        if ev.stage in ("retry", "target"):  # target: a --target-ci the build cannot reach, said before any call
            con.print(f"{ev.stage} {ev.detail}" if ev.stage == "retry" else ev.detail, markup=False,
                      highlight=False)

    with listening(say):
        yield


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


def check_price(value: str | None) -> str | None:
    """``--price``: two non-negative numbers IN,OUT (a usage error naming the option otherwise)."""
    try:
        parse_price(value)
    except InputError as e:
        raise typer.BadParameter(str(e).split(": ", 1)[1]) from None
    return value


def check_efforts(value: Optional[str]) -> Optional[str]:
    """--reasoning-effort: comma-separated efforts of ctxbench.core.values.EFFORTS."""
    try:
        parse_efforts(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def say_failed(n: int, failed: list[str], where: Path, prefix: str = "") -> int:
    """Say that ``n`` calls failed and are stored as failed rows (``failed``: ``instance_id: reason``, the first
    three named) and that the same command asks them again; returns the exit status 1 (docs/reference/
    exit-codes.md: a run that leaves failed calls, status error or empty_reply, is incomplete, whatever its answers)."""
    first = "; ".join(f[:160] for f in failed[:3]) + (f"; ... ({len(failed) - 3} more)" if len(failed) > 3 else "")
    console.print(f"{prefix}error: {n} call(s) failed and are stored as failed rows in {where}"
                  + (f" ({first})" if first else "") + "; the same command asks them again", markup=False)
    return 1


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the option ``name`` (its parameter name) was given, on the command line or through its environment
    variable, rather than left at its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def say_concurrency(model: str, base_url: str | None, concurrency: int, asked: bool) -> None:
    """Say once, on stderr, that a ``--concurrency`` given (``asked``) above 1 changes nothing for the embedded
    model (its server has one slot: :func:`ctxbench.models.backends.concurrency_note`); nothing for the option's
    default, which the help already explains, nor for a model whose calls do run side by side."""
    if not asked:
        return
    from ctxbench.models.backends import concurrency_note  # lazy: the backends' HTTP libraries, kept out of --help

    if note := concurrency_note(model, base_url, concurrency):
        console.print(note, markup=False, highlight=False)
