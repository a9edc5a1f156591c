"""The work of ``ctxbench build <track>`` and ``ctxbench import <track>`` (their options and help, generated from the
track's Config: :mod:`ctxbench.cli.commands.build`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ctxbench.cli.common import console, out_console, progress_bar
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.cli.options import OptionSpec, config_values
from ctxbench.run.outcome import why_no_instances


def _print_build(r, verb: str = "built") -> None:
    """One line for a finished (or skipped: same build hash) build or import."""
    what = f"already {verb} (same build hash), nothing to do" if r.skipped else verb
    out_console.print(f"{what}: {r.n_instances} instances, {r.n_quarantined} quarantined, build {r.build_hash} → {r.out}")


def build_track(track, verb: str, specs: list[OptionSpec], given: dict[str, Any]) -> None:
    """Validate the options ``given`` (by field, as parsed from ``specs``, with ``out`` and ``force``) with the
    track's Config and run its stages into ``out``; prints the result lines and exits 1 when the build holds no
    instance."""
    kw = dict(given)
    out, force = kw.pop("out"), kw.pop("force")
    names = {s.field: s.flag for s in specs}
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
