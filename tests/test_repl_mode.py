"""``evaluate --mode repl`` (issue 35, ctxbench.run.repl) end to end against a scripted root model served by the
fake OpenAI-compatible server: the model's code regex-searches ``context``, asks the sub-model through
``llm_query`` and ends with ``FINAL`` / ``FINAL_VAR``. Every instance of a small HoloBench-shaped build is right
after ``score``; the code saw exactly the instance's context (it prints its length and SHA-256, checked against
the build); sub-calls are answered, cached and stored in steps.parquet; an endless loop ends its instance with
``step_timeout`` while the run completes; a rerun makes no request; the code cannot reach a listener on the host's
127.0.0.1 nor write outside its sandbox."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import socket
import threading

import pyarrow.parquet as pq
import pytest

import ctxbench.run.evaluate as ev
from ctxbench.core.errors import InputError
from ctxbench.models.cache import ResponseCache
from ctxbench.models.gateway import RetryPolicy
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.run.repl import ReplConfig
from ctxbench.run.repl import sandbox as sandbox_mod
from ctxbench.analysis.modes import analyse_modes
from ctxbench.report import build_report
from ctxbench.report.browser import browser_data
from ctxbench.run.score import score_build
from ctxbench.core.storage import to_table, write_parquet
from fakeserver import FakeOpenAIServer, message_text



@pytest.fixture
def bwrap():
    """Skip where bubblewrap cannot start a sandbox (not installed, or no user namespaces); fail under CI=true,
    where .ci/run installs it."""
    try:
        sandbox_mod.require_sandbox("bwrap")
    except InputError as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{e} (required under CI=true)")
        pytest.skip(str(e))

NAMES = ["Aster", "Birch", "Cedar", "Dahlia", "Elm", "Fern"]
CODES = [4821, 1937, 7065, 3310, 5582, 6149]


def _context(i: int) -> str:
    facts = [f"The code of item {NAMES[j]} is {CODES[j]}." for j in range(len(NAMES))]
    facts = facts[i:] + facts[:i]
    filler = " ".join(f"Shelf {k} of record set {i} holds nothing of note." for k in range(40))
    return " ".join([filler] + facts)


def make_build(d, n=6):
    """A small HoloBench-shaped build: the question asks an item's code, the gold is that code."""
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"instance_id": f"inst-{i:02d}", "benchmark": "holobench", "source_id": "toy",
             "question": f"What is the code of item {NAMES[i]}?", "question_id": f"q{i}", "sql": None,
             "gold": json.dumps([[CODES[i]]]), "context": _context(i), "tokenizer": "cl100k_base",
             "target_tokens": 1024, "context_tokens": 600, "setting": "amount", "context_format": "full_text",
             "position": "end", "query_types": json.dumps(["Lookup"]), "difficulty": "easy",
             "evidence_spans": "[]", "build_hash": "toybuild"} for i in range(n)]
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "toybuild", "track": "holobench"}), encoding="utf-8")
    return d


STEP1 = '''I will look at the context first.
```repl
import hashlib, re
print("LEN", len(context), "SHA", hashlib.sha256(context.encode("utf-8")).hexdigest())
m = re.search(r"The code of item {name} is (\\d+)\\.", context)
note = llm_query("Confirm this sentence: " + m.group(0))
print("SUB", note)
answer = m.group(1)
```'''


def scripted_root(body: dict, extra: dict | None = None) -> str:
    """The scripted root model (it follows the protocol): step 1 searches the context and asks the sub-model;
    step 2 ends with FINAL(answer) in code (even instances) or FINAL_VAR(answer) in text (odd ones). ``extra``:
    question name -> the code of step 1 instead (the sandbox probes, the endless loop)."""
    msgs = body["messages"]
    first = message_text(msgs[0]["content"])
    if not first.startswith("You are tasked"):  # a sub-call: one user message
        sentence = message_text(msgs[-1]["content"]).split(": ", 1)[1]
        return f"Confirmed: {sentence}"
    name = re.search(r"Question: What is the code of item (\w+)\?", message_text(msgs[1]["content"])).group(1)
    users = [m for m in msgs if m["role"] == "user"]
    if extra and name in extra and len(users) == 1:
        return f"```repl\n{extra[name]}\n```"
    if len(users) == 1:
        return STEP1.replace("{name}", name)
    if NAMES.index(name) % 2 == 0:
        return "Now I have it.\n```repl\nFINAL(answer)\n```"
    return "The code is in `answer`.\nFINAL_VAR(answer)"


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def cfg(srv, **repl):
    return EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=3, max_retries=2, timeout_s=30,
                      mode="repl", repl=ReplConfig(**{"step_timeout_s": 20.0, **repl}))


