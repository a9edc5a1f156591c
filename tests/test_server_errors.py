"""Servers and cache (issue 13 items 7-11): every entry of tests/data/tricky_inputs.yaml's ``server_errors`` section
through the gateway against tests/fakeserver.py, on ctxbench's own HTTP path and through litellm (its openai
provider at the same base URL, and its anthropic provider for Anthropic's wording); context-length errors are
over_length after one request and never pause an evaluation; silent truncation is stored as ``truncated``, left out
of scores and shown in the report; the server's window decides whether an over-length or truncated outcome is
replayed; the normalised --base-url is part of the request key; Retry-After has a ceiling."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from ctxbench.run.evaluate import EvalConfig, evaluate_build, plan_requests
from ctxbench.core.hashing import canonical_json
from ctxbench.models.cache import ResponseCache, endpoint_id, normalise_base_url, request_key
from ctxbench.models.gateway import Gateway, RetryPolicy
from ctxbench.models.runner import CallRunner, Request
from ctxbench.run.score import score_build
from fakeserver import FakeOpenAIServer, message_text, prompt_token_count
from test_crash_safety import FACT_RE, Q_RE, code, make_toy_build

SECTION = yaml.safe_load((Path(__file__).parent / "data" / "tricky_inputs.yaml").read_text(encoding="utf-8"))[
    "server_errors"]
ERRORS = [e for e in SECTION if "prompt_tokens" not in e]
TRUNCATION = [e for e in SECTION if "prompt_tokens" in e]
CAP_S = 300.0
MESSAGES = [{"role": "system", "content": "You answer questions."},
            {"role": "user", "content": "Document: the gate of flight UA 1545 is C12.\nQuestion: which gate?"}]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def reader(body: dict) -> str:
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return f"Answer: {dict(FACT_RE.findall(user))[Q_RE.search(user).group(1)]}"


def item(body: dict) -> int:
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return int(Q_RE.search(user).group(1)[1:])


def gateway(srv: FakeOpenAIServer, path: str) -> Gateway:
    policy = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02, timeout_s=120, max_retry_after_s=CAP_S)
    if path == "http":
        return Gateway("openai/fake", srv.base_url, 1, policy)
    if path == "litellm":
        return Gateway("openai/fake", srv.base_url, 1, policy, backend="litellm")
    # litellm's anthropic provider posts to <api_base>/v1/messages
    return Gateway("anthropic/claude-3-5-sonnet-20240620", srv.base_url[:-len("/v1")], 1, policy, backend="litellm")


def call(gw: Gateway, messages=MESSAGES, max_tokens: int = 64):
    async def go():
        try:
            return await gw.complete(messages, max_tokens, {"temperature": 0.0}, random.Random(0))
        finally:
            await gw.aclose()

    return asyncio.run(go())


def test_the_section_covers_every_outcome_and_the_issues_examples():
    ids = [e["id"] for e in SECTION]
    assert len(ids) == len(set(ids)) and len(SECTION) >= 60
    assert {e["expect"] for e in SECTION} == {"over_length", "config_error", "error", "refused_by_provider",
                                              "transient", "paused", "truncated", "ok"}
    over = [e for e in ERRORS if e["expect"] == "over_length"]
    assert {e["status"] for e in over} >= {200, 400, 413, 422, 500}  # every status the issue names, and a 200


@pytest.mark.parametrize("entry,path", [pytest.param(e, p, id=f"{e['id']}-{p}") for e in ERRORS
                                        for p in e.get("paths", ["http", "litellm"])])
def test_every_server_error_through_the_gateway(entry, path):
    spec = {k: entry[k] for k in ("status", "body", "headers") if k in entry}
    with FakeOpenAIServer() as srv:
        srv.script([spec, "ok", "ok"])
        r = call(gateway(srv, path))
        requests = srv.count
    exp = entry["expect"]
    if exp == "transient":  # retried; the next answer is taken
        assert (r.status, r.retries, requests) == ("ok", 1, 2), (r.status, r.error)
    elif exp == "paused":  # the hint is over the cap: no wait, no retry; the outage pause takes over
        assert r.status == "error" and r.transient_failure and requests == 1, r.error
        assert r.retry_after_s > CAP_S and r.retry_delay_s == 0
        assert "Retry-After" in r.error and f"{r.retry_after_s:.0f} s" in r.error
    else:  # one request, never retried, recorded with its outcome
        assert (r.status, r.retries, requests, r.transient_failure) == (exp, 0, 1, False), r.error
        assert r.response is None


def filler_messages(tokens: int) -> list[dict]:
    """One user message the fake server counts as ``tokens`` prompt tokens (3 template tokens + " alpha" words)."""
    msgs = [{"role": "user", "content": "alpha" + " alpha" * (tokens - 4)}]
    assert prompt_token_count(msgs) == tokens
    return msgs


@pytest.mark.parametrize("model", ["openai/fake", "openai/gpt-4o"])  # cl100k estimate; the model's own tokenizer
@pytest.mark.parametrize("entry,path", [pytest.param(e, p, id=f"{e['id']}-{p}") for e in TRUNCATION
                                        for p in e.get("paths", ["http", "litellm"])])
def test_silent_truncation_through_the_runner(entry, path, model, tmp_path):
    msgs = filler_messages(entry["prompt_tokens"])
    with FakeOpenAIServer(truncate_to=entry.get("truncate_to"), usage=entry.get("usage", True)) as srv:
        runner = CallRunner(model, srv.base_url, cache=ResponseCache(tmp_path / "c.sqlite"), concurrency=1,
                            backend="litellm" if path == "litellm" else "auto")
        key = runner.key(msgs, {"temperature": 0.0}, 16)
        [o] = runner.run([Request(key, msgs, {"temperature": 0.0}, 16)])
        assert srv.count == 1
    r = o.result
    assert r.status == entry["expect"], r.error
    if entry["expect"] == "truncated":
        assert r.prompt_tokens == entry["truncate_to"] and r.response  # the reply is kept
        assert f"read {entry['truncate_to']} prompt tokens of the" in r.error
    assert ResponseCache(tmp_path / "c.sqlite").get(key)["status"] == entry["expect"]  # stored as such


# -- evaluation: over_length after one call, never a pause -------------------------------------------------------

def test_context_errors_in_every_wording_are_over_length_after_one_call_and_never_pause(tmp_path):
    """Each instance meets another server's context-length error (500, 422, 200 with an error body, ...): every
    call is made once, recorded over_length, and with pause_after=1 a single call counted as an outage would
    pause the run; it completes."""
    over = [e for e in ERRORS if e["expect"] == "over_length"]
    n = len(over)
    build = make_toy_build(tmp_path / "b", n)
    with FakeOpenAIServer(answer_fn=reader, rule=lambda body: {k: over[item(body)][k] for k in
                                                               ("status", "body", "headers") if k in over[item(body)]}
                          ) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=4, pause_after=1, max_retries=3)
        s = evaluate_build(build, cfg)
        assert srv.count == n and set(srv.call_counts().values()) == {1}
    assert (s.status, s.over_length, s.unfinished, s.errors, s.retries) == ("complete", n, 0, 0, 0), s.notes[:3]
    rows = pq.read_table(build / "responses.parquet").to_pylist()
    assert len(rows) == n and {r["status"] for r in rows} == {"over_length"}
    score_build(build)
    assert pq.read_table(build / "scores.parquet").num_rows == 0  # never scored as wrong answers


# -- Retry-After ceiling ---------------------------------------------------------------------------------------------

def test_a_retry_after_over_the_cap_pauses_the_evaluation_with_the_hint(tmp_path):
    build = make_toy_build(tmp_path / "b", 6)
    with FakeOpenAIServer(answer_fn=reader, retry_after="86400") as srv:
        srv.script(["ok", "ok", "429_retry_after"])
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=1)
        t0 = time.monotonic()
        s = evaluate_build(build, cfg)
        took = time.monotonic() - t0
        assert srv.count == 3  # two answers, the 429; then no new call starts
    assert s.status == "paused" and took < 30
    assert "86400 s (24.0 h)" in s.notes[0] and "Retry-After" in s.notes[0] and "cap of 300 s" in s.notes[0]
    assert (s.new_rows, s.unfinished) == (2, 4)


def test_the_retry_after_cap_is_configurable(tmp_path):
    build = make_toy_build(tmp_path / "b", 1)
    with FakeOpenAIServer(answer_fn=reader, retry_after="2") as srv:
        srv.script(["429_retry_after"])
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url, max_retry_after_s=1.0))
        assert s.status == "paused" and srv.count == 1 and "cap of 1 s" in s.notes[0]
        srv.script(["429_retry_after"])
        t0 = time.monotonic()
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url))  # default cap: 300 s
        assert s.status == "complete" and s.retries == 1 and s.retry_delay_s >= 2.0
        assert time.monotonic() - t0 >= 2.0


# -- silent truncation in an evaluation: stored, not scored, in the report -------------------------------------------

def test_a_truncated_prompt_is_stored_as_truncated_left_out_of_scores_and_reported(tmp_path):
    from ctxbench.report import build_report

    build = make_toy_build(tmp_path / "b", 4)
    with FakeOpenAIServer(answer_fn=reader, truncate_to=lambda body: 8 if item(body) == 2 else None) as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url))
    assert (s.truncated, s.errors, s.status) == (1, 0, "complete")
    rows = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
    assert rows["inst-02"]["status"] == "truncated" and rows["inst-02"]["prompt_tokens"] == 8
    assert rows["inst-02"]["expected_prompt_tokens"] > 8 and rows["inst-02"]["response"] == f"Answer: {code(2)}"
    assert all(rows[f"inst-0{i}"]["status"] == "ok" for i in (0, 1, 3))
    score_build(build)
    assert {r["instance_id"] for r in pq.read_table(build / "scores.parquet").to_pylist()} == {
        "inst-00", "inst-01", "inst-03"}
    page = build_report(build).read_text(encoding="utf-8")
    assert "Truncated prompts" in page and "read 8 prompt tokens" in page


# -- the server's window decides replays -----------------------------------------------------------------------------

@pytest.mark.parametrize("style", ["vllm", "llamacpp", "tgi", "ollama"])
def test_the_window_each_server_reports_is_read(style):
    with FakeOpenAIServer(window=16384, window_style=style) as srv:
        assert asyncio.run(Gateway("openai/fake", srv.base_url).server_window()) == 16384
    with FakeOpenAIServer() as srv:  # reports none
        assert asyncio.run(Gateway("openai/fake", srv.base_url).server_window()) is None


@pytest.mark.parametrize("kind", ["over_length", "truncated"])
def test_an_outcome_of_a_window_is_not_replayed_after_the_window_changes(tmp_path, kind):
    """Recorded under the server's small window (4096 tokens for the context error; 8 for the truncation, since a
    window that holds the prompt rules truncation out): a rerun (and another build sharing the cache) makes no call
    while the window holds; once the server reports 32768, the call is made again and its row replaced."""
    build = make_toy_build(tmp_path / "b", 3)
    small = {"w": True}
    w0 = 4096 if kind == "over_length" else 8

    def rule(body):
        return "ctx400" if kind == "over_length" and small["w"] and item(body) == 1 else None

    with FakeOpenAIServer(answer_fn=reader, rule=rule, window=w0,
                          truncate_to=lambda body: 6 if kind == "truncated" and small["w"] and item(body) == 1
                          else None) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url)
        evaluate_build(build, cfg)
        rows = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
        assert rows["inst-01"]["status"] == kind and rows["inst-01"]["server_window"] == w0
        srv.reset_counts()
        s = evaluate_build(build, cfg)  # same window: nothing is called
        other = evaluate_build(make_toy_build(tmp_path / "b2", 3), cfg)  # a new build: replayed from the cache
        assert srv.count == 0 and s.new_rows == 0 and other.from_cache == 3
        small["w"] = False
        srv.window = 32768  # the operator restarted the server with a larger window
        s = evaluate_build(build, cfg)
        assert srv.count == 1 and s.calls == 1
        other = evaluate_build(make_toy_build(tmp_path / "b3", 3), cfg)
        assert srv.count == 1 and other.from_cache == 3  # the new answer is in the cache
    rows = pq.read_table(build / "responses.parquet").to_pylist()
    assert len(rows) == 3 and {r["status"] for r in rows} == {"ok"}  # the old row was replaced, not added to
    b3 = {r["instance_id"]: r for r in pq.read_table(tmp_path / "b3" / "responses.parquet").to_pylist()}
    assert b3["inst-01"]["status"] == "ok" and b3["inst-01"]["response"] == f"Answer: {code(1)}"


def test_a_server_that_reports_no_window_is_not_asked_again(tmp_path):
    build = make_toy_build(tmp_path / "b", 2)
    with FakeOpenAIServer(answer_fn=reader, rule=lambda body: "ctx400" if item(body) == 0 else None) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url)
        evaluate_build(build, cfg)
        srv.reset_counts()
        evaluate_build(build, cfg)
        assert srv.count == 0  # nothing observable changed: the rerun makes no call


# -- the endpoint in the request key ---------------------------------------------------------------------------------

def test_base_urls_normalise_to_one_spelling_per_server():
    same = ["http://127.0.0.1:8000/v1", "HTTP://localhost:8000/v1/", "http://[::1]:8000//v1",
            "http://0.0.0.0:8000/v1/chat/completions", "localhost:8000/v1"]
    assert {normalise_base_url(u) for u in same} == {"http://localhost:8000/v1"}
    assert normalise_base_url("https://llm.example.org:443/api/v1/") == "https://llm.example.org/api/v1"
    assert normalise_base_url("http://gpu-box:80/v1") == "http://gpu-box/v1"
    assert normalise_base_url("http://localhost:8001/v1") != normalise_base_url("http://localhost:8000/v1")
    with pytest.raises(ValueError, match="has no host"):
        normalise_base_url("http:///v1")


def test_a_providers_default_endpoint_is_its_name_and_keeps_the_old_keys():
    msgs, sampling = [{"role": "user", "content": "hi"}], {"temperature": 0.0, "seed": 0}
    # the key as ctxbench made it before the endpoint was keyed: SHA-256 of model, messages, sampling, max tokens,
    # sample
    legacy = hashlib.sha256(canonical_json({"model": "gpt-4o", "messages": msgs, "sampling": sampling,
                                            "max_tokens": 64, "sample": 0}).encode()).hexdigest()
    for url in (None, "https://api.openai.com/v1", "https://API.openai.com/v1/"):
        assert endpoint_id("gpt-4o", url) is None
        assert request_key("gpt-4o", msgs, sampling, 64, 0, endpoint_id("gpt-4o", url)) == legacy
    assert endpoint_id("claude-sonnet-4-20250514", "https://api.anthropic.com") is None
    assert endpoint_id("gemini/gemini-2.0-flash", "https://generativelanguage.googleapis.com/v1beta/openai") is None
    # another provider's public API is that provider; any other server is its URL
    assert endpoint_id("openai/deepseek-chat", "https://api.deepseek.com/v1") == "deepseek"
    assert endpoint_id("gpt-4o", "http://127.0.0.1:8000/v1") == "http://localhost:8000/v1"
    keys = {request_key("gpt-4o", msgs, sampling, 64, 0, endpoint_id("gpt-4o", u))
            for u in (None, "http://localhost:8000/v1", "http://localhost:8001/v1")}
    assert len(keys) == 3


def test_cache_entries_under_old_keys_stay_readable_for_default_endpoints(tmp_path):
    """A build fully answered in a cache written before the endpoint was keyed: evaluating gpt-4o at its default
    endpoint (or at OpenAI's URL) reads every answer, calls nothing and starts nothing."""
    build = make_toy_build(tmp_path / "b", 3)
    cache = ResponseCache(tmp_path / "c.sqlite")
    cfg = EvalConfig(model="gpt-4o")
    for t in plan_requests(build, cfg, cache).pending:
        legacy = hashlib.sha256(canonical_json({"model": "gpt-4o", "messages": t["_messages"],
                                                "sampling": t["_sampling"], "max_tokens": 4096,
                                                "sample": t["sample"]}).encode()).hexdigest()
        assert legacy == t["request_key"]
        cache.put(legacy, "gpt-4o", {"status": "ok", "response": f"Answer: {t['instance_id']}"})
    s = evaluate_build(build, cfg, cache=cache)
    assert (s.from_cache, s.calls, s.new_rows) == (3, 0, 3)
    s = evaluate_build(make_toy_build(tmp_path / "b2", 3), cfg.model_copy(update={"base_url":
                                                                                  "https://api.openai.com/v1"}),
                       cache=cache)
    assert (s.from_cache, s.calls) == (3, 0)


def test_the_same_model_at_another_server_gets_no_cached_answer(tmp_path):
    build = make_toy_build(tmp_path / "b", 3)
    with FakeOpenAIServer(answer_fn=reader) as a, FakeOpenAIServer(answer_fn=lambda body: "Answer: B") as b:
        evaluate_build(build, EvalConfig(model="openai/fake", base_url=a.base_url))
        b2 = make_toy_build(tmp_path / "b2", 3)
        s = evaluate_build(b2, EvalConfig(model="openai/fake", base_url=b.base_url))
        assert b.count == 3 and s.from_cache == 0
        s = evaluate_build(make_toy_build(tmp_path / "b3", 3),
                           EvalConfig(model="openai/fake", base_url=a.base_url.replace("127.0.0.1", "localhost")))
        assert s.from_cache == 3 and a.count == 3  # the same server spelled another way: cached
    assert {r["response"] for r in pq.read_table(b2 / "responses.parquet").to_pylist()} == {"Answer: B"}


# -- one call path -------------------------------------------------------------------------------------------------

def test_every_model_call_goes_through_the_runner():
    """No module outside ctxbench/models builds a Gateway or calls litellm's completion itself; the judge-style
    callers import complete_all from the runner."""
    root = Path(__file__).resolve().parent.parent / "ctxbench"
    offenders = []
    for f in root.rglob("*.py"):
        rel = f.relative_to(root).as_posix()
        if rel.startswith("models/"):
            continue
        text = f.read_text(encoding="utf-8")
        if "Gateway(" in text or "acompletion(" in text or "litellm.completion(" in text:
            offenders.append(rel)
        if "complete_all" in text and not re.search(r"from (?:\.+|ctxbench\.)models\.runner import complete_all", text):
            offenders.append(rel)
    assert offenders == []


def test_the_stored_contract_names_the_truncated_status():
    cols = {c["name"]: c for c in json.loads((Path(__file__).resolve().parent.parent / "schemas" /
                                               "responses.schema.json").read_text())["columns"]}
    assert cols["status"]["values"] == ["ok", "over_length", "truncated", "cut_off", "refused_by_provider", "error",
                                        "empty_reply",  # issue 30: tokens generated, no text returned
                                        "max_steps", "over_budget", "step_timeout"]  # issue 35: --mode repl
    assert cols["server_window"]["type"] == cols["expected_prompt_tokens"]["type"] == "int64"


# -- litellm's own providers: the exceptions litellm raises carry the provider's wording -----------------------------

def _litellm_cases():
    import httpx
    import litellm

    def resp(code):
        return httpx.Response(code, request=httpx.Request("POST", "http://127.0.0.1/v1/chat"))

    gem = ('VertexAIException BadRequestError - {"error": {"code": 400, "message": "The input token count (1200293) '
           'exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}')
    ant = ('AnthropicException - {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too '
           'long: 208310 tokens > 200000 maximum"}}')
    return [
        ("gemini-input-token-count", litellm.BadRequestError(gem, model="gemini/gemini-2.0-flash", llm_provider="gemini",
                                                             response=resp(400)), "over_length"),
        ("anthropic-prompt-too-long", litellm.BadRequestError(ant, model="claude-sonnet-4-20250514",
                                                              llm_provider="anthropic", response=resp(400)),
         "over_length"),
        ("anthropic-context-window", litellm.ContextWindowExceededError("prompt is too long", model="claude-sonnet-4",
                                                                        llm_provider="anthropic", response=resp(400)),
         "over_length"),
        ("hosted-vllm-500", litellm.InternalServerError(
            "Hosted_vllmException - Prompt length of 5016 is longer than the maximum model length of 4096.",
            llm_provider="hosted_vllm", model="hosted_vllm/qwen", response=resp(500)), "over_length"),
        ("openai-output-budget", litellm.BadRequestError(
            "OpenAIException - max_tokens is too large: 100000. This model supports at most 16384 completion tokens, "
            "whereas you provided 100000.", model="gpt-4o", llm_provider="openai", response=resp(400)),
         "config_error"),
        ("anthropic-output-budget", litellm.BadRequestError(
            "AnthropicException - max_tokens: 10000 > 8192, which is the maximum allowed number of output tokens for "
            "claude-3-5-sonnet-20241022", model="claude-3-5-sonnet-20241022", llm_provider="anthropic",
            response=resp(400)), "config_error"),
        ("gemini-resource-exhausted", litellm.RateLimitError("GeminiException - Resource has been exhausted (e.g. "
                                                             "check quota).", llm_provider="gemini",
                                                             model="gemini/gemini-2.0-flash", response=resp(429)),
         "transient"),
        ("openai-insufficient-quota", litellm.RateLimitError(
            "OpenAIException - You exceeded your current quota, please check your plan and billing details.",
            llm_provider="openai", model="gpt-4o", response=resp(429)), "config_error"),
        ("anthropic-overloaded", litellm.InternalServerError("AnthropicException - Overloaded", llm_provider="anthropic",
                                                             model="claude-sonnet-4", response=resp(529)),
         "transient"),
    ]


def test_litellm_provider_exceptions_through_the_table():
    from ctxbench.models.gateway import PermanentError, TransientError, classify

    for name, exc, expect in _litellm_cases():
        got = classify(exc)
        outcome = "transient" if isinstance(got, TransientError) else got.status
        assert isinstance(got, (TransientError, PermanentError)) and outcome == expect, (name, outcome, str(got))


@pytest.mark.parametrize("reason,status", [
    ("content_filter", "refused_by_provider"), ("content-filter", "refused_by_provider"),
    ("refusal", "refused_by_provider"), ("SAFETY", "refused_by_provider"), ("RECITATION", "refused_by_provider"),
    ("PROHIBITED_CONTENT", "refused_by_provider"), ("blocklist", "refused_by_provider"),
    ("stop", "ok"), ("STOP", "ok"), ("length", "cut_off"), ("MAX_TOKENS", "cut_off"), ("max_tokens", "cut_off"),
    ("end_turn", "ok"),
    # issue 30: no finish reason at all is not positively a finished answer (a router's partial reply)
    (None, "error"),
])
def test_refusal_finish_reasons_in_every_spelling(reason, status):
    """A reply the provider withheld for its content policy is refused_by_provider whatever the server calls the
    finish (OpenAI/vLLM content_filter, Anthropic's refusal stop, Gemini's SAFETY family); a normal finish is an
    answer, a length finish (the output budget ended the reply, issue 21) is cut_off; the finish reason is stored as
    sent (truncation of the prompt is judged from the token counts, not here)."""
    from ctxbench.models.batch import anthropic_result
    from ctxbench.models.gateway import completion_result

    r = completion_result("openai/x", {"finish_reason": reason}, {"content": "The total is"}, None)
    assert r.status == status and r.finish_reason == reason
    a = anthropic_result("anthropic/x", {"content": [{"type": "text", "text": "The total is"}],
                                         "stop_reason": reason})
    assert a.status == status and a.finish_reason == reason
