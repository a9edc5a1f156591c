"""``evaluate --batch`` (issue 17 item 4) against a local server speaking OpenAI's files + batches protocol and
Anthropic's Message Batches: the uncached requests go in one batch (upload, create, poll in_progress → completed,
download), each answer is a response-cache entry under the key a direct call uses (so batch and direct runs share
answers both ways), per-request errors go through the same error table and truncation check, transient and
expired requests are sent again in a new batch, a failed batch leaves its requests unanswered, and a run killed
while its batch runs resumes by polling that batch (never resubmitting)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import ctxbench.run.evaluate as ev
from ctxbench.cli import app
from ctxbench.run.evaluate import EvalConfig, evaluate_build, plan_requests
from ctxbench.models.batch import BatchStore, OpenAIHTTPBatch
from ctxbench.models.cache import ResponseCache
from ctxbench.models.gateway import RetryPolicy
from ctxbench.models.runner import CallRunner, Request
from fakeserver import FakeOpenAIServer, message_text
from test_evaluate import CODES, NAMES, answer_from_document, make_build

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def cfg(srv, **kw):
    return EvalConfig(model="openai/fake", base_url=srv.base_url, batch=True, batch_poll_s=0.02, **kw)


def rows(build):
    return {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}


def item(body: dict) -> str:
    """The item a request asks about (its question's last word)."""
    user = [m for m in (body.get("messages") or []) if m["role"] == "user"][-1]
    return message_text(user["content"]).split("Question: What is the code of item ")[1].split("?")[0]


def batch_lines(srv, bid: str) -> list[dict]:
    b = srv.batches[bid]
    return b["lines"]


def test_batch_answers_share_the_response_cache_with_direct_calls(tmp_path):
    a, b = make_build(tmp_path / "a", n=8), make_build(tmp_path / "b", n=10)
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        srv.plan_batches([{"polls": 3}])
        s = evaluate_build(a, cfg(srv))
        assert (s.status, s.calls, s.unfinished, s.batches) == ("complete", 8, 0, ["batch_0001"])
        # one upload, one batch, polled validating -> in_progress x3 -> completed
        assert srv.uploads == ["file-0001"] and srv.batch_ids == ["batch_0001"] and srv.polls["batch_0001"] == 4
        assert srv.batches["batch_0001"]["endpoint"] == "/v1/chat/completions"
        got = rows(a)
        assert all(r["status"] == "ok" and r["batch_id"] == "batch_0001" and not r["cached"] for r in got.values())
        for i in range(8):  # the fake model read each document: the item's code
            assert got[f"inst-{i:02d}"]["response"].endswith(f"Answer: {CODES[i]}")
        # the custom_id of each line is the request key a direct call would use, the body the direct call's body
        plan = plan_requests(a, EvalConfig(model="openai/fake", base_url=srv.base_url), ResponseCache())
        assert plan.todo == [] and {r["request_key"] for r in got.values()} == \
            {ln["custom_id"] for ln in batch_lines(srv, "batch_0001")}
        line = next(ln for ln in batch_lines(srv, "batch_0001") if ln["custom_id"] == got["inst-03"]["request_key"])
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        assert set(line["body"]) == {"model", "messages", "max_tokens", "temperature", "seed"}
        assert line["body"]["model"] == "fake" and item(line["body"]) == NAMES[3]

        # a direct run on another build of the same instances: the 8 batch answers are cache hits, 2 calls made
        n = srv.count
        s = evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url))
        assert (s.from_cache, s.calls) == (8, 2) and srv.count == n + 2 and len(srv.batch_ids) == 1
        got_b = rows(b)
        assert got_b["inst-02"]["cached"] and got_b["inst-02"]["batch_id"] == "batch_0001"
        assert got_b["inst-02"]["response"] == got["inst-02"]["response"]
        assert got_b["inst-09"]["batch_id"] is None

        # and the other way: a batch run on a third build sends only what neither run answered
        c = make_build(tmp_path / "c", n=10, question=lambda i: f"What is the code of item {NAMES[i]}? Be brief.")
        s = evaluate_build(c, cfg(srv, per_length=1))  # one new question per length: 2 requests
        assert s.calls == 2 and srv.batch_ids[-1] == "batch_0002" and len(batch_lines(srv, "batch_0002")) == 2
        assert all(v == 1 for v in srv.batch_processed.values())  # no request was run twice


