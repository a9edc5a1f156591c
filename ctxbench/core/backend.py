"""The backend contract: what one model call returns (:class:`CallResult`) and what a backend is (:class:`Backend`).

A *backend* is one way of sending a chat request to a model: an OpenAI-compatible server over HTTP, litellm, the
embedded llama.cpp server, a provider's batch API. Each is one class in ``ctxbench/models/backends/``, registered by
name (:mod:`ctxbench.core.registry`); the gateway (:mod:`ctxbench.models.gateway`) picks one by name, retries and
bounds concurrency, and never looks inside a reply: the backend turns every reply into a :class:`CallResult` through
the one reply classifier (:mod:`ctxbench.models.replies`). This module is on the ground floor: it imports nothing
above :mod:`ctxbench.core` (the shape of inspect_ai's ``ModelAPI.generate`` and ``should_retry``).
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from ctxbench.core.redact import redact


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



@dataclass
class CallResult:
    """Outcome of one call: status ``ok``, ``over_length``, ``truncated`` (set by the runner: the server read fewer
    prompt tokens than were sent), ``cut_off``, ``refused_by_provider``, ``empty_reply`` (tokens generated, no text
    returned) or ``error``; ``config_error`` (credentials, model name,
    quota, output budget) is never stored, so a fixed rerun calls again. ``server_window``: the server's context
    window in tokens when the runner knew it (over_length and truncated outcomes are replayed only while it holds);
    ``expected_prompt_tokens``: the prompt's count the truncation check compared with ``prompt_tokens``;
    ``retry_after_s``: a Retry-After hint over the policy's cap, which ended the retries; ``cached_prompt_tokens``:
    the prompt tokens the provider read from its prompt cache (where its usage reports them); ``batch_id``: the
    provider's batch that answered the request (``evaluate --batch``), None for a direct call."""

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
    server_window: int | None = None
    expected_prompt_tokens: int | None = None
    retry_after_s: float | None = None
    cached_prompt_tokens: int | None = None
    batch_id: str | None = None
    finish_reason: str | None = None  # the server's finish (stop) reason exactly as sent
    http_status: int | None = None    # the HTTP status of a permanent error (not stored): the configuration stop
    empty_reply: bool = False         # a 200 without a reply (the server dropped the prompt): asked once more
    inband_error: bool = False        # a 200 whose reply ends in an error (finish_reason "error"): retried
    prefix_cache_hit: bool = False    # set by the runner: a short prompt count read as a prompt-cache hit (issue 30)
    truncation_unclear: bool = False  # set by the runner: truncated, but a prompt-cache hit could not be ruled out

    def __post_init__(self) -> None:
        # a reply is stored as UTF-8 text whatever the server sent: content blocks joined, other JSON values as
        # JSON, lone surrogates (valid in JSON escapes, not in UTF-8) replaced by U+FFFD
        for f in ("response", "reasoning", "error"):
            setattr(self, f, clean_text(getattr(self, f)))
        self.error = redact(self.error)  # stored, cached, reported: never a credential (ctxbench.core.redact)

    def payload(self) -> dict[str, Any]:
        """What the response cache stores (no key, no secrets)."""
        return {k: getattr(self, k) for k in PAYLOAD_FIELDS}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> "CallResult":
        """A result from a stored payload (an answer read from the response cache)."""
        kw = {k: payload[k] for k in PAYLOAD_FIELDS if k in payload}
        kw.setdefault("status", "ok")
        return cls(**kw)


PAYLOAD_FIELDS = ("status", "response", "reasoning", "prompt_tokens", "completion_tokens", "latency_s", "cost_usd",
                  "error", "server_window", "expected_prompt_tokens", "cached_prompt_tokens", "batch_id",
                  "finish_reason")


@runtime_checkable
class Backend(Protocol):
    """One way of calling a model (an instance serves one ``model`` at one ``base_url``).

    - ``name``: the registered name (``openai_http``, ``litellm``, ``embedded``, ...).
    - :meth:`generate`: one attempt of one chat request (``messages``: OpenAI-style chat messages; ``max_tokens``:
      the output budget in tokens; ``sampling``: extra request fields such as ``temperature`` and ``seed``) → a
      :class:`CallResult` whose status the reply classifier set. A failure is raised, already classified
      (:meth:`classify`): a ``TransientError`` (the gateway retries it) or a ``PermanentError`` (stored as its
      status); the gateway owns retries, backoff and timeouts, never the backend.
    - :meth:`classify`: a client exception of this backend's library as ``TransientError`` or ``PermanentError``
      (the error table of :mod:`ctxbench.models.replies`).
    - :meth:`aclose`: release connections.
    - ``preflight(model, base_url)`` (a classmethod): raise CtxbenchError, before any work, naming what the
      backend lacks locally (the embedded model's runtime); nothing for a backend that needs nothing.
    - ``has_lifecycle(model, base_url)`` and ``lifecycle(model, base_url)`` (classmethods): whether something must
      run while the backend serves (answered without starting anything), and that thing as a context manager that
      starts what the backend needs (the embedded llama.cpp server) and stops it on exit; the entered object has
      ``base_url`` and ``count_tokens``. False and None for a backend that needs nothing started.
    """

    name: ClassVar[str]

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        ...

    def classify(self, exc: BaseException) -> Exception:
        ...

    async def aclose(self) -> None:
        ...

    @classmethod
    def preflight(cls, model: str, base_url: str | None) -> None:
        ...

    @classmethod
    def has_lifecycle(cls, model: str, base_url: str | None) -> bool:
        ...

    @classmethod
    def lifecycle(cls, model: str, base_url: str | None) -> AbstractContextManager | None:
        ...
