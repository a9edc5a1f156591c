"""``python -m ctxbench.cli``: the ``ctxbench`` command."""

from ctxbench.cli import app

app(prog_name="ctxbench")
