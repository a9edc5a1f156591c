"""What a newcomer meets in ``ctxbench run`` (issue 32, items 1-4): ``run`` takes every build option of the track it
builds (``--queries`` included) and a bad one gets ``build``'s line and exit status, with no engine traceback on the
terminal (Prefect and luigi); the results table counts cut-off replies and ``run`` prints ``evaluate``'s closing
summary; models side by side on different instances are flagged, with the shared-instance table beside them; the
instance browser opens on the answered instances when fewer than half are answered, saying why the rest are not
asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.cli.commands.run import run_command
from ctxbench.core.storage import to_table, write_parquet
from fakeserver import FakeOpenAIServer
from test_crash_safety import make_toy_build

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


# ---------------------------------------------------------------------------------- item 1: run's build options

def test_run_takes_every_build_option_of_its_track():
    from ctxbench.cli.options import option_specs
    from ctxbench.core.track import default_track

    t = default_track()
    build_flags = {"--" + s.flag for s in option_specs(t.Config, t.cli_names, t.cli_hidden, t.cli_checks)}
    run_flags = {o for p in run_command().params for o in p.opts}
    assert "--queries" in build_flags
    assert build_flags <= run_flags, build_flags - run_flags
    # run's own tiers stay small: 2,048 and 4,096 tokens (build's default starts at 4,096)
    lengths = next(p for p in run_command().params if "--lengths" in p.opts)
    assert lengths.default == "2048,4096"


@pytest.mark.parametrize("args", [["--queries", "no-such-file.yaml"], ["--density", "1.5"], ["--position", "top"]])
def test_a_bad_build_option_gets_builds_line_and_status(args, tmp_path):
    b = runner.invoke(app, ["build", "holobench", *args, "--out", str(tmp_path / "b")])
    r = runner.invoke(app, ["run", *args, "--model", "openai/x", "--base-url", "http://127.0.0.1:9/v1",
                            "--out", str(tmp_path / "r")])
    assert b.exit_code == r.exit_code == 2
    err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and err == [ln for ln in b.output.splitlines() if ln.startswith("error:")]
    assert "Traceback" not in r.output and not (tmp_path / "r").exists()  # nothing started


def _cli(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctxbench.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["prefect", "luigi"])
def test_a_bad_input_found_inside_the_engine_is_one_line(engine, spider_db, tmp_path):
    # chinook_1 has no verbalization templates under assets/ and no --queries: the build's verbalize stage raises
    # InputError inside the engine (Prefect used to print ~170 lines of tracebacks before ctxbench's one line)
    db = str(spider_db("chinook_1"))
    b = _cli(["build", "holobench", "--db", db, "--lengths", "1024", "--out", str(tmp_path / "b")])
    r = _cli(["run", "--engine", engine, "--db", db, "--lengths", "1024", "--model", "openai/x", "--base-url",
              "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r")])
    assert b.returncode == r.returncode == 2, r.stderr
    build_err = [ln for ln in b.stderr.splitlines() if ln.startswith("error:")]
    assert len(build_err) == 1 and "no verbalization templates for database 'chinook_1'" in build_err[0]
    out = r.stdout + r.stderr
    assert [ln for ln in out.splitlines() if ln.startswith("error:")] == build_err
    assert len(out.splitlines()) <= 6, out  # the run's header, its stage lines, the error
    for noise in ("Traceback", "ERROR", "Error logging to API", "Task run", "Flow run", "luigi-interface",
                  "Worker(", "Luigi Execution Summary", "InputError"):
        assert noise not in out, out
    # the engine's records went to the run's log instead
    log = (tmp_path / "r" / "run.log").read_text(encoding="utf-8")
    assert "no verbalization templates" in log


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["prefect", "luigi"])
def test_own_db_and_query_set_reach_a_table_in_one_command(engine, spider_db, tmp_path):
    """A Spider database as "my own" (chinook_1: no query set or templates in assets/), its query set from
    `questions generate`, then one `run --db FILE --queries FILE`; the fake model's first reply is cut off by the
    output budget (finish_reason length)."""
    db = str(spider_db("chinook_1"))
    q = tmp_path / "chinook.yaml"
    g = _cli(["questions", "generate", "--db", db, "--out", str(q)])
    assert g.returncode == 0, g.stderr
    with FakeOpenAIServer() as srv:
        srv.script(["cut_off"])
        r = _cli(["run", "--engine", engine, "--db", db, "--queries", str(q), "--lengths", "1024,2048",
                  "--per-length", "2", "--model", "openai/x", "--base-url", srv.base_url, "--out",
                  str(tmp_path / "r")], env={"CTXBENCH_HOME": str(tmp_path / "home")})
        calls = srv.count
        assert (tmp_path / "r" / "run.log").is_file()  # the engine's log that run's help names, even when empty
        # the same command again: nothing is asked, and the stored cut-off reply is still named with the advice
        again = _cli(["run", "--engine", engine, "--db", db, "--queries", str(q), "--lengths", "1024,2048",
                      "--per-length", "2", "--model", "openai/x", "--base-url", srv.base_url, "--out",
                      str(tmp_path / "r")], env={"CTXBENCH_HOME": str(tmp_path / "home")})
        assert srv.count == calls and again.returncode == 0, again.stderr
        assert "cut off: 1 stored replies of openai/x ended at the output budget" in again.stderr
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Traceback" not in out and "ERROR" not in out
    assert calls == 4  # 2 per length x 2 lengths
    assert "ctxbench results" in r.stdout
    # the table's cut-off column: the one cut-off reply sits in one row (by hand: 1 of the 4 replies), the other
    # length's row counts 0, and the model's Avg row sums them: 1
    import pyarrow.parquet as pq

    build = (tmp_path / "r" / "latest").resolve()
    resp = pq.read_table(build / "responses.parquet").to_pylist()
    assert sorted(x["status"] for x in resp) == ["cut_off", "ok", "ok", "ok"]
    from ctxbench.analysis.core import results_table

    rows = results_table(build, primary_only=True)
    assert sorted(x["cut_off"] for x in rows) == [0, 1]
    # evaluate's closing summary, with the budget advice
    assert "4 instances selected; 4 calls made" in out
    assert "1 cut off by the output budget (scored 0)" in out
    assert "cut off: 1 replies ended at the output budget" in out and "--max-tokens" in out


# ------------------------------------------------------------------------- item 3: one sample for every model

def test_runs_sample_does_not_depend_on_the_model(monkeypatch, tmp_path):
    """`run --model X` after the default run must evaluate the same instances: the EvalConfig `run` hands the
    engine differs between the embedded default and another model only in the model and its endpoint."""
    import pipelines.flows as flows
    import pipelines.temp_server as ts
    import ctxbench.cli.run as cli_run  # where run looks the backend's preflight check up

    seen = []

    def fake_nightly(build, out, models, **engine_options):  # workers=... since issue 36
        seen.append(models[0])
        raise ValueError("stop here")

    monkeypatch.setattr(flows, "nightly", fake_nightly)
    monkeypatch.setattr(ts, "temporary_server", lambda: __import__("contextlib").nullcontext())
    monkeypatch.setattr(cli_run, "preflight", lambda model, base_url=None: None)  # no runtime or GGUF needed
    for extra in ([], ["--model", "openai/x", "--base-url", "http://127.0.0.1:9/v1"]):
        r = runner.invoke(app, ["run", *extra, "--out", str(tmp_path / "r")])
        assert r.exit_code == 2 and "stop here" in r.output
    a, b = seen
    assert a.model != b.model
    assert a.model_dump(exclude={"model", "base_url"}) == b.model_dump(exclude={"model", "base_url"})


def _two_model_build(d: Path) -> Path:
    """A toy build (inst-00..03 at 1,024 tokens, inst-04..07 at 2,048) scored for two models: at 1,024 openai/a
    answered inst-00,01,02 (scores 1, 0 cut off, 1) and openai/b inst-01,02,03 (1, 1, 0); at 2,048 both answered
    inst-04 and inst-05 (a: 1, 0; b: 0, 0)."""
    make_toy_build(d, 8)
    plan = {"openai/a": {"inst-00": 1.0, "inst-01": 0.0, "inst-02": 1.0, "inst-04": 1.0, "inst-05": 0.0},
            "openai/b": {"inst-01": 1.0, "inst-02": 1.0, "inst-03": 0.0, "inst-04": 0.0, "inst-05": 0.0}}
    resp, sc = [], []
    for m, by in plan.items():
        for iid, s in by.items():
            key = f"{m}|{iid}"
            cut = (m, iid) == ("openai/a", "inst-01")
            resp.append({"request_key": key, "instance_id": iid, "model": m, "mode": "lc", "sample": 0,
                         "prompt_variant": "cot", "response": "Answer: x", "reasoning": None, "cached": False,
                         "status": "cut_off" if cut else "ok", "retries": 0,
                         "finish_reason": "length" if cut else "stop"})
            sc.append({"instance_id": iid, "model": m, "mode": "lc", "sample": 0, "matcher": "row_match",
                       "score": s, "tags": json.dumps(["cut_off"] if cut else []), "extracted_answer": "x",
                       "request_key": key})
    write_parquet(to_table("responses", resp), d / "responses.parquet")
    write_parquet(to_table("scores", sc), d / "scores.parquet")
    return d


def test_models_on_different_instances_are_flagged_with_the_shared_table(tmp_path):
    from ctxbench.analysis.core import differing_samples, instance_scores, length_rows, results_table, \
        shared_instance_rows

    b = _two_model_build(tmp_path / "b")
    rows = instance_scores(b)[0]
    assert differing_samples(rows) == [{"mode": "lc", "matcher": "row_match", "context_length": 1024,
                                        "per_model": {"openai/a": 3, "openai/b": 3}, "shared": 2}]
    full = {(r["model"], r["context_length"]): r for r in results_table(b)}
    # by hand: a at 1,024 = (1 + 0 + 1) / 3, one reply cut off; b = (1 + 1 + 0) / 3
    assert full[("openai/a", 1024)]["n"] == 3 and full[("openai/a", 1024)]["score"] == pytest.approx(2 / 3)
    assert full[("openai/a", 1024)]["cut_off"] == 1 and full[("openai/b", 1024)]["cut_off"] == 0
    shared = {(r["model"], r["context_length"]): r for r in length_rows(shared_instance_rows(rows))}
    # shared at 1,024: inst-01, inst-02 -> a (0 + 1) / 2 = 0.5, b (1 + 1) / 2 = 1.0; 2,048 unchanged
    assert shared[("openai/a", 1024)]["n"] == shared[("openai/b", 1024)]["n"] == 2
    assert shared[("openai/a", 1024)]["score"] == 0.5 and shared[("openai/b", 1024)]["score"] == 1.0
    assert shared[("openai/a", 2048)]["score"] == 0.5 and shared[("openai/b", 2048)]["score"] == 0.0

    r = runner.invoke(app, ["report", "--build", str(b)])
    assert r.exit_code == 0, r.output
    assert "scored on different instances" in r.output
    assert "1,024 tokens (lc): openai/a 3, openai/b 3, 2 shared" in r.output
    assert "shared instances only" in r.output
    page = (b / "report" / "index.html").read_text(encoding="utf-8")
    assert "The models were scored on different instances" in page and "shared instances only" in page


def test_models_on_the_same_instances_get_no_warning(tmp_path):
    from ctxbench.analysis.core import differing_samples, instance_scores

    b = _two_model_build(tmp_path / "b")
    rows = [r for r in instance_scores(b)[0] if r["target_tokens"] == 2048]
    assert differing_samples(rows) == []
    from ctxbench.cli.results import print_shared_comparison

    import pyarrow.parquet as pq
    keep = [r for r in pq.read_table(b / "scores.parquet").to_pylist() if r["instance_id"] in ("inst-04", "inst-05")]
    write_parquet(to_table("scores", keep), b / "scores.parquet")
    assert print_shared_comparison(b) is False


# ------------------------------------------------------------------------------- items 2 and 4: the browser

def test_browser_opens_on_the_answered_when_fewer_than_half_are():
    from ctxbench.report.browser import asked_summary

    # the case: 40 instances (20 per length), a sample of 3 per length answered -> 34 not asked
    inst = [{"length": 2048 if k < 20 else 4096} for k in range(40)]
    answers = [{"i": k} for k in (0, 1, 2, 20, 21, 22)]
    s = asked_summary(inst, answers)
    assert s["answered"] == 6 and s["open_answered"] is True
    assert s["unasked_note"].startswith("34 of 40 instances are not asked: the evaluation asked a sample of 3 per "
                                        "context length")
    assert "opens on the 6 answered" in s["unasked_note"]
    # half answered: opens on every instance, still says why the rest are not asked
    half = asked_summary(inst[:4], [{"i": 0}, {"i": 1}])
    assert half["open_answered"] is False and half["unasked_note"].startswith("2 of 4 instances are not asked")
    # unequal counts per length are listed; all answered: no note
    uneven = asked_summary(inst, [{"i": 0}, {"i": 20}, {"i": 21}])
    assert "2,048 tokens 1 of 20; 4,096 tokens 2 of 20" in uneven["unasked_note"]
    assert asked_summary(inst[:2], [{"i": 0}, {"i": 1}]) == {"answered": 2, "open_answered": False,
                                                          "unasked_note": ""}


def test_browser_page_says_what_a_cut_off_reply_scores():
    from ctxbench.report.browser_page import JS

    assert "0, cut off" in JS and "controls.asked.value = 'answered'" in JS


NODE = "/usr/bin/node"


@pytest.mark.skipif(not os.path.exists(NODE), reason="node is not installed")
def test_browser_script_opens_on_answered_cards_and_words_a_cut_off(tmp_path):
    """The page's own script run by node on a minimal DOM: 4 instances, 1 answered (cut off, row_match 0): the page
    opens on that one card, says 3 are not asked, and writes "0, cut off" beside the 0.00 badge."""
    from ctxbench.report.browser_page import JS

    data = {"instances": [{"id": f"i{k}", "question": f"q{k}", "length": 1024, "facets": {}, "accepted": [],
                           "gold": "1", "primary": "row_match"} for k in range(4)],
            "answers": [{"i": 0, "model": "m", "mode": "lc", "sample": 0, "status": "cut_off", "error": "x",
                         "scores": {"row_match": 0.0}, "tags": {"row_match": ["cut_off"]}, "extracted": {},
                         "details": {}, "cut_off": True, "finish_reason": "length", "reply": "Ans", "visible": "Ans",
                         "reasoning": []}],
            "questions": [], "facets": [], "matchers": ["row_match"], "models": ["m"], "modes": ["lc"],
            "lengths": [1024], "prompts": {}, "answered": 1, "open_answered": True,
            "unasked_note": "3 of 4 instances are not asked: because."}
    dom = r"""
