"""The error table: every failure of a model call (an HTTP status with its body, a client exception, an error object
inside a 200) becomes one outcome, by the first matching row of :data:`ERROR_TABLE` (:func:`classify_error`).

Transient errors (429, 5xx, timeouts, connection resets) are retried by the gateway with exponential backoff and
full jitter, honouring ``Retry-After`` (:func:`retry_after_s`, or a wait written in the text:
:func:`retry_hint_in_text`) up to a cap; a context-length error, in any server's wording and status (400, 413, 422,
500, or a 200 whose body is an error object), is ``over_length`` after one call; credentials, model names, quotas
and output budgets are ``config_error`` (never stored: a fixed rerun calls again; :func:`setting_to_change` says
what to change); content filters are ``refused_by_provider``; anything else is a permanent ``error``. Every
backend and the batch reader classify through this one table (:mod:`ctxbench.models.replies` for the 200s).
Split out of :mod:`ctxbench.models.gateway`, which re-exports every name.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from ctxbench.core.redact import redact

# -- the error table ---------------------------------------------------------------------------------------------
# Context-length errors as servers word them (examples: tests/data/tricky_inputs.yaml, section server_errors):
# OpenAI / Azure / Groq / DeepSeek / vLLM ("maximum context length is N tokens", "context_length_exceeded"),
# vLLM v1 ("Prompt length of N is longer than the maximum model length of M", "The decoder prompt (length N) is
# longer than ...", "too long to fit into the model (context length N)"), TGI ("`inputs` tokens + `max_new_tokens`
# must be <= N", "`inputs` must have less than N tokens"), llama.cpp and forks ("exceeds the available context
# size", "Context size has been exceeded", "exceed_context_size_error", "Requested tokens (N) exceed context window
# of M"), LM Studio ("Trying to keep the first N tokens when context the overflows", "n_keep (N) >= n_ctx (M)"),
# SGLang ("The input (N tokens) is longer than the model's context length", "Input length (N tokens) exceeds the
# maximum allowed length"), Anthropic ("prompt is too long: N tokens > M maximum"), Gemini ("The input token count
# (N) exceeds the maximum number of tokens allowed (M)"), Bedrock ("Input is too long for requested model"),
# Cohere ("too many tokens"), Mistral ("too large for model with N maximum context length"), Moonshot ("model max
# length exceeded", "exceeded model token limit"), xAI ("maximum prompt length is N"), and a negative output budget
# computed by the server ("max_tokens must be at least 1, got -186").
CONTEXT_LENGTH_RE = re.compile(
    r"context[ _.-]?(?:length|window|size)|n_ctx\b.{0,40}(?:exceed|>)|n_keep\W{0,3}\d+\W{0,3}>=\s*n_ctx"
    r"|exceed_context_size|context (?:the )?overflows|max(?:imum)?[ _]model[ _]len"
    r"|maximum (?:sequence|prompt|input) length|model max length exceeded"
    r"|exceed(?:s|ed)? (?:the )?model(?:'s)? (?:token|context|input) limit"
    r"|(?:prompt|input|message|messages|request|text) (?:is |are )?too long|too long to fit"
    r"|too many (?:input )?tokens|input token count.{0,40}exceeds|input length.{0,40}exceeds"
    r"|(?:input|prompt)s?`? tokens \+ `?max_new_tokens`? must be"
    r"|`?inputs`? must have less than \d+ tokens|above the allowed maximum"
    r"|reduce the length of the (?:messages|input|prompt)|max_tokens must be at least 1, got -\d+"
    r"|exceeds? (?:the )?context limit"
    # vLLM v0's scheduler ("Input prompt (5300 tokens) is too long and exceeds limit of 4096"), vLLM's "This
    # model's maximum context length is N tokens. However, you requested M tokens", llama.cpp's
    # "exceed_context_size_error" / "the request exceeds the available context size", Ollama's "input exceeds
    # context length" / "input length exceeds the maximum", Mistral's "Prompt contains N tokens ... too large for
    # model with M maximum context length", DeepSeek's "This model's maximum context length is 65536 tokens"
    r"|(?:prompt|input)s? \(\d+ tokens?\) (?:is |are )?too long|too long and exceeds (?:the )?limit of \d+"
    r"|exceeds (?:the )?(?:available )?(?:context|KV cache|kv-cache)|maximum (?:context|input) (?:length|size|tokens)"
    r"|prompt contains \d+ tokens|exceeds the maximum number of tokens|longer than the maximum (?:model|input) length"
    # issue 30: vLLM's "decoder prompt of 5300 tokens is longer than the model's maximum length of 4096" (as a 500,
    # a 400 or a 200 error body) and "The decoder prompt (length N) plus the number of requested output tokens (at
    # least 1) is longer than the maximum model length of M"; Together / OpenAI-compatible gateways' "The input (N
    # tokens) is longer than the model's context length (M tokens)"; OpenAI's Responses API "Input tokens exceed the
    # configured limit of 272000 tokens"; GitHub Copilot's "prompt token count of N exceeds the limit of M"; "input
    # length too long"; OpenAI's "string too long. Expected a string with maximum length N" (a message over 10 MB)
    r"|longer than the model'?s? (?:maximum|max|context)(?: \w+)? length|requested output tokens \(at least 1\)"
    r"|exceeds? the configured limit of \d+ tokens|token count of \d+ exceeds the limit"
    r"|input length (?:is )?too long|expected a string with maximum length",
    re.IGNORECASE)
# an output budget over the model's limit: every call of the run fails alike, so it is the run's configuration
# (OpenAI "max_tokens is too large: N. This model supports at most M completion tokens", Anthropic "max_tokens: N >
# M, which is the maximum allowed number of output tokens", TGI "`max_new_tokens` must be <= N")
OUTPUT_BUDGET_RE = re.compile(
    r"max_(?:completion_)?tokens(?:`)? is too large: \d+\. This model supports at most"
    r"|max_tokens: \d+ > \d+, which is the maximum allowed number of output tokens"
    r"|(?<!\+ )`max_new_tokens` must be <= \d+", re.IGNORECASE)
# account limits that no retry lifts: exhausted quota or credit, a single request over the tokens-per-minute limit
QUOTA_RE = re.compile(r"insufficient_quota|exceeded your current quota|credit balance is too low|insufficient balance"
                      r"|billing|Request too large for .{0,80}tokens per min", re.IGNORECASE)
CONTENT_FILTER_RE = re.compile(r"content[_ ]?(?:filter|policy|management policy)|safety (?:system|filter)"
                               r"|responsible ?ai|flagged as potentially violating|violat\w* (?:our |the )?usage "
                               r"polic|\binvalid_prompt\b|blocked (?:due to|by) safety|prohibited_content",
                               re.IGNORECASE)
CONFIG_RE = re.compile(r"LLM Provider NOT provided|model .{0,80}does not exist|model_not_found|unknown model"
                       r"|invalid[_ ]api[_ ]key|incorrect api key|api key not valid|invalid x-api-key"
                       r"|\b(?:authentication|permission|not_found)_error\b|model .{0,80}not found, try pulling"
                       # LiteLLM proxy ("Invalid model name passed in model=X. Call `/v1/models` ..."), vLLM
                       # ("The model `X` does not exist."), TGI / Ollama / llama.cpp model names, Gemini
                       # ("models/X is not found for API version v1beta"), Mistral ("Invalid model: X")
                       r"|invalid model name passed in|invalid model(?: name)?:|model .{0,80}is not found"
                       r"|no (?:such|matching) model|model .{0,40}is not (?:available|supported|served)",
                       re.IGNORECASE)
# Credentials missing or refused, worded by the client library itself (no HTTP status, or litellm's APIError 500
# around the openai client's complaint): never retried, at any status. openai ("The api_key client option must be
# set either by passing api_key to the client or by setting the OPENAI_API_KEY environment variable"; newer: "Missing
# credentials. Please pass an `api_key`, ... or set the `OPENAI_API_KEY` ... environment variable", which litellm
# raises as an InternalServerError), litellm
# ("Missing Anthropic API Key", "api_key not set", "AuthenticationError"), Anthropic's SDK ("Could not resolve
# authentication method. Expected either api_key or auth_token to be set"), Google ("API key not valid. Please pass
# a valid API key", "API_KEY_INVALID"), Mistral ("Unauthorized" on 401, handled by status).
# A key missing on this machine, as the client library says it before it sends anything (litellm then labels it
# with a status of its own choosing, 500 for openai, 401 for anthropic, although no server answered).
MISSING_KEY_RE = re.compile(r"api_key client option must be set|missing credentials|missing \w+ api key"
                            r"|api_key not set|could not resolve authentication method"
                            r"|no key is set", re.IGNORECASE)
CREDENTIALS_RE = re.compile(r"api_key client option must be set|_API_KEY\b.{0,80}environment variable"
                            r"|missing credentials|set the `?[A-Z]+_API_KEY"
                            r"|missing (?:\w+ )?api[ _]?key|api[ _]key (?:is )?(?:not set|required|missing)"
                            r"|no api[ _]key (?:was )?(?:provided|found)|could not resolve authentication method"
                            r"|\bAPI_KEY_INVALID\b|\bAuthenticationError\b|authentication_error|invalid_api_key"
                            r"|incorrect api key provided|api key not valid", re.IGNORECASE)
# A request parameter or setting the server refuses (a bad request that every call of the run makes alike): OpenAI
# ("Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is
# supported.", "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
# instead.", "Unrecognized request argument supplied: seed", "Unknown parameter: 'x'"), Mistral (422 pydantic
# "extra_forbidden" / "Extra inputs are not permitted" with its "loc": ["body", "seed"]), vLLM without a chat
# template ("As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat
# template if the tokenizer does not define one.", "Cannot use chat template functions because
# tokenizer.chat_template is not set"), Anthropic ("temperature: range: 0..1"), Gemini ("Invalid JSON payload
# received. Unknown name \"seed\"").
PARAMETER_RE = re.compile(r"unsupported (?:value|parameter)s?\b|\bunsupported_(?:value|parameter)\b"
                          r"|unrecognized request arguments? supplied|unknown (?:parameter|name|field)s?\b"
                          r"|\bextra_forbidden\b|extra (?:inputs|fields) (?:are )?not permitted"
                          r"|chat[ _]template|does not support (?:the )?(?:parameter|\w+ parameter)"
                          r"|is not supported (?:with|by|for) this model|not supported when using"
                          r"|\b\w+: range: -?\d", re.IGNORECASE)
# a transient failure named in the error text where the status does not say so: an error object inside a 200
# answer (a proxy relaying a stream's error event) or a gateway's own status (Anthropic's error types
# overloaded_error / rate_limit_error / api_error, Gemini's RESOURCE_EXHAUSTED / UNAVAILABLE)
TRANSIENT_RE = re.compile(r"\b(?:overloaded_error|rate_limit_error|api_error)\b|\bRESOURCE_EXHAUSTED\b"
                          r"|\bUNAVAILABLE\b", re.IGNORECASE)

OUTCOMES = ("transient", "over_length", "config_error", "refused_by_provider", "error")
TRANSIENT_EXCEPTIONS = frozenset({
    "APITimeoutError", "Timeout", "APIConnectionError", "ServiceUnavailableError", "InternalServerError",
    "RateLimitError", "TimeoutError", "TimeoutException", "ReadTimeout", "ConnectError", "RemoteProtocolError",
    "TransportError", "ConnectionError",
    # aiohttp's (the openai_http backend's client): a refused, reset or dropped connection, a body cut in transit,
    # and ClientResponseError, which that backend (no raise_for_status) gets only for a reply that is not HTTP (a
    # bad status line or header: httpx's RemoteProtocolError) or a proxy that refused the tunnel (httpx's ProxyError)
    "ClientConnectionError", "ClientPayloadError", "ClientResponseError"})


@dataclass(frozen=True)
class ErrorRule:
    """One row of the error table: a failure whose HTTP status is in ``statuses`` (None: any, also no status, e.g. a
    client exception or a 200 whose body is an error object), whose text matches ``pattern`` (None: any) and whose
    exception class or any base class is named in ``exceptions`` (empty: any) has the ``outcome``."""

    outcome: str
    statuses: frozenset[int] | None = None
    pattern: re.Pattern | None = None
    exceptions: frozenset[str] = frozenset()
    why: str = ""

    def matches(self, status: int | None, text: str, names: tuple[str, ...]) -> bool:
        return ((self.statuses is None or status in self.statuses)
                and (self.pattern is None or bool(self.pattern.search(text)))
                and (not self.exceptions or any(n in self.exceptions for n in names)))


# A wait written in an error's text, where a server sends no Retry-After header: OpenAI's "Please try again in
# 6s" / "in 20ms" / "in 1m30.5s", Azure's "Please retry after 30 seconds", Gemini's "Please retry in 6.2s" and its
# RetryInfo "retryDelay": "6s", "wait 5 seconds" and the like.
# one duration unit, named by its group (h, m, s, ms); shared by the hint's pattern and the reading of its parts
_UNIT = r"(?:(?P<ms>ms|milliseconds?)|(?P<h>h|hours?)|(?P<m>m|min(?:ute)?s?)|(?P<s>s|secs?|seconds?))(?![a-z])"
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*" + _UNIT, re.I)
_DURATION = r"(?:\d+(?:\.\d+)?\s*" + re.sub(r"\?P<\w+>", "?:", _UNIT) + r"\s*)+"
_RETRY_TEXT = re.compile(r"(?:(?:try|retry)(?:ing)?\s+(?:again\s+)?(?:in|after)|wait(?:\s+for)?)\s+(?:about\s+)?"
                         rf"({_DURATION})|\"retryDelay\"\s*:\s*\"(\d+(?:\.\d+)?)s\"", re.I)
_UNIT_S = {"h": 3600.0, "m": 60.0, "ms": 0.001, "s": 1.0}


_5XX = frozenset(range(500, 600))
# First match wins. Order matters: an output budget over the model's limit is configuration even though it names
# "tokens"; quota and rate limits are not context errors although they count tokens; a context-length error is
# over_length whatever its status (a 500 from vLLM v1 or llama.cpp, a 200 with an error body), before the 5xx rule.
ERROR_TABLE: tuple[ErrorRule, ...] = (
    ErrorRule("config_error", pattern=OUTPUT_BUDGET_RE, why="max tokens above the model's output limit"),
    ErrorRule("config_error", exceptions=frozenset({"AuthenticationError", "PermissionDeniedError"}),
              why="credentials refused (litellm's and openai's exception classes, whatever status they carry)"),
    ErrorRule("config_error", pattern=CREDENTIALS_RE,
              why="credentials missing or refused, in the client's or the server's words (never retried)"),
    ErrorRule("transient", statuses=frozenset({429}), pattern=_RETRY_TEXT,
              why="a limit the server says when to retry (Gemini's per-minute quota words it as a quota)"),
    ErrorRule("config_error", pattern=QUOTA_RE, why="quota, credit or per-minute token limit of the account"),
    ErrorRule("transient", statuses=frozenset({429}), why="rate limited"),
    ErrorRule("transient", exceptions=frozenset({"RateLimitError"}), why="rate limited"),
    ErrorRule("over_length", exceptions=frozenset({"ContextWindowExceededError"}), why="litellm's context error"),
    ErrorRule("over_length", pattern=CONTEXT_LENGTH_RE, why="the prompt is longer than the model's window"),
    ErrorRule("over_length", statuses=frozenset({413}), why="request entity too large"),
    ErrorRule("refused_by_provider", exceptions=frozenset({"ContentPolicyViolationError"}), why="content filter"),
    ErrorRule("refused_by_provider", statuses=frozenset({400, 403, 422, 200, None}), pattern=CONTENT_FILTER_RE,
              why="content filter"),
    ErrorRule("config_error", statuses=frozenset({400, 404, 422, 200, None}), pattern=CONFIG_RE,
              why="credentials or model name named in the error text"),
    ErrorRule("config_error", statuses=frozenset({400, 422, 200, None}), pattern=PARAMETER_RE,
              why="a request parameter or server setting the server refuses (every call of the run alike)"),
    ErrorRule("transient", statuses=frozenset({200, None}), pattern=TRANSIENT_RE,
              why="overloaded, rate limited or an internal error, in an error object without its status"),
    ErrorRule("error", pattern=re.compile(r"OpenAIException - Invalid response object"),
              why="a 200 whose reply litellm cannot read (e.g. a refusal content part): an unrecognised shape, not "
                  "a server error (litellm raises it as a 500)"),
    ErrorRule("transient", statuses=frozenset({408, 409, 425}) | _5XX, why="server error or timeout"),
    ErrorRule("transient", exceptions=TRANSIENT_EXCEPTIONS, why="timeout or connection error"),
    ErrorRule("config_error", statuses=frozenset({401, 403, 404}), why="credentials, permissions or model name"),
    ErrorRule("config_error", exceptions=frozenset({"AuthenticationError", "PermissionDeniedError",
                                                    "NotFoundError"}), why="credentials or model name"),
    ErrorRule("config_error", pattern=CONFIG_RE, why="unknown model or provider"),
    ErrorRule("error", why="any other error (a bad request): stored, not retried"),
)


@dataclass
class ErrorInfo:
    """What the error table reads of one failure: the HTTP status (None when there was no response; for a 200 whose
    body is an error object, the code in the body, if any), the error text (message and body) and the names of the
    exception's class and its base classes."""

    status: int | None
    text: str
    exceptions: tuple[str, ...] = ()
    headers: Any = None

    def __post_init__(self) -> None:
        self.text = redact(self.text)  # a server echoing the key (issue 31): no credential in any error text

    @classmethod
    def from_exception(cls, exc: BaseException) -> "ErrorInfo":
        """From a client exception (litellm, openai, httpx, or Python's own)."""
        resp = getattr(exc, "response", None)
        status = getattr(exc, "status_code", None)
        if not isinstance(status, int):
            status = getattr(resp, "status_code", None)
        body = ""
        try:
            body = resp.text if resp is not None and hasattr(resp, "text") else ""
        except Exception:  # noqa: BLE001 - a streamed or closed response has no text
            body = ""
        names = tuple(c.__name__ for c in type(exc).__mro__)
        text = f"{type(exc).__name__}: {exc}" + (f" {body}" if body and body not in str(exc) else "")
        if MISSING_KEY_RE.search(text):  # litellm attaches a made-up response (500, 401) to its own refusal
            status = None  # the client refused before sending: no server answered, whatever status litellm gives
        # litellm keeps the provider's headers (Retry-After) beside a response object that may have none
        headers = next((h for h in (getattr(exc, "litellm_response_headers", None), getattr(exc, "headers", None),
                                    getattr(resp, "headers", None)) if h), None)
        return cls(status if isinstance(status, int) else None, text, names, headers)


