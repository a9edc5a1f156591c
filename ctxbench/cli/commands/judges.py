"""The options and help of ``screen``, ``label`` and ``kappa``; their work is :mod:`ctxbench.cli.judges`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.cli.common import given
from ctxbench.cli.options import check_env, check_text, check_url


def screen_cmd(ctx: typer.Context,
               build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
               model: str = typer.Option(..., callback=check_text,
                                         help="model asked each question without its context"),
               base_url: Optional[str] = typer.Option(None, callback=check_url, help="OpenAI-compatible endpoint"),
               api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                                         help="environment variable holding the key"),
               concurrency: int = typer.Option(8, min=1,
                                               help="calls in flight (the embedded model: one at a time)")) -> None:
    """Closed-book screen (LURCH): flag instances a model answers correctly without the context;
    writes BUILD/closed_book.parquet (evaluate --exclude-closed-book leaves them out)."""
    kw = dict(locals())  # the options as parsed
    kw["concurrency_given"] = given(kw.pop("ctx"), "concurrency")
    from ctxbench.cli import judges  # lazy: the command's code and libraries load when it runs (start-up time)

    judges.screen_cmd(**kw)


def label_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
              n: int = typer.Option(30, min=1, help="answers to label"),
              out: Path = typer.Option(Path("labels.jsonl"), dir_okay=False,
                                       help="labels file (JSON Lines; appended, resumable)"),
              model: Optional[str] = typer.Option(None, callback=check_text, help="only this model's answers"),
              seed: int = typer.Option(0, min=0, help="sample seed")) -> None:
    """Label a sample of answers by hand (correct / partial / incorrect) for judge validation (`ctxbench kappa`)."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import judges  # lazy: the command's code and libraries load when it runs (start-up time)

    judges.label_cmd(**kw)


def kappa_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory (scored)"),
              labels: Path = typer.Option(..., exists=True, dir_okay=False,
                                          help="human labels (JSON Lines; `ctxbench label` writes them)"),
              threshold: float = typer.Option(1.0, min=0.0, max=1.0,
                                              help="score at or above which an answer counts as correct")) -> None:
    """Cohen's κ (95% CI) of every judge in BUILD/scores.parquet against human labels (LaRA appendix C): LLM
    judges of every prompt, matchers and fallbacks; writes BUILD/kappa.parquet for the report."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import judges  # lazy: the command's code and libraries load when it runs (start-up time)

    judges.kappa_cmd(**kw)
