"""The one-line user error of every command and its exit status: :data:`USER_ERRORS` (what a command reports as a
clear error instead of a traceback) and :func:`fail`. Imported by the commands' implementations when they run, not
for ``--help`` (sqlglot's and Arrow's error classes are among them; issue 36)."""

from __future__ import annotations

import sqlite3

import typer
import yaml
from pydantic import ValidationError as PydanticValidationError
from rich.markup import escape
from sqlglot.errors import SqlglotError

from ctxbench.cli.common import console
from ctxbench.core.errors import CtxbenchError
from ctxbench.core.outdir import DirectoryBusy
from ctxbench.core.redact import redact
from ctxbench.core.storage import disk_full, disk_full_message


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
