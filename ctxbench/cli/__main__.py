"""``python -m ctxbench.cli``: the ``ctxbench`` command."""

from ctxbench.cli import app

if __name__ == "__main__":  # not when a spawned worker process (evaluate --workers: Dask) imports this main module
    app(prog_name="ctxbench")
