"""Model gateway: one async call path for every provider, and one table that classifies every error.

OpenAI-compatible servers (a ``base_url``: vLLM, llama.cpp, Ollama, the embedded model) are called over plain
async HTTP (``/chat/completions``, the OpenAI wire format); every other provider (OpenAI, Anthropic, Gemini, ...) through
``litellm.acompletion`` (``backend="litellm"`` also sends a base URL through litellm). API keys come only from the
environment (or a Prefect Secret block resolved by the flow into the environment); they are never written to any
output or log.

Faults: every failure of either path, an HTTP status with its body or a client exception, is classified by one
table, :data:`ERROR_TABLE` (:func:`classify_error`): transient errors (429, 5xx, timeouts, connection resets) are
retried with exponential backoff and full jitter, honouring ``Retry-After`` up to a cap (a longer hint ends the
call's retries and hands over to the outage pause); a context-length error, in any server's wording and status
(400, 413, 422, 500, or a 200 whose body is an error object), is ``over_length`` after one call; credentials, model
names, quotas and output budgets are ``config_error`` (never stored: a fixed rerun calls again); content filters are
``refused_by_provider``; anything else is a permanent ``error``. Concurrency is bounded per gateway (one per model).

Replies: a 200 is ``ok`` only when it is positively a finished answer (:func:`completion_result`: a finish reason
in :data:`FINISHED_FINISH_REASONS` and text); a provider error inside a 200 (``finish_reason: "error"``,
``choices[0].error``) is retried as a transient failure and stored as ``error`` if it persists; tokens generated
with no text returned are ``empty_reply``; any other finish reason is ``error`` "not a finished answer".
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

from ctxbench.core import progress
from ctxbench.core.redact import install as _install_redaction
from ctxbench.core.redact import redact, register_url
from ctxbench.core.redact import register as register_secret
from ctxbench.core.errors import InputError
from ctxbench.models import quiet_litellm
from ctxbench.models.pricing import model_prices

_install_redaction()  # every log record and warning of a process that calls models is redacted (ctxbench.core.redact)

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
    "TransportError", "ConnectionError"})


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
NOT_ATTEMPTED = "not attempted"  # the error of a call a paused run did not start
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


def missing_credentials(model: str, base_url: str | None = None) -> list[str]:
    """The environment variables litellm needs for ``model`` that are not set (``litellm.validate_environment``;
    e.g. ``["OPENAI_API_KEY"]`` for ``gpt-4o-mini``, where any one of several will do all are listed); [] for a
    model called at a ``base_url`` (its key comes only from ``--api-key-env``, checked as the option is read),
    for one whose provider litellm does not know, or where litellm cannot tell. Never raises."""
    if base_url:
        return []
    try:
        env = quiet_litellm().validate_environment(model=model)
    except Exception:  # noqa: BLE001  a check that cannot be made is no reason to stop: the call will say
        return []
    if not isinstance(env, dict) or env.get("keys_in_environment"):
        return []
    return [str(k) for k in env.get("missing_keys") or [] if str(k).isupper()]


def require_credentials(model: str, base_url: str | None = None, what: str = "model") -> None:
    """Raise InputError (exit 2) before any call when ``model``'s provider key is not set in the environment
    (:func:`missing_credentials`), naming the variable(s); nothing happens when they are set."""
    missing = missing_credentials(model, base_url)
    if missing:
        either = missing[0] if len(missing) == 1 else "one of " + ", ".join(missing)
        raise InputError(f"{what} {model}: its provider's key is not set: export {either} (or call a server with "
                         f"--base-url URL [--api-key-env NAME]); nothing was called")


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


def usage_counts(usage: Any) -> tuple[int | None, int | None, int, int]:
    """``(prompt_tokens, completion_tokens, cached, written)`` of a usage object in any of the shapes providers send:
    OpenAI's (``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``), DeepSeek's
    (``prompt_cache_hit_tokens``), litellm's for Anthropic (the same plus ``cache_creation_input_tokens``) and
    Anthropic's own (``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``,
    ``output_tokens``). ``prompt_tokens`` counts every input token, cached or written ones included; ``cached`` are
    read from the prompt cache, ``written`` written to it. None where the usage names no count."""
    u = usage.model_dump() if hasattr(usage, "model_dump") else usage
    if u is None:
        return None, None, 0, 0
    if not isinstance(u, dict):  # an object with attributes
        u = {k: getattr(u, k, None) for k in ("prompt_tokens", "completion_tokens", "prompt_tokens_details",
                                             "cache_creation_input_tokens", "prompt_cache_hit_tokens")}
        d = u["prompt_tokens_details"]
        u["prompt_tokens_details"] = {"cached_tokens": getattr(d, "cached_tokens", None)} if d is not None else None

    def num(v: Any) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    written = num(u.get("cache_creation_input_tokens"))
    if "prompt_tokens" in u or "completion_tokens" in u:
        details = u.get("prompt_tokens_details") or {}
        cached = num(details.get("cached_tokens") if isinstance(details, dict) else None) \
            or num(u.get("prompt_cache_hit_tokens"))
        pt, ct = u.get("prompt_tokens"), u.get("completion_tokens")
        return (pt if isinstance(pt, int) else None), (ct if isinstance(ct, int) else None), cached, written
    if "promptTokenCount" in u or "candidatesTokenCount" in u:  # Gemini's usageMetadata
        cached = num(u.get("cachedContentTokenCount"))
        pt, ct = u.get("promptTokenCount"), num(u.get("candidatesTokenCount")) + num(u.get("thoughtsTokenCount"))
        return (pt if isinstance(pt, int) else None), ct, cached, written
    if "prompt_eval_count" in u or "eval_count" in u:  # Ollama's own API (the uncached prompt tokens only)
        pt, ct = u.get("prompt_eval_count"), u.get("eval_count")
        return (pt if isinstance(pt, int) else None), (ct if isinstance(ct, int) else None), 0, 0
    if "input_tokens" in u or "output_tokens" in u:  # Anthropic's Messages API
        cached = num(u.get("cache_read_input_tokens"))
        pt = num(u.get("input_tokens")) + cached + written if "input_tokens" in u else None
        ct = u.get("output_tokens")
        return pt, (ct if isinstance(ct, int) else None), cached, written
    return None, None, 0, 0


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
    a base URL, else litellm), ``http`` or ``litellm`` (litellm also for a base URL, sent as its ``api_base``)."""

    model: str
    base_url: str | None = None
    concurrency: int = 8
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    api_key_env: str | None = None
    stop: asyncio.Event | None = field(default=None, repr=False)  # set: no new attempt starts (a paused run)
    backend: str = "auto"
    _sem: asyncio.Semaphore | None = field(default=None, repr=False)
    _client: Any = field(default=None, repr=False)

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._sem

    def _api_key(self) -> str:
        # a key is sent to a base URL only when named explicitly (--api-key-env): never leak OPENAI_API_KEY
        # to an arbitrary server
        key = (os.environ.get(self.api_key_env) if self.api_key_env else None) or "sk-no-key"
        register_secret(key)  # whatever variable holds it: redacted from every error text (ctxbench.core.redact)
        register_url(self.base_url)
        return key

    @property
    def served_name(self) -> str:
        """The model name sent to an OpenAI-compatible server."""
        return self.model[len("openai/"):] if self.model.startswith("openai/") else self.model

    def _http_client(self):
        if self._client is None:
            import httpx

            n = max(self.concurrency, 1) * 2
            self._client = httpx.AsyncClient(
                base_url=self.base_url.rstrip("/") + "/", timeout=self.policy.timeout_s,
                headers={"Authorization": f"Bearer {self._api_key()}"},
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))
        return self._client

    async def _once_http(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One call to an OpenAI-compatible ``/chat/completions`` endpoint with a bare async HTTP client (measured
        faster than the SDKs on 2 cores, whose per-call CPU cost limits throughput)."""
        import httpx

        t0 = time.perf_counter()
        try:
            r = await self._http_client().post("chat/completions", json={
                "model": self.served_name, "messages": messages, "max_tokens": max_tokens, **sampling})
        except (httpx.TimeoutException, httpx.TransportError) as e:
            raise classify(e) from None
        lat = time.perf_counter() - t0
        res = http_result(self.model, r.status_code, r.text, r.headers, max_tokens)
        res.latency_s = lat
        return res

    async def _once_litellm(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        t0 = time.perf_counter()
        litellm = quiet_litellm()

        # a provider that lacks a parameter (seed, response_format) ignores it; not for a base URL, where litellm
        # would also answer a 422 (TGI's context-length error) by sending the request again
        extra = {"api_base": self.base_url, "api_key": self._api_key()} if self.base_url else {}
        r = await litellm.acompletion(model=self.model, messages=messages, max_tokens=max_tokens,
                                      num_retries=0, max_retries=0, timeout=self.policy.timeout_s,
                                      drop_params=not self.base_url, **extra, **sampling)
        lat = time.perf_counter() - t0
        choices = getattr(r, "choices", None)
        if not choices:  # a body without an answer: an error object where the server sent one
            body = r.model_dump() if hasattr(r, "model_dump") else r
            err = error_in_body(body if isinstance(body, dict) else {})
            raise classify_error(ErrorInfo(err[0] if err else None,
                                           f"no answer in the response: {(err[1] if err else str(body))[:2000]}"))
        choice = choices[0]
        msg = getattr(choice, "message", None)
        res = completion_result(self.model, litellm_choice(choice),
                                {"content": getattr(msg, "content", None),
                                 "reasoning_content": getattr(msg, "reasoning_content", None),
                                 "reasoning": getattr(msg, "reasoning", None),
                                 "refusal": getattr(msg, "refusal", None),
                                 "tool_calls": getattr(msg, "tool_calls", None)},
                                getattr(r, "usage", None), zeros_mean_none=True, max_tokens=max_tokens)
        res.latency_s = lat
        return res

    async def _once(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        if self.base_url and self.backend != "litellm":
            return await self._once_http(messages, max_tokens, sampling)
        return await self._once_litellm(messages, max_tokens, sampling)

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
                        res = await asyncio.wait_for(self._once(messages, max_tokens, sampling),
                                                     self.policy.timeout_s)
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
                    err = e if isinstance(e, (TransientError, PermanentError)) else classify(e)
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
        import httpx

        base = self.base_url.rstrip("/")
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

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def litellm_choice(choice: Any) -> dict:
    """The finish of a litellm ``Choices`` as the gateway reads it. litellm maps every provider's finish reason to
    OpenAI's (``end_turn`` and ``STOP`` to ``stop``, but also ``error``, ``ERROR``, ``network_error``,
    ``MALFORMED_RESPONSE`` and any reason it does not know to ``stop``) and keeps the provider's own in
    ``provider_specific_fields["native_finish_reason"]``: where that native reason is not a finished one
    (:func:`is_finished`) it is the finish the gateway judges; an ``error`` object on the choice (litellm keeps it
    in ``provider_specific_fields["error"]``) is kept."""
    fin = getattr(choice, "finish_reason", None)
    psf = getattr(choice, "provider_specific_fields", None)
    native = psf.get("native_finish_reason") if isinstance(psf, dict) else None
    out: dict = {"finish_reason": fin}
    if isinstance(native, str) and native != fin:
        out["native_finish_reason"] = native
        if _finish_key(fin) == "stop" and not is_finished(native):
            out["finish_reason"] = native  # litellm's default "stop" hides what the provider said
    err = getattr(choice, "error", None) or (psf.get("error") if isinstance(psf, dict) else None)
    if err:
        out["error"] = err if isinstance(err, (dict, str)) else getattr(err, "__dict__", str(err))
    return out


def _duration(s: float) -> str:
    """``86400`` → ``86400 s (24.0 h)``."""
    return f"{s:.0f} s" + (f" ({s / 3600:.1f} h)" if s >= 3600 else f" ({s / 60:.1f} min)" if s >= 120 else "")


# Finish reasons meaning the provider withheld or cut the reply for its content policy, however a server spells
# them (compared lower-cased, '-' as '_'): OpenAI/Azure/vLLM ``content_filter``, Anthropic ``refusal`` (its
# ``stop_reason``), Gemini's ``SAFETY``, ``RECITATION``, ``PROHIBITED_CONTENT``, ``BLOCKLIST``, ``SPII``,
# ``IMAGE_SAFETY`` (its ``finishReason``, passed through by OpenAI-compatible proxies).
REFUSAL_FINISH_REASONS = frozenset({"content_filter", "refusal", "safety", "recitation", "prohibited_content",
                                    "blocklist", "spii", "image_safety"})


def is_refusal_finish(reason: Any) -> bool:
    """Whether a completion's finish (stop) reason says the provider refused or filtered the reply
    (:data:`REFUSAL_FINISH_REASONS`, any case, ``content-filter`` as ``content_filter``)."""
    return isinstance(reason, str) and reason.strip().lower().replace("-", "_") in REFUSAL_FINISH_REASONS


# Finish reasons meaning the output budget ended the reply, however a server spells them (compared lower-cased):
# OpenAI / Azure / vLLM / SGLang / TGI / llama.cpp / Ollama / DeepSeek / Mistral ``length``, Anthropic's
# ``max_tokens`` (its stop_reason), Gemini's ``MAX_TOKENS`` (finishReason), OpenAI's Responses API
# ``max_output_tokens`` (incomplete_details.reason), Mistral's ``model_length``, TGI's native ``Length`` and
# Bedrock's ``max_tokens`` / ``length``.
LENGTH_FINISH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens", "model_length",
                                   "max_length", "max_new_tokens", "token_limit", "model_context_window_exceeded"})
# Finish reasons meaning a finished answer (compared lower-cased, '-' as '_'; issue 30: a reply is ``ok`` only with
# one of these): OpenAI / Azure / vLLM / SGLang / llama.cpp / Ollama / Mistral / DeepSeek ``stop``, Gemini's
# ``STOP``, Anthropic's and Bedrock's ``end_turn`` and ``stop_sequence`` (ctxbench sends no tools, so a stop sequence
# ends an answer), TGI's native ``eos_token`` / ``stop_sequence``, Together's ``eos``, Cohere's ``COMPLETE`` and
# ``STOP_SEQUENCE`` (the sets litellm's ``map_finish_reason`` maps to ``stop`` from a real finish).
FINISHED_FINISH_REASONS = frozenset({"stop", "end_turn", "stop_sequence", "eos", "eos_token", "complete"})
# Finish reasons meaning the provider failed while answering (a router's in-band error on a 200: OpenRouter's
# ``error`` with ``native_finish_reason`` and ``choices[0].error``; Cohere's ``ERROR``; Zhipu GLM's
# ``network_error``; vLLM's ``abort`` (the engine aborted the request); Gemini's ``MALFORMED_RESPONSE``). litellm
# maps all of these to ``stop``; the gateway reads the native reason instead. Retried as a transient failure.
ERROR_FINISH_REASONS = frozenset({"error", "network_error", "abort", "aborted", "malformed_response",
                                  "server_error", "internal_error"})


def _finish_key(reason: Any) -> str | None:
    return reason.strip().lower().replace("-", "_") if isinstance(reason, str) else None


def is_finished(reason: Any) -> bool:
    """Whether a finish (stop) reason positively says the reply is a finished answer
    (:data:`FINISHED_FINISH_REASONS`, any case, ``-`` as ``_``)."""
    return _finish_key(reason) in FINISHED_FINISH_REASONS


def is_error_finish(reason: Any) -> bool:
    """Whether a finish reason says the provider failed while answering (:data:`ERROR_FINISH_REASONS`)."""
    return _finish_key(reason) in ERROR_FINISH_REASONS
EMPTY_REPLY_RETRIES = 1  # a 200 that holds no reply (the server dropped the prompt) is asked once more


def is_length_finish(reason: Any) -> bool:
    """Whether a finish (stop) reason says the output budget ended the reply (:data:`LENGTH_FINISH_REASONS`, any
    case, ``-`` as ``_``; also any other wording holding ``max_token`` or ending in ``length``). The one
    definition the gateway's status, scoring (:func:`ctxbench.scoring.pipeline.finish_kind`) and every report
    count (:func:`ctxbench.models.effort.is_cut_off`) use."""
    if not isinstance(reason, str):
        return False
    f = reason.strip().lower().replace("-", "_")
    return f in LENGTH_FINISH_REASONS or "max_token" in f or f.endswith("length")


def finish_text(reason: Any) -> str | None:
    """A finish reason as stored: the string exactly as sent; another JSON value as JSON; None stays None."""
    if reason is None or isinstance(reason, str):
        return reason
    return json.dumps(reason, ensure_ascii=False, default=str)


_TEXT_PARTS = (None, "text", "output_text")
_REASONING_PARTS = ("thinking", "reasoning", "reasoning_content", "reasoning_text")


def _part_text(v: Any) -> str | None:
    """The text of one part's value: a string, or (Mistral's Magistral ``thinking`` part) a list of text parts."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        got = [x if isinstance(x, str) else x.get("text") if isinstance(x, dict) else None for x in v]
        got = [x for x in got if isinstance(x, str)]
        return "".join(got) if got else None
    return None


