"""Providers' batch APIs (``evaluate --batch``): the requests a run would call go to the provider as one batch, at
the batch price (OpenAI's Batch API and Anthropic's Message Batches bill 50%), and come back within a day.

Two protocols, each behind one client with the same five steps (upload, create, poll, results, find):

- **OpenAI files + batches** (``/v1/files`` with ``purpose=batch``, ``/v1/batches``, ``/v1/files/{id}/content``):
  one JSONL line per request (``custom_id`` = the request key, ``body`` = the chat-completions request the direct
  call sends); the output file holds the 200 answers, the error file the failed requests (an HTTP status and error
  body each, or an ``error`` such as ``batch_expired``). Through litellm's batch functions (``acreate_file``,
  ``acreate_batch``, ``aretrieve_batch``, ``afile_content``, ``alist_batches``) for the provider's own endpoint
  (and ``backend="litellm"``), over plain HTTP for an OpenAI-compatible ``--base-url``.
- **Anthropic Message Batches** (``/v1/messages/batches``; litellm 1.x retrieves but cannot create them): one
  ``{"custom_id", "params"}`` per request, the Messages API parameters translated from the chat request (system
  message apart, ``cache_control`` blocks kept); results are JSONL lines ``succeeded`` / ``errored`` / ``canceled``
  / ``expired``.

:func:`line_result` turns each returned line into a :class:`~ctxbench.models.gateway.CallResult` through the same
parsing and the same error table (:data:`~ctxbench.models.gateway.ERROR_TABLE`) as a direct call, or into "send
again" (a transient error, an expired or cancelled request). :class:`BatchStore` keeps each batch's id, input file
and request keys in the build (``batches.json``), written before the batch is created and after, so an evaluation
killed while its batch runs resumes by polling that batch; :meth:`ctxbench.models.runner.CallRunner.arun_batch`
drives the whole of it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbench.core.errors import InputError
from ctxbench.core.redact import redact
from ctxbench.core.redact import register as register_secret
from ctxbench.core.backend import CallResult
from ctxbench.core.registry import Registry
from ctxbench.models import quiet_litellm
from ctxbench.models.errors import (ErrorInfo, PermanentError, TransientError, classify, classify_error,
                                    error_in_body)
from ctxbench.models.providers import LITELLM_BATCH_PROVIDERS, batch_protocol  # noqa: F401 - re-exported
from ctxbench.models.replies import reply_result

TERMINAL = ("completed", "failed", "expired", "cancelled")  # a batch in one of these states runs no more
RESEND_CODES = ("batch_expired", "batch_cancelled")  # per-request errors that only mean "not run": send again
# Anthropic's error types as the HTTP statuses the error table reads
ANTHROPIC_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
                          "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
                          "api_error": 500, "overloaded_error": 529, "billing_error": 402}
ANTHROPIC_URL = "https://api.anthropic.com/v1"


# the batch backends, by "protocol/transport" (ctxbench.models.providers.batch_protocol names the pair)
BATCH_CLIENTS: Registry[type] = Registry("batch backend")


@dataclass
class BatchState:
    """A poll's answer: ``status`` (``validating``, ``in_progress``, ``finalizing``, ``cancelling`` or one of
    :data:`TERMINAL`), where the results are (``output``: file id or results URL; ``errors``: error file id), a
    batch-level error (``message``, e.g. why a batch failed validation) and the provider's request counts."""

    status: str
    output: str | None = None
    errors: str | None = None
    message: str | None = None
    counts: dict = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


# -- what comes back ---------------------------------------------------------------------------------------------

def anthropic_result(model: str, message: dict, batch: bool = True) -> CallResult:
    """A :class:`CallResult` from an Anthropic Messages API answer (:func:`~ctxbench.models.gateway.reply_result`):
    text blocks joined as the reply, ``thinking`` blocks as the reasoning, usage with cache reads and writes
    (:func:`usage_counts`), ``stop_reason`` stored as ``finish_reason``, a ``refusal`` stop as
    ``refused_by_provider``, a ``max_tokens`` stop as ``cut_off``."""
    return reply_result(model, {**message, "type": "message", "content": message.get("content") or []}, batch=batch)


