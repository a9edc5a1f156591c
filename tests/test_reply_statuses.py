"""Issue 30, the model boundary: a reply is ``ok`` only when it is positively a finished answer. In-band provider
errors on a 200 (kind 1), generated tokens with nothing returned (kind 2), OpenAI refusals and content parts (kind 4),
context-overflow wordings (kind 8), a server that serves a shared prefix from its cache without saying so (kind 9),
and finish reasons ctxbench does not know. Every expected value is worked out by hand in the comments; the CLI tests
send the kinds through ``ctxbench evaluate`` and ``ctxbench score`` against tests/fakeserver.py."""

from __future__ import annotations

import asyncio
import json
import random

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.models.gateway import (CallResult, Gateway, PermanentError, RetryPolicy, TransientError,
                                     completion_result, http_result, litellm_choice, read_content)
from fakeserver import FakeOpenAIServer, message_text
from test_crash_safety import Q_RE, code, make_toy_build
from test_server_errors import reader

cli = CliRunner()


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def chat(content, finish="stop", ct=None, **choice_extra) -> dict:
    """An OpenAI-shaped chat completion body."""
    ch = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish, **choice_extra}
    body = {"id": "x", "object": "chat.completion", "model": "m", "choices": [ch]}
    if ct is not None:
        body["usage"] = {"prompt_tokens": 10, "completion_tokens": ct, "total_tokens": 10 + ct}
    return body


def read(body, status=200, max_tokens=256):
    """``(status, CallResult or None)`` of one HTTP answer as the gateway reads it."""
    try:
        res = http_result("openai/fake", status, json.dumps(body) if not isinstance(body, str) else body, {},
                          max_tokens)
    except TransientError:
        return "transient", None
    except PermanentError as e:
        return e.status, None
    return res.status, res


# -- kind 1: an in-band provider failure on a 200 ---------------------------------------------------------------

OPENROUTER_ERROR = chat("The Napa rows total 4", "error", native_finish_reason="error",
                        error={"code": 502, "message": "Upstream provider error: connection reset by peer"})


@pytest.mark.parametrize("body", [
    OPENROUTER_ERROR,
    # the same router, empty content
    chat("", "error", native_finish_reason="error", error={"code": 502, "message": "Provider returned error"}),
    # the normalised finish says stop, the native one says the provider failed
    chat("Answer: 4", "stop", native_finish_reason="error"),
    # an error object on the choice whatever the finish
    chat("Answer: 4", "stop", error={"message": "stream interrupted", "code": "server_error"}),
    chat("Answer: 4", None, error={"message": "stream interrupted"}),
    # Cohere's ERROR, Zhipu GLM's network_error, vLLM's abort, Gemini's MALFORMED_RESPONSE through a proxy
    chat("Answer: 4", "ERROR"), chat("Answer: 4", "network_error"), chat("Answer: 4", "abort"),
    chat("Answer: 4", "MALFORMED_RESPONSE"),
])
def test_an_error_finish_is_an_inband_error_never_ok(body):
    status, res = read(body)
    assert status == "error" and res.inband_error
    assert res.error.startswith("in-band provider error")


def test_the_inband_error_keeps_the_providers_message_and_a_partial_reply_earns_nothing():
    status, res = read(OPENROUTER_ERROR)
    assert status == "error" and "Upstream provider error: connection reset by peer" in res.error
    assert res.finish_reason == "error"  # stored as sent


def test_an_inband_context_error_is_over_length_and_a_filter_is_a_refusal():
    # the provider's message decides the outcome through the error table, as an HTTP error's would
    s, _ = read(chat(None, "error", error={"code": 400, "message": "This model's maximum context length is 8192 "
                                                                   "tokens. However, you requested 9000 tokens."}))
    assert s == "over_length"
    s, _ = read(chat(None, "error", error={"code": 400, "message": "flagged by the content_filter"}))
    assert s == "refused_by_provider"


def gw_complete(srv, max_retries=3, max_tokens=64):
    gw = Gateway("openai/fake", srv.base_url, 1, RetryPolicy(max_retries=max_retries, base_delay_s=0.0))

    async def go():
        try:
            return await gw.complete([{"role": "user", "content": "q"}], max_tokens, {"temperature": 0.0},
                                     random.Random(0))
        finally:
            await gw.aclose()
    return asyncio.run(go())