def test_repl_answers_every_instance_right_and_reruns_make_no_request(tmp_path, bwrap):
    build = make_build(tmp_path / "b")
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        s = evaluate_build(build, cfg(srv))
        assert (s.selected, s.new_rows, s.unfinished, s.errors, s.status) == (6, 6, 0, 0, "complete")
        # 6 instances × (2 root turns + 1 sub-call)
        assert srv.count == 18 and s.calls == 18
        rows = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
        assert {r["mode"] for r in rows.values()} == {"repl"}
        assert {i: (r["status"], r["response"]) for i, r in rows.items()} == \
            {f"inst-{i:02d}": ("ok", str(CODES[i])) for i in range(6)}
        assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in rows.values())

        # the code saw exactly the instance's context: the output it printed, as the root model got it
        inst = {r["instance_id"]: r["context"] for r in pq.read_table(build / "instances.parquet").to_pylist()}
        steps = pq.read_table(build / "steps.parquet").to_pylist()
        assert len(steps) == 12
        for iid, ctx in inst.items():
            mine = sorted((r for r in steps if r["instance_id"] == iid), key=lambda r: r["step"])
            assert [r["status"] for r in mine] == ["continue", "final"]
            assert f"LEN {len(ctx)} SHA {hashlib.sha256(ctx.encode()).hexdigest()}" in mine[0]["output"]
            subs = json.loads(mine[0]["sub_calls"])
            i = int(iid[-2:])
            assert len(subs) == 1 and subs[0]["status"] == "ok"
            assert subs[0]["response"] == f"Confirmed: The code of item {NAMES[i]} is {CODES[i]}."
            assert subs[0]["response"] in mine[0]["output"]  # the sub-model's answer came back to the code
            assert all(r["request_key"] == rows[iid]["request_key"] for r in mine)
        # the root model's second turn carried the output of the first
        seconds = [b for b in srv.requests if len([m for m in b["messages"] if m["role"] == "user"]) == 2]
        assert len(seconds) == 6 and all("REPL output:\nLEN " in message_text(b["messages"][-1]["content"])
                                         for b in seconds)
        assert len(ResponseCache()) == 18  # every root turn and sub-call stored in the response cache

        # score: the final answers go through the same answer pipeline and matchers
        score_build(build)
        sc = pq.read_table(build / "scores.parquet").to_pylist()
        assert sc and all(r["mode"] == "repl" and r["score"] == 1.0 for r in sc), sc
        # the report puts the modes side by side: calls per instance counted from the steps (2 turns + 1 sub-call)
        build_report(build)
        (m,) = pq.read_table(build / "report" / "modes.parquet").to_pylist()
        assert (m["mode"], m["instances"], m["score"], m["calls_per_instance"]) == ("repl", 6, 1.0, 3.0)
        # the instance browser holds each answer's steps (shown folded), and no LC prompt for them
        d, _ = browser_data(build, tmp_path / "site")
        shown = [a for a in d["answers"] if a["mode"] == "repl"]
        assert len(shown) == 6 and all(a["prompt"] is None for a in shown)
        assert all([(x["step"], x["status"], x["sub_calls"]) for x in a["steps"]] ==
                   [(1, "continue", 1), (2, "final", 0)] for a in shown)

        # a rerun of the same command makes no request
        s2 = evaluate_build(build, cfg(srv))
        assert (srv.count, s2.calls, s2.new_rows, s2.already_stored) == (18, 0, 0, 6)
        # a resume with the rows lost replays every conversation from the response cache: no request either
        (build / "responses.parquet").unlink()
        s3 = evaluate_build(build, cfg(srv))
        assert (srv.count, s3.calls, s3.new_rows, s3.from_cache) == (18, 0, 6, 6)
        assert all(r["cached"] for r in pq.read_table(build / "responses.parquet").to_pylist())


