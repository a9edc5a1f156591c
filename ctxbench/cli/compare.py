"""``compare``: the leaderboard across runs."""

from __future__ import annotations

from pathlib import Path


from ctxbench.cli.common import out_console
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.report.compare import compare_runs


def compare_cmd(*, dirs: list[Path], out: Path, force: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.compare.compare_cmd` (its options and help)."""
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
