"""Model gateway: one async call path for every provider: retries, backoff, the outage pause and bounded concurrency
around one registered backend (:mod:`ctxbench.models.backends`).

The backend is picked by name (:func:`ctxbench.models.backends.backend_class`): OpenAI-compatible servers (a
``base_url``: vLLM, llama.cpp, Ollama, the embedded model's server) over plain async HTTP (``openai_http``); every
other provider (OpenAI, Anthropic, Gemini, ...) through ``litellm.acompletion`` (``litellm``; ``backend="litellm"``
also sends a base URL through litellm); the embedded model at no base URL through ``embedded``, which starts its
server itself. API keys come only from the environment (or a Prefect Secret block resolved by the flow into the
environment); they are never written to any output or log.

Faults: every failure is classified by one table (:mod:`ctxbench.models.errors`, :data:`ERROR_TABLE`): transient
errors are retried here with exponential backoff and full jitter, honouring ``Retry-After`` up to a cap (a longer
hint ends the call's retries and hands over to the outage pause); everything else is a permanent outcome after one
call. Replies: every 200 is read by the one reply classifier (:mod:`ctxbench.models.replies`); a provider error
inside a 200 is retried here as a transient failure, and a 200 that holds no reply (``empty_reply``) is asked once
more. Every name of :mod:`ctxbench.models.errors`, :mod:`ctxbench.models.replies`, ``CallResult`` and the
credentials check (:mod:`ctxbench.models.providers`) is importable from here as before.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from ctxbench.core import progress
from ctxbench.core.backend import PAYLOAD_FIELDS, CallResult, clean_text  # noqa: F401 - re-exported
from ctxbench.core.redact import install as _install_redaction
from ctxbench.models.backends import backend_class
from ctxbench.models.backends.base import BaseBackend, api_key, served_name
from ctxbench.models.deployment import is_deployment, parse_deployment
from ctxbench.models.errors import (  # noqa: F401 - re-exported: the error table's names, as before the split
    CONFIG_RE, CONTENT_FILTER_RE, CONTEXT_LENGTH_RE, CREDENTIALS_RE, ERROR_TABLE, MISSING_KEY_RE, OUTCOMES,
    OUTPUT_BUDGET_RE, PARAMETER_RE, QUOTA_RE, TRANSIENT_EXCEPTIONS, TRANSIENT_RE, ErrorInfo, ErrorRule,
    PermanentError, TransientError, classify, classify_error, error_in_body, retry_after_s, retry_hint_in_text,
    setting_to_change)
from ctxbench.models.providers import missing_credentials, require_credentials  # noqa: F401 - re-exported
from ctxbench.models.replies import (  # noqa: F401 - re-exported: the reply classifier's names
    ERROR_FINISH_REASONS, FINISHED_FINISH_REASONS, LENGTH_FINISH_REASONS, REFUSAL_FINISH_REASONS, Parts,
    completion_result, cost_usd, finish_text, http_result, inband_error, is_error_finish, is_finished,
    is_length_finish, is_refusal_finish, litellm_choice, litellm_result, read_content, reply_parts, reply_result,
    usage_counts)

_install_redaction()  # every log record and warning of a process that calls models is redacted (ctxbench.core.redact)

NOT_ATTEMPTED = "not attempted"  # the error of a call a paused run did not start
EMPTY_REPLY_RETRIES = 1  # a 200 that holds no reply (the server dropped the prompt) is asked once more


@dataclass
class RetryPolicy:
    """Retries of transient errors: up to ``max_retries``, delay ``min(max_delay_s, base_delay_s·2^n)`` with full
    jitter, at least the server's ``Retry-After`` up to ``max_retry_after_s`` (a longer hint ends the call's
    retries in the gateway: the outage pause takes over)."""

    max_retries: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    timeout_s: float = 600.0
    max_retry_after_s: float = 300.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): full jitter, at least ``retry_after`` capped
        at ``max_retry_after_s``."""
        d = rng.uniform(0, min(self.max_delay_s, self.base_delay_s * (2 ** attempt)))
        return max(d, min(retry_after or 0.0, self.max_retry_after_s))