def test_an_inband_error_is_retried_and_stored_as_error_when_it_persists():
    # persists: 1 call + 3 retries = 4 requests, then the error row (not a transient failure: it is stored)
    with FakeOpenAIServer(rule=lambda b: {"status": 200, "body": OPENROUTER_ERROR}) as srv:
        res = gw_complete(srv)
        n = srv.count
    assert n == 4 and res.status == "error" and res.retries == 3 and not res.transient_failure
    assert "Upstream provider error" in res.error
    # once: the retry gets the answer
    seen = []

    def rule(body):
        seen.append(1)
        return {"status": 200, "body": OPENROUTER_ERROR} if len(seen) == 1 else None
    with FakeOpenAIServer(rule=rule, answer_fn=lambda b: "Answer: 17") as srv:
        res = gw_complete(srv)
    assert res.status == "ok" and res.response == "Answer: 17" and res.retries == 1


class _Choice:
    def __init__(self, finish, native=None, error=None):
        self.finish_reason = finish
        self.provider_specific_fields = {"native_finish_reason": native} if native else None
        self.error = error


def test_litellm_hides_error_finishes_as_stop_and_the_gateway_reads_the_native_one():
    # litellm's map_finish_reason maps "error", "ERROR", "network_error" to "stop" and keeps the native reason
    ch = litellm_choice(_Choice("stop", "error"))
    r = completion_result("openai/x", ch, {"content": "Answer: 4"}, None)
    assert r.status == "error" and r.inband_error
    # a native reason litellm maps to stop that means nothing finished (Gemini's FINISH_REASON_UNSPECIFIED)
    r = completion_result("openai/x", litellm_choice(_Choice("stop", "FINISH_REASON_UNSPECIFIED")),
                          {"content": "Answer: 4"}, None)
    assert r.status == "error" and r.error.startswith("not a finished answer")
    # Anthropic's end_turn, mapped to stop: a finished answer
    r = completion_result("openai/x", litellm_choice(_Choice("stop", "end_turn")), {"content": "Answer: 4"}, None)
    assert r.status == "ok" and r.finish_reason == "stop"


# -- the structural rule: only finished reasons give ok ------------------------------------------------------------

@pytest.mark.parametrize("finish,status", [
    ("stop", "ok"), ("STOP", "ok"), ("end_turn", "ok"), ("stop_sequence", "ok"), ("eos", "ok"),
    ("eos_token", "ok"), ("COMPLETE", "ok"),
    ("length", "cut_off"), ("max_tokens", "cut_off"), ("MAX_TOKENS", "cut_off"),
    ("model_context_window_exceeded", "cut_off"),
    ("tool_calls", "error"), ("tool_use", "error"), ("function_call", "error"), ("pause_turn", "error"),
    ("OTHER", "error"), ("FINISH_REASON_UNSPECIFIED", "error"), ("weird_new_reason", "error"), (None, "error"),
])
def test_only_a_finished_reason_gives_ok(finish, status):
    s, res = read(chat("Answer: 42", finish, ct=5))
    assert s == status
    if status == "error":
        assert res.error.startswith("not a finished answer") and not res.inband_error


def test_a_tool_call_under_a_stop_finish_is_not_an_answer():
    body = chat(None, "stop")
    body["choices"][0]["message"]["tool_calls"] = [{"id": "c", "type": "function",
                                                    "function": {"name": "f", "arguments": "{}"}}]
    s, res = read(body)
    assert s == "error" and "tool call" in res.error


def test_ollama_native_done_without_a_reason_is_finished():
    body = {"model": "m", "message": {"role": "assistant", "content": "Answer: 3"}, "done": True,
            "prompt_eval_count": 10, "eval_count": 4}
    s, res = read(body)
    assert s == "ok" and res.finish_reason is None


# -- kind 2: generated tokens with nothing returned ----------------------------------------------------------------

@pytest.mark.parametrize("body", [
    chat(None, "stop", ct=734),          # the example: a reasoning parser that dropped its output
    chat("", "stop", ct=734),
    chat("\n\n", "stop", ct=12),         # only whitespace came back
    chat(None, "stop"),                  # content null, no usage: nothing returned at all
    {"id": "m", "type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn",
     "usage": {"input_tokens": 10, "output_tokens": 88}},   # Anthropic, no blocks, 88 tokens generated
    {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}],
     "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 0, "thoughtsTokenCount": 512}},  # Gemini
])
def test_tokens_generated_and_nothing_returned_is_empty_reply(body):
    s, res = read(body)
    assert s == "empty_reply" and res.empty_reply and res.error.startswith("empty reply")