def test_per_request_errors_through_the_error_table_and_transient_ones_sent_again(tmp_path):
    build = make_build(tmp_path / "b", n=8)
    seen: dict[str, int] = {}

    def rule(body):
        it = item(body)
        seen[it] = seen.get(it, 0) + 1
        return {"Aster": "ctx400", "Birch": "400", "Cedar": "content_filter",
                "Dahlia": "500" if seen[it] == 1 else None,
                "Elm": {"status": 400, "body": {"error": {"message": "Please reduce the length of the messages.",
                                                          "type": "invalid_request_error"}}}}.get(it)

    with FakeOpenAIServer(answer_fn=answer_from_document, rule=rule,
                          truncate_to=lambda body: 5 if item(body) == "Fern" else None) as srv:
        s = evaluate_build(build, cfg(srv))
        got = rows(build)
        st = {k: got[k]["status"] for k in got}
        assert st == {"inst-00": "over_length", "inst-01": "error", "inst-02": "refused_by_provider",
                      "inst-03": "ok", "inst-04": "over_length", "inst-05": "truncated", "inst-06": "ok",
                      "inst-07": "ok"}
        assert "invalid_value" in got["inst-01"]["error"] and "HTTP 400 in the batch" in got["inst-01"]["error"]
        assert "read 5 prompt tokens" in got["inst-05"]["error"]
        # the 500 was sent again in a second batch holding only that request, and answered there
        assert srv.batch_ids == ["batch_0001", "batch_0002"]
        assert [item(ln["body"]) for ln in batch_lines(srv, "batch_0002")] == ["Dahlia"]
        assert got["inst-03"]["batch_id"] == "batch_0002" and got["inst-03"]["response"].endswith(str(CODES[3]))
        assert (s.calls, s.over_length, s.errors, s.truncated, s.unfinished) == (8, 2, 1, 1, 0)
        # stored outcomes are cache entries, as for direct calls: a direct run on a copy calls only the permanent
        # error again (an error is kept in responses.parquet, never in the response cache)
        other = make_build(tmp_path / "o", n=8)
        n = srv.count
        s = evaluate_build(other, EvalConfig(model="openai/fake", base_url=srv.base_url))
        assert srv.count == n + 1 and s.calls == 1 and s.from_cache == 7 and item(srv.requests[-1]) == "Birch"


def test_expired_batch_keeps_its_answers_and_resends_the_rest(tmp_path):
    build = make_build(tmp_path / "b")
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        srv.plan_batches([{"end": "expired", "run": 4}, {"polls": 2}])
        s = evaluate_build(build, cfg(srv))
        assert s.status == "complete" and s.calls == 10 and srv.batch_ids == ["batch_0001", "batch_0002"]
        first = [ln["custom_id"] for ln in batch_lines(srv, "batch_0001")]
        second = [ln["custom_id"] for ln in batch_lines(srv, "batch_0002")]
        assert second == first[4:]  # only the expired requests, none of the four answered
        got = rows(build)
        by_key = {r["request_key"]: r for r in got.values()}
        assert {by_key[k]["batch_id"] for k in first[:4]} == {"batch_0001"}
        assert {by_key[k]["batch_id"] for k in second} == {"batch_0002"}
        assert all(r["status"] == "ok" for r in got.values()) and set(srv.batch_processed.values()) == {1}
        recs = BatchStore(build / "batches.json").records()
        assert [(r["status"], r["provider_status"]) for r in recs] == [("collected", "expired"),
                                                                       ("collected", "completed")]