def classify_error(info: ErrorInfo) -> "TransientError | PermanentError":
    """The outcome of one failure by the first matching row of :data:`ERROR_TABLE`: a TransientError (retried,
    with the server's Retry-After) or a PermanentError whose ``status`` is ``over_length``, ``config_error``,
    ``refused_by_provider`` or ``error``. The message keeps the first 500 characters of the error text; a
    ``config_error`` message starts with the setting to change (:func:`setting_to_change`). ``http_status`` of a
    PermanentError is the status the server sent (None without one)."""
    msg = info.text[:500]
    for rule in ERROR_TABLE:
        if rule.matches(info.status, info.text, info.exceptions):
            if rule.outcome == "transient":
                hint = retry_after_s(info.headers)
                return TransientError(msg, hint if hint is not None else retry_hint_in_text(info.text))
            if rule.outcome == "config_error":
                msg = f"{setting_to_change(info.text)}: {msg}"
            return PermanentError(msg, rule.outcome, info.status)
    return PermanentError(msg, http_status=info.status)  # unreachable: the last row matches everything


_PARAM_RES = (re.compile(r"""["']param["']\s*:\s*["'](\w+)["']"""),
              re.compile(r"""unsupported (?:value|parameter):\s*'(\w+)'""", re.I),
              re.compile(r"""["']loc["']\s*:\s*\[\s*["']body["']\s*,\s*["'](\w+)["']"""),
              re.compile(r"""\\?["']loc\\?["']\s*:\s*\[\s*\\?["']body\\?["']\s*,\s*\\?["'](\w+)"""),
              re.compile(r"unrecognized request arguments? supplied:\s*(\w+)", re.I),
              re.compile(r"""unknown (?:parameter|name|field):?\s*\\?["'](\w+)""", re.I),
              re.compile(r"\b(temperature|top_p|seed|max_tokens|max_completion_tokens)\b: range", re.I))
