"""``score``, ``verify`` and ``report``."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Optional

import pyarrow.parquet as pq
import typer

from ctxbench.cli.common import console, out_console
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.cli.options import check_reference
from ctxbench.cli.results import print_results, shared_note
from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.core.track import tracks
from ctxbench.report import build_report
from ctxbench.run.incremental import rescore_if_unreadable
from ctxbench.run.score import SCORE_ERRORS, score_build, tagging_text
from ctxbench.verify import CERTIFICATES, SOURCE_DATA_ENV, verify_build


def score_cmd(*, build: Path, judge: Optional[str], judge_prompt: Optional[list[str]], judge_base_url: Optional[str],
              judge_api_key_env: Optional[str]) -> None:
    """The work of :func:`ctxbench.cli.commands.score.score_cmd` (its options and help)."""
    if judge_prompt and not judge:
        fail(CtxbenchError("--judge-prompt names the prompt of an LLM judge: give the judge model with --judge MODEL"))
    try:
        s = score_build(build, judge, judge_base_url, judge_api_key_env, judge_prompt)
    except USER_ERRORS as e:
        fail(e)
    msg = f"{s.rows} scores → {build / 'scores.parquet'}"
    if s.no_answer:
        msg += (f"; {s.no_answer} replies hold no answer after removing reasoning and chat tokens (scored 0, "
                f"tag null_answer: see scores.extracted_answer)")
    if getattr(s, "cut_off", 0):
        msg += (f"; {s.cut_off} replies cut off by the output budget before their answer (scored 0, tag cut_off; "
                f"raise the budget with `evaluate --max-tokens`)")
    if getattr(s, "repl_unfinished", 0):
        msg += (f"; {s.repl_unfinished} --mode repl answers ended without FINAL (scored 0, tagged max_steps, "
                f"over_budget or step_timeout)")
    if getattr(s, "answer_from_reasoning", 0):
        msg += (f"; {s.answer_from_reasoning} answers read from the reasoning field (empty content; tag "
                f"answer_from_reasoning)")
    if getattr(s, "degenerate_repetition", 0):
        msg += (f"; {s.degenerate_repetition} replies degenerate into repetition (the repeated block earns "
                f"nothing; tag degenerate_repetition)")
    for name, c in (s.judges or {}).items():
        msg += (f"; {name}: {c['judged']} judged, {c['unparseable_verdicts']} unparseable verdicts after a repair "
                f"prompt (not scored), {c['repaired_verdicts']} read after the repair prompt, {c['judge_failed']} "
                f"failed calls (rerun to retry)")
    for bench, t in sorted((s.tagging or {}).items()):   # what each track's failure tagger returned
        msg += f"; {bench} failure tags: {tagging_text(t)}" if t is not None else ""
    out_console.print(msg)
    print_results(build, paths=False)  # the primary score per model and length, as run prints it
    if getattr(s, "adaptive", 0):
        say_adaptive(build)
    judge_failed = sum(c.get("judge_failed", 0) for c in (s.judges or {}).values())
    if judge_failed and not s.matcher_errors:  # judge calls that failed: exit 1, a rerun asks them again
        console.print(f"error: {judge_failed} judge call(s) failed (not scored); the same command asks them again",
                      markup=False)
        raise typer.Exit(1)
    if s.matcher_errors:  # a matcher's bug: the rest is scored, these responses are set aside and the run fails
        by = Counter(e["matcher"] for e in s.matcher_errors)
        console.print(f"error: {len(s.matcher_errors)} response(s) not scored by a matcher that raised ("
                      + ", ".join(f"{m} {n}" for m, n in sorted(by.items())) + f"), listed in {build / SCORE_ERRORS}; "
                      f"first: {s.matcher_errors[0]['error']}", markup=False)
        raise typer.Exit(1)


def say_adaptive(build: Path) -> None:
    """The whole-build adaptive estimates (``adaptive.parquet``, issue 34), marked as estimates: a model evaluated
    with ``--adaptive-calls`` answered a few instances, and the table above shows only those."""
    for r in pq.read_table(build / "adaptive.parquet").to_pylist():
        if r["context_length"] is None:
            out_console.print(f"adaptive estimate (item response theory, not a full result): {r['model']} "
                              f"{r['mode']}: {r['estimate']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] over all "
                              f"{r['n_instances']} instances from {r['n_asked']} asked ({r['method']}) → "
                              f"{build / 'adaptive.parquet'}", markup=False)


def verify_cmd(*, build: Path, source_data: Optional[Path]) -> None:
    """The work of :func:`ctxbench.cli.commands.score.verify_cmd` (its options and help)."""
    if source_data is not None:
        os.environ[SOURCE_DATA_ENV] = str(source_data)
    try:
        res = verify_build(build)
    except USER_ERRORS as e:
        fail(e)
    for line in res.summary_lines():
        out_console.print(line, markup=False)
    out_console.print(f"{len(res.certificates)} certificates → {build / CERTIFICATES}", markup=False)
    if res.failed:
        for c in res.failed[:10]:
            console.print(f"failed: {c.instance_id}: {c.reason}", markup=False)
        if len(res.failed) > 10:
            console.print(f"... and {len(res.failed) - 10} more failed (see {build / CERTIFICATES})", markup=False)
        raise typer.Exit(1)


def report_cmd(*, build: Path, regime: Optional[list[str]]) -> None:
    """The work of :func:`ctxbench.cli.commands.score.report_cmd` (its options and help)."""
    opts = {"regime": regime} if regime else None
    _check_report_options(opts)
    try:
        rescore_if_unreadable(build)  # a damaged scores.parquet is derived: scored again, not an error
        p = build_report(build, opts)
    except USER_ERRORS as e:
        fail(e)
    print_results(build, paths=False)  # the primary score per model and length, as run prints it
    out_console.print(f"report → {p}")
    shared_note(build)


def _check_report_options(opts: dict | None) -> None:
    """Each report option checked by the track that reads it (``Track.report_options``) before anything is read;
    an option no track reads is an error."""
    for key, values in (opts or {}).items():
        refs = [t.report_options[key] for t in tracks() if key in t.report_options]
        if not refs:
            fail(InputError(f"--{key}: no track's report reads this option"))
        for ref in refs:
            try:
                check_reference(ref)(values)
            except typer.BadParameter as e:
                fail(InputError(f"--{key}: {e.message}"))
