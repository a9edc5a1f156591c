"""Issue 31, defects 3-7 and "Also": one rule for every command that writes a directory, a lock per build
directory tried with two real processes, failed calls exit 1 in every command that makes calls, I/O failures
name their file (a corrupt Parquet, a full disk, a full CTXBENCH_HOME), per-process counts under concurrency, and a
report browser whose long replies load lazily."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
import time

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import ctxbench.run.evaluate as ev
from ctxbench.cli import app
from ctxbench.models.gateway import RetryPolicy
from fakeserver import FakeOpenAIServer
from test_evaluate import answer_from_document, make_build

runner = CliRunner()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def cli(*args):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r


def one_line_error(r) -> str:
    """The ``error:`` line of a CLI run (there must be exactly one, and no traceback: the fake server's own report
    of a connection the client closed, between its ``----`` lines, is not the CLI's)."""
    import re

    out = re.sub(r"-{40}\nException occurred during processing.*?-{40}\n", "", r.output, flags=re.S)
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out, r.output
    return lines[0]


def foreign(d, n=7):
    """A user's directory: n files of their own (index.html among them)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "index.html").write_text("<p>my own page</p>", encoding="utf-8")
    for i in range(n - 1):
        (d / f"notes{i}.txt").write_text("precious", encoding="utf-8")
    return d


# ----------------------------------------------------------------------------------- defect 3: one --out rule

def test_compare_refuses_a_users_directory_then_writes_it_with_force_and_again_as_its_own(tmp_path):
    b = make_build(tmp_path / "b", n=4)
    out = foreign(tmp_path / "site")
    r = cli("compare", b, "--out", out)
    line = one_line_error(r)
    # today's code replaced index.html and exited 0
    assert r.exit_code == 2 and "index.html" in line and "--force" in line and "and 2 more" in line, r.output
    assert (out / "index.html").read_text(encoding="utf-8") == "<p>my own page</p>"
    assert not (out / "catalogue.duckdb").exists()  # nothing written
    r = cli("compare", b, "--out", out, "--force")
    assert r.exit_code == 0, r.output
    assert "my own page" not in (out / "index.html").read_text(encoding="utf-8")
    # its own earlier output is written again without --force; so is a new directory
    assert cli("compare", b, "--out", out).exit_code == 0
    assert cli("compare", b, "--out", tmp_path / "new" / "lb").exit_code == 0


def _spider(tmp_path):
    f = tmp_path / "questions.json"
    f.write_text(json.dumps([{"db_id": "x", "question": "How many?", "query": "SELECT count(*) FROM t"}]),
                 encoding="utf-8")
    (tmp_path / "dbs").mkdir()
    return f


def _corpus_src(tmp_path):
    src = tmp_path / "texts"
    src.mkdir()
    (src / "001_one.txt").write_text("Volume one\nThe first paragraph is here.\n", encoding="utf-8")
    return src


@pytest.mark.parametrize("command", ["compare", "export", "fetch corpus", "fetch s2", "questions import", "run",
                                     "build"])
def test_every_command_that_writes_a_directory_refuses_a_foreign_one_alike(tmp_path, command, monkeypatch):
    out = foreign(tmp_path / "mine", n=3)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    b = make_build(tmp_path / "b", n=2)
    args = {"compare": ["compare", b, "--out", out],
            "export": ["export", "--build", b, "--format", "jsonl", "--out", out],
            "fetch corpus": ["fetch", "corpus", "--local", _corpus_src(tmp_path), "--out", out],
            "fetch s2": ["fetch", "s2", "--api-url", "http://127.0.0.1:9", "--out", out],
            "questions import": ["questions", "import", "--spider", _spider(tmp_path), "--db-dir", tmp_path / "dbs",
                                 "--out", out],
            "run": ["run", "--out", out, "--db", "nycflights13", "--model", "m", "--base-url", "http://127.0.0.1:9"],
            "build": ["build", "holobench", "--db", "nycflights13", "--lengths", "2048", "--out", out]}[command]
    r = cli(*args)
    line = one_line_error(r)
    assert r.exit_code == 2 and "--force" in line and "index.html" in line and str(out) in line, r.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written, nothing replaced


def test_own_output_is_recognised_by_its_marker_even_after_an_interruption(tmp_path):
    from ctxbench.core.outdir import check_out_dir, claim_out_dir

    out = tmp_path / "o"
    assert claim_out_dir(out, "compare") is False  # new
    (out / "leaderboard.parquet").write_bytes(b"partial")  # interrupted mid-write
    assert check_out_dir(out, "compare") is True
    with pytest.raises(Exception, match="holds no ctxbench export"):
        check_out_dir(out, "export")  # another command's output is not its own


# ----------------------------------------------------------------------------- defect 4: the build lock

HOLD = textwrap.dedent("""
    import sys, time
    try:
        from ctxbench.core.outdir import out_dir_lock
    except ImportError:  # before issue 31: the holder is another build in progress, which took no lock
        import contextlib
        out_dir_lock = lambda d: contextlib.nullcontext()
    with out_dir_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(60)
""")


def test_a_second_build_into_a_locked_directory_stops_at_once_naming_the_holder(tmp_path):
    from ctxbench.core.outdir import lock_files, out_dir_lock

    out = tmp_path / "b"
    env = {**os.environ, "PYTHONPATH": REPO}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "ctxbench.cli", "build", "holobench", "--db", "nycflights13",
                            "--lengths", "2048", "--out", str(out)], capture_output=True, text=True, env=env,
                           timeout=300)
        took = time.monotonic() - t0
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert r.returncode == 75 and "Traceback" not in r.stderr, r.stderr
        assert len(err) == 1 and err[0].startswith("error:") and f"PID {holder.pid}" in err[0], r.stderr
        assert "in use" in err[0] and took < 120
        assert not out.exists()  # nothing written: the lock is beside the directory
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing: the operating system dropped its lock, the next build takes it
    with out_dir_lock(out):
        assert json.loads(lock_files(out)[1].read_text())["pid"] == os.getpid()
    assert not lock_files(out)[1].exists()


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    from ctxbench.core.outdir import lock_files, out_dir_lock

    with out_dir_lock(tmp_path / "o"):
        with out_dir_lock(tmp_path / "o"):
            pass
        assert lock_files(tmp_path / "o")[1].exists()  # still held by the outer block


# --------------------------------------------------------------------------- defect 5: failed calls exit 1

def _evaluate(b, srv, *extra):
    return cli("evaluate", "--build", b, "--model", "toy-model", "--base-url", srv.base_url, "--concurrency", "2",
               *extra)


def test_evaluate_with_failed_calls_exits_1_naming_them_and_a_rerun_asks_them_again(tmp_path):
    b = make_build(tmp_path / "b", n=10)
    bad = {"inst-01", "inst-04", "inst-05", "inst-08", "inst-09"}  # 5 of 10 get a permanent 400

    def rule(body):
        user = json.dumps(body["messages"])
        return "400" if any(f"building {int(i[-2:]) + 3}." in user for i in bad) else None

    with FakeOpenAIServer(answer_fn=answer_from_document, rule=rule) as srv:
        r = _evaluate(b, srv)
        line = one_line_error(r)
        assert r.exit_code == 1, r.output  # today: 0
        assert line.startswith("error: 5 call(s) failed") and "asks them again" in line
        assert sum(i in line for i in bad) == 3  # the first three named
        rows = pq.read_table(b / "responses.parquet").to_pylist()
        assert sorted(r["instance_id"] for r in rows if r["status"] == "error") == sorted(bad)
        n = srv.count
        srv.rule = None  # the server is fixed: the same command asks exactly the 5 again and succeeds
        r = _evaluate(b, srv)
        assert r.exit_code == 0 and srv.count == n + 5, r.output
    assert {r["status"] for r in pq.read_table(b / "responses.parquet").to_pylist()} == {"ok"}


def test_the_models_own_outcomes_stay_exit_0(tmp_path):
    b = make_build(tmp_path / "b", n=4)
    kinds = {0: "cut_off", 1: "content_filter", 2: "ctx400"}

    def rule(body):
        user = json.dumps(body["messages"])
        return next((k for i, k in kinds.items() if f"building {i + 3}." in user), None)

    with FakeOpenAIServer(answer_fn=answer_from_document, rule=rule) as srv:
        r = _evaluate(b, srv)
    assert r.exit_code == 0 and "error:" not in r.output, r.output
    st = sorted(r["status"] for r in pq.read_table(b / "responses.parquet").to_pylist())
    assert st == ["cut_off", "ok", "over_length", "refused_by_provider"]


def test_every_status_a_rerun_asks_again_counts_as_failed():
    from ctxbench.models.runner import STORED_STATUSES, asked_again

    assert asked_again("error") and asked_again("empty_reply") and asked_again(None)
    assert not any(asked_again(s) for s in STORED_STATUSES)


# ------------------------------------------------------------------- defect 6: failures that name the file

def _evaluated(tmp_path, n=4):
    b = make_build(tmp_path / "b", n=n)
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        assert _evaluate(b, srv).exit_code == 0
    return b


def test_a_damaged_table_is_named_under_score_and_verify(tmp_path):
    b = _evaluated(tmp_path)
    good = (b / "responses.parquet").read_bytes()
    (b / "responses.parquet").write_bytes(good[: len(good) // 2])  # cut in half: no footer
    r = cli("score", "--build", b)
    line = one_line_error(r)
    assert r.exit_code == 2 and str(b / "responses.parquet") in line and "evaluate" in line, r.output
    (b / "responses.parquet").write_bytes(good)
    m = json.loads((b / "manifest.json").read_text())  # a complete manifest, as verify reads it first
    (b / "manifest.json").write_text(json.dumps({**m, "config": {}, "versions": {}, "python": "3", "sqlite_version": "3",
                                                 "counts": {"instances": 4}}))
    (b / "instances.parquet").write_bytes(b"PAR1 not really")
    for cmd in ("score", "verify"):
        r = cli(cmd, "--build", b)
        line = one_line_error(r)
        assert r.exit_code == 2 and str(b / "instances.parquet") in line and "--force" in line, (cmd, r.output)


def test_score_rebuilds_its_own_damaged_scores(tmp_path):
    b = _evaluated(tmp_path)
    assert cli("score", "--build", b).exit_code == 0
    want = pq.read_table(b / "scores.parquet").to_pylist()
    (b / "scores.parquet").write_bytes(b"garbage, not Parquet")
    r = cli("score", "--build", b)
    assert r.exit_code == 0, r.output  # today: ArrowInvalid, exit 2
    assert pq.read_table(b / "scores.parquet").to_pylist() == want
    from ctxbench.run.incremental import score_if_changed

    (b / "scores.parquet").write_bytes(b"garbage again")
    assert score_if_changed(b)[1] is True  # not current: recomputed
    assert pq.read_table(b / "scores.parquet").num_rows == len(want)


def test_a_full_disk_under_evaluate_exits_1_naming_the_directory(tmp_path, monkeypatch):
    import errno

    b = make_build(tmp_path / "b", n=10)
    real = pq.write_table

    def full(tbl, where, *a, **k):
        if "responses" in str(where):
            raise OSError(errno.ENOSPC, "No space left on device", str(where))
        return real(tbl, where, *a, **k)

    monkeypatch.setattr(pq, "write_table", full)
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
            r = _evaluate(b, srv)
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]  # nothing leaks from the event loop
    line = one_line_error(r)
    assert r.exit_code == 1 and "no space left" in line and str(b) in line and "rerun" in line, r.output  # today: 2
    assert not [p for p in b.rglob(".*tmp-*")]  # no half-written temporary left


def _tmpfs(d, size="200k"):
    d.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    return d


def test_a_full_ctxbench_home_is_named_and_exits_1_without_event_loop_warnings(tmp_path):
    disk = _tmpfs(tmp_path / "disk")
    try:
        (disk / "fill").write_bytes(b"\0" * (200 * 1024 - 16 * 1024))  # 16 KiB left: the cache's WAL fills it
        b = make_build(tmp_path / "b", n=10)
        with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
            r = subprocess.run([sys.executable, "-W", "always", "-m", "ctxbench.cli", "evaluate", "--build", str(b),
                                "--model", "toy-model", "--base-url", srv.base_url, "--samples", "8"],
                               capture_output=True, text=True, timeout=300,
                               env={**os.environ, "PYTHONPATH": REPO, "CTXBENCH_HOME": str(disk / "home")})
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert r.returncode == 1 and len(err) == 1, r.stderr  # today: 2, "OperationalError: disk I/O error"
        assert str(disk / "home" / "cache" / "responses.sqlite") in err[0] and "CTXBENCH_HOME" in err[0]
        assert "never awaited" not in r.stderr and "Traceback" not in r.stderr and "Warning" not in r.stderr
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -------------------------------------------------------- defect 7: each of two processes reports its own work

def _numbers(out: str) -> dict:
    import re

    m = re.search(r"(\d+) calls made, (\d+) from cache, (?:(\d+) called by another process.*?, )?(\d+) already "
                  r"stored.*?(\d+) rows added to", out, re.S)
    assert m, out
    other = re.search(r"another process evaluating this build added (\d+) rows", out)
    return {"calls": int(m[1]), "cache": int(m[2]), "taken": int(m[3] or 0), "rows": int(m[5]),
            "others": int(other[1]) if other else 0}


@pytest.mark.slow
def test_two_evaluations_of_one_build_each_count_their_own_calls_and_rows(tmp_path):
    b = make_build(tmp_path / "b", n=10)
    env = {**os.environ, "PYTHONPATH": REPO, "CTXBENCH_HOME": str(tmp_path / "home")}
    with FakeOpenAIServer(answer_fn=answer_from_document, latency_s=0.3) as srv:
        cmd = [sys.executable, "-m", "ctxbench.cli", "evaluate", "--build", str(b), "--model", "toy-model",
               "--base-url", srv.base_url, "--samples", "4", "--concurrency", "2"]
        ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
              for _ in range(2)]
        outs = [p.communicate(timeout=600) for p in ps]
        calls = srv.count
    assert [p.returncode for p in ps] == [0, 0], outs
    a, c = (_numbers(o) for o, _ in outs)
    total = pq.read_metadata(b / "responses.parquet").num_rows
    assert total == 40  # 10 instances x 4 samples, each stored once
    assert a["calls"] + c["calls"] == calls == 40  # every call made once, counted by the process that made it
    assert a["rows"] + c["rows"] == total  # every row counted by the process that added it, none twice
    # each says what the other added while it ran (never more than the other added); the two overlapped
    assert a["others"] <= c["rows"] and c["others"] <= a["rows"] and a["others"] + c["others"] > 0, outs


# ------------------------------------------------ Also: long hostile replies load lazily in the report browser

def test_long_hostile_replies_keep_data_js_small_and_load_whole_on_demand(tmp_path):
    from ctxbench.report.browser import PREVIEW_CHARS, write_browser
    from ctxbench.core.storage import to_table, write_parquet
    from test_report_browser import _tiny_build, read_data

    b = _tiny_build(tmp_path / "b")
    resp = pq.read_table(b / "responses.parquet").to_pylist()
    # three hostile replies of 2 MB each: a lone surrogate (as stored: replaced by U+FFFD), NULs, markup
    huge = "\ufffd \x00 <script>alert(1)</script> " + "\x00x" * 1_000_000 + "\nAnswer: 1"
    for r in resp[:3]:
        r["response"] = huge
    write_parquet(to_table("responses", resp), b / "responses.parquet")
    out = b / "report"
    write_browser(b, out, "tiny")
    size = (out / "browser" / "data.js").stat().st_size
    assert size < 100_000, size  # today: 3 x 2 MB x (reply + visible + raw...) = tens of MB
    data = read_data(out)
    long = [a for a in data["answers"] if a.get("full")]
    assert len(long) == 3 and data["preview_chars"] == PREVIEW_CHARS
    files = sorted((out / "browser" / "replies").glob("*.js"))
    assert sorted(f.stem for f in files) == sorted(a["full"]["key"] for a in long)
    for a in long:
        assert len(a["reply"]) == PREVIEW_CHARS and a["full"]["chars"]["reply"] == len(huge)
        f = out / "browser" / "replies" / f"{a['full']['key']}.js"
        s = f.read_text(encoding="utf-8")
        assert "<" not in s and ">" not in s  # escaped like data.js
        key, texts = json.loads("[" + s[len("ctxbenchReply("):].rstrip().rstrip(";").rstrip(")") + "]")
        assert key == a["full"]["key"] and texts["reply"] == huge and texts["visible"].endswith("Answer: 1")
    page = (out / "instances.html").read_text(encoding="utf-8")
    assert "browser/replies/" in page and "show all" in page
    # short replies again: the reply files go
    for r in resp[:3]:
        r["response"] = "Answer: 1"
    write_parquet(to_table("responses", resp), b / "responses.parquet")
    write_browser(b, out, "tiny")
    assert not list((out / "browser" / "replies").glob("*.js"))
    assert not [a for a in read_data(out)["answers"] if a.get("full")]


# ----------------------------------------------------- attempts that held, kept: script in every page of a run

def test_markup_in_model_names_and_replies_is_text_in_every_page(tmp_path):
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.report import build_report
    from ctxbench.report.compare import compare_runs
    from ctxbench.run.score import score_build

    bad = "<img src=x onerror=alert(1)>"
    b = make_build(tmp_path / "b", n=4)
    with FakeOpenAIServer(answer_fn=lambda body: f"{bad}<script>alert(2)</script>\nAnswer: 4821") as srv:
        s = evaluate_build(b, EvalConfig(model=f"openai/{bad}", base_url=srv.base_url, concurrency=2))
    assert s.calls == 4
    score_build(b)
    pages = [build_report(b), compare_runs([b], tmp_path / "board").page]
    pages += [p for p in (b / "report").glob("*.html")]
    for p in pages:
        html = p.read_text(encoding="utf-8")
        assert "<img src=x" not in html and "<script>alert" not in html, p
    for js in (b / "report" / "browser").rglob("*.js"):
        t = js.read_text(encoding="utf-8")
        assert "<" not in t and ">" not in t, js  # data for the browser: markup escaped, shown as text


def test_questions_generate_never_replaces_a_users_file(tmp_path):
    mine = tmp_path / "my_queries.yaml"
    mine.write_text("questions:\n  - {id: q1, question: 'Mine?', sql: 'SELECT 1'}\n", encoding="utf-8")
    r = cli("questions", "generate", "--db", "nycflights13", "--out", mine, "--n", "1")
    line = one_line_error(r)
    assert r.exit_code == 2 and str(mine) in line and "--force" in line, r.output  # today: replaced, exit 0
    assert "Mine?" in mine.read_text(encoding="utf-8")
    from ctxbench.tracks.holobench.generate import GENERATED_MARK, check_generated_out

    mine.write_text(f"# Query set for x, {GENERATED_MARK} (generator version 1)\n", encoding="utf-8")
    check_generated_out(mine)  # an earlier generated query set is written again
    check_generated_out(tmp_path / "new.yaml")


def test_screen_with_failed_calls_exits_1(tmp_path):
    from test_filters import make_build as filters_build

    b = filters_build(tmp_path / "fb")
    # every question about box 2 gets a permanent 400: 1 of 6 closed-book calls fails
    with FakeOpenAIServer(rule=lambda body: "400" if "box 2?" in json.dumps(body["messages"]) else None) as srv:
        r = cli("screen", "--build", b, "--model", "openai/cb", "--base-url", srv.base_url)
    line = one_line_error(r)
    assert r.exit_code == 1 and line.startswith("error: 1 call(s) failed") and "asks them again" in line, r.output


def test_report_rebuilds_damaged_scores_first(tmp_path):
    b = _evaluated(tmp_path)
    assert cli("score", "--build", b).exit_code == 0
    want = pq.read_table(b / "scores.parquet").num_rows
    (b / "scores.parquet").write_bytes(b"damaged")
    r = cli("report", "--build", b)
    assert r.exit_code == 0, r.output  # today: ArrowInvalid without a path, exit 2
    assert pq.read_table(b / "scores.parquet").num_rows == want and (b / "report" / "index.html").exists()
