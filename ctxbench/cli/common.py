"""Shared pieces of the commands: the two consoles (messages on stderr, results on stdout), the one-line user error and
its exit status, option checks, the progress bar and the table printer."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Optional

import typer
import yaml
from pydantic import ValidationError as PydanticValidationError
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlglot.errors import SqlglotError

from ctxbench.cli.options import parse_ints
from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.core.outdir import DirectoryBusy
from ctxbench.core.progress import listening
from ctxbench.core.redact import redact
from ctxbench.core.storage import disk_full, disk_full_message
from ctxbench.models.effort import parse_efforts
from ctxbench.models.providers import is_embedded
from ctxbench.models.registry import unknown_model_warning
from ctxbench.run.spend import parse_price

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


def fail(e: Exception, flags: dict[str, str] | None = None) -> None:
    """Print a user error (no traceback) and exit with status 2 (bad input); 75 when another process holds the
    output directory (:class:`ctxbench.core.outdir.DirectoryBusy`: rerun once it has finished) and 1 for a full disk
    (:func:`ctxbench.core.storage.disk_full`: the run failed, the input was fine). ``flags``: config field → CLI
    word, for pydantic errors."""


    if isinstance(e, PydanticValidationError):
        flag = flags or {}
        msg = "; ".join((f"--{flag.get(str(err['loc'][0]), str(err['loc'][0])).replace('_', '-')}: "
                         if err["loc"] else "") + str(err["msg"]).removeprefix("Value error, ")
                        for err in e.errors())
    elif isinstance(e, CtxbenchError):
        msg = str(e)
    elif disk_full(e):
        msg = disk_full_message(e)
    else:  # a file or table that could not be read: name the error, not a traceback
        msg = f"{type(e).__name__}: {e}"
    console.print("[bold red]error:[/] " + escape(redact(msg)))
    raise typer.Exit(75 if isinstance(e, DirectoryBusy) else 1 if disk_full(e) else 2)


# what a command reports as a clear error (exit 2) instead of a traceback: bad input files and options
USER_ERRORS = (CtxbenchError, PydanticValidationError, OSError, ValueError, sqlite3.Error, RecursionError,
               yaml.YAMLError, SqlglotError)


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
    """--reasoning-effort: comma-separated efforts of ctxbench.models.effort.EFFORTS."""
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


def warn_unknown_model(model: str, base_url: str | None) -> None:
    """Print :func:`ctxbench.models.registry.unknown_model_warning` (a misspelt name such as ``gtp-4o``) on
    stderr; the command goes on."""
    if not is_embedded(model, base_url) and (w := unknown_model_warning(model, base_url)):
        console.print(w, markup=False)