def line_result(model: str, protocol: str, line: dict | None) -> CallResult | TransientError:
    """One returned batch line as a :class:`CallResult` (an answer, or a permanent error classified by the error
    table: ``over_length``, ``refused_by_provider``, ``config_error``, ``error``), or a TransientError when the
    request should be sent again: no line at all, an expired or cancelled request, or a transient error (429, 5xx)
    by the error table."""
    if line is None:
        return TransientError("no result for this request in the batch's output (the batch ended without it)")
    try:
        if protocol == "anthropic":
            res = line.get("result") or {}
            kind = res.get("type")
            if kind == "succeeded":
                return anthropic_result(model, res.get("message") or {})
            if kind in ("canceled", "expired"):
                return TransientError(f"the request was {kind} before it ran")
            err = (res.get("error") or {}).get("error") or res.get("error") or {}
            raise classify_error(ErrorInfo(ANTHROPIC_ERROR_STATUS.get(err.get("type")),
                                           f"batch request errored: {json.dumps(err, ensure_ascii=False)}"))
        resp, err = line.get("response"), line.get("error")
        if resp is None:
            code = (err or {}).get("code")
            if code in RESEND_CODES:
                return TransientError(f"{code}: {(err or {}).get('message')}")
            raise classify_error(ErrorInfo(None, f"batch request error: {json.dumps(err, ensure_ascii=False)}"))
        status, body = resp.get("status_code"), resp.get("body")
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                pass
        text = json.dumps(body, ensure_ascii=False) if not isinstance(body, str) else body
        if status != 200:
            raise classify_error(ErrorInfo(status, f"HTTP {status} in the batch: {text[:2000]}"))
        bad = error_in_body(body)
        if bad is not None:
            raise classify_error(ErrorInfo(bad[0], f"HTTP 200 with an error body in the batch: {bad[1][:2000]}"))
        return reply_result(model, body, batch=True)
    except TransientError as e:
        return e
    except PermanentError as e:
        return CallResult(e.status, error=str(e))


# -- the clients -------------------------------------------------------------------------------------------------

