"""What the user types: every command's options and help (typer signatures), light to import, so that
``ctxbench --help``, ``ctxbench <command> --help`` and a bad option value load typer, click, rich and the light
option checks only (issue 36). Each command's body imports its implementation module (``ctxbench.cli.<group>``)
when the command runs; ``ctxbench.cli.main`` registers the commands."""
