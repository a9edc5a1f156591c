"""A local OpenAI-compatible chat-completions server for tests (stdlib only, 127.0.0.1, free port).

``POST /v1/chat/completions`` answers with the documented ``chat.completion`` JSON shape. The answer text comes from
``answer_fn(body) -> str`` (default: ``"Answer: " + <the last line of the last user message>``). Every request is
counted and its body kept. What happens to a request is decided, in this order, by

1. ``rule(body)``: a callable returning a behaviour name or None (e.g. always reject one question);
2. the scripted queue (``script([...])``), consumed one request at a time;
3. an outage (``outage(True)``): every request gets the outage behaviour (default ``503``) until ``outage(False)``;
4. ``fail_rate`` with a seeded RNG choosing among ``fail_kinds`` (``FAULT_KINDS``: the fault-injecting mode, with
   timeouts; ``TRANSIENT_KINDS``: the same without them);
5. otherwise ``"ok"``, after ``latency_s`` seconds (a model's fixed latency).

Behaviours: ``ok``, ``429_retry_after`` (429 with ``Retry-After: <retry_after>``), ``429_retry_after_ms``
(``retry-after-ms`` header), ``429`` (no Retry-After), ``500``, ``503``, ``reset`` (socket closed without a
response), ``delay`` (sleeps ``delay_s`` before answering ok: longer than the client timeout), ``ctx400`` (400 with
an OpenAI-style ``context_length_exceeded`` body), ``400`` (plain 400 ``invalid_request_error``),
``content_filter`` (200 with ``finish_reason: content_filter``), ``401`` (a bad API key); issue 21's replies:
``cut_off`` (the answer's first half, ``finish_reason: length``, ``completion_tokens`` = the request's max_tokens),
``empty_length`` (content ``""``, ``finish_reason: length``, 0 completion tokens: the server dropped the prompt),
``reasoning_only`` (content null, the whole answer in ``reasoning_content``, ``finish_reason: stop``),
``unknown_shape`` (a 200 whose JSON holds no chat completion), ``temperature400`` (OpenAI's "Unsupported value:
'temperature'"), ``seed422`` (Mistral's pydantic ``extra_forbidden`` on ``seed``), ``no_template400`` (vLLM without
a chat template), ``invalid_model400`` (a LiteLLM proxy's "Invalid model name"), ``prompt_too_long500`` (vLLM's
"Input prompt (N tokens) is too long and exceeds limit of M" as a 500); and any response given as a
dict ``{"status": 500, "body": {...} or "text", "headers": {...}}`` (a server's own error, e.g. the entries of
tests/data/tricky_inputs.yaml's ``server_errors``; ``status`` 200 with an error body included).

Usage counts are tokens of ``cl100k_base`` (this fake model's tokenizer): 3 per message plus the tokens of its text,
as OpenAI counts chat prompts. ``window`` (tokens) is reported as a vLLM server does (``max_model_len`` in
``/v1/models``), or as llama.cpp (``/props``), TGI (``/info``) or Ollama (``/api/ps``) do with ``window_style``;
``truncate_to`` (N, or a function of the request body giving N or None) makes the server keep only the last N
prompt tokens silently (Ollama's and some llama.cpp setups'
default): it answers 200 and reports ``prompt_tokens = N``; ``usage=False`` reports no usage at all.
``POST /v1/messages`` answers in Anthropic's Messages API shape (for litellm's ``anthropic/`` provider).
``prompt_cache=True`` acts as OpenAI's automatic prompt caching: a request whose prompt up to the end of its
``</document>`` (system message included) was seen before, and is at least ``prompt_cache_min`` tokens long, reports
that prefix's tokens as ``usage.prompt_tokens_details.cached_tokens``.

Batch APIs: OpenAI's files + batches protocol (``POST /v1/files`` multipart with ``purpose=batch``, ``POST
/v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches?limit=N``, ``GET /v1/files/{id}/content``) and
Anthropic's Message Batches (``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}`` and its
``results_url``). A batch is ``validating`` at creation, ``in_progress`` from its first poll, and ends after
``polls`` polls in progress (while ``hold_batches()`` is on it stays in progress) the way its plan says
(``plan_batches([...])``, one dict per batch in creation order: ``end`` = ``completed`` (default), ``failed``
(validation errors, no output), ``expired`` or ``cancelled`` (only the first ``run`` requests answered, the others
``batch_expired`` / ``batch_cancelled``), ``polls`` = 1). When it ends, each request line goes through the same
behaviour choice as a direct request (rule, script, outage, fail rate) and is answered in the documented shape: an
output-file line with ``status_code`` 200, or an error-file line with the error status and body (Anthropic:
``succeeded`` / ``errored`` / ``expired`` / ``canceled`` result lines). ``uploads``, ``batch_ids`` (creation
order), ``polls`` (per batch id) and ``batch_processed`` (per ``custom_id``) count what happened.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

TRANSIENT_KINDS = ("429_retry_after", "429", "500", "503", "reset")
FAULT_KINDS = TRANSIENT_KINDS + ("429_retry_after_ms", "delay")  # "delay": longer than a short client timeout


def call_id(body: dict) -> tuple[str, int | None]:
    """What identifies a request's answer on the server side (the last user message and the sample seed): two
    requests with the same id are the same call made twice."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return (message_text(users[-1]["content"]) if users else "", body.get("seed"))