def test_an_empty_answer_the_model_gave_is_still_its_answer():
    # content "" with 0 tokens generated and a stop: the model's own (empty) answer, scored as no answer
    s, _ = read(chat("", "stop", ct=0))
    assert s == "ok"
    # the reasoning field holds the reply: ok (issue 21)
    body = chat(None, "stop", ct=40)
    body["choices"][0]["message"]["reasoning_content"] = "so the total is 17. Answer: 17"
    assert read(body)[0] == "ok"


def test_an_empty_reply_is_asked_once_more():
    with FakeOpenAIServer(rule=lambda b: {"status": 200, "body": chat(None, "stop", ct=734)}) as srv:
        res = gw_complete(srv, max_retries=0)
        n = srv.count
    assert n == 2 and res.status == "empty_reply" and res.retries == 1


# -- kind 4: refusals and content parts ----------------------------------------------------------------------------

def test_message_refusal_with_null_content_is_refused_by_provider():
    body = chat(None, "stop", ct=9)
    body["choices"][0]["message"]["refusal"] = "I'm sorry, I can't help with that."
    s, res = read(body)
    assert s == "refused_by_provider" and "I'm sorry, I can't help with that." in res.error


def test_a_refusal_part_is_refused_by_provider_never_attribute_error():
    s, res = read(chat([{"type": "refusal", "refusal": "I can't assist with that."}], "stop", ct=7))
    assert s == "refused_by_provider" and "I can't assist" in res.error
    s, _ = read(chat([{"type": "text", "text": "Answer: 4"}, {"type": "refusal", "refusal": "No."}], "stop", ct=7))
    assert s == "refused_by_provider"


@pytest.mark.parametrize("content,text,reasoning", [
    ([{"type": "text", "text": "Answer: "}, {"type": "text", "text": "42"}], "Answer: 42", None),
    ([{"type": "output_text", "text": "Answer: 42", "annotations": []}], "Answer: 42", None),
    (["Answer: ", "42"], "Answer: 42", None),
    ({"type": "text", "text": "Answer: 42"}, "Answer: 42", None),
    # Mistral's Magistral: a thinking part holding text parts, then the answer
    ([{"type": "thinking", "thinking": [{"type": "text", "text": "6 times 7"}]}, {"type": "text", "text": "Answer: 42"}],
     "Answer: 42", "6 times 7"),
    # Anthropic-style blocks through an OpenAI-compatible proxy
    ([{"type": "thinking", "thinking": "6 times 7", "signature": "x"}, {"type": "text", "text": "Answer: 42"}],
     "Answer: 42", "6 times 7"),
])
def test_content_parts_are_read_part_by_part(content, text, reasoning):
    s, res = read(chat(content, "stop", ct=9))
    assert s == "ok" and res.response == text and res.reasoning == reasoning


def test_parts_of_no_kind_ctxbench_reads_are_not_an_answer():
    s, res = read(chat([{"type": "image_url", "image_url": {"url": "data:"}}], "stop", ct=9))
    assert s == "error" and "image_url" in res.error
    assert read_content([{"type": "text", "text": "a"}, 3]).other == ("int",)


def test_a_prompt_gemini_blocked_is_refused():
    s, _ = read({"promptFeedback": {"blockReason": "OTHER"}, "usageMetadata": {"promptTokenCount": 10}})
    assert s == "refused_by_provider"


# -- kind 8: context-overflow wordings ----------------------------------------------------------------------------

OVERFLOW = [
    # vLLM (the example and its v1 engine's)
    "decoder prompt of 5300 tokens is longer than the model's maximum length of 4096",
    "The decoder prompt (length 8192) plus the number of requested output tokens (at least 1) is longer than the "
    "maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of text tokens.",
    "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens "
    "and your request has 2778 input tokens (8000 > 4096 - 2778).",
    # Together / OpenAI-compatible gateways, SGLang
    "The input (250000 tokens) is longer than the model's context length (200000 tokens).",
    "Requested token count exceeds the model's maximum context length of 32768 tokens.",
    # OpenAI's Responses API, GitHub Copilot, OpenAI's message size limit
    "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 509178 tokens.",
    "prompt token count of 200000 exceeds the limit of 128000",
    "Invalid 'messages[1].content': string too long. Expected a string with maximum length 10485760, but got a "
    "string with length 12000000 instead.",
    # llama.cpp, Ollama, xAI, Mistral, Anthropic, Gemini
    "the request exceeds the available context size, try increasing it",
    "the input length exceeds the context length",
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
    "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    "prompt is too long: 210000 tokens > 200000 maximum",
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
]


