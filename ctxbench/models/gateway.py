"""Model gateway: one async call path for every provider.

OpenAI-compatible servers (a ``base_url``: vLLM, llama.cpp, Ollama, the embedded model) are called over plain
async HTTP (``/chat/completions``, the OpenAI wire format); every other provider (OpenAI, Anthropic, Gemini, ...) through
``litellm.acompletion``. API keys come only from the environment (or a Prefect Secret block resolved by the flow
into the environment); they are never written to any output or log.

Faults: transient errors (429, 5xx, timeouts, connection resets) are retried with exponential backoff and full
jitter, honouring ``Retry-After``; permanent errors (400, 401/403, 404) are not retried; a context-length error is
recorded as ``over_length``. Concurrency is bounded per gateway (one per model).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

_CTX_RE = re.compile(r"context.?length|context window|maximum context|too many tokens|exceed.*context|"
                     r"prompt is too long|input is too long|reduce the length", re.IGNORECASE)


@dataclass
class CallResult:
    """Outcome of one call: status ``ok``, ``over_length``, ``refused_by_provider`` or ``error``; ``config_error``
    (401/403/404: credentials, permissions, model name) is never stored, so a fixed rerun calls again."""

    status: str
    response: str | None = None
    reasoning: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    error: str | None = None
    retries: int = 0
    retry_delay_s: float = 0.0
    transient_failure: bool = False  # True when the retry budget ran out on transient errors

    def __post_init__(self) -> None:
        # a reply is stored as UTF-8 text whatever the server sent: content blocks joined, other JSON values as
        # JSON, lone surrogates (valid in JSON escapes, not in UTF-8) replaced by U+FFFD
        for f in ("response", "reasoning", "error"):
            setattr(self, f, clean_text(getattr(self, f)))

    def payload(self) -> dict[str, Any]:
        """What the response cache stores (no key, no secrets)."""
        return {k: getattr(self, k) for k in ("status", "response", "reasoning", "prompt_tokens",
                                              "completion_tokens", "latency_s", "cost_usd", "error")}


def clean_text(v: Any) -> str | None:
    """``v`` as storable text: None stays None; a list of content blocks becomes their joined text; any other
    non-string is written as JSON; lone surrogates become U+FFFD."""
    if v is None:
        return None
    if isinstance(v, list):
        v = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in v)
    elif not isinstance(v, str):
        v = json.dumps(v, ensure_ascii=False, default=str)
    try:
        v.encode("utf-8")
        return v
    except UnicodeEncodeError:
        return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class TransientError(Exception):
    def __init__(self, msg: str, retry_after: float | None = None):
        super().__init__(msg)
        self.retry_after = retry_after


class PermanentError(Exception):
    def __init__(self, msg: str, status: str = "error"):
        super().__init__(msg)
        self.status = status


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    v = headers.get("retry-after") or headers.get("Retry-After")
    if v is None:
        ms = headers.get("retry-after-ms")
        return float(ms) / 1000 if ms else None
    try:
        return max(0.0, float(v))
    except ValueError:
        from email.utils import parsedate_to_datetime
        try:
            return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def classify(exc: BaseException) -> Exception:
    """Map a client exception to TransientError or PermanentError (with status ``over_length`` for
    context-length errors)."""
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    headers = getattr(getattr(exc, "response", None), "headers", None)
    msg = f"{type(exc).__name__}: {str(exc)[:500]}"
    name = type(exc).__name__
    if "ContextWindowExceeded" in name or (status in (400, 413, 422) and _CTX_RE.search(str(exc))):
        return PermanentError(msg, "over_length")
    if status == 429 or name in ("RateLimitError",):
        return TransientError(msg, _retry_after(headers))
    if isinstance(status, int) and status >= 500:
        return TransientError(msg, _retry_after(headers))
    if name in ("APITimeoutError", "Timeout", "APIConnectionError", "ServiceUnavailableError",
                "InternalServerError", "TimeoutError", "ReadTimeout", "ConnectError", "RemoteProtocolError"):
        return TransientError(msg)
    if isinstance(exc, (asyncio.TimeoutError, ConnectionError, TimeoutError)):
        return TransientError(msg)
    if name == "ContentPolicyViolationError":
        return PermanentError(msg, "refused_by_provider")
    if (status in (401, 403, 404) or name in ("AuthenticationError", "PermissionDeniedError", "NotFoundError")
            or "LLM Provider NOT provided" in str(exc)):  # litellm: an unknown model name without --base-url
        return PermanentError(msg, "config_error")
    return PermanentError(msg)


@dataclass
class RetryPolicy:
    """Retries of transient errors: up to ``max_retries``, delay ``min(max_delay_s, base_delay_s·2^n)`` with full
    jitter, at least the server's ``Retry-After``."""

    max_retries: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    timeout_s: float = 600.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        d = rng.uniform(0, min(self.max_delay_s, self.base_delay_s * (2 ** attempt)))
        return max(d, retry_after or 0.0)


