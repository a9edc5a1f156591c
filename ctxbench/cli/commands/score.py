"""The options and help of ``score``, ``verify`` and ``report``; their work is :mod:`ctxbench.cli.score`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.cli.options import check_env, check_text, check_url


def score_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
              judge: Optional[str] = typer.Option(None, callback=check_text,
                                                  help="LLM judge model (adds matcher judge:<model>)"),
              judge_prompt: Optional[list[str]] = typer.Option(
                  None, "--judge-prompt", help="judging prompt of --judge, repeatable: rows (the row judge, the "
                                               "default: matcher judge:<model>) or one a track registers (`ctxbench "
                                               "tracks`; matcher judge-<prompt>:<model>)"),
              judge_base_url: Optional[str] = typer.Option(None, callback=check_url,
                                                           help="OpenAI-compatible endpoint of the judge"),
              judge_api_key_env: Optional[str] = typer.Option(
                  None, callback=check_env, help="env variable with the judge's key for --judge-base-url")) -> None:
    """Score every stored response; writes BUILD/scores.parquet."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import score  # lazy: the command's code and libraries load when it runs (start-up time)

    score.score_cmd(**kw)


def verify_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
               source_data: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                                          help="the data directory of an imported benchmark whose "
                                                               "supporting passages are not in the build (LaRA's: "
                                                               "queries/, corpora/)")) -> None:
    """Re-derive every gold answer from the context alone; writes BUILD/certificates.parquet, prints counts per
    track and status, exits 1 when an instance fails."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import score  # lazy: the command's code and libraries load when it runs (start-up time)

    score.verify_cmd(**kw)


def report_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
               regime: Optional[list[str]] = typer.Option(
                   None, "--regime", help="needles decay-regime threshold KEY=VALUE, repeatable (e.g. "
                                          "stable_floor=0.5, variants=chain); defaults: assets/analysis/needles.yaml")
               ) -> None:
    """Write BUILD/report/index.html (and the same numbers as Parquet)."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import score  # lazy: the command's code and libraries load when it runs (start-up time)

    score.report_cmd(**kw)
