"""``compare``: the leaderboard across runs."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxbench.cli.common import USER_ERRORS, fail, out_console
from ctxbench.report.compare import compare_runs


def compare_cmd(dirs: list[Path] = typer.Argument(..., exists=True, file_okay=False,
                                                 help="build directories or run roots (all their builds)"),
                out: Path = typer.Option(..., file_okay=False, help="directory for index.html, the Parquet "
                                                                    "tables and catalogue.duckdb"),
                force: bool = typer.Option(False, "--force", help="write into a non-empty --out that holds no earlier "
                                                       "leaderboard")) -> None:
    """Leaderboard across runs: OUT/index.html (models x benchmarks x context lengths, Avg/wAvg with 95% CIs, on
    comparable instances only), OUT/*.parquet and the DuckDB catalogue OUT/catalogue.duckdb over every build."""
    try:
        r = compare_runs(dirs, out, force=force)
    except USER_ERRORS as e:
        fail(e)
    out_console.print(f"leaderboard of {r.models} models on {r.groups} benchmark builds ({r.builds} build "
                      f"directories): {r.cells - r.missing} cells, {r.missing} missing (reasons on the page) → "
                      f"{r.page}; catalogue {r.catalogue}")
    if r.pairs:
        out_console.print(f"paired differences: {r.pairs} rows in {out / 'pairs.parquet'}, {r.significant} "
                          f"significant after Holm's correction")