def test_endless_loop_and_escapes_end_only_their_instance(tmp_path, bwrap):
    """The code cannot reach a listener on the host's 127.0.0.1 nor write outside its sandbox; an endless loop
    ends its instance with step_timeout (stored, scored 0, not asked again) while the run completes."""
    build = make_build(tmp_path / "b")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        try:
            while True:
                try:
                    accepted.append(listener.accept())
                except socket.timeout:
                    if stop.is_set():
                        return
        except OSError:
            return

    stop = threading.Event()
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    outside = tmp_path / "escaped.txt"
    worktree_file = build / "written-by-the-model.txt"
    probe = (f"import socket\n"
             f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('NET reached')\n"
             f"except OSError as e:\n    print('NET blocked', type(e).__name__)\n"
             f"for p in [{str(outside)!r}, {str(worktree_file)!r}]:\n"
             f"    try:\n        open(p, 'w').write('x'); print('WROTE', p)\n"
             f"    except OSError as e:\n        print('WRITE blocked', type(e).__name__)\n"
             f"open('/tmp/mine.txt', 'w').write('private'); print('TMP', open('/tmp/mine.txt').read())\n"
             f"FINAL('{CODES[1]}')")
    extra = {"Aster": "x = 0\nwhile True:\n    x += 1", "Birch": probe}
    try:
        with FakeOpenAIServer(answer_fn=lambda b: scripted_root(b, extra)) as srv:
            s = evaluate_build(build, cfg(srv, step_timeout_s=2.0))
            rows = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
            assert s.status == "complete" and len(rows) == 6
            assert rows["inst-00"]["status"] == "step_timeout"
            assert "wall-clock limit of 2 s" in rows["inst-00"]["error"] or "CPU-time" in rows["inst-00"]["error"]
            assert all(rows[f"inst-{i:02d}"]["status"] == "ok" for i in range(1, 6))
            out = [r for r in pq.read_table(build / "steps.parquet").to_pylist() if r["instance_id"] == "inst-01"]
            assert len(out) == 1 and out[0]["status"] == "final"
            text = out[0]["output"]
            assert "NET blocked" in text and "NET reached" not in text
            assert text.count("WRITE blocked") == 2 and "WROTE" not in text and "TMP private" in text
            n = srv.count
            s2 = evaluate_build(build, cfg(srv, step_timeout_s=2.0))  # step_timeout is not asked again
            assert srv.count == n and s2.calls == 0 and s2.new_rows == 0
        summary = score_build(build)
        sc = {r["instance_id"]: (r["score"], json.loads(r["tags"]))
              for r in pq.read_table(build / "scores.parquet").to_pylist()}
        assert summary.repl_unfinished == 1 and sc["inst-00"] == (0.0, ["step_timeout"])  # never credited
        assert all(sc[f"inst-{i:02d}"][0] == 1.0 for i in range(1, 6))
        (m,) = analyse_modes(build)["modes"]  # the side-by-side table counts it, as a wrong answer
        assert (m["step_timeout"], m["scored"], m["score"]) == (1, 6, pytest.approx(5 / 6))
    finally:
        stop.set()
        th.join(5)
        listener.close()
    assert not accepted
    assert not outside.exists() and not worktree_file.exists()


def test_max_steps_and_token_budget_are_the_models_own_statuses(tmp_path, bwrap):
    build = make_build(tmp_path / "b", n=2)
    talk = lambda b: "```repl\nprint('still looking')\n```"  # noqa: E731 - never ends
    with FakeOpenAIServer(answer_fn=talk) as srv:
        evaluate_build(build, cfg(srv, max_steps=3))
        rows = pq.read_table(build / "responses.parquet").to_pylist()
        assert {r["status"] for r in rows} == {"max_steps"} and srv.count == 6
        steps = pq.read_table(build / "steps.parquet").to_pylist()
        assert sorted(r["status"] for r in steps) == ["continue"] * 4 + ["max_steps"] * 2
    build2 = make_build(tmp_path / "b2", n=1)
    with FakeOpenAIServer(answer_fn=talk) as srv:
        evaluate_build(build2, cfg(srv, max_steps=50, max_answer_tokens=1500))
        (row,) = pq.read_table(build2 / "responses.parquet").to_pylist()
        assert row["status"] == "over_budget" and "1,500" in row["error"]
        assert row["prompt_tokens"] + row["completion_tokens"] >= 1500
        assert srv.count < 50