function E(tag){this.tagName=tag.toUpperCase();this.children=[];this.options=[];this.dataset={};this.style={};
  this.value='';this._text='';this.className='';}
E.prototype.appendChild=function(c){this.children.push(c);if(this.tagName==='SELECT'&&c.tagName==='OPTION')this.options.push(c);return c;};
E.prototype.addEventListener=function(){};E.prototype.querySelectorAll=function(){return [];};
Object.defineProperty(E.prototype,'textContent',{get:function(){return this._text+this.children.map(function(c){return c.textContent;}).join('');},
  set:function(v){this._text=String(v);this.children=[];}});
var byId={filters:new E('div'),count:new E('p'),list:new E('main'),more:new E('button')};
var header=new E('header');
global.document={createElement:function(t){return new E(t);},createTextNode:function(t){var e=new E('#text');e._text=String(t);return e;},
  getElementById:function(i){return byId[i];},querySelector:function(){return header;},head:new E('head'),
  addEventListener:function(ev,f){if(ev==='DOMContentLoaded')global.__ready=f;}};
global.window={location:{hash:'',search:'',pathname:'/x'},addEventListener:function(){}};
global.history={replaceState:function(){}};
"""
    script = tmp_path / "t.js"
    script.write_text(dom + f"window.CTXBENCH_BROWSER={json.dumps(data)};\n" + JS + "\nglobal.__ready();\n"
                      "console.log(JSON.stringify({n: byId.list.children.length, count: byId.count.textContent,"
                      " header: header.textContent, list: byId.list.textContent}));\n", encoding="utf-8")
    r = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["n"] == 1                                    # only the answered card
    assert got["count"].startswith("1 instance, 1 answer shown (of 4 instances")
    assert "3 of 4 instances are not asked" in got["header"]
    assert "row_match 0.00" in got["list"] and "0, cut off" in got["list"] and "not scored" not in got["list"]