@pytest.mark.parametrize("status", [400, 500, 200])
@pytest.mark.parametrize("msg", OVERFLOW)
def test_every_overflow_wording_at_every_status_is_over_length(msg, status):
    body = {"object": "error", "message": msg, "type": "BadRequestError", "code": status if status != 200 else 400}
    assert read(body, status)[0] == "over_length"


# -- the CLI: the kinds through evaluate and score ----------------------------------------------------------------

def item(body: dict) -> int:
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return int(Q_RE.search(user).group(1)[1:])


def cli_rule(calls: dict):
    """Per item (the others answer "Answer: <code>" with finish_reason stop):
    1 an in-band error every time, its partial content ending on the gold; 2 an in-band error twice, then the
    answer; 3 content null, finish stop, 734 tokens; 4 message.refusal; 5 the answer as two text parts; 6 a
    refusal part; 7 vLLM's "decoder prompt ... longer than the model's maximum length" as a 500; 8 a finish reason
    ctxbench does not know; 9 the same overflow as a 200 error body."""
    def rule(body):
        i = item(body)
        calls[i] = calls.get(i, 0) + 1
        g = code(i)
        if i == 1:
            return {"status": 200, "body": chat(f"The Napa rows: Answer: {g}", "error", native_finish_reason="error",
                                                error={"code": 502, "message": "Upstream provider error"})}
        if i == 2 and calls[i] <= 2:
            return {"status": 200, "body": chat("", "error", error={"code": 503, "message": "overloaded"})}
        if i == 3:
            return {"status": 200, "body": chat(None, "stop", ct=734)}
        if i == 4:
            b = chat(None, "stop", ct=9)
            b["choices"][0]["message"]["refusal"] = "I can't help with that."
            return {"status": 200, "body": b}
        if i == 5:
            return {"status": 200, "body": chat([{"type": "text", "text": "Answer: "},
                                                 {"type": "text", "text": str(g)}], "stop")}
        if i == 6:
            return {"status": 200, "body": chat([{"type": "refusal", "refusal": "No."}], "stop")}
        if i in (7, 9):
            return {"status": 500 if i == 7 else 200,
                    "body": {"object": "error", "type": "BadRequestError", "code": 400,
                             "message": "decoder prompt of 5300 tokens is longer than the model's maximum length "
                                        "of 4096"}}
        if i == 8:
            return {"status": 200, "body": chat(f"Answer: {g}", "weird_new_reason")}
        return None
    return rule


