"""The conformance corpus of server replies (tests/data/server_replies.jsonl, issue 21): every entry through the
gateway's reading of an HTTP answer (:func:`ctxbench.models.gateway.http_result`: status, finish_reason, response,
reasoning), through the real HTTP path against tests/fakeserver.py (the server sends the entry's status, headers and
body), and the stored row through the real answer pipeline and matchers (:func:`ctxbench.scoring.pipeline
.score_reply`: extracted answer and credit). Expectations are written by hand in the corpus (see its generator,
tests/data/make_server_replies.py). Entries marked ``needs: i21a`` rely on the answer-pipeline side of issue 21 (the
answer from the reasoning field, ruled-out values, lists joined by words, format characters, Chinese decimals and
negatives) and pass once that branch is merged."""

from __future__ import annotations

import asyncio
import inspect
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from ctxbench.models.gateway import Gateway, PermanentError, RetryPolicy, TransientError, http_result
from ctxbench.scoring.pipeline import score_reply
from fakeserver import FakeOpenAIServer

CORPUS = [json.loads(x) for x in (Path(__file__).parent / "data" / "server_replies.jsonl").read_text(
    encoding="utf-8").splitlines() if x.strip()]
REQUIRED = {"openai", "azure", "anthropic_proxy", "gemini", "mistral", "deepseek", "vllm", "sglang", "tgi",
            "ollama", "llamacpp", "litellm_proxy"}
STATUSES = {"ok", "cut_off", "over_length", "config_error", "refused_by_provider", "error", "transient",
            "empty_reply"}


def body_text(e: dict) -> str:
    return e["body"] if isinstance(e["body"], str) else json.dumps(e["body"], ensure_ascii=False)


def read(e: dict):
    """What the gateway makes of the entry: ``(status, CallResult or None)``."""
    try:
        res = http_result("openai/fake", e["http_status"], body_text(e), e["headers"], e["max_tokens"])
    except TransientError:
        return "transient", None
    except PermanentError as err:
        return err.status, None
    return res.status, res


def test_the_corpus_covers_the_families_and_kinds():
    fams = Counter(e["family"] for e in CORPUS)
    assert len(CORPUS) >= 150 and len({e["id"] for e in CORPUS}) == len(CORPUS)
    assert REQUIRED <= set(fams) and len(fams) >= 10
    assert {e["expect"]["status"] for e in CORPUS} == STATUSES
    kinds = Counter(e["kind"] for e in CORPUS)
    for k in ("cut_off", "over_length", "config", "reasoning_only", "empty_reply", "unrecognised", "negation",
              "list", "format_chars", "zh_numeral",
              # issue 30: in-band errors, empty replies with tokens generated, content parts, unfinished finishes
              "inband_error", "content_parts", "unfinished"):
        assert kinds[k] >= 3, k


@pytest.mark.parametrize("e", CORPUS, ids=[e["id"] for e in CORPUS])
def test_the_gateway_reads_every_entry(e):
    status, res = read(e)
    x = e["expect"]
    assert status == x["status"]
    if res is not None:
        assert res.finish_reason == x["finish_reason"]
        assert res.response == x["response"] and res.reasoning == x["reasoning"]
        if status == "error":  # never scored silently: the reason is named
            assert res.error.startswith(("unrecognised reply shape", "empty reply", "not a finished answer",
                                         "in-band provider error"))
            assert res.inband_error == (e["kind"] == "inband_error")
        if status == "empty_reply":  # tokens generated, nothing returned (issue 30): a server fault, named
            assert res.error.startswith("empty reply") and res.empty_reply
        if status == "cut_off":
            assert "--max-tokens" in res.error
        if status == "ok" and x["reasoning"] and not (x["response"] or "").strip():
            assert res.error is None  # a reasoning-only reply that finished: the budget is not blamed


def test_every_entry_through_the_http_path():
    """The same entries sent by a local server: the gateway's outcome, without retries (a transient error ends
    past the budget of 0 retries; an empty 200 is asked once more and answered the same)."""
    by_id = {e["id"]: e for e in CORPUS}

    def rule(body):
        e = by_id[body["messages"][-1]["content"]]
        return {"status": e["http_status"], "body": e["body"], "headers": e["headers"]}

    with FakeOpenAIServer(rule=rule) as srv:
        gw = Gateway("openai/fake", srv.base_url, 4, RetryPolicy(max_retries=0, timeout_s=30))

        async def go():
            try:
                return await asyncio.gather(*(gw.complete([{"role": "user", "content": e["id"]}], e["max_tokens"],
                                                          {"temperature": 0.0}, random.Random(0)) for e in CORPUS))
            finally:
                await gw.aclose()
        results = asyncio.run(go())
        sent = Counter(b["messages"][-1]["content"] for b in srv.requests)
    for e, res in zip(CORPUS, results):
        x = e["expect"]
        got = "transient" if res.transient_failure else res.status
        assert got == x["status"], e["id"]
        if x["status"] not in ("transient", "config_error", "over_length", "refused_by_provider") or \
                e["http_status"] == 200:
            assert res.finish_reason == x["finish_reason"] and res.response == x["response"], e["id"]
        # one request per entry, except an empty 200, which is asked once more
        assert sent[e["id"]] == (2 if e["kind"] == "empty_reply" else 1), e["id"]


SCORED = [e for e in CORPUS if e["expect"]["status"] in ("ok", "cut_off")]


def credit(e: dict, res) -> tuple[str | None, dict[str, float]]:
    """The stored row through the answer pipeline and matchers as ``score`` runs them: a ``cut_off`` reply earns no
    credit (``score`` never scores it, or scores it 0 where the pipeline takes the status)."""
    inst = {"instance_id": e["id"], "benchmark": e["benchmark"], "gold": e["gold"], "sql": e["sql"],
            "question": "q?", "accepted_answers": None}
    takes = inspect.signature(score_reply).parameters
    if "status" in takes:
        scored = score_reply(res.response, inst, res.reasoning, finish_reason=res.finish_reason, status=res.status)
    elif res.status == "cut_off":
        return None, {m: 0.0 for m in e["expect"]["scores"]}
    else:
        scored = score_reply(res.response, inst, res.reasoning)
    return scored[0].answer, {s.matcher: s.result.score for s in scored}


@pytest.mark.parametrize("e", SCORED, ids=[e["id"] for e in SCORED])
def test_the_stored_row_through_the_answer_pipeline(e):
    status, res = read(e)
    assert status == e["expect"]["status"]
    answer, scores = credit(e, res)
    if status == "ok":
        assert answer == e["expect"]["answer"]
    assert {m: scores[m] for m in e["expect"]["scores"]} == e["expect"]["scores"]