_SETTING = {
    "temperature": "the server refuses the parameter `temperature`: pass `--temperature` with a value the model "
                   "takes, or set `fixed_temperature` for the model in assets/models.yaml (reasoning models such "
                   "as o1/o3/gpt-5 take only 1)",
    "seed": "the server refuses the parameter `seed` (ctxbench sends the sample index as the seed): call the model "
            "through its litellm provider (e.g. --model mistral/<name> without --base-url), which renames or drops "
            "it, or serve it behind a proxy that accepts seed",
    "max_tokens": "the server refuses the parameter `max_tokens`: set the model's max_output_tokens in "
                  "assets/models.yaml or pass --max-tokens with a value it takes (a model that wants "
                  "max_completion_tokens: call it through litellm, without --base-url)",
}
_SETTING["max_completion_tokens"] = _SETTING["max_tokens"]

def setting_to_change(text: str) -> str:
    """The parameter or setting a configuration error's text names, as advice: the refused request parameter
    (OpenAI's ``param``, ``Unsupported value: 'temperature'``, Mistral's pydantic ``loc``), the server's chat
    template, the model name, the credentials, the account's quota, or the output budget; a generic sentence
    otherwise. Never raises."""
    t = text or ""
    if OUTPUT_BUDGET_RE.search(t):
        return "configuration error: the output budget is over the model's limit: lower --max-tokens"
    if QUOTA_RE.search(t):
        return "configuration error: the account's quota or credit is used up: add credit or raise the limit"
    if re.search(r"chat[ _]template", t, re.I):
        return ("configuration error: the server has no chat template for this model: start it with one (vLLM "
                "--chat-template FILE, llama.cpp --jinja / --chat-template) or serve an instruct model")
    if CREDENTIALS_RE.search(t) or re.search(r"HTTP 40[13]\b|\bunauthori[sz]ed\b|\bforbidden\b", t, re.I):
        return ("configuration error: the credentials: set the provider's API key variable (OPENAI_API_KEY, "
                "ANTHROPIC_API_KEY, GEMINI_API_KEY, ...), or --api-key-env NAME for a --base-url")
    if CONFIG_RE.search(t) or re.search(r"HTTP 404\b", t):
        return ("configuration error: the model name: check --model against the server's /v1/models (or the "
                "provider's model list); a litellm name needs its provider prefix")
    for rx in _PARAM_RES:
        m = rx.search(t)
        if m and m.group(1).lower() not in ("none", "null", "messages", "model"):
            p = m.group(1)
            return "configuration error: " + _SETTING.get(p.lower(), f"the server refuses the request parameter "
                                                                  f"`{p}`: change or drop it and rerun")
    return "configuration error: the server refuses every request alike: change the setting its message names"


