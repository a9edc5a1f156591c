"""``questions generate`` and ``questions import``: query sets with their SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.cli.common import console, out_console
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.questions.importer import REPORT, import_questions
from ctxbench.tracks.holobench.generate import GenerateConfig, check_generated_out, generate_questions, write_generated

def questions_generate_cmd(*, db: str, out: Path, n: int, seed: int, question_model: Optional[str],
                           question_base_url: Optional[str], question_api_key_env: Optional[str],
                           force: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.questions.questions_generate_cmd` (its options and help)."""
    try:
        check_generated_out(out, force)  # before the work: a user's file is never replaced without --force
        cfg = GenerateConfig(db=db, n=n, seed=seed, question_model=question_model,
                             question_base_url=question_base_url, question_api_key_env=question_api_key_env)
        with console.status("drawing and checking questions") as st:
            r = generate_questions(cfg, progress=lambda m: st.update(m))
        write_generated(r, out)
    except USER_ERRORS as e:
        fail(e)
    rep, cov = r.report, r.report["coverage"]
    out_console.print(f"{len(r.questions)} questions for {r.db_id} → {out} ({rep['checked']} of {rep['candidates']} "
                      f"candidate queries checked, {rep['passed']} passed; {r.seconds:.1f} s)"
                      + (f"; templates for {len(r.templates)} tables in its templates: section" if r.templates else ""))
    out_console.print("  difficulty: " + ", ".join(f"{k} {v}" for k, v in cov["difficulty"].items())
                      + "; query types: " + ", ".join(f"{k} {v}" for k, v in cov["query_types"].items()))
    for why, k in rep["left_out"].items():
        out_console.print(f"  left out {k}: {why}")
    if "roundtrip_dropped" in rep:
        out_console.print(f"  dropped by the SQL round trip: {rep['roundtrip_dropped']}")
    if len(r.questions) < n:
        console.print(f"only {len(r.questions)} of {n} questions passed the checks", markup=False)


def questions_import_cmd(*, spider: Path, db_dir: Path, out: Path, integer_division: str, force: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.questions.questions_import_cmd` (its options and help)."""
    try:
        r = import_questions(spider, db_dir, out, integer_division=integer_division, force=force)
    except USER_ERRORS as e:
        fail(e)
    c = r.counts
    why = ", ".join(f"{k} {n}" for k, n in c["by_reason"].items())
    out_console.print(f"imported {c['inputs']} questions: {c['accepted']} accepted, {c['rejected']} rejected"
                      f"{f' ({why})' if why else ''}; {len(r.written)} query set(s) and {REPORT} → {out}")
    if c["not_buildable"]:
        out_console.print(f"  {c['written']} accepted question(s) written; {c['not_buildable']} left out of the query "
                          f"sets as not buildable (they read identifiers or columns the build's prepared database "
                          f"lacks, or their answer there is not unambiguous): `note` in {out / REPORT}")
    if not c["written"]:  # nothing a build can use: a script's `&&` must not go on to build holobench
        console.print(f"error: no question of {spider} was written to a query set (every one rejected or not "
                      f"buildable: see `reason` and `note` in {out / REPORT})", markup=False)
        raise typer.Exit(1)
