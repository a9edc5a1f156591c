"""``ctxbench build <track>`` and ``ctxbench import <track>``: one command per registered track, generated from the
track's Config."""

from __future__ import annotations

import inspect
from pathlib import Path

import click
import typer

from ctxbench.cli.common import USER_ERRORS, console, fail, out_console, progress_bar
from ctxbench.cli.options import config_values, option_specs, parameters
from ctxbench.run.outcome import why_no_instances


def _print_build(r, verb: str = "built") -> None:
    """One line for a finished (or skipped: same build hash) build or import."""
    what = f"already {verb} (same build hash), nothing to do" if r.skipped else verb
    out_console.print(f"{what}: {r.n_instances} instances, {r.n_quarantined} quarantined, build {r.build_hash} → {r.out}")


def track_command(track, verb: str) -> click.Command:
    """The ``ctxbench build|import <track>`` command: one option per field of the track's Config (help from the
    field's description; ctxbench.cli.options), then --out and --force; runs the track's stages."""
    specs = option_specs(track.Config, track.cli_names, track.cli_hidden, track.cli_checks)
    names = {s.field: s.flag for s in specs}

    def command(**kw) -> None:
        out, force = kw.pop("out"), kw.pop("force")
        try:
            cfg = track.Config(**config_values(specs, kw))
        except USER_ERRORS as e:
            fail(e, names)
        try:
            with progress_bar() as p:
                t = p.add_task(f"{track.name}", total=None)
                r = track.build(cfg, out, force=force, progress=lambda d, n: p.update(t, completed=d, total=n),
                                on_stage=lambda st: p.update(t, description=f"{track.name}: {st.name}"))
        except USER_ERRORS as e:
            fail(e, names)
        _print_build(r, "imported" if verb == "import" else "built")
        for line in track.result_lines(r):
            out_console.print(line)
        if r.n_instances == 0:
            console.print("error: " + why_no_instances(Path(r.out), r.n_quarantined), markup=False)
            raise typer.Exit(1)

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