def test_the_kinds_through_evaluate_and_score(tmp_path, monkeypatch):
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt, retry_after, rng: 0.0)
    build = make_toy_build(tmp_path / "b", 10)
    calls: dict[int, int] = {}
    srv = FakeOpenAIServer(answer_fn=reader, rule=cli_rule(calls)).__enter__()
    r = cli.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url", srv.base_url])
    out = " ".join(r.output.split())
    # every call ended, none paused (never 75); the three failed calls (an in-band error that persisted, an
    # empty_reply, an unfinished finish) leave the run incomplete: exit 1 naming them (issue 31, exit-codes.md)
    assert r.exit_code == 1, r.output
    assert "error: 3 call(s) failed" in out and all(f"inst-0{i}:" in out for i in (1, 3, 8))
    # requests: item 1 = 1 + 6 retries (the default budget); item 2 = 2 errors + the answer; item 3 asked once
    # more; the overflows one each; everything else one
    assert calls == {0: 1, 1: 7, 2: 3, 3: 2, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1, 9: 1}
    rows = {x["instance_id"]: x for x in pq.read_table(build / "responses.parquet").to_pylist()}
    got = {i: rows[f"inst-{i:02d}"]["status"] for i in range(10)}
    assert got == {0: "ok", 1: "error", 2: "ok", 3: "empty_reply", 4: "refused_by_provider", 5: "ok",
                   6: "refused_by_provider", 7: "over_length", 8: "error", 9: "over_length"}
    assert "Upstream provider error" in rows["inst-01"]["error"] and rows["inst-01"]["retries"] == 6
    assert rows["inst-05"]["response"] == f"Answer: {code(5)}"
    assert "2 over length" in out and "2 refused by the provider" in out and "2 failed" in out
    assert "1 empty replies with tokens generated" in out and "1 provider errors inside a 200" in out
    assert "1 replies whose finish reason does not mean a finished answer (weird_new_reason ×1)" in out

    from ctxbench.analysis.core import call_counts
    c = call_counts(build)[0]  # the report's Calls table: 10 calls, 3 ok, 2 failed, 1 empty_reply, 2 refused
    assert (c["calls"], c["ok"], c["failed"], c["empty_reply"], c["refused"], c["over_length"]) == (10, 3, 2, 1, 2, 2)

    s = cli.invoke(app, ["score", "--build", str(build)])
    assert s.exit_code == 0, s.output
    by = {(x["instance_id"], x["matcher"]): x["score"] for x in pq.read_table(build / "scores.parquet").to_pylist()}
    # only the finished answers are scored: item 1's partial reply ends on its gold but earns nothing (no row)
    assert {iid for iid, _ in by} == {"inst-00", "inst-02", "inst-05"}
    assert by[("inst-00", "row_match")] == by[("inst-02", "row_match")] == by[("inst-05", "row_match")] == 1.0
    # with a judge: the judge grades the same three answers only (one gold row each: one verdict)
    with FakeOpenAIServer(answer_fn=lambda b: json.dumps({"verdicts": ["exact"]})) as judge:
        sj = cli.invoke(app, ["score", "--build", str(build), "--judge", "openai/judge", "--judge-base-url",
                              judge.base_url])
        judged = judge.count
    assert sj.exit_code == 0, sj.output
    rows_j = [x for x in pq.read_table(build / "scores.parquet").to_pylist() if x["matcher"].startswith("judge")]
    assert judged == 3 and {x["instance_id"] for x in rows_j} == {"inst-00", "inst-02", "inst-05"}

    # the rerun asks the error and empty_reply rows again (items 1, 3, 8), nothing else
    before = dict(calls)
    try:
        r2 = cli.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                              srv.base_url])
    finally:
        srv.__exit__(None, None, None)
    assert r2.exit_code == 1, r2.output  # the same three fail again: still incomplete
    assert {i for i in calls if calls[i] != before.get(i)} == {1, 3, 8}
    assert len(pq.read_table(build / "responses.parquet")) == 10  # replaced, not added


def test_a_server_that_words_every_overflow_as_a_500_is_not_down(tmp_path):
    """vLLM's 'longer than the model's maximum length' as a 500 for every call: over_length after one call each,
    exit 0 (the old reading retried it as transient and paused the run with exit 75)."""
    build = make_toy_build(tmp_path / "b", 4)
    body = {"object": "error", "type": "InternalServerError", "code": 500,
            "message": "decoder prompt of 5300 tokens is longer than the model's maximum length of 4096"}
    with FakeOpenAIServer(rule=lambda b: {"status": 500, "body": body}) as srv:
        r = cli.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url", srv.base_url])
        n = srv.count
    assert r.exit_code == 0, r.output
    assert n == 4 and "4 over length" in " ".join(r.output.split())


# -- kind 9: a prompt cache the server does not report ------------------------------------------------------------

def test_a_prefix_served_from_the_cache_is_not_truncation(tmp_path):
    """Four samples of each instance share its context. The server reports neither its window nor cached tokens;
    the first request of a context reports its whole prompt, each later one only the part after the shared prefix
    (Ollama's /v1). Counted in cl100k_base exactly (tolerance 5% + 16 tokens): the later counts fall by the prefix
    (reported + prefix = whole), so they are cache hits, not truncated."""
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.models.prompts import messages_text, shared_prefix
    from fakeserver import prompt_token_count, token_count

    seen: set[str] = set()

    def keep(body):
        msgs = body["messages"]
        ctx = FACTS(msgs)
        if ctx in seen:  # a hit: only the suffix after the shared prefix is counted
            return prompt_token_count(msgs) - token_count(shared_prefix(msgs, ctx))
        seen.add(ctx)
        return None

    build = make_toy_build(tmp_path / "b", 4)
    counter = count_fn()
    with FakeOpenAIServer(answer_fn=reader, truncate_to=keep) as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url, samples=4, concurrency=2),
                           count_tokens=counter)
    assert s.truncated == 0 and s.prefix_cache_hits == 12  # 4 contexts x 3 later samples
    assert {r["status"] for r in pq.read_table(build / "responses.parquet").to_pylist()} == {"ok"}
    assert messages_text  # the check counts messages_text, the fake counts messages: the slack covers it

    # a server that truncates every prompt to 5 tokens: still truncated (the fall is not the prefix's size)
    with FakeOpenAIServer(answer_fn=reader, truncate_to=5) as srv:
        s = evaluate_build(make_toy_build(tmp_path / "c", 2), EvalConfig(model="openai/fake", base_url=srv.base_url,
                                                                        samples=2), count_tokens=counter)
    assert s.truncated == 4 and s.prefix_cache_hits == 0