def openai_line(key: str, model: str, messages: list[dict], max_tokens: int, sampling: dict) -> dict:
    """One request of an OpenAI batch input file: the body the direct call sends (:meth:`Gateway._once_http`)."""
    return {"custom_id": key, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": model, "messages": messages, "max_tokens": max_tokens, **sampling}}


def anthropic_params(model: str, messages: list[dict], max_tokens: int, sampling: dict) -> dict:
    """The Messages API parameters of a chat request: system messages joined into ``system`` (their content blocks,
    with ``cache_control``, kept), the other messages as they are, ``temperature`` / ``top_p`` / ``top_k`` /
    ``thinking`` kept and
    parameters Anthropic lacks (``seed``) dropped, the model without its ``anthropic/`` prefix."""
    system = [m["content"] for m in messages if m.get("role") == "system"]
    out: dict[str, Any] = {"model": model.split("/", 1)[1] if model.startswith("anthropic/") else model,
                           "max_tokens": max_tokens,
                           "messages": [{"role": m["role"], "content": m["content"]} for m in messages
                                        if m.get("role") != "system"]}
    if system:
        out["system"] = (system[0] if len(system) == 1 and isinstance(system[0], str)
                         else [b for s in system for b in ([{"type": "text", "text": s}] if isinstance(s, str) else s)])
    # ``thinking``: extended thinking (evaluate --reasoning-effort, ctxbench.models.effort)
    out.update({k: v for k, v in sampling.items()
                if k in ("temperature", "top_p", "top_k", "stop_sequences", "thinking")})
    return out


class BatchClient:
    """One provider's batch protocol for one model. ``max_requests`` / ``max_bytes``: the provider's limits on one
    batch (the runner splits larger runs). Methods raise TransientError / PermanentError (the error table) on a
    failed HTTP call."""

    protocol = "openai"
    max_requests = 50_000
    max_bytes = 190 * 1024 * 1024

    def __init__(self, model: str, base_url: str | None, api_key_env: str | None, timeout_s: float = 600.0):
        self.model, self.base_url, self.api_key_env, self.timeout_s = model, base_url, api_key_env, timeout_s
        self._client = None

    def encode(self, key: str, messages: list[dict], max_tokens: int, sampling: dict) -> bytes:
        raise NotImplementedError

    async def upload(self, lines: list[bytes]) -> str | None:
        """Upload the batch input; its file id (None where the protocol sends the requests with the batch)."""
        raise NotImplementedError

    async def create(self, file_id: str | None, lines: list[bytes], meta: dict[str, str]) -> str:
        raise NotImplementedError

    async def poll(self, batch_id: str) -> BatchState:
        raise NotImplementedError

    async def results(self, state: BatchState) -> dict[str, dict]:
        """Every returned line by its ``custom_id`` (output and error files together)."""
        raise NotImplementedError

    async def find(self, file_id: str) -> str | None:
        """The batch created from input file ``file_id`` (a run killed between creating it and recording its id),
        or None."""
        return None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- HTTP ---------------------------------------------------------------------------------------------------
    def _key(self, default_env: str | None) -> str:
        env = self.api_key_env or (None if self.base_url else default_env)
        key = (os.environ.get(env) if env else None) or "sk-no-key"
        register_secret(key)  # redacted from every error text (ctxbench.core.redact)
        return key

    def _http(self):
        raise NotImplementedError

    async def _request(self, method: str, url: str, **kw):
        """An HTTP call; a failure raises through the error table; returns the response."""
        import httpx

        try:
            r = await self._http().request(method, url, **kw)
        except (httpx.TimeoutException, httpx.TransportError) as e:
            raise classify(e) from None
        if r.status_code >= 400:
            raise classify_error(ErrorInfo(r.status_code, f"HTTP {r.status_code} from {method} {url}: "
                                                          f"{redact(r.text)[:2000]}", headers=r.headers))
        return r


def _jsonl(content: bytes | str | None) -> list[dict]:
    text = content.decode("utf-8") if isinstance(content, (bytes, bytearray)) else (content or "")
    out = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln:
            try:
                out.append(json.loads(ln))
            except ValueError:
                continue  # a line that does not parse names no request: it is sent again
    return out


def _batch_state(b: Any) -> BatchState:
    """A BatchState from an OpenAI batch object (a dict or litellm's LiteLLMBatch)."""
    d = b.model_dump() if hasattr(b, "model_dump") else dict(b)
    errs = d.get("errors") or {}
    data = errs.get("data") if isinstance(errs, dict) else None
    msg = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in data or [] if isinstance(e, dict)) or None
    return BatchState(d.get("status") or "in_progress", d.get("output_file_id"), d.get("error_file_id"), msg,
                      d.get("request_counts") or {})


