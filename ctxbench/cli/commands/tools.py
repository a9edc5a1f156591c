"""The options and help of ``sql-info``, ``tracks``, ``calibrate``, ``plan`` and ``export``; their work is
:mod:`ctxbench.cli.tools`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import typer

from ctxbench.cli.common import check_words
from ctxbench.cli.options import check_tokenizers
from ctxbench.core.values import EXPORT_FORMATS


def _export_format(value: str) -> str:
    if value not in EXPORT_FORMATS:
        raise typer.BadParameter(f"unknown export format {value!r}: use {', '.join(EXPORT_FORMATS)}")
    return value


def sql_info_cmd(sql: str = typer.Argument(..., help="one SQL SELECT statement"),
                 db: Path = typer.Option(None, exists=True, dir_okay=False,
                                         help="database the SQL reads: resolve each column in it or in its "
                                              "preprocessed view (the columns `questions generate` writes, e.g. "
                                              "DestAirport_airportname)")) -> None:
    """Print tables, columns, query types and difficulty (HoloBench A.3) of an SQL query as JSON; with --db also
    where each column is (`resolved`: database or preprocessed view, what a name column stands for) and `unknown`."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import tools  # lazy: the command's code and libraries load when it runs (start-up time)

    tools.sql_info_cmd(**kw)


def tracks_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")) -> None:
    """List every registered track: its stages, matchers (primary first), tagger and CLI verbs."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import tools  # lazy: the command's code and libraries load when it runs (start-up time)

    tools.tracks_cmd(**kw)


def calibrate_cmd(
    corpus: Path = typer.Option(..., exists=True, file_okay=False, help="corpus directory"),
    tokenizers: Optional[str] = typer.Option(None, callback=check_tokenizers,
                                             help="comma-separated tokenizers (default: every registered one)"),
    exclude: str = typer.Option("", help="volumes to leave out, comma-separated"),
    out: Optional[Path] = typer.Option(None, dir_okay=False,
                                       help="JSON file to write (default: CORPUS/calibration.json for a fetched corpus)"),
) -> None:
    """Tokens per character of a corpus for each tokenizer (stored as JSON and printed)."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import tools  # lazy: the command's code and libraries load when it runs (start-up time)

    tools.calibrate_cmd(**kw)


def plan_cmd(accuracy: Optional[float] = typer.Option(None, min=0.0, max=1.0,
                                                     help="expected accuracy P of the better model (0-1)"),
             mde: float = typer.Option(..., min=0.0, max=1.0,
                                       help="smallest difference D worth detecting (0-1), e.g. 0.05"),
             power: float = typer.Option(0.8, min=0.0, max=1.0, help="probability of detecting a true difference D"),
             alpha: float = typer.Option(0.05, min=0.0, max=1.0, help="two-sided significance level"),
             pilot: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                                  help="a scored build both --models answered: plan the paired "
                                                       "design from its discordance and design effect"),
             models: Optional[str] = typer.Option(None, callback=check_words,
                                                  help="A,B: the two models (with --pilot), or the models to cost"),
             build: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                                  help="the build to cost and count tiers on (default: --pilot)"),
             as_json: bool = typer.Option(False, "--json", help="print only a JSON object")) -> None:
    """Instances per model needed to detect a difference D between two models, their cost and the tiers needed."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import tools  # lazy: the command's code and libraries load when it runs (start-up time)

    tools.plan_cmd(**kw)


def export_cmd(
    build: list[Path] = typer.Option(..., exists=True, file_okay=False,
                                     help="build directory (repeat to export several builds together)"),
    format: str = typer.Option(..., "--format", callback=_export_format,
                               help="parquet | hf | inspect | jsonl (hf needs .\\[service]; running the inspect task "
                                    "needs .\\[export])"),
    out: Path = typer.Option(..., file_okay=False, help="directory to write (never inside a build)"),
    test_fraction: Optional[float] = typer.Option(None, min=0.0, max=1.0,
                                                  help="hf/jsonl: train/test split with no shared source or "
                                                       "template, this fraction of instances in test"),
    seed: int = typer.Option(0, min=0, help="seed of the split"),
    prompt_variant: Literal["cot", "direct"] = typer.Option(
        "cot", help="inspect: prompt variant of the samples (cot | direct)"),
    model: str = typer.Option("", help="inspect: the model whose messages and output budget the samples use"),
    force: bool = typer.Option(False, "--force", help="replace the content of a non-empty --out"),
) -> None:
    """Export builds as Parquet, a Hugging Face datasets directory, an inspect_ai task, or chat JSONL."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import tools  # lazy: the command's code and libraries load when it runs (start-up time)

    tools.export_cmd(**kw)
