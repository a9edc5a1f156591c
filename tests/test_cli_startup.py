"""``ctxbench --help``, ``ctxbench <command> --help`` and a bad option value import typer, click, rich and the light
option checks only (issue 36, "CI stays quick"): a command imports its work (``ctxbench.cli.<group>``) and the
libraries behind it (scipy, pyarrow, duckdb, sqlglot, litellm, prefect, ...) when it runs. A structural check of
``sys.modules`` in a fresh interpreter, not a timing (bench/cli_startup.py prints the times)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "numpy", "pyarrow", "duckdb", "sqlglot", "litellm", "prefect", "great_expectations", "statsmodels",
         "pandas", "httpx", "tiktoken", "jinja2", "luigi", "dask", "semanticscholar")

# each case: the arguments and the exit status they give (0 help, 2 a usage error)
CASES = [
    (["--help"], 0),
    (["--version"], 2),  # no such option: a one-line usage error
    (["nosuchcommand"], 2),
    (["run", "--help"], 0),
    (["build", "--help"], 0),
    (["build", "holobench", "--help"], 0),
    (["build", "scitrek", "--help"], 0),
    (["build", "needles", "--help"], 0),
    (["import", "lara", "--help"], 0),
    (["build", "nosuch"], 2),
    (["build", "holobench", "--density", "3"], 2),
    (["evaluate", "--help"], 0),
    (["evaluate", "--build", "{tmp}", "--model", "m", "--price", "abc"], 2),
    (["evaluate", "--build", "{tmp}", "--model", "m", "--reasoning-effort", "huge"], 2),
    (["evaluate", "--build", "{tmp}/missing", "--model", "m"], 2),
    (["backfill", "--help"], 0),
    (["score", "--help"], 0), (["verify", "--help"], 0), (["report", "--help"], 0), (["compare", "--help"], 0),
    (["screen", "--help"], 0), (["label", "--help"], 0), (["kappa", "--help"], 0),
    (["sql-info", "--help"], 0), (["tracks", "--help"], 0), (["calibrate", "--help"], 0), (["plan", "--help"], 0),
    (["export", "--help"], 0),
    (["export", "--build", "{tmp}", "--format", "xml", "--out", "{tmp}/x"], 2),
    (["fetch", "corpus", "--help"], 0), (["fetch", "s2", "--help"], 0),
    (["fetch", "s2", "--api-url", "notaurl", "--out", "{tmp}/s2"], 2),
    (["questions", "generate", "--help"], 0), (["questions", "import", "--help"], 0),
]

# one interpreter runs every case in turn (the app raises SystemExit after each), then one command that does its
# work (sql-info parses SQL with sqlglot), and prints what each step found loaded
SCRIPT = r"""
import io, json, sys, contextlib
from ctxbench.cli import app

heavy, cases = json.loads(sys.argv[1]), json.loads(sys.argv[2])
found = []
for args in cases + [["sql-info", "SELECT a FROM t"]]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            app(args=args, prog_name="ctxbench")
            rc = 0
        except SystemExit as e:
            rc = e.code
    found.append({"args": args, "rc": rc, "loaded": [m for m in heavy if m in sys.modules]})
print(json.dumps(found))
"""


def _run(script: str, *argv: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "100", "NO_COLOR": "1"}
    r = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return r.stdout


def test_importing_the_app_loads_no_heavy_library(tmp_path):
    out = _run("import sys, json; import ctxbench.cli.main; "
               f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))", cwd=tmp_path)
    assert json.loads(out.splitlines()[-1]) == []


def test_help_and_usage_errors_load_no_heavy_library_and_a_command_loads_its_own(tmp_path):
    cases = [[a.replace("{tmp}", str(tmp_path)) for a in args] for args, _ in CASES]
    found = json.loads(_run(SCRIPT, json.dumps(HEAVY), json.dumps(cases), cwd=tmp_path).splitlines()[-1])
    *checked, ran = found
    for (args, rc), f in zip(CASES, checked):
        assert f["rc"] == rc, (args, f)
        assert f["loaded"] == [], f"`ctxbench {' '.join(args)}` imported {f['loaded']}"
    # the check can fail: a command that runs imports its work, and sql-info's work parses SQL with sqlglot
    assert ran["rc"] == 0 and "sqlglot" in ran["loaded"], ran


def test_every_command_is_declared_in_the_light_commands_package():
    """A command registered on the app takes its options from ctxbench.cli.commands (the light signatures), so that
    a new command keeps ``--help`` quick; its work lives in ctxbench.cli.<group>."""
    import typer

    from ctxbench.cli import app

    group = typer.main.get_group(app)
    seen = 0
    for name, cmd in group.commands.items():
        subs = cmd.commands.values() if hasattr(cmd, "commands") else [cmd]
        for c in subs:
            if c.callback is None:
                continue
            seen += 1
            assert c.callback.__module__.startswith("ctxbench.cli.commands."), (name, c.name, c.callback.__module__)
    assert seen >= 18  # sql-info ... export, fetch corpus/s2, questions generate/import