# context-window fields servers report: vLLM and SGLang (/v1/models max_model_len), LM Studio (/api/v0/models
# max_context_length, loaded_context_length), OpenRouter and Together (context_length), llama.cpp (/props n_ctx),
# TGI (/info max_total_tokens), Ollama (/api/ps context_length)
WINDOW_FIELDS = ("max_model_len", "loaded_context_length", "max_context_length", "context_length", "n_ctx",
                 "max_total_tokens")


def window_from(obj: Any, model: str | None = None) -> int | None:
    """The context window a server's info document reports (first of :data:`WINDOW_FIELDS` found, searched in the
    entry of ``model`` where the document lists models, else anywhere in it); None when it reports none."""
    if isinstance(obj, dict):
        for k in ("data", "models"):
            if isinstance(obj.get(k), list):
                entries = [e for e in obj[k] if isinstance(e, dict)]
                mine = [e for e in entries if model and model in (e.get("id"), e.get("name"), e.get("model"))]
                for e in mine or (entries if len(entries) == 1 else []):
                    w = window_from(e)
                    if w:
                        return w
        for f in WINDOW_FIELDS:
            v = obj.get(f)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        for v in obj.values():
            if isinstance(v, dict):
                w = window_from(v)
                if w:
                    return w
    return None


@dataclass
class Gateway:
    """Calls one model. ``model`` is the name as given on the CLI; with ``base_url`` it is served by an
    OpenAI-compatible server (a leading ``openai/`` is dropped from the name sent). ``backend``: ``auto`` (HTTP for
    a base URL, else litellm), ``http`` or ``litellm`` (litellm also for a base URL, sent as its ``api_base``), or
    any registered backend's name (:mod:`ctxbench.models.backends`)."""

    model: str
    base_url: str | None = None
    concurrency: int = 8
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    api_key_env: str | None = None
    stop: asyncio.Event | None = field(default=None, repr=False)  # set: no new attempt starts (a paused run)
    backend: str = "auto"
    _sem: asyncio.Semaphore | None = field(default=None, repr=False)
    _backend: BaseBackend | None = field(default=None, repr=False)

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._sem

    def _api_key(self) -> str:
        return api_key(self.api_key_env, self.base_url)

    @property
    def served_name(self) -> str:
        """The model name sent to an OpenAI-compatible server."""
        return served_name(self.model)

    def _transport(self) -> BaseBackend:
        """The backend this gateway calls through, made on first use: looked up by name
        (:func:`ctxbench.models.backends.backend_class`: ``openai_http`` for a base URL, ``litellm`` otherwise or
        with ``backend="litellm"``, ``embedded`` for the embedded model at no base URL)."""
        if self._backend is None:
            cls = backend_class(self.model, self.base_url, self.backend)
            self._backend = cls(self.model, self.base_url, api_key_env=self.api_key_env,
                                timeout_s=self.policy.timeout_s, concurrency=self.concurrency)
        return self._backend

    async def _once(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        return await self._transport().generate(messages, max_tokens, sampling)

    async def complete(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any],
                       rng: random.Random | None = None) -> CallResult:
        """One call with retries. Never raises for a provider error: the result's status says what happened.
        A Retry-After longer than the policy's ``max_retry_after_s`` ends the retries at once (``retry_after_s``
        set, ``transient_failure`` true, the hint in ``error``): the caller's outage pause takes over."""
        rng = rng or random.Random(0)
        retries, waited, empties = 0, 0.0, 0
        async with self._semaphore():
            while True:
                if self.stop is not None and self.stop.is_set():
                    return CallResult("error", error=f"{NOT_ATTEMPTED}: the evaluation paused (provider outage)",
                                      retries=retries, retry_delay_s=waited, transient_failure=True)
                try:
                    with progress.in_flight(self.model, retries):  # a heartbeat shows it while it runs
                        async with asyncio.timeout(self.policy.timeout_s):  # in this task: no task and hop per call
                            res = await self._once(messages, max_tokens, sampling)
                    if res.empty_reply and empties < EMPTY_REPLY_RETRIES:  # the server dropped the prompt: once more
                        empties += 1
                        retries += 1
                        continue
                    if res.inband_error and retries < self.policy.max_retries:  # a provider failure on a 200
                        d = self.policy.delay(retries, None, rng)
                        retries += 1
                        waited += d
                        progress.retrying(self.model, res.error or "in-band error", retries,
                                          self.policy.max_retries, d, self.policy.timeout_s)
                        if self.stop is None:
                            await asyncio.sleep(d)
                        else:  # a pause cuts the backoff short
                            try:
                                await asyncio.wait_for(self.stop.wait(), d)
                            except asyncio.TimeoutError:
                                pass
                        continue
                    res.retries, res.retry_delay_s = retries, waited
                    return res
                except Exception as e:  # noqa: BLE001
                    err = e if isinstance(e, (TransientError, PermanentError)) else self._classify(e)
                    if isinstance(err, PermanentError):
                        return CallResult(err.status, error=str(err), retries=retries, retry_delay_s=waited,
                                          http_status=err.http_status)
                    if err.retry_after is not None and err.retry_after > self.policy.max_retry_after_s:
                        return CallResult("error", error=f"the server asked to wait {_duration(err.retry_after)} "
                                          f"(Retry-After) before a retry, over the cap of "
                                          f"{_duration(self.policy.max_retry_after_s)} (max_retry_after_s): {err}",
                                          retries=retries, retry_delay_s=waited, transient_failure=True,
                                          retry_after_s=err.retry_after)
                    if retries >= self.policy.max_retries:
                        return CallResult("error", error=f"retry budget exhausted: {err}", retries=retries,
                                          retry_delay_s=waited, transient_failure=True)
                    d = self.policy.delay(retries, err.retry_after, rng)
                    retries += 1
                    waited += d
                    progress.retrying(self.model, e, retries, self.policy.max_retries, d, self.policy.timeout_s)
                    if self.stop is None:
                        await asyncio.sleep(d)
                    else:  # a pause cuts the backoff short
                        try:
                            await asyncio.wait_for(self.stop.wait(), d)
                        except asyncio.TimeoutError:
                            pass

    async def server_window(self) -> int | None:
        """The context window (tokens) the OpenAI-compatible server at ``base_url`` reports for this model, from
        the first of ``/models`` (vLLM, SGLang, LM Studio), ``/props`` (llama.cpp), ``/info`` (TGI), ``/api/ps``
        (Ollama) and ``/api/v0/models`` (LM Studio) that names one (:func:`window_from`); None when none does or
        there is no base URL. Never raises."""
        if not self.base_url:
            return None
        base = self.base_url.rstrip("/")
        if is_deployment(base):  # replicas serve one model: the first one's window
            base = parse_deployment(base, self.model).replicas[0].rstrip("/")
        root = re.sub(r"/v\d+$", "", base)
        urls = [f"{base}/models", f"{root}/props", f"{root}/info", f"{root}/api/ps", f"{root}/api/v0/models"]
        async with httpx.AsyncClient(timeout=5.0, headers={"Authorization": f"Bearer {self._api_key()}"}) as c:
            for u in urls:
                try:
                    r = await c.get(u)
                    if r.status_code == 200:
                        w = window_from(r.json(), self.served_name)
                        if w:
                            return w
                except (httpx.HTTPError, ValueError):
                    continue
        return None

    def _classify(self, exc: BaseException) -> Exception:
        return self._backend.classify(exc) if self._backend is not None else classify(exc)

    async def aclose(self) -> None:
        """Close the backend's connections (and stop a server the backend started)."""
        if self._backend is not None:
            await self._backend.aclose()


def _duration(s: float) -> str:
    """``86400`` → ``86400 s (24.0 h)``."""
    return f"{s:.0f} s" + (f" ({s / 3600:.1f} h)" if s >= 3600 else f" ({s / 60:.1f} min)" if s >= 120 else "")