def test_missing_bubblewrap_is_one_line_naming_the_package(tmp_path, monkeypatch):
    build = make_build(tmp_path / "b", n=1)
    monkeypatch.setattr(sandbox_mod.shutil, "which", lambda name: None)
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        with pytest.raises(InputError, match="install the package bubblewrap") as e:
            evaluate_build(build, cfg(srv))
        assert "\n" not in str(e.value) and srv.count == 0


def _cli(build, srv, *extra):
    from typer.testing import CliRunner  # lazy: only the CLI tests drive the command line

    from ctxbench.cli import app  # lazy: as above
    return CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                                    srv.base_url, "--mode", "repl", "--concurrency", "1", *extra])


def test_cli_missing_bwrap_exit_2_and_sandbox_none_warns_every_run(tmp_path, monkeypatch):
    build = make_build(tmp_path / "b", n=2)
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        with monkeypatch.context() as m:
            m.setattr(sandbox_mod.shutil, "which", lambda name: None)
            r = _cli(build, srv)
        assert r.exit_code == 2 and srv.count == 0
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert len(lines) == 1 and "bubblewrap" in lines[0] and "apt-get install -y bubblewrap" in lines[0]
        for _ in range(2):  # the warning on every run, the fully stored rerun included
            r = _cli(build, srv, "--sandbox", "none")
            assert r.exit_code == 0, r.output
            assert "warning: --sandbox none" in r.output
        assert srv.count == 6
        assert all(x["status"] == "ok" for x in pq.read_table(build / "responses.parquet").to_pylist())


def test_max_cost_counts_sub_calls_before_they_are_sent(tmp_path, bwrap):
    """--max-cost reserves each call's worst case, sub-calls included, before sending it: the server's own count
    of what it answered stays under the cap; the answers cut short are not stored, and a rerun with a larger cap
    finishes them, replaying what was already answered from the cache."""
    build = make_build(tmp_path / "b", n=3)
    price = 1000.0  # USD per million tokens, input and output: $0.001 a token
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        r = _cli(build, srv, "--max-tokens", "100", "--max-cost", "1.5", "--price", f"{price},{price}")
        assert r.exit_code == 3, r.output
        sent = len(srv.requests)
        subs_sent = sum(1 for b in srv.requests if b["messages"][0]["role"] == "user")
        assert subs_sent >= 1  # a sub-call was counted and sent under the cap
        spent = float(re.search(r"spent \$([\d.]+)", r.output).group(1))
        assert 0 < spent <= 1.5
        stored = pq.read_table(build / "responses.parquet").to_pylist()
        assert len(stored) < 3 and all(x["status"] == "ok" for x in stored)
        r = _cli(build, srv, "--max-tokens", "100", "--max-cost", "100", "--price", f"{price},{price}")
        assert r.exit_code == 0, r.output
        assert len(pq.read_table(build / "responses.parquet").to_pylist()) == 3
        # every call of the first run was replayed from the cache: 3 answers × 3 calls in all, none asked twice
        assert len(srv.requests) == 9 and len({json.dumps(b, sort_keys=True) for b in srv.requests}) == 9
        assert sent < 9


def test_sub_call_failures_go_through_the_runners_statuses(tmp_path, bwrap):
    """A sub-call the server refuses (a permanent 400) comes back to the code as a failed llm_query and the answer
    goes on; a sub-call failing past its retries (transient 503s) leaves its answer unstored, and a rerun, once
    the server is back, finishes it with the earlier calls replayed from the cache."""
    build = make_build(tmp_path / "b", n=3)
    state = {"down": True}

    def rule(body):
        first = body["messages"][0]
        if first["role"] != "user":
            return None  # root turns always answered
        text = message_text(first["content"])
        if "Aster" in text:
            return "400"
        if "Birch" in text and state["down"]:
            return "503"
        return None

    with FakeOpenAIServer(answer_fn=scripted_root, rule=rule, retry_after="0") as srv:
        s = evaluate_build(build, cfg(srv))
        rows = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
        assert set(rows) == {"inst-00", "inst-02"} and s.unfinished == 1 and s.status == "incomplete"
        assert rows["inst-00"]["status"] == "ok" and rows["inst-00"]["response"] == str(CODES[0])
        step1 = [r for r in pq.read_table(build / "steps.parquet").to_pylist()
                 if r["instance_id"] == "inst-00" and r["step"] == 1][0]
        assert "SUB [llm_query failed: error: " in step1["output"]
        assert json.loads(step1["sub_calls"])[0]["status"] == "error"
        assert any("inst-01" in n for n in s.notes)
        before = srv.count
        state["down"] = False
        s2 = evaluate_build(build, cfg(srv))
        assert s2.new_rows == 1 and s2.unfinished == 0
        # the rerun made the sub-call and the second root turn; the first root turn came from the cache
        assert srv.count - before == 2 and s2.calls == 2
        rows = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
        assert rows["inst-01"]["status"] == "ok" and rows["inst-01"]["response"] == str(CODES[1])


