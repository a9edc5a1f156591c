"""The ``ctxbench`` typer app: the root group (one-line usage errors, Ctrl-C), the track groups of ``build`` and
``import``, the global options, and the registration of every command (:mod:`ctxbench.cli.commands`: options and
help only; a command imports its work when it runs, so ``ctxbench --help`` stays quick: issue 36)."""

from __future__ import annotations

import sys
from typing import Optional

import click
import typer
from rich.markup import escape
from typer.core import TyperGroup

from ctxbench.cli.commands import compare, evaluate, fetch, judges, questions, score, tools
from ctxbench.cli.commands.build import track_command
from ctxbench.cli.commands.run import run_command
from ctxbench.cli.common import console
from ctxbench.cli.help_format import install as _install_help_format
from ctxbench.core.errors import CtxbenchError, InputError, one_line_data_warnings
from ctxbench.core.redact import install, redact
from ctxbench.core.track import find_track, get_track, load_plugins, tracks

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
        return track_command(t, self.verb) if t is not None and self.verb in t.verbs else None

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
    CLI (:func:`fail`), so paths in messages stay whole and logs can be searched; exit status 2. A Ctrl-C prints
    ``interrupted`` and exits 130 (128 + SIGINT), never a traceback. ``run`` is made when asked for
    (:func:`run_command`: its options include the default track's build options)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return names if "run" in names else [*names, "run"]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name == "run" and "run" not in self.commands:
            self.commands["run"] = run_command()
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
        except CtxbenchError as e:  # raised while the command tree is made (a track plugin that cannot load)
            console.print("[bold red]error:[/] " + escape(redact(str(e))), highlight=False)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(cls=_RootGroup, add_completion=False, no_args_is_help=True,
                  help="Build long-context benchmarks and evaluate models on them.")
build_app = typer.Typer(cls=_TrackGroup, no_args_is_help=True,
                        help="Build a benchmark: one command per registered track (`ctxbench tracks`).")
app.add_typer(build_app, name="build")
import_app = typer.Typer(cls=_ImportGroup, no_args_is_help=True,
                         help="Import an existing benchmark as a build.")
app.add_typer(import_app, name="import")
app.add_typer(fetch.fetch_app, name="fetch")
app.add_typer(questions.questions_app, name="questions")

# the commands, one module per group, in the order `ctxbench --help` lists them
app.command("sql-info")(tools.sql_info_cmd)
app.command("tracks")(tools.tracks_cmd)
app.command("calibrate")(tools.calibrate_cmd)
app.command("evaluate")(evaluate.evaluate_cmd)
app.command("backfill")(evaluate.backfill_cmd)
app.command("screen")(judges.screen_cmd)
app.command("label")(judges.label_cmd)
app.command("kappa")(judges.kappa_cmd)
app.command("score")(score.score_cmd)
app.command("plan")(tools.plan_cmd)
app.command("verify")(score.verify_cmd)
app.command("report")(score.report_cmd)
app.command("compare")(compare.compare_cmd)
app.command("export")(tools.export_cmd)


@app.callback()
def main_options(plugin: Optional[list[str]] = typer.Option(
        None, "--plugin", help="module or .py file defining a track (repeatable; also $CTXBENCH_TRACKS, which "
                               "subprocesses inherit)")) -> None:
    """Build long-context benchmarks and evaluate models on them."""
    install()  # no credential in any log record or warning this process shows (issue 31)
    one_line_data_warnings()  # a data warning is one line, no source path

    if plugin:
        from ctxbench.cli.errors import USER_ERRORS, fail  # lazy: sqlglot's and Arrow's errors, for --plugin only

        try:  # a plugin that cannot be loaded is not left for later commands (or subprocesses)
            load_plugins(plugin)
        except (*USER_ERRORS, ImportError) as e:
            fail(InputError(f"--plugin {', '.join(plugin)}: {e}"))


def main() -> None:  # pragma: no cover
    app()