@dataclass
class Parts:
    """A message's content read part by part (:func:`read_content`): ``text`` (the text parts joined; None when
    there is none), ``reasoning`` (thinking / reasoning parts joined), ``refusal`` (refusal parts joined) and
    ``other`` (the types of parts that are none of these: images, tool calls, unknown kinds)."""

    text: str | None = None
    reasoning: str | None = None
    refusal: str | None = None
    other: tuple[str, ...] = ()


def read_content(v: Any) -> Parts:
    """A message's ``content`` in any shape providers send, read part by part: a string; None; a list of parts
    (OpenAI's ``[{"type": "text", "text": ...}, {"type": "refusal", "refusal": ...}]``, the Responses API's
    ``output_text``, Anthropic's ``text`` / ``thinking`` / ``redacted_thinking`` blocks, Mistral's Magistral
    ``{"type": "thinking", "thinking": [{"type": "text", ...}]}``, a bare string part); one part as a dict. Text
    parts are joined in order. Never raises."""
    if v is None:
        return Parts()
    if isinstance(v, str):
        return Parts(text=v)
    items = v if isinstance(v, list) else [v] if isinstance(v, dict) else None
    if items is None:
        return Parts(text=json.dumps(v, ensure_ascii=False, default=str))
    text, reasoning, refusal, other = [], [], [], []
    for p in items:
        if isinstance(p, str):
            text.append(p)
            continue
        if not isinstance(p, dict):
            other.append(type(p).__name__)
            continue
        kind = p.get("type")
        if kind == "refusal":
            r = _part_text(p.get("refusal", p.get("text")))
            refusal.append(r or "")
        elif kind in _REASONING_PARTS:
            r = next((_part_text(p.get(k)) for k in ("thinking", "reasoning", "text", "content")
                      if _part_text(p.get(k)) is not None), None)
            if r is not None:
                reasoning.append(r)
        elif kind == "redacted_thinking":
            continue
        elif kind in _TEXT_PARTS and isinstance(p.get("text"), str):
            text.append(p["text"])
        else:
            other.append(str(kind))
    return Parts("".join(text) if text else None, "".join(reasoning) if reasoning else None,
                 "\n".join(refusal) if refusal else None, tuple(other))


