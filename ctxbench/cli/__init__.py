"""``ctxbench`` command line (typer). Words follow SCHEMA.md: --lengths, --setting, --position, --tokenizer,
--model, --base-url, --samples, --out, --build.

One module per command group (:mod:`ctxbench.cli.main` registers them on :data:`app`); the shared consoles, error
exit and option checks in :mod:`ctxbench.cli.common`; the progress renderer of ``run`` in
:mod:`ctxbench.cli.progress` and Prefect's log filter in :mod:`ctxbench.cli.logfilter`."""

from ctxbench.cli.main import app, main

__all__ = ["app", "main"]