def test_a_prefix_cached_before_the_run_could_not_be_told_apart(tmp_path):
    """The same server, its cache warm from an earlier run: even the first request of the run reports only the
    suffix. Nothing in this run read the prefix whole, so the rows are truncated, each flagged as undecidable, and
    the summary says truncation could not be told apart."""
    from ctxbench.models.runner import CallRunner, Request, TruncationCheck
    from ctxbench.models.prompts import shared_prefix
    from fakeserver import prompt_token_count, token_count

    msgs = [{"role": "user", "content": "<document>" + "The code of item Q01 is 1037. " * 60 + "</document>\n"
                                        "Question: What is the code of item Q01?"}]
    ctx = "The code of item Q01 is 1037. " * 60
    pre = token_count(shared_prefix(msgs, ctx))

    def keep(body):
        return prompt_token_count(body["messages"]) - pre

    counter = count_fn()
    with FakeOpenAIServer(answer_fn=lambda b: "Answer: 1037", truncate_to=keep) as srv:
        runner = CallRunner("openai/fake", srv.base_url, truncation=TruncationCheck(counter, 0.05, "cl100k", True),
                            window=None)
        from ctxbench.models.cache import ResponseCache
        runner.cache = ResponseCache(tmp_path / "cache")
        out = runner.run([Request("k1", msgs, {"temperature": 0.0}, 64, prefix="p", prefix_tokens=pre)])
    res = out[0].result
    assert res.status == "truncated" and res.truncation_unclear and "could not be told apart" in res.error


def FACTS(msgs):
    """The context of a toy prompt: the text between <document> tags, else the facts sentences."""
    text = message_text(msgs[-1]["content"])
    start = text.find("This is record set number")
    end = text.find(".", text.rfind("The code of item")) + 1
    return text[start:end]


def count_fn():
    from fakeserver import token_count

    return token_count


def test_callresult_flags_are_not_stored():
    # the new flags are run-time only: the payload (the response cache's row) keeps its fields
    r = CallResult("ok", "x", inband_error=True, prefix_cache_hit=True)
    assert "inband_error" not in r.payload() and "prefix_cache_hit" not in r.payload()


def test_the_litellm_path_reads_the_inband_error_litellm_hides():
    """Through litellm (backend litellm at the same base URL): litellm turns finish_reason "error" into "stop" and
    keeps the native reason and the error object in provider_specific_fields; the gateway reads them: an in-band
    error, retried once (budget 1: 2 requests), stored as error with the provider's message."""
    with FakeOpenAIServer(rule=lambda b: {"status": 200, "body": OPENROUTER_ERROR}) as srv:
        gw = Gateway("openai/fake", srv.base_url, 1, RetryPolicy(max_retries=1, base_delay_s=0.0), backend="litellm")

        async def go():
            try:
                return await gw.complete([{"role": "user", "content": "q"}], 64, {"temperature": 0.0},
                                         random.Random(0))
            finally:
                await gw.aclose()
        res = asyncio.run(go())
        n = srv.count
    assert n == 2 and res.status == "error" and res.inband_error and res.finish_reason == "error"
    assert "Upstream provider error: connection reset by peer" in res.error


def test_the_summary_names_cache_hits_and_undecidable_truncation(tmp_path, monkeypatch):
    """The closing summary says how many short prompt counts were read as prompt-cache hits and how many truncated
    rows could not be told apart from one (exit 0: per-instance outcomes)."""
    import io

    from rich.console import Console

    from ctxbench.cli import evaluate as cli_mod  # where report_evaluation prints
    from ctxbench.run.evaluate import EvalSummary

    buf = io.StringIO()
    monkeypatch.setattr(cli_mod, "console", Console(file=buf, soft_wrap=True))
    monkeypatch.setattr(cli_mod, "out_console", Console(file=buf, soft_wrap=True, markup=False))
    s = EvalSummary(selected=16, calls=16, truncated=1, prefix_cache_hits=14, truncation_unclear=1, new_rows=16)
    assert cli_mod.report_evaluation(s, tmp_path) == 0
    out = " ".join(buf.getvalue().split())
    assert "14 replies whose prompt count fell by about the size of a prefix already sent in this run were read as " \
           "prompt-cache hits" in out
    assert "1 truncated replies could not be told apart from a cache hit" in out
