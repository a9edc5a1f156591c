"""Errors raised by ctxbench. Each message names the input and what to fix."""

import warnings

from ctxbench.core.redact import redact


class CtxbenchError(Exception):
    """Base class: a user-facing error whose message names the bad input and the fix."""


class InputError(CtxbenchError, ValueError):
    """Bad user input (database, query, template, option)."""


class TokenizerError(CtxbenchError, LookupError):
    """A tokenizer that is unknown or cannot be loaded."""


class ValidationError(CtxbenchError):
    """A data-quality expectation failed on a stored table."""


class EmptySelection(InputError):
    """An evaluation (or its dry run) whose filters select no instance; the message names the filter that emptied
    it. The CLI exits 1 for it, as for an evaluation that selects nothing."""


class DataWarning(UserWarning):
    """Something in the user's data that the run went on without but the user should know (a table losing more
    than 1% of its rows, with the reasons): the CLI prints it as one ``warning:`` line, a library caller gets a
    Python warning of this class to filter or raise on."""


def one_line_data_warnings() -> None:
    """Show every :class:`DataWarning` from now on as one line, ``warning: <message>`` with credentials redacted and
    no source path (the CLI's form); other warnings keep Python's format. Once per process (idempotent)."""
    if getattr(warnings.formatwarning, "_ctxbench_one_line", False):
        return
    plain = warnings.formatwarning

    def one_line(message, category, filename, lineno, line=None):
        if issubclass(category, DataWarning):
            return redact(f"warning: {message}\n")
        return plain(message, category, filename, lineno, line)

    one_line._ctxbench_one_line = True  # type: ignore[attr-defined]
    warnings.formatwarning = one_line