CTX_ERROR = {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                  "resulted in 9120 tokens. Please reduce the length of the messages.",
                       "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
PLAIN_400 = {"error": {"message": "Invalid value for 'temperature': expected a number between 0 and 2.",
                       "type": "invalid_request_error", "param": "temperature", "code": "invalid_value"}}
# issue 21's configuration errors, in their servers' shapes (OpenAI, Mistral, vLLM, a LiteLLM proxy)
CONFIG_ERRORS = {
    "temperature400": (400, {"error": {"message": "Unsupported value: 'temperature' does not support 0.0 with this "
                                                  "model. Only the default (1) value is supported.",
                                       "type": "invalid_request_error", "param": "temperature",
                                       "code": "unsupported_value"}}),
    "seed422": (422, {"object": "error", "message": {"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"],
                                                                 "msg": "Extra inputs are not permitted", "input": 0}]},
                      "type": "invalid_request_error", "param": None, "code": None}),
    "no_template400": (400, {"object": "error", "message": "As of transformers v4.44, default chat template is no "
                             "longer allowed, so you must provide a chat template if the tokenizer does not define "
                             "one.", "type": "BadRequestError", "param": None, "code": 400}),
    "invalid_model400": (400, {"error": {"message": "/chat/completions: Invalid model name passed in model=fake. "
                                                    "Call `/v1/models` to view available models for your key.",
                                         "type": "None", "param": "None", "code": "400"}}),
}


