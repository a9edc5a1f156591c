"""Gateway against a local fake OpenAI-compatible server: success, retries of transient faults (honouring
Retry-After), over-length and permanent errors, the retry budget, and the concurrency bound; classify() on
litellm's exception classes."""

from __future__ import annotations

import asyncio
import random
import time

import httpx
import pytest

from ctxbench.models.gateway import Gateway, PermanentError, RetryPolicy, TransientError, classify
from fakeserver import FakeOpenAIServer

MESSAGES = [{"role": "system", "content": "You answer questions."},
            {"role": "user", "content": "Document: the gate of flight UA 1545 is C12.\nQuestion: which gate?"}]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


@pytest.fixture
def srv():
    with FakeOpenAIServer() as s:
        yield s


def call(srv, *, max_retries=4, timeout_s=5.0, model="openai/fake", messages=MESSAGES, sampling=None,
         max_tokens=64):
    async def go():
        gw = Gateway(model, srv.base_url, concurrency=2,
                     policy=RetryPolicy(max_retries=max_retries, base_delay_s=0.01, max_delay_s=0.05,
                                        timeout_s=timeout_s))
        try:
            return await gw.complete(messages, max_tokens, sampling or {"temperature": 0.0, "seed": 0},
                                     random.Random(0))
        finally:
            await gw.aclose()

    return asyncio.run(go())


def test_success_returns_text_and_token_counts(srv):
    r = call(srv, sampling={"temperature": 0.0, "seed": 3}, max_tokens=77)
    assert r.status == "ok"
    assert r.response == "Answer: Question: which gate?"
    # the fake server counts cl100k_base tokens, 3 per message plus the text: system "You| answer| questions|." (4),
    # user "Document|:| the| gate| of| flight| UA| |154|5| is| C|12|.\n|Question|:| which| gate|?" (19);
    # answer "Answer|:| Question|:| which| gate|?" (7)
    assert (r.prompt_tokens, r.completion_tokens) == (3 + 4 + 3 + 19, 7)
    assert r.retries == 0 and r.retry_delay_s == 0.0 and not r.transient_failure
    assert r.error is None and r.latency_s is not None and r.latency_s > 0
    assert r.cost_usd is None  # an unknown model has no price: null, never 0
    assert srv.count == 1
    body = srv.requests[0]
    assert body["model"] == "fake"  # the leading openai/ is dropped for a base_url server
    assert body["max_tokens"] == 77 and body["temperature"] == 0.0 and body["seed"] == 3
    assert body["messages"] == MESSAGES


def test_model_name_without_prefix_is_sent_unchanged(srv):
    r = call(srv, model="my-local-model")
    assert r.status == "ok"
    assert srv.requests[0]["model"] == "my-local-model"


def test_429_with_retry_after_waits_at_least_that_long(srv):
    srv.retry_after = "1"
    srv.script(["429_retry_after"])
    t0 = time.perf_counter()
    r = call(srv)
    elapsed = time.perf_counter() - t0
    assert r.status == "ok"
    assert r.retries == 1
    assert r.retry_delay_s >= 1.0  # base_delay_s is 0.01: only Retry-After can make it this long
    assert elapsed >= 1.0
    assert srv.count == 2 and srv.behaviours == ["429_retry_after", "ok"]


def test_429_with_retry_after_ms_is_honoured(srv):
    srv.retry_after = "0.3"
    srv.script(["429_retry_after_ms"])
    r = call(srv)
    assert r.status == "ok" and r.retries == 1
    assert r.retry_delay_s >= 0.3
    assert srv.count == 2


@pytest.mark.parametrize("kind", ["429", "500", "503", "reset"])
def test_transient_errors_are_retried(srv, kind):
    srv.script([kind, kind])
    r = call(srv, max_retries=4)
    assert r.status == "ok", r.error
    assert r.retries == 2
    assert r.response == "Answer: Question: which gate?"
    assert 0 < r.retry_delay_s <= 2 * 0.05 + 1e-9  # full jitter, capped by max_delay_s
    assert srv.count == 3
    assert srv.behaviours == [kind, kind, "ok"]


def test_timeout_is_retried(srv):
    assert call(srv).status == "ok"  # warm-up: first-call imports and set-up are not part of what is timed
    srv.delay_s = 8.0
    srv.script(["delay"])
    before = srv.count
    t0 = time.perf_counter()
    r = call(srv, timeout_s=2.0)  # generous for the ok answer on a loaded machine, far below the 8 s delay
    elapsed = time.perf_counter() - t0
    assert r.status == "ok", r.error
    assert r.retries == 1
    assert srv.count - before == 2
    assert elapsed < 7.0  # gave up on the slow answer instead of waiting 8 s for it


def test_context_length_400_is_over_length_without_retry(srv):
    srv.script(["ctx400", "ok", "ok"])
    r = call(srv)
    assert r.status == "over_length"
    assert r.retries == 0 and not r.transient_failure
    assert r.response is None
    assert "maximum context length" in r.error
    assert srv.count == 1


def test_plain_400_is_a_permanent_error(srv):
    srv.script(["400", "ok", "ok"])
    r = call(srv)
    assert r.status == "error"
    assert r.retries == 0 and not r.transient_failure
    assert "400" in r.error and "temperature" in r.error
    assert srv.count == 1


def test_content_filter_finish_reason_is_refused(srv):
    srv.script(["content_filter"])
    r = call(srv)
    assert r.status == "refused_by_provider"
    assert srv.count == 1