def reply_parts(body: Any) -> tuple[dict, dict, Any] | None:
    """``(choice, message, usage)`` of a 200 body in any shape a chat server answers: OpenAI's chat completion
    (``choices[0].message``, every OpenAI-compatible server), OpenAI's legacy completion (``choices[0].text``),
    Anthropic's Messages API (``content`` blocks, ``stop_reason``), Gemini's ``generateContent`` (``candidates[0]
    .content.parts``, ``finishReason``; ``thought`` parts as reasoning; a prompt Gemini blocked, ``promptFeedback
    .blockReason`` without candidates, as that finish) and Ollama's own ``/api/chat`` (``message``, ``done_reason``,
    ``prompt_eval_count``). ``choice`` holds ``finish_reason`` as sent, and where the server sent them
    ``native_finish_reason``, an in-band ``error`` object and Ollama's ``done``; ``message`` holds ``content``
    (a string or parts), ``reasoning_content``/``reasoning`` and ``refusal``. None for a shape none of these is."""
    if not isinstance(body, dict):
        return None
    ch = body.get("choices")
    if isinstance(ch, list) and ch and isinstance(ch[0], dict):
        c = ch[0]
        msg = c.get("message")
        if msg is None and "delta" in c:
            msg = c.get("delta")
        if msg is None and "text" in c:
            msg = {"content": c.get("text")}
        if msg is None and c.get("error"):  # an in-band error with no message at all
            msg = {"content": None}
        if not isinstance(msg, dict):
            return None
        if "content" not in msg and not any(k in msg for k in ("reasoning_content", "reasoning", "tool_calls",
                                                                  "refusal")) and not c.get("error"):
            return None
        choice = {"finish_reason": c.get("finish_reason", c.get("stop_reason"))}
        for k in ("native_finish_reason", "error"):
            if c.get(k) is not None:
                choice[k] = c[k]
        return choice, msg, body.get("usage")
    if body.get("type") == "message" and isinstance(body.get("content"), list):  # Anthropic
        blocks = read_content(body["content"])
        return ({"finish_reason": body.get("stop_reason")},
                {"content": body["content"], "reasoning": blocks.reasoning}, body.get("usage"))
    cands = body.get("candidates")
    if isinstance(cands, list) and cands and isinstance(cands[0], dict):  # Gemini
        c = cands[0]
        parts = ((c.get("content") or {}).get("parts") or []) if isinstance(c.get("content"), dict) else []
        texts = [p["text"] for p in parts if isinstance(p, dict) and not p.get("thought")
                 and isinstance(p.get("text"), str)]
        thought = "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("thought"))
        # no text part at all (Gemini's empty candidate with finishReason STOP) is no content, not an empty answer
        return {"finish_reason": c.get("finishReason")}, \
            {"content": "".join(texts) if texts else None, "reasoning": thought or None}, body.get("usageMetadata")
    fb = body.get("promptFeedback")
    if isinstance(fb, dict) and fb.get("blockReason") and not cands:  # Gemini refused the prompt itself
        return ({"finish_reason": fb["blockReason"], "blocked": True},
                {"content": None}, body.get("usageMetadata"))
    msg = body.get("message")
    if isinstance(msg, dict) and ("done" in body or "done_reason" in body):  # Ollama's /api/chat
        usage = {k: body[k] for k in ("prompt_eval_count", "eval_count") if k in body}
        return ({"finish_reason": body.get("done_reason"), "done": body.get("done")},
                {"content": msg.get("content"), "reasoning": msg.get("thinking") or msg.get("reasoning")},
                usage or None)
    return None


