"""The options and help of ``ctxbench build <track>`` and ``ctxbench import <track>``: one command per registered
track, generated from the track's Config; their work is :mod:`ctxbench.cli.build`."""

from __future__ import annotations

import inspect
from pathlib import Path

import click
import typer

from ctxbench.cli.options import option_specs, parameters


def track_command(track, verb: str) -> click.Command:
    """The ``ctxbench build|import <track>`` command: one option per field of the track's Config (help from the
    field's description; ctxbench.cli.options), then --out and --force; runs the track's stages."""
    specs = option_specs(track.Config, track.cli_names, track.cli_hidden, track.cli_checks)

    def command(**kw) -> None:
        from ctxbench.cli import build  # lazy: the command's code and libraries load when it runs (start-up time)

        build.build_track(track, verb, specs, kw)

    params = parameters(specs) + [
        inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation=Path,
                          default=typer.Option(Path(track.out_default), file_okay=False,
                                               help="build directory to write")),
        inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, help="replace a different build already in --out"))]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    doc = (track.title or track.name) + "."
    stages = " → ".join(s.name for s in track.stages)
    command.__doc__ = (f"{doc} Stages: {stages}. Writes the build directory --out (instances.parquet, "
                       f"quarantine.parquet, manifest.json; columns in schemas/).")
    sub = typer.Typer(add_completion=False)
    sub.command(name=track.name)(command)
    return typer.main.get_command(sub)