def test_retry_budget_exhausted_is_transient_failure(srv):
    srv.script(["500", "503", "429", "500"])
    r = call(srv, max_retries=2)
    assert r.status == "error"
    assert r.transient_failure is True
    assert r.retries == 2
    assert r.error.startswith("retry budget exhausted")
    assert srv.count == 3  # 1 call + 2 retries; the 4th scripted failure is never requested
    assert srv.behaviours == ["500", "503", "429"]


def test_zero_retries_gives_up_at_once(srv):
    srv.script(["503"])
    r = call(srv, max_retries=0)
    assert r.status == "error" and r.transient_failure and r.retries == 0
    assert srv.count == 1


def test_connection_refused_is_transient():
    # a port nobody listens on: connect errors are retried, then reported as a transient failure
    from ctxbench.models.local_server import free_port

    class Dead:
        base_url = f"http://127.0.0.1:{free_port()}/v1"

    r = call(Dead, max_retries=1)
    assert r.status == "error" and r.transient_failure and r.retries == 1


def test_concurrency_is_bounded(srv):
    srv.delay_s = 0.2
    srv.rule = lambda body: "delay"

    async def go():
        gw = Gateway("openai/fake", srv.base_url, concurrency=2,
                     policy=RetryPolicy(max_retries=0, base_delay_s=0.01, timeout_s=5))
        try:
            return await asyncio.gather(*(gw.complete(MESSAGES, 16, {"temperature": 0.0}) for _ in range(6)))
        finally:
            await gw.aclose()

    res = asyncio.run(go())
    assert [r.status for r in res] == ["ok"] * 6
    assert srv.count == 6
    assert srv.max_in_flight == 2


def test_sampling_words_are_passed_through(srv):
    r = call(srv, messages=[{"role": "user", "content": "one two three"}], sampling={"temperature": 0.7, "seed": 5})
    assert r.status == "ok"
    assert r.prompt_tokens == 3 + 3 and r.completion_tokens == 5  # "one| two| three", "Answer|:| one| two| three"
    assert srv.requests[0]["temperature"] == 0.7 and srv.requests[0]["seed"] == 5


# -- classify() on litellm's exception classes ---------------------------------------------------------------------

def _resp(code, headers=None):
    return httpx.Response(code, headers=headers or {}, request=httpx.Request("POST", "http://127.0.0.1/v1/chat"))


def test_classify_litellm_exceptions():
    import litellm

    e = classify(litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o",
                                        response=_resp(429, {"retry-after": "7"})))
    assert isinstance(e, TransientError) and e.retry_after == 7.0

    e = classify(litellm.ContextWindowExceededError("too long", model="gpt-4o", llm_provider="openai",
                                                    response=_resp(400)))
    assert isinstance(e, PermanentError) and e.status == "over_length"

    e = classify(litellm.BadRequestError("This model's maximum context length is 128000 tokens", model="gpt-4o",
                                         llm_provider="openai", response=_resp(400)))
    assert isinstance(e, PermanentError) and e.status == "over_length"

    e = classify(litellm.BadRequestError("Invalid value for 'temperature'", model="gpt-4o", llm_provider="openai",
                                         response=_resp(400)))
    assert isinstance(e, PermanentError) and e.status == "error"

    # credentials and model names are the run's configuration: config_error, never stored, so a fixed rerun calls
    e = classify(litellm.AuthenticationError("bad key", llm_provider="openai", model="gpt-4o", response=_resp(401)))
    assert isinstance(e, PermanentError) and e.status == "config_error"

    e = classify(litellm.NotFoundError("no such model", model="gpt-9", llm_provider="openai", response=_resp(404)))
    assert isinstance(e, PermanentError) and e.status == "config_error"

    for exc in (litellm.ServiceUnavailableError("down", llm_provider="openai", model="gpt-4o", response=_resp(503)),
                litellm.InternalServerError("oops", llm_provider="openai", model="gpt-4o", response=_resp(500)),
                litellm.Timeout("timed out", model="gpt-4o", llm_provider="openai"),
                litellm.APIConnectionError("reset", llm_provider="openai", model="gpt-4o",
                                           request=httpx.Request("POST", "http://127.0.0.1/"))):
        assert isinstance(classify(exc), TransientError), type(exc).__name__

    e = classify(litellm.ContentPolicyViolationError("blocked", model="gpt-4o", llm_provider="openai",
                                                     response=_resp(400)))
    assert isinstance(e, PermanentError) and e.status == "refused_by_provider"


def test_classify_plain_python_errors():
    assert isinstance(classify(asyncio.TimeoutError()), TransientError)
    assert isinstance(classify(ConnectionResetError()), TransientError)
    e = classify(ValueError("bad"))
    assert isinstance(e, PermanentError) and e.status == "error"


def test_retry_policy_delay_bounds():
    p = RetryPolicy(base_delay_s=0.5, max_delay_s=3.0)
    rng = random.Random(1)
    for attempt in range(8):
        cap = min(3.0, 0.5 * 2 ** attempt)
        for _ in range(50):
            d = p.delay(attempt, None, rng)
            assert 0.0 <= d <= cap
    assert p.delay(0, 10.0, rng) >= 10.0  # Retry-After is a floor


def test_retry_after_header_forms():
    import email.utils

    import litellm

    def ra(headers):
        return classify(litellm.RateLimitError("slow", llm_provider="openai", model="m",
                                               response=_resp(429, headers))).retry_after

    assert ra({"Retry-After": "2"}) == 2.0
    assert ra({"retry-after-ms": "250"}) == 0.25
    assert ra({}) is None
    assert ra({"Retry-After": "-5"}) == 0.0
    future = email.utils.formatdate(time.time() + 5, usegmt=True)  # HTTP-date form, whole seconds
    assert 3.0 <= ra({"Retry-After": future}) <= 5.5
    assert ra({"Retry-After": "soon"}) is None
