"""The results table ``run``, ``score`` and ``report`` print, with the shared-instance comparison."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from rich.table import Table

from ctxbench.analysis.core import results_table, shared_comparison
from ctxbench.cli.common import console, out_console, print_table
from ctxbench.cli.errors import USER_ERRORS
from ctxbench.scoring.metrics import length_averages


def print_results(build: Path, paths: bool = True, scope: Callable[[dict], bool] | None = None,
                  note: str | None = None) -> None:
    """The results table (model, context length, score, replies cut off) and, with ``paths``, where the files are
    (``run`` prints both; ``score`` and ``report`` the table, when something is scored). Where models side by side
    were scored on different instances, says so and prints the table of the shared instances beside it
    (:func:`print_shared_comparison`). ``scope`` (``run``: :func:`ctxbench.run.outcome.run_scope`), a predicate
    on rows of ``scores.parquet``: only the replies it keeps are counted (None: every stored reply); ``note``: a
    line printed under the table (``run``: where the replies outside its scope are counted)."""
    rows = results_table(build, primary_only=True, only=scope)
    if not rows and not paths:
        return
    print_table(_length_table(rows, "ctxbench results (each track's primary matcher, mean score over instances)"))
    shared_note(build, scope)
    if note:
        out_console.print(note, markup=False)
    if not paths:
        return
    out_console.print(f"build directory: {build}\n  instances: {build / 'instances.parquet'}\n"
                      f"  responses: {build / 'responses.parquet'}\n  scores:    {build / 'scores.parquet'}\n"
                      f"  report:    {build / 'report' / 'index.html'}")


def _length_table(rows: list[dict], title: str) -> Table:
    """A table of :func:`ctxbench.analysis.core.results_table` rows with each model's Avg over lengths;
    ``cut off``: replies of the row the output budget ended (each scored 0 and counted in the score)."""
    t = Table(title=title)
    for c in ("model", "mode", "matcher", "context length", "instances", "score", "95% CI", "cut off"):
        t.add_column(c, justify="right" if c not in ("model", "mode", "matcher") else "left")
    for r in rows:
        t.add_row(r["model"], r["mode"], r["matcher"], f"{r['context_length']:,}", str(r["n"]), f"{r['score']:.3f}",
                  f"{r['ci_low']:.3f}–{r['ci_high']:.3f}", str(r.get("cut_off", 0)))
    for m, md, mt in sorted({(r["model"], r["mode"], r["matcher"]) for r in rows}):
        a = length_averages({r["context_length"]: r["score"] for r in rows
                             if (r["model"], r["mode"], r["matcher"]) == (m, md, mt)})
        t.add_row(m, md, mt, "Avg", "", f"{a['Avg']:.3f}", "",
                  str(sum(r.get("cut_off", 0) for r in rows if (r["model"], r["mode"], r["matcher"]) == (m, md, mt))))
    return t


def shared_note(build: Path, scope: Callable[[dict], bool] | None = None) -> None:
    """:func:`print_shared_comparison` for ``run`` (over its ``scope``), ``score`` and ``report``; a build whose
    tables cannot be read says nothing more (the command's own output stands)."""
    with contextlib.suppress(*USER_ERRORS):
        print_shared_comparison(build, scope)


def print_shared_comparison(build: Path, scope: Callable[[dict], bool] | None = None) -> bool:
    """Where models side by side in a build's results were scored on different instances (e.g. each evaluated
    its own sample): print a warning naming, per context length, each model's instance count and the shared count,
    then the results table over the shared instances only (with ``scope``, over the replies it keeps). Returns
    whether it printed anything."""
    diff, shared = shared_comparison(build, scope)
    if not diff:
        return False
    where = "; ".join(f"{d['context_length']:,} tokens ({d['mode']}): "
                      + ", ".join(f"{m} {n}" for m, n in d["per_model"].items()) + f", {d['shared']} shared"
                      for d in diff)
    console.print(f"warning: the models of this build were scored on different instances, so side by side their "
                  f"scores compare different questions: {where}. The table below compares them on the shared instances only "
                  f"(`ctxbench compare` does the same; evaluate every model on the same sample to compare all).",
                  markup=False)
    print_table(_length_table(shared, "shared instances only (every model side by side on the same instances)"))
    return True
