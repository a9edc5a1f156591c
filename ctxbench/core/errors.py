"""Errors raised by ctxbench. Each message names the input and what to fix."""


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