def message_text(content: Any) -> str:
    """Text of a message's content (a string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [])


def default_answer(body: dict) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    text = message_text(users[-1]["content"]) if users else ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return "Answer: " + (lines[-1] if lines else "")


def word_count(s: str) -> int:
    return len(s.split())


def wire_text(s: str) -> str:
    """``s`` as a server's client reads it: a lone surrogate (which no UTF-8 text can hold; a JSON body carries it
    escaped, ``"\\ud800"``) becomes U+FFFD. A real server counts and sends its text this way, never failing on it."""
    return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def token_count(s: str) -> int:
    """Tokens of ``s`` in cl100k_base (the fake model's tokenizer; lone surrogates counted as U+FFFD)."""
    from ctxbench.tokenizers import get_tokenizer

    return get_tokenizer("cl100k_base").count(wire_text(s))


def prompt_token_count(messages: list[dict]) -> int:
    """The fake server's prompt count: 3 template tokens per message plus the tokens of its text."""
    return sum(3 + token_count(message_text(m.get("content"))) for m in messages)


class FakeOpenAIServer:
    """Context manager: ``with FakeOpenAIServer() as srv: srv.base_url`` (``http://127.0.0.1:<port>/v1``)."""

    def __init__(self, answer_fn: Callable[[dict], str] | None = None, fail_rate: float = 0.0,
                 fail_kinds: tuple[str, ...] = TRANSIENT_KINDS, seed: int = 0, retry_after: str = "1",
                 delay_s: float = 2.0, rule: Callable[[dict], Any] | None = None, latency_s: float = 0.0,
                 window: int | None = None, window_style: str = "vllm", truncate_to: Any = None,
                 usage: bool = True, prompt_cache: bool = False, prompt_cache_min: int = 1024):
        self.answer_fn = answer_fn or default_answer
        self.fail_rate, self.fail_kinds = fail_rate, tuple(fail_kinds)
        self.rng = random.Random(seed)
        self.retry_after, self.delay_s, self.rule = retry_after, delay_s, rule
        self.latency_s = latency_s
        self.window, self.window_style, self.truncate_to, self.usage = window, window_style, truncate_to, usage
        self.prompt_cache, self.prompt_cache_min = prompt_cache, prompt_cache_min
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.uploads: list[str] = []
        self.batch_ids: list[str] = []
        self.polls: Counter = Counter()
        self.batch_processed: Counter = Counter()
        self._plans: list[dict] = []
        self._hold = False
        self._prefixes: set[str] = set()  # prompt prefixes seen (prompt_cache)
        self.gets: list[str] = []  # paths of every GET (the window probes)
        self._outage: str | None = None
        self._queue: list[str] = []
        self._lock = threading.Lock()
        self.requests: list[dict] = []        # bodies of every POST /v1/chat/completions, in arrival order
        self.behaviours: list[str] = []       # what was done with each of them
        self.auth: list[str | None] = []      # the Authorization header of each of them
        self.in_flight = 0
        self.max_in_flight = 0
        self.spans: list[tuple[float, float]] = []  # (arrival, answer) wall times of every finished POST
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control ------------------------------------------------------------------------------------------------
    def script(self, behaviours: list[Any]) -> None:
        """Behaviours for the next requests, in order (after which the rate / ok rule applies again)."""
        with self._lock:
            self._queue.extend(behaviours)

    def outage(self, on: bool, behaviour: str = "503") -> None:
        """Start (``on``) or end a provider outage: meanwhile every request gets ``behaviour``."""
        with self._lock:
            self._outage = behaviour if on else None

    def call_counts(self, ok_only: bool = False) -> Counter:
        """Requests per :func:`call_id` (all of them, or only those answered ``ok``)."""
        with self._lock:
            return Counter(call_id(b) for b, h in zip(self.requests, self.behaviours) if not ok_only or h == "ok")

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.behaviours.clear()
            self.auth.clear()
            self.spans.clear()
            self.max_in_flight = 0

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def count_by_model(self) -> Counter:
        with self._lock:
            return Counter(b.get("model") for b in self.requests)

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _choose(self, body: dict, auth: str | None = None) -> Any:
        with self._lock:
            b = self.rule(body) if self.rule else None
            if b is None and self._queue:
                b = self._queue.pop(0)
            if b is None and self._outage:
                b = self._outage
            if b is None and self.fail_rate and self.rng.random() < self.fail_rate:
                b = self.rng.choice(self.fail_kinds)
            b = b or "ok"
            self.requests.append(body)
            self.behaviours.append(b)
            self.auth.append(auth)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return b

    def _done(self, arrived: float | None = None) -> None:
        with self._lock:
            self.in_flight -= 1
            if arrived is not None:
                self.spans.append((arrived, time.time()))

    def call_window(self) -> tuple[float, float] | None:
        """(first arrival, last answer) wall times of the POSTs since the last reset, or None before any."""
        with self._lock:
            if not self.spans:
                return None
            return min(a for a, _ in self.spans), max(b for _, b in self.spans)

    def prompt_tokens(self, body: dict) -> int:
        """Prompt tokens this server reports for a request (after its silent truncation, if any)."""
        pt = prompt_token_count(body.get("messages", []))
        keep = self.truncate_to(body) if callable(self.truncate_to) else self.truncate_to
        return min(pt, keep) if keep else pt

    def completion(self, body: dict, finish_reason: str = "stop", kind: str = "ok") -> dict:
        answer = self.answer_fn(body)
        pt, ct = self.prompt_tokens(body), token_count(answer)
        msg: dict = {"role": "assistant", "content": answer}
        if kind == "cut_off":  # the budget ended the reply half-way
            msg["content"], ct = answer[:max(1, len(answer) // 2)], int(body.get("max_tokens") or ct)
        elif kind == "empty_length":
            msg["content"], ct = "", 0
        elif kind == "reasoning_only":
            msg = {"role": "assistant", "content": None, "reasoning_content": answer}
        out = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
               "model": body.get("model", ""), "system_fingerprint": "fp_fake",
               "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish_reason}]}
        if self.usage:
            out["usage"] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
            if self.prompt_cache:
                out["usage"]["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens(body)}
        return out

    def cached_tokens(self, body: dict) -> int:
        """Prompt tokens this server serves from its prompt cache for ``body`` (``prompt_cache``), remembering the
        prefix for later requests."""
        text = "\n".join(message_text(m.get("content")) for m in body.get("messages", []))
        end = text.find("</document>")
        if end < 0:
            return 0
        prefix = text[:end + len("</document>")]
        n = token_count(prefix)
        with self._lock:
            seen = prefix in self._prefixes
            self._prefixes.add(prefix)
        return n if seen and n >= self.prompt_cache_min else 0

    def anthropic_message(self, body: dict) -> dict:
        """An answer in Anthropic's Messages API shape."""
        answer = self.answer_fn(body)
        msgs = body.get("messages", []) + ([{"role": "system", "content": body["system"]}]
                                           if isinstance(body.get("system"), str) else [])
        return {"id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
                "model": body.get("model", ""), "content": [{"type": "text", "text": answer}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": self.prompt_tokens({"messages": msgs}),
                          "output_tokens": token_count(answer)}}

    # -- batches --------------------------------------------------------------------------------------------
    def plan_batches(self, plans: list[dict]) -> None:
        """How the next batches created end (module docstring), in creation order."""
        with self._lock:
            self._plans.extend(plans)

    def hold_batches(self, on: bool = True) -> None:
        """While on, every batch stays in progress however often it is polled."""
        with self._lock:
            self._hold = on

    def _new_batch(self, protocol: str, lines: list[dict], extra: dict) -> dict:
        with self._lock:
            n = len(self.batch_ids) + 1
            plan = {"end": "completed", "polls": 1, **(self._plans.pop(0) if self._plans else {})}
            bid = f"batch_{n:04d}" if protocol == "openai" else f"msgbatch_{n:04d}"
            b = {"id": bid, "protocol": protocol, "lines": lines, "plan": plan, "status": "validating",
                 "polls_in_progress": 0, "output": None, "errors": None, "created_at": int(time.time()), **extra}
            self.batches[bid] = b
            self.batch_ids.append(bid)
            return b

    def _answer_line(self, protocol: str, body: dict) -> tuple[int, Any]:
        """A batch request's status and response body, by the behaviour chosen as for a direct request."""
        b = self._choose(body)
        self._done()
        if isinstance(b, dict):
            return int(b.get("status", 200)), b.get("body", "")
        if b in ("ok", "content_filter"):
            if protocol == "anthropic":
                msg = self.anthropic_message(body)
                if b == "content_filter":
                    msg["stop_reason"] = "refusal"
                return 200, msg
            return 200, self.completion(body, "content_filter" if b == "content_filter" else "stop")
        if b == "ctx400":
            return 400, (CTX_ERROR if protocol == "openai" else {"type": "error", "error": {
                "type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
        if b == "400":
            return 400, (PLAIN_400 if protocol == "openai" else {"type": "error", "error": {
                "type": "invalid_request_error", "message": "temperature: range: 0..1"}})
        if b == "401":
            return 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                   "code": "invalid_api_key"}}
        if b.startswith("429"):
            return 429, ({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
                         if protocol == "openai" else {"type": "error", "error": {"type": "rate_limit_error",
                                                                                   "message": "Rate limited"}})
        code = 503 if b == "503" else 500
        return code, ({"error": {"message": f"fake {b}", "type": "server_error"}} if protocol == "openai"
                      else {"type": "error", "error": {"type": "overloaded_error" if code == 503 else "api_error",
                                                       "message": f"fake {b}"}})

    def _end_batch(self, b: dict) -> None:
        """Run a batch's requests (all, or the first ``run`` for an expired or cancelled one) and write its
        output as the protocol does."""
        plan, end = b["plan"], b["plan"]["end"]
        b["status"] = end
        if end == "failed":
            b["errors_obj"] = {"object": "list", "data": [{"code": "invalid_request", "line": 1,
                                                           "message": "The batch input file is not valid."}]}
            return
        run = len(b["lines"]) if end == "completed" else plan.get("run", 0)
        out, err = [], []
        for n, ln in enumerate(b["lines"]):
            cid = ln["custom_id"]
            if n >= run:
                if b["protocol"] == "anthropic":
                    out.append({"custom_id": cid, "result": {"type": "expired" if end == "expired" else "canceled"}})
                else:
                    code = "batch_expired" if end == "expired" else "batch_cancelled"
                    err.append({"id": f"batch_req_{n}", "custom_id": cid, "response": None,
                                "error": {"code": code, "message": "This request could not be executed before "
                                                                   "the batch ended."}})
                continue
            with self._lock:
                self.batch_processed[cid] += 1
            if b["protocol"] == "anthropic":
                status, body = self._answer_line("anthropic", ln["params"])
                out.append({"custom_id": cid, "result": {"type": "succeeded", "message": body} if status == 200
                            else {"type": "errored", "error": body}})
            else:
                status, body = self._answer_line("openai", ln["body"])
                rec = {"id": f"batch_req_{n}", "custom_id": cid, "error": None,
                       "response": {"status_code": status, "request_id": f"req_{n}", "body": body}}
                (out if status == 200 else err).append(rec)
        for kind, lines in (("output", out), ("errors", err)):
            if lines:
                fid = f"file-{b['id']}-{kind}"
                self.files[fid] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                b[kind] = fid

    def poll_batch(self, bid: str) -> dict | None:
        """One poll: advance the batch's state (module docstring) and return its object in its protocol's shape."""
        b = self.batches.get(bid)
        if b is None:
            return None
        with self._lock:
            self.polls[bid] += 1
            held = self._hold
        if b["status"] == "validating":
            b["status"] = "in_progress"
        elif b["status"] == "in_progress" and not held:
            b["polls_in_progress"] += 1
            if b["polls_in_progress"] >= b["plan"]["polls"]:
                self._end_batch(b)
        return self.batch_object(b)

    def batch_object(self, b: dict) -> dict:
        n = len(b["lines"])
        done = b["status"] not in ("validating", "in_progress")
        if b["protocol"] == "anthropic":
            return {"id": b["id"], "type": "message_batch", "processing_status": "ended" if done else "in_progress",
                    "request_counts": {"processing": 0 if done else n, "succeeded": 0, "errored": 0, "canceled": 0,
                                       "expired": 0},
                    "created_at": "2025-01-01T00:00:00Z", "expires_at": "2025-01-02T00:00:00Z",
                    "ended_at": "2025-01-01T01:00:00Z" if done else None,
                    "results_url": f"{self.base_url}/messages/batches/{b['id']}/results" if done else None}
        return {"id": b["id"], "object": "batch", "endpoint": b.get("endpoint"), "errors": b.get("errors_obj"),
                "input_file_id": b.get("input_file_id"), "completion_window": "24h", "status": b["status"],
                "output_file_id": b["output"], "error_file_id": b["errors"], "created_at": b["created_at"],
                "in_progress_at": None, "expires_at": b["created_at"] + 86400, "completed_at": None,
                "failed_at": None, "expired_at": None, "cancelled_at": None, "finalizing_at": None,
                "cancelling_at": None, "request_counts": {"total": n, "completed": 0, "failed": 0},
                "metadata": b.get("metadata")}

    def info(self, path: str) -> dict | None:
        """What a GET of ``path`` answers: the model list (with the window in vLLM's style), or the window where
        the chosen server style reports it; None for a 404."""
        w, style = self.window, self.window_style
        if path == "/v1/models":
            entry = {"id": "fake", "object": "model"}
            if w and style == "vllm":
                entry["max_model_len"] = w
            return {"object": "list", "data": [entry]}
        if w and style == "llamacpp" and path == "/props":
            return {"default_generation_settings": {"n_ctx": w, "model": "fake"}, "total_slots": 1}
        if w and style == "tgi" and path == "/info":
            return {"model_id": "fake", "max_input_tokens": w - 1, "max_total_tokens": w}
        if w and style == "ollama" and path == "/api/ps":
            return {"models": [{"name": "fake", "model": "fake", "context_length": w}]}
        return None

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def __enter__(self) -> "FakeOpenAIServer":
        owner = self

        class Handler(BaseHTTPRequestHandler):
            # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm holds the body
            # until the client's delayed ACK (about 40 ms a call), which no real server adds
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # silence
                pass

            def _send(self, code: int, obj: dict, headers: dict | None = None) -> None:
                data = json.dumps(obj).encode()  # ASCII: a lone surrogate goes escaped ("\ud800"), as servers send it
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _bytes(self, data: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _missing(self) -> None:
                self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def do_GET(self):
                path = self.path.split("?")[0].rstrip("/")
                with owner._lock:
                    owner.gets.append(path)
                parts = path.split("/")
                if path.startswith("/v1/files/") and path.endswith("/content"):
                    data = owner.files.get(parts[3])
                    return self._bytes(data) if data is not None else self._missing()
                if path == "/v1/batches":
                    return self._send(200, {"object": "list", "has_more": False, "data": [
                        owner.batch_object(b) for b in reversed(list(owner.batches.values()))
                        if b["protocol"] == "openai"]})
                if path.startswith("/v1/messages/batches/") and path.endswith("/results"):
                    b = owner.batches.get(parts[4])
                    data = owner.files.get(b["output"]) if b and b["output"] else None
                    return self._bytes(data) if data is not None else self._missing()
                if path.startswith("/v1/batches/") or path.startswith("/v1/messages/batches/"):
                    obj = owner.poll_batch(parts[-1])
                    return self._send(200, obj) if obj is not None else self._missing()
                doc = owner.info(path)
                if doc is not None:
                    self._send(200, doc)
                else:
                    self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                path = self.path.split("?")[0].rstrip("/")
                if path == "/v1/files":
                    return self._upload(raw)
                if path == "/v1/batches":
                    req = json.loads(raw or b"{}")
                    data = owner.files.get(req.get("input_file_id"))
                    if data is None:
                        return self._send(400, {"error": {"message": "No such file", "type": "invalid_request_error"}})
                    lines = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
                    b = owner._new_batch("openai", lines, {"input_file_id": req["input_file_id"],
                                                           "endpoint": req.get("endpoint"),
                                                           "metadata": req.get("metadata")})
                    return self._send(200, owner.batch_object(b))
                if path == "/v1/messages/batches":
                    b = owner._new_batch("anthropic", json.loads(raw)["requests"], {})
                    return self._send(200, owner.batch_object(b))
                if path not in ("/v1/chat/completions", "/v1/messages"):
                    self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                    return
                body = json.loads(raw or b"{}")
                arrived = time.time()
                b = owner._choose(body, self.headers.get("Authorization") or self.headers.get("x-api-key"))
                try:
                    if isinstance(b, dict):
                        self._raw(b)
                    elif path == "/v1/messages":
                        self._send(200, owner.anthropic_message(body)) if b == "ok" else self._act(b, body)
                    else:
                        self._act(b, body)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    self.close_connection = True
                finally:
                    owner._done(arrived)

            def _upload(self, raw: bytes) -> None:
                """``POST /v1/files``: a multipart form with ``purpose`` and ``file``."""
                from email.parser import BytesParser
                from email.policy import default

                ctype = self.headers.get("Content-Type", "")
                msg = BytesParser(policy=default).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + raw)
                form = {p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
                        for p in msg.iter_parts()}
                if form.get("purpose") != b"batch" or not form.get("file"):
                    return self._send(400, {"error": {"message": "purpose must be batch, with a file",
                                                      "type": "invalid_request_error"}})
                with owner._lock:
                    fid = f"file-{len(owner.uploads) + 1:04d}"
                    owner.uploads.append(fid)
                    owner.files[fid] = form["file"]
                self._send(200, {"id": fid, "object": "file", "bytes": len(form["file"]), "created_at":
                                 int(time.time()), "filename": "batch.jsonl", "purpose": "batch",
                                 "status": "processed"})

            def _raw(self, spec: dict) -> None:
                """A response given in full: status, body (a JSON value, or text sent as it is) and headers."""
                body = spec.get("body", "")
                data = wire_text(body).encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(int(spec.get("status", 200)))
                self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (spec.get("headers") or {}).items():
                    self.send_header(k, str(v))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _act(self, b: str, body: dict) -> None:
                err = {"error": {"message": f"fake {b}", "type": "server_error"}}
                if b == "ok":
                    if owner.latency_s:
                        time.sleep(owner.latency_s)
                    self._send(200, owner.completion(body))
                elif b == "content_filter":
                    self._send(200, owner.completion(body, "content_filter"))
                elif b in ("cut_off", "empty_length"):
                    self._send(200, owner.completion(body, "length", b))
                elif b == "reasoning_only":
                    self._send(200, owner.completion(body, "stop", b))
                elif b == "unknown_shape":
                    self._send(200, {"id": "x", "object": "text_completion.v9", "output": [owner.answer_fn(body)]})
                elif b in CONFIG_ERRORS:
                    self._send(*CONFIG_ERRORS[b])
                elif b == "prompt_too_long500":
                    self._send(500, {"object": "error", "message": "Input prompt (5300 tokens) is too long and "
                                     "exceeds limit of 4096", "type": "BadRequestError", "param": None, "code": 500})
                elif b == "429_retry_after":
                    self._send(429, {"error": {"message": "Rate limit reached", "type": "requests",
                                               "code": "rate_limit_exceeded"}}, {"Retry-After": owner.retry_after})
                elif b == "429_retry_after_ms":
                    self._send(429, {"error": {"message": "Rate limit reached", "type": "requests",
                                               "code": "rate_limit_exceeded"}},
                               {"retry-after-ms": str(int(float(owner.retry_after) * 1000))})
                elif b == "429":
                    self._send(429, {"error": {"message": "Rate limit reached", "type": "requests",
                                               "code": "rate_limit_exceeded"}})
                elif b in ("500", "503"):
                    self._send(int(b), err)
                elif b == "ctx400":
                    self._send(400, CTX_ERROR)
                elif b == "400":
                    self._send(400, PLAIN_400)
                elif b == "401":
                    self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                               "code": "invalid_api_key"}})
                elif b == "delay":
                    time.sleep(owner.delay_s)
                    self._send(200, owner.completion(body))
                elif b == "reset":
                    # abortive close (RST): no status line, no body
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                else:
                    raise ValueError(f"unknown behaviour {b!r}")

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None