def test_adaptive_calls_with_repl_is_refused_before_any_call(tmp_path):
    """--adaptive-calls counts single calls; a repl answer makes many, so the two are refused together in one line
    before anything is asked (no sandbox is needed to say so)."""
    build = make_build(tmp_path / "b", n=2)
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        with pytest.raises(InputError, match="--adaptive-calls: --mode repl") as e:
            evaluate_build(build, cfg(srv, sandbox="none").model_copy(update={"adaptive_calls": 5}))
        assert "\n" not in str(e.value) and srv.count == 0
        assert not (build / "responses.parquet").exists() or not pq.read_table(build / "responses.parquet").num_rows


def test_repl_max_cost_on_a_model_without_a_price_is_refused(tmp_path):
    """A cost nobody can count would never end an answer: --repl-max-cost on a model litellm has no price for is
    refused in one line before any call (naming --repl-max-tokens); 0 USD is refused at the command line."""
    build = make_build(tmp_path / "b", n=1)
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        with pytest.raises(InputError, match="--repl-max-cost: openai/fake has no price") as e:
            evaluate_build(build, cfg(srv, sandbox="none", max_answer_cost=0.01))
        assert "--repl-max-tokens" in str(e.value) and "\n" not in str(e.value) and srv.count == 0
        r = _cli(build, srv, "--sandbox", "none", "--repl-max-cost", "0")
        assert r.exit_code == 2 and "--repl-max-cost 0: give a budget above 0" in r.output and srv.count == 0


def test_a_final_answer_is_a_finished_turn_never_read_as_cut_off(tmp_path):
    """An answer FINAL gave is stored with finish reason stop: a value that ends on a word no sentence ends with
    ("... is") is the model's answer, not a reply the output budget cut off (it was, with no finish reason)."""
    from ctxbench.scoring.pipeline import answer_chain  # lazy: only this test reads an answer

    build = make_build(tmp_path / "b", n=2)
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        evaluate_build(build, cfg(srv, sandbox="none"))
    rows = pq.read_table(build / "responses.parquet").to_pylist()
    assert {(x["status"], x["finish_reason"]) for x in rows} == {("ok", "stop")}
    got = answer_chain().extract("The aircraft with tail number N802UA is", finish_reason="stop")
    assert "cut_off" not in got.tags and got.answer
    assert "cut_off" in answer_chain().extract("The aircraft with tail number N802UA is", finish_reason=None).tags


def test_backfill_mode_repl_adds_the_model_to_every_build(tmp_path, bwrap):
    """`backfill --mode repl` answers every build under --runs the REPL way (steps stored); a rerun asks nothing."""
    from typer.testing import CliRunner  # lazy: only the CLI tests drive the command line

    from ctxbench.cli import app  # lazy: as above
    builds = [make_build(tmp_path / "runs" / n, n=2) for n in ("b1", "b2")]
    args = ["backfill", "--runs", str(tmp_path / "runs"), "--model", "openai/fake", "--mode", "repl",
            "--concurrency", "1"]
    with FakeOpenAIServer(answer_fn=scripted_root) as srv:
        r = CliRunner().invoke(app, [*args, "--base-url", srv.base_url])
        assert r.exit_code == 0, r.output
        for b in builds:
            rows = pq.read_table(b / "responses.parquet").to_pylist()
            assert {(x["mode"], x["status"]) for x in rows} == {("repl", "ok")} and len(rows) == 2
            assert {x["response"] for x in rows} == {str(CODES[0]), str(CODES[1])}
            assert pq.read_table(b / "steps.parquet").num_rows >= 4
        made = srv.count
        r = CliRunner().invoke(app, [*args, "--base-url", srv.base_url])
        assert r.exit_code == 0 and srv.count == made