def http_result(model: str, status: int, text: str, headers: Any = None, max_tokens: int | None = None
                ) -> CallResult:
    """One HTTP answer of an OpenAI-compatible ``/chat/completions`` (``status``, the body's ``text``, its
    ``headers``) as the gateway reads it: a status of 400 or more goes through the error table (raises
    TransientError or PermanentError); a body that is not JSON is a TransientError (a proxy's page, a body cut in
    transit); else :func:`reply_result`."""
    if status >= 400:
        raise classify_error(ErrorInfo(status, f"HTTP {status}: {redact(text)[:2000]}", headers=headers))
    try:
        d = json.loads(text)
    except ValueError:
        raise TransientError(f"malformed response body: {redact(text)[:200]}") from None
    return reply_result(model, d, max_tokens, status=status, headers=headers)


def reply_result(model: str, body: Any, max_tokens: int | None = None, status: int = 200, headers: Any = None,
                 batch: bool = False) -> CallResult:
    """The :class:`CallResult` of one 200 answer's parsed JSON ``body`` (a direct call or a batch line): an
    error object in the body goes through the error table (raises TransientError or PermanentError, as an HTTP
    error would); a body of no known shape (:func:`reply_parts`) is status ``error`` naming it, never scored;
    else :func:`completion_result`."""
    err = error_in_body(body)
    if err is not None:  # a 200 whose body is an error object
        code, text = err
        raise classify_error(ErrorInfo(code, f"HTTP {status} with an error body: {redact(text)[:2000]}", headers=headers))
    parts = reply_parts(body)
    if parts is None:
        shown = redact(json.dumps(body, ensure_ascii=False, default=str))[:300]
        return CallResult("error", error=f"unrecognised reply shape: HTTP {status} whose body holds no chat "
                                         f"completion ctxbench knows (OpenAI choices[0].message, Anthropic "
                                         f"content blocks, Gemini candidates, Ollama message): {shown}")
    choice, msg, usage = parts
    return completion_result(model, choice, msg, usage, batch=batch, max_tokens=max_tokens)


