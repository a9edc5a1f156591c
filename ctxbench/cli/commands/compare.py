"""The options and help of ``compare``; its work is :mod:`ctxbench.cli.compare`."""

from __future__ import annotations

from pathlib import Path

import typer


def compare_cmd(dirs: list[Path] = typer.Argument(..., exists=True, file_okay=False,
                                                 help="build directories or run roots (all their builds)"),
                out: Path = typer.Option(..., file_okay=False, help="directory for index.html, the Parquet "
                                                                    "tables and catalogue.duckdb"),
                force: bool = typer.Option(False, "--force", help="write into a non-empty --out that holds no earlier "
                                                       "leaderboard")) -> None:
    """Leaderboard across runs: OUT/index.html (models x benchmarks x context lengths, Avg/wAvg with 95% CIs, on
    comparable instances only), OUT/*.parquet and the DuckDB catalogue OUT/catalogue.duckdb over every build."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import compare  # lazy: the command's code and libraries load when it runs (start-up time)

    compare.compare_cmd(**kw)