def error_in_body(body: Any) -> tuple[int | None, str] | None:
    """``(code, text)`` when a response body is an error object rather than an answer, as some servers send with
    status 200 (llama.cpp behind a proxy, SGLang's ``{"object": "error", ...}``, TGI's ``{"error": "...",
    "error_type": ...}``); None for an answer. ``code`` is the status the body names, where it names one."""
    if not isinstance(body, dict) or body.get("choices"):
        return None
    err = body.get("error")
    if err is None and body.get("object") != "error" and body.get("type") != "error":
        return None
    obj = err if isinstance(err, dict) else body
    code = obj.get("code", body.get("code"))
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    return (code if isinstance(code, int) else None), json.dumps(body, ensure_ascii=False, default=str)


class TransientError(Exception):
    """A failure worth retrying; ``retry_after`` is the server's Retry-After in seconds, where it sent one."""

    def __init__(self, msg: str, retry_after: float | None = None):
        super().__init__(redact(msg))
        self.retry_after = retry_after


class PermanentError(Exception):
    """A failure no retry changes; ``status`` is the stored outcome (``over_length``, ``refused_by_provider``,
    ``error``) or ``config_error``."""

    def __init__(self, msg: str, status: str = "error", http_status: int | None = None):
        super().__init__(redact(msg))
        self.status = status
        self.http_status = http_status


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asks to wait (``Retry-After`` as seconds or an HTTP date, or ``retry-after-ms``); None
    without a readable hint. Never negative."""
    if not headers:
        return None
    v = headers.get("retry-after") or headers.get("Retry-After")
    if v is None:
        ms = headers.get("retry-after-ms")
        try:
            return max(0.0, float(ms) / 1000) if ms else None
        except ValueError:
            return None
    try:
        return max(0.0, float(v))
    except ValueError:
        from email.utils import parsedate_to_datetime
        try:
            return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def retry_hint_in_text(text: str | None) -> float | None:
    """Seconds an error's text asks to wait before a retry (:data:`_RETRY_TEXT`: ``try again in 1m30.5s``,
    ``retry after 30 seconds``, ``"retryDelay": "6s"``), for servers that put the hint in the message instead of
    a ``Retry-After`` header; None without one."""
    m = _RETRY_TEXT.search(text or "")
    if m is None:
        return None
    if m.group(2) is not None:
        return float(m.group(2))
    return sum(float(p.group(1)) * _UNIT_S[p.lastgroup] for p in _DURATION_PART.finditer(m.group(1)))


def classify(exc: BaseException) -> Exception:
    """A client exception (litellm, openai, httpx, Python's own) through the error table: TransientError or
    PermanentError (see :func:`classify_error`)."""
    return classify_error(ErrorInfo.from_exception(exc))