def inband_error(choice: dict) -> tuple[int | None, str] | None:
    """``(code, message)`` when a 200's choice says the provider failed while answering: an error finish
    (:func:`is_error_finish`) in ``finish_reason`` or ``native_finish_reason``, or an ``error`` object on the choice
    (OpenRouter's ``choices[0].error``: ``{"code": 502, "message": ...}``); None otherwise."""
    err = choice.get("error")
    fin, native = choice.get("finish_reason"), choice.get("native_finish_reason")
    if not err and not is_error_finish(fin) and not is_error_finish(native):
        return None
    code, text = None, ""
    if isinstance(err, dict):
        code = err.get("code")
        code = int(code) if isinstance(code, str) and code.isdigit() else code if isinstance(code, int) else None
        text = str(err.get("message") or json.dumps(err, ensure_ascii=False, default=str))
    elif err:
        text = str(err)
    return code, (text or "no message")


def completion_result(model: str, choice: dict, msg: dict, usage: Any, zeros_mean_none: bool = False,
                      batch: bool = False, max_tokens: int | None = None) -> CallResult:
    """The :class:`CallResult` of one chat completion (OpenAI's shape: a choice with its ``finish_reason``, its
    ``message`` and the response's ``usage``), for a direct call and for a line of a batch's output alike: the
    reply (content read part by part, :func:`read_content`), the reasoning field (``reasoning_content``,
    ``reasoning`` or reasoning parts), token counts (:func:`usage_counts`), the cost (at batch prices with
    ``batch``) and ``finish_reason`` exactly as sent. ``zeros_mean_none``: litellm writes zeros where the server
    reported no usage. ``max_tokens``: the output budget the request asked for.

    A reply is ``ok`` only when it is positively a finished answer (issue 30). Status, in this order
    (docs/reference/replies.md):

    - an in-band provider failure (:func:`inband_error`: ``finish_reason: "error"``, ``native_finish_reason``,
      ``choices[0].error``): the provider's message through the error table; a context-length, content-filter or
      configuration message gets that outcome, anything else is ``error`` with ``inband_error`` set (the gateway
      retries it as a transient failure; if it persists it is stored as ``error``, never scored);
    - ``refused_by_provider`` for a refusal finish (:func:`is_refusal_finish`), a blocked prompt, a
      ``message.refusal`` or a ``refusal`` content part;
    - ``error`` with ``empty_reply`` set when the reply is empty (no content, no reasoning), the finish is
      length-like and no completion token was generated: the server dropped the prompt; asked once more;
    - ``cut_off`` when the finish reason is length-like (:func:`is_length_finish`), or, where the server sent no
      finish reason, the completion tokens reached ``max_tokens``: the budget ended the reply, so whether its
      final answer was whole cannot be known (a list may stop after two of five items, "Answer: 9" may have been
      going to be "96"), so it earns no credit (``score`` scores it 0, tag ``cut_off``);
    - with a finished reason (:func:`is_finished`, or Ollama's ``done: true``): ``empty_reply`` when no text came
      back although tokens were generated (``content`` null or blank, no reasoning, ``completion_tokens`` > 0, or
      ``content`` null with no count: a reasoning parser that dropped its output), asked once more and never
      scored; else ``ok`` (a reply whose content is empty but whose reasoning field holds it stays ``ok``);
    - ``error`` "not a finished answer: ..." for any other finish reason (``tool_calls``, ``pause_turn``,
      Gemini's ``OTHER``, no finish reason at all, or one ctxbench does not know), and for content parts of no
      kind it reads (an image, a tool call): never scored, named in the run's summary."""
    pt, ct, cached, written = usage_counts(usage)
    if zeros_mean_none and not pt and not ct:
        pt = ct = None
    finish = choice.get("finish_reason")
    parts = read_content(msg.get("content"))
    content = parts.text
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or msg.get("thinking") or parts.reasoning
    if not isinstance(reasoning, (str, type(None))):
        reasoning = read_content(reasoning).text
    refusal = msg.get("refusal")
    refusal = (read_content(refusal).text if not isinstance(refusal, str) else refusal) or parts.refusal
    empty = not (content or "").strip() and not (clean_text(reasoning) or "").strip()
    cost = cost_usd(model, pt, ct, cached, written, batch=batch)

    def result(status: str, error: str | None = None, **kw: Any) -> CallResult:
        return CallResult(status, content, reasoning, pt, ct, None, cost, error=error,
                          cached_prompt_tokens=cached if pt is not None else None,
                          finish_reason=finish_text(finish), **kw)

    bad = inband_error(choice)
    if bad is not None:
        code, text = bad
        shown = finish_text(choice.get("native_finish_reason") or finish)
        err = classify_error(ErrorInfo(code, f"in-band provider error (HTTP 200, finish_reason {finish!r}"
                                             f"{f', native_finish_reason {shown!r}' if shown != finish else ''}): "
                                             f"{text[:1500]}"))
        if isinstance(err, PermanentError) and err.status != "error":
            return result(err.status, str(err), http_status=err.http_status)
        return result("error", f"{err} -- a provider failure inside a 200 answer: retried as a transient failure, "
                               f"stored as error when it persists; never scored", inband_error=True)
    if is_refusal_finish(finish) or choice.get("blocked") or (refusal or "").strip() \
            or (parts.refusal is not None and not (content or "").strip()):
        why = (refusal or "").strip() or f"finish_reason {finish!r}"
        return result("refused_by_provider", f"refused by the provider: {why[:500]}")
    if empty and is_length_finish(finish) and not ct and not msg.get("tool_calls"):
        return result("error", f"empty reply: the server answered 200 with no text, finish_reason {finish!r} and "
                               f"{'0' if ct == 0 else 'no'} completion tokens: it dropped the prompt without "
                               f"generating (e.g. vLLM's 'Input prompt is too long' warning, a server out of KV "
                               f"cache); asked once more, it answered the same. Not scored; the same command asks it "
                               f"again.", empty_reply=True)
    if is_length_finish(finish) or (finish is None and ct is not None and max_tokens and ct >= max_tokens):
        where = "its reasoning" if not (content or "").strip() else "the reply"
        return result("cut_off", f"cut off: the output budget of {max_tokens if max_tokens else '?'} tokens ended "
                                 f"{where} (finish_reason {finish!r}, {ct if ct is not None else '?'} completion "
                                 f"tokens) before it was finished; scored 0 (cut off). Raise the budget with --max-tokens "
                                 f"(or the model's max_output_tokens in assets/models.yaml) and rerun.")
    if is_finished(finish) or (finish is None and choice.get("done") is True):
        if msg.get("tool_calls") and empty:  # a finish that says stop around a tool call: no answer
            return result("error", f"not a finished answer: a tool call (ctxbench sends no tools) with no text, "
                                   f"finish_reason {finish!r}; not scored")
        if parts.other and not (content or "").strip() and empty:
            return result("error", f"not a finished answer: content parts of a kind ctxbench does not read "
                                   f"({', '.join(parts.other)}), finish_reason {finish!r}; not scored")
        if empty and not msg.get("tool_calls") and ((ct or 0) > 0 or msg.get("content") is None):
            n = ct if ct is not None else "an unreported number of"
            return result("empty_reply", f"empty reply: the server generated {n} completion tokens "
                                         f"(finish_reason {finish!r}) but "
                                         f"returned no text and no reasoning (a reasoning parser that dropped its "
                                         f"output, a server fault); asked once more, it answered the same. Not "
                                         f"scored; the same command asks it again.", empty_reply=True)
        return result("ok")
    what = "no finish reason" if finish is None else f"finish_reason {finish_text(finish)!r}"
    why = ("a tool call (ctxbench sends no tools)" if _finish_key(finish) in ("tool_calls", "tool_use",
                                                                               "function_call")
           else "ctxbench does not know whether the reply is finished")
    return result("error", f"not a finished answer: {what}: {why}; stored as error, not scored, named in the "
                           f"run's summary")


def cost_usd(model: str, prompt_tokens: int | None, completion_tokens: int | None, cached_tokens: int = 0,
             written_tokens: int = 0, batch: bool = False) -> float | None:
    """Cost in USD from litellm's price table (:func:`ctxbench.models.pricing.model_prices`): ``cached_tokens`` of
    the prompt at the cached-input price, ``written_tokens`` at the cache-write price, at batch prices with
    ``batch``; None when the price (or a token count) is unknown — never 0 by default."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    try:
        prices = model_prices(model, batch=batch)
        if prices is None:
            return None
        return prices.cost(prompt_tokens, completion_tokens, min(cached_tokens, prompt_tokens),
                           min(written_tokens, prompt_tokens - min(cached_tokens, prompt_tokens)))
    except Exception:  # noqa: BLE001
        return None