def test_failed_batch_leaves_requests_unanswered_and_a_rerun_sends_a_new_one(tmp_path):
    build = make_build(tmp_path / "b", n=4)
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        srv.plan_batches([{"end": "failed"}])
        s = evaluate_build(build, cfg(srv))
        assert (s.status, s.unfinished, s.new_rows) == ("incomplete", 4, 0)
        assert all("batch_0001 failed: invalid_request: The batch input file is not valid" in n for n in s.notes)
        assert not (build / "responses.parquet").exists() and sum(srv.batch_processed.values()) == 0
        [rec] = BatchStore(build / "batches.json").records()
        assert rec["status"] == "failed" and "The batch input file is not valid" in rec["error"]
        r = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                                     srv.base_url, "--batch", "--batch-poll", "0.02"])
        assert r.exit_code == 0, r.output
        assert "batches: batch_0002" in r.output and srv.batch_ids == ["batch_0001", "batch_0002"]
        assert len(rows(build)) == 4


def _cli(build, srv, *extra) -> list[str]:
    return [sys.executable, "-m", "ctxbench.cli", "evaluate", "--build", str(build), "--model", "openai/fake",
            "--base-url", srv.base_url, "--batch", "--batch-poll", "0.05", *extra]


def test_killed_evaluation_resumes_by_polling_the_same_batch(tmp_path):
    build = make_build(tmp_path / "b")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        srv.hold_batches(True)
        p = subprocess.Popen(_cli(build, srv), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and srv.polls["batch_0001"] < 3:
                assert p.poll() is None, p.stdout.read().decode()
                time.sleep(0.05)
            assert srv.polls["batch_0001"] >= 3, "the batch was never polled"
        finally:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        [rec] = BatchStore(build / "batches.json").records()
        assert (rec["batch_id"], rec["input_file_id"], rec["status"]) == ("batch_0001", "file-0001", "in_progress")
        assert not (build / "responses.parquet").exists()
        polls = srv.polls["batch_0001"]

        srv.hold_batches(False)
        r = CliRunner().invoke(app, _cli(build, srv)[3:])
        assert r.exit_code == 0, r.output
        # no new upload, no new batch: the same batch polled on until it completed
        assert srv.uploads == ["file-0001"] and srv.batch_ids == ["batch_0001"] and srv.polls["batch_0001"] > polls
        got = rows(build)
        assert len(got) == 10 and {r["batch_id"] for r in got.values()} == {"batch_0001"}
        assert all(r["status"] == "ok" for r in got.values()) and set(srv.batch_processed.values()) == {1}
        assert BatchStore(build / "batches.json").records()[0]["status"] == "collected"
        r = CliRunner().invoke(app, _cli(build, srv)[3:])  # all stored: nothing sent, nothing polled
        assert r.exit_code == 0 and srv.batch_ids == ["batch_0001"] and "0 calls made" in r.output


def test_killed_between_create_and_record_finds_the_batch_by_its_input_file(tmp_path):
    """A run killed after the provider created the batch but before its id was recorded: the record holds the
    input file id, and the resume finds the batch in the provider's list instead of creating another."""
    import asyncio

    build = make_build(tmp_path / "b", n=3)
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        plan = plan_requests(build, cfg(srv), ResponseCache())
        client = OpenAIHTTPBatch("openai/fake", srv.base_url, None)
        lines = [client.encode(t["request_key"], t["_messages"], plan.max_tokens, t["_sampling"])
                 for t in plan.pending]

        async def upload_and_create():
            fid = await client.upload(lines)
            await client.create(fid, lines, {})
            await client.aclose()
            return fid

        fid = asyncio.run(upload_and_create())
        store = BatchStore(build / "batches.json")
        rec = store.add("openai/fake", plan.endpoint, "openai", [t["request_key"] for t in plan.pending])
        store.update(rec, input_file_id=fid)  # ... and killed here
        s = evaluate_build(build, cfg(srv))
        assert s.calls == 3 and s.batches == ["batch_0001"] and srv.batch_ids == ["batch_0001"]
        assert srv.uploads == ["file-0001"]


def test_batch_wait_leaves_running_batches_to_a_rerun(tmp_path):
    build = make_build(tmp_path / "b", n=4)
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        srv.hold_batches(True)
        r = CliRunner().invoke(app, _cli(build, srv, "--batch-wait", "0.3")[3:])
        assert r.exit_code == 75, r.output
        assert "status: pending (4 requests in running batches)" in r.output and "batch_0001" in r.output
        srv.hold_batches(False)
        r = CliRunner().invoke(app, _cli(build, srv, "--batch-wait", "30")[3:])
        assert r.exit_code == 0, r.output
        assert srv.batch_ids == ["batch_0001"] and len(rows(build)) == 4


def test_litellm_transport_and_anthropic_message_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test-123")
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        # OpenAI's protocol through litellm's batch functions (acreate_file, acreate_batch, aretrieve_batch, ...)
        reqs = [Request(f"{i:064x}", [{"role": "system", "content": "You answer."},
                                      {"role": "user", "content": f"The code of item {NAMES[i]} is {CODES[i]}.\n"
                                                                  f"Question: What is the code of item {NAMES[i]}?"}],
                        {"temperature": 0.0, "seed": 0}, 64) for i in range(3)]
        runner = CallRunner("openai/fake", srv.base_url, backend="litellm", api_key_env="FAKE_KEY")
        out = runner.run_batch(reqs, BatchStore(tmp_path / "litellm.json"), poll_s=0.02)
        assert [o.result.response for o in out] == [f"The document says the code of item {NAMES[i]} is listed.\n"
                                                     f"Answer: {CODES[i]}" for i in range(3)]
        assert srv.uploads == ["file-0001"] and srv.batch_ids == ["batch_0001"]

        # Anthropic's Message Batches, through evaluate: Claude messages carry the cache hint
        build = make_build(tmp_path / "b", n=4)

        def rule(body):
            return "ctx400" if item(body) == "Birch" else None

        srv.rule = rule
        srv.plan_batches([{"end": "expired", "run": 3}])
        s = evaluate_build(build, EvalConfig(model="anthropic/claude-test", base_url=srv.base_url,
                                             api_key_env="FAKE_KEY", batch=True, batch_poll_s=0.02))
        assert s.status == "complete" and srv.batch_ids[1:] == ["msgbatch_0002", "msgbatch_0003"]
        req = srv.batches["msgbatch_0002"]["lines"][0]
        params = req["params"]
        assert params["model"] == "claude-test" and "seed" not in params and params["temperature"] == 0.0
        assert isinstance(params["system"], str) and [m["role"] for m in params["messages"]] == ["user"]
        assert params["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
        assert len(srv.batches["msgbatch_0003"]["lines"]) == 1  # the expired one, sent again
        got = rows(build)
        assert got["inst-01"]["status"] == "over_length" and "prompt is too long" in got["inst-01"]["error"]
        assert all(got[f"inst-0{i}"]["response"].endswith(f"Answer: {CODES[i]}") for i in (0, 2, 3))
        assert got["inst-00"]["prompt_tokens"] > 0 and got["inst-00"]["batch_id"] == "msgbatch_0002"


def test_batch_refused_where_no_batch_api(tmp_path):
    build = make_build(tmp_path / "b", n=2)
    r = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "gemini/gemini-2.0-flash", "--batch"])
    assert r.exit_code == 2 and "has no batch API ctxbench can send to" in r.output
    r = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "smollm2-135m-instruct", "--batch"])
    assert r.exit_code == 2 and "has no batch API" in r.output