@BATCH_CLIENTS.register("openai/http")
class OpenAIHTTPBatch(BatchClient):
    """OpenAI's files + batches protocol over plain HTTP, for an OpenAI-compatible ``--base-url``."""

    def _http(self):
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(base_url=self.base_url.rstrip("/") + "/", timeout=self.timeout_s,
                                             headers={"Authorization": f"Bearer {self._key('OPENAI_API_KEY')}"})
        return self._client

    @property
    def served(self) -> str:
        return self.model[len("openai/"):] if self.model.startswith("openai/") else self.model

    def encode(self, key: str, messages: list[dict], max_tokens: int, sampling: dict) -> bytes:
        return json.dumps(openai_line(key, self.served, messages, max_tokens, sampling), ensure_ascii=False
                          ).encode("utf-8")

    async def upload(self, lines: list[bytes]) -> str | None:
        r = await self._request("POST", "files", data={"purpose": "batch"},
                                files={"file": ("ctxbench-batch.jsonl", b"\n".join(lines) + b"\n",
                                                "application/jsonl")})
        return r.json()["id"]

    async def create(self, file_id: str | None, lines: list[bytes], meta: dict[str, str]) -> str:
        r = await self._request("POST", "batches", json={"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                         "completion_window": "24h", "metadata": meta})
        return r.json()["id"]

    async def poll(self, batch_id: str) -> BatchState:
        return _batch_state((await self._request("GET", f"batches/{batch_id}")).json())

    async def _content(self, file_id: str) -> bytes:
        return (await self._request("GET", f"files/{file_id}/content")).content

    async def results(self, state: BatchState) -> dict[str, dict]:
        lines = []
        for fid in (state.output, state.errors):
            if fid:
                lines += _jsonl(await self._content(fid))
        return {ln["custom_id"]: ln for ln in lines if isinstance(ln, dict) and "custom_id" in ln}

    async def find(self, file_id: str) -> str | None:
        r = await self._request("GET", "batches", params={"limit": 100})
        return next((b["id"] for b in r.json().get("data") or [] if b.get("input_file_id") == file_id), None)


@BATCH_CLIENTS.register("openai/litellm")
class OpenAILitellmBatch(OpenAIHTTPBatch):
    """OpenAI's files + batches protocol through litellm's batch functions (the provider's own endpoint, or a base
    URL with ``backend="litellm"``)."""

    def _kw(self) -> dict:
        kw: dict[str, Any] = {"custom_llm_provider": "openai", "timeout": self.timeout_s}
        if self.base_url:
            kw.update(api_base=self.base_url, api_key=self._key(None))
        return kw

    async def _call(self, fn: str, **kw):
        litellm = quiet_litellm()

        try:
            return await getattr(litellm, fn)(**kw, **self._kw())
        except (TransientError, PermanentError):
            raise
        except Exception as e:  # noqa: BLE001 - litellm's and openai's exceptions, through the error table
            raise classify(e) from None

    async def upload(self, lines: list[bytes]) -> str | None:
        f = await self._call("acreate_file", file=("ctxbench-batch.jsonl", b"\n".join(lines) + b"\n",
                                                   "application/jsonl"), purpose="batch")
        return f.id

    async def create(self, file_id: str | None, lines: list[bytes], meta: dict[str, str]) -> str:
        b = await self._call("acreate_batch", completion_window="24h", endpoint="/v1/chat/completions",
                             input_file_id=file_id, metadata=meta)
        return b.id

    async def poll(self, batch_id: str) -> BatchState:
        return _batch_state(await self._call("aretrieve_batch", batch_id=batch_id))

    async def _content(self, file_id: str) -> bytes:
        r = await self._call("afile_content", file_id=file_id)
        return r.content if hasattr(r, "content") else bytes(r)

    async def aclose(self) -> None:
        """Let litellm's background logging tasks of these calls end (cancelled at the loop's close, they leave
        a "coroutine was never awaited" warning behind)."""
        import asyncio

        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
        if others:
            await asyncio.wait(others, timeout=2.0)
        await super().aclose()

    async def find(self, file_id: str) -> str | None:
        r = await self._call("alist_batches", limit=100)
        data = r.get("data") if isinstance(r, dict) else getattr(r, "data", None)
        for b in data or []:
            d = b.model_dump() if hasattr(b, "model_dump") else b
            if d.get("input_file_id") == file_id:
                return d.get("id")
        return None


@BATCH_CLIENTS.register("anthropic/http")
class AnthropicBatch(BatchClient):
    """Anthropic's Message Batches over HTTP (``ANTHROPIC_API_KEY``, or ``--api-key-env`` for a base URL)."""

    protocol = "anthropic"
    max_requests = 100_000
    max_bytes = 240 * 1024 * 1024

    def _http(self):
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(
                base_url=(self.base_url or ANTHROPIC_URL).rstrip("/") + "/", timeout=self.timeout_s,
                headers={"x-api-key": self._key("ANTHROPIC_API_KEY"), "anthropic-version": "2023-06-01"})
        return self._client

    def encode(self, key: str, messages: list[dict], max_tokens: int, sampling: dict) -> bytes:
        return json.dumps({"custom_id": key, "params": anthropic_params(self.model, messages, max_tokens, sampling)},
                          ensure_ascii=False).encode("utf-8")

    async def upload(self, lines: list[bytes]) -> str | None:
        return None  # the requests go with the batch

    async def create(self, file_id: str | None, lines: list[bytes], meta: dict[str, str]) -> str:
        body = b'{"requests": [' + b",".join(lines) + b"]}"
        r = await self._request("POST", "messages/batches", content=body,
                                headers={"content-type": "application/json"})
        return r.json()["id"]

    async def poll(self, batch_id: str) -> BatchState:
        d = (await self._request("GET", f"messages/batches/{batch_id}")).json()
        st = d.get("processing_status")
        status = "completed" if st == "ended" else "cancelling" if st == "canceling" else "in_progress"
        return BatchState(status, d.get("results_url"), None, None, d.get("request_counts") or {})

    async def results(self, state: BatchState) -> dict[str, dict]:
        if not state.output:
            return {}
        r = await self._request("GET", state.output)
        return {ln["custom_id"]: ln for ln in _jsonl(r.content) if isinstance(ln, dict) and "custom_id" in ln}


def batch_client(model: str, base_url: str | None, api_key_env: str | None, backend: str = "auto",
                 timeout_s: float = 600.0) -> BatchClient:
    """The :class:`BatchClient` for ``model``: the one registered in :data:`BATCH_CLIENTS` as
    ``protocol/transport`` of :func:`batch_protocol` (raises InputError where there is none)."""
    protocol, transport = batch_protocol(model, base_url, backend)
    return BATCH_CLIENTS.get(f"{protocol}/{transport}")(model, base_url, api_key_env, timeout_s)


# -- the record in the build ------------------------------------------------------------------------------------

class BatchStore:
    """The batches of a build (``BUILD/batches.json``): one record per batch with ``id`` (ours), ``model``,
    ``endpoint`` (the request keys' endpoint), ``protocol``, ``batch_id`` and ``input_file_id`` (the provider's),
    ``keys`` (request keys, in input order), ``status`` (``submitting`` until the provider names the batch, then
    the provider's status, ``collected`` once its answers are in the response cache), ``error``, ``created_at``,
    ``updated_at`` (Unix times). Read and written whole under a file lock, atomically, so several workers and a
    killed one leave it readable; a record is written before each step that the provider bills or that a resume
    needs (before upload, after upload, after create)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _read(self) -> list[dict]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8")).get("batches", [])
        except FileNotFoundError:
            return []
        except (ValueError, AttributeError) as e:
            raise InputError(f"{self.path} is not a ctxbench batch record ({e}): move it away to submit new "
                             f"batches (batches it names are then not polled again)") from None

    def records(self, model: str | None = None, endpoint: Any = "any") -> list[dict]:
        """Every record (of ``model`` at ``endpoint``, where given)."""
        return [r for r in self._read() if (model is None or r.get("model") == model)
                and (endpoint == "any" or r.get("endpoint") == endpoint)]

    def _update(self, fn) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(f".{self.path.name}.lock"), "a") as lock:  # hidden, as storage's locks
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                recs = self._read()
                out = fn(recs)
                tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
                tmp.write_text(json.dumps({"batches": recs}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
                os.replace(tmp, self.path)
                return out
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def add(self, model: str, endpoint: str | None, protocol: str, keys: list[str]) -> dict:
        """A new record (status ``submitting``); returns it."""
        now = time.time()
        rec = {"id": uuid.uuid4().hex[:12], "model": model, "endpoint": endpoint, "protocol": protocol,
               "batch_id": None, "input_file_id": None, "keys": list(keys), "status": "submitting", "error": None,
               "created_at": now, "updated_at": now}
        self._update(lambda recs: recs.append(rec))
        return rec

    def update(self, rec: dict, **fields) -> None:
        """Set ``fields`` on the record ``rec`` (also in ``rec`` itself)."""
        rec.update(fields, updated_at=time.time())

        def go(recs: list[dict]) -> None:
            for r in recs:
                if r["id"] == rec["id"]:
                    r.update(fields, updated_at=rec["updated_at"])

        self._update(go)

    def remove(self, rec: dict) -> None:
        self._update(lambda recs: recs.__setitem__(slice(None), [r for r in recs if r["id"] != rec["id"]]))