@dataclass
class Gateway:
    """Calls one model. ``model`` is the name as given on the CLI; with ``base_url`` it is served by an
    OpenAI-compatible server (a leading ``openai/`` is dropped from the name sent)."""

    model: str
    base_url: str | None = None
    concurrency: int = 8
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    api_key_env: str | None = None
    stop: asyncio.Event | None = field(default=None, repr=False)  # set: no new attempt starts (a paused run)
    _sem: asyncio.Semaphore | None = field(default=None, repr=False)
    _client: Any = field(default=None, repr=False)

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._sem

    def _http_client(self):
        if self._client is None:
            import httpx

            # a key is sent to a base URL only when named explicitly (--api-key-env): never leak OPENAI_API_KEY
            # to an arbitrary server
            key = (os.environ.get(self.api_key_env) if self.api_key_env else None) or "sk-no-key"
            n = max(self.concurrency, 1) * 2
            self._client = httpx.AsyncClient(
                base_url=self.base_url.rstrip("/") + "/", timeout=self.policy.timeout_s,
                headers={"Authorization": f"Bearer {key}"},
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))
        return self._client

    async def _once_http(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One call to an OpenAI-compatible ``/chat/completions`` endpoint with a bare async HTTP client (measured
        faster than the SDKs on 2 cores, whose per-call CPU cost limits throughput)."""
        import httpx

        name = self.model[len("openai/"):] if self.model.startswith("openai/") else self.model
        t0 = time.perf_counter()
        try:
            r = await self._http_client().post("chat/completions", json={
                "model": name, "messages": messages, "max_tokens": max_tokens, **sampling})
        except (httpx.TimeoutException, httpx.TransportError) as e:
            raise TransientError(f"{type(e).__name__}: {e}") from None
        lat = time.perf_counter() - t0
        if r.status_code >= 400:
            text = r.text[:500]
            if r.status_code == 429 or r.status_code >= 500:
                raise TransientError(f"HTTP {r.status_code}: {text}", _retry_after(r.headers))
            if r.status_code in (400, 413, 422) and _CTX_RE.search(text):
                raise PermanentError(f"HTTP {r.status_code}: {text}", "over_length")
            if r.status_code in (401, 403, 404):
                # credentials, permissions or the model name: the run's configuration, not this instance
                raise PermanentError(f"HTTP {r.status_code}: {text}", "config_error")
            raise PermanentError(f"HTTP {r.status_code}: {text}")
        try:
            d = r.json()
            choice = d["choices"][0]
            msg = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            raise TransientError(f"malformed response body: {r.text[:200]}") from None
        usage = d.get("usage") or {}
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        status = "refused_by_provider" if choice.get("finish_reason") == "content_filter" else "ok"
        return CallResult(status, msg.get("content"), msg.get("reasoning_content"), pt, ct, lat,
                          cost_usd(self.model, pt, ct))

    async def _once(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        if self.base_url:
            return await self._once_http(messages, max_tokens, sampling)
        t0 = time.perf_counter()
        import litellm

        litellm.drop_params = True  # a provider that lacks a parameter (seed, response_format) ignores it
        r = await litellm.acompletion(model=self.model, messages=messages, max_tokens=max_tokens,
                                      num_retries=0, timeout=self.policy.timeout_s, **sampling)
        lat = time.perf_counter() - t0
        choice = r.choices[0]
        msg = choice.message
        text = getattr(msg, "content", None)
        reasoning = getattr(msg, "reasoning_content", None)
        usage = getattr(r, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage else None
        ct = getattr(usage, "completion_tokens", None) if usage else None
        status = "ok"
        if choice.finish_reason == "content_filter":
            status = "refused_by_provider"
        return CallResult(status, text, reasoning, pt, ct, lat, cost_usd(self.model, pt, ct))

    async def complete(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any],
                       rng: random.Random | None = None) -> CallResult:
        """One call with retries. Never raises for a provider error: the result's status says what happened."""
        rng = rng or random.Random(0)
        retries, waited = 0, 0.0
        async with self._semaphore():
            while True:
                if self.stop is not None and self.stop.is_set():
                    return CallResult("error", error="not attempted: the evaluation paused (provider outage)",
                                      retries=retries, retry_delay_s=waited, transient_failure=True)
                try:
                    res = await asyncio.wait_for(self._once(messages, max_tokens, sampling), self.policy.timeout_s)
                    res.retries, res.retry_delay_s = retries, waited
                    return res
                except Exception as e:  # noqa: BLE001
                    err = e if isinstance(e, (TransientError, PermanentError)) else classify(e)
                    if isinstance(err, PermanentError):
                        return CallResult(err.status, error=str(err), retries=retries, retry_delay_s=waited)
                    if retries >= self.policy.max_retries:
                        return CallResult("error", error=f"retry budget exhausted: {err}", retries=retries,
                                          retry_delay_s=waited, transient_failure=True)
                    d = self.policy.delay(retries, err.retry_after, rng)
                    retries += 1
                    waited += d
                    if self.stop is None:
                        await asyncio.sleep(d)
                    else:  # a pause cuts the backoff short
                        try:
                            await asyncio.wait_for(self.stop.wait(), d)
                        except asyncio.TimeoutError:
                            pass

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def cost_usd(model: str, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    """Cost from litellm's price table; None when the price (or a token count) is unknown — never 0 by default."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    try:
        import litellm

        info = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1])
        if not info or info.get("input_cost_per_token") is None:
            return None
        return (prompt_tokens * float(info["input_cost_per_token"])
                + completion_tokens * float(info.get("output_cost_per_token") or 0.0))
    except Exception:  # noqa: BLE001
        return None
