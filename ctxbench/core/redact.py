"""Credentials out of every text ctxbench prints, stores, logs or sends to Prefect (issue 31: a server whose error
body repeats the ``Authorization`` header had its key printed, stored in ``responses.parquet``'s ``error``, the
report's ``browser/data.js`` and Prefect's database).

:func:`redact` is applied where a failure becomes text: the gateway's error text (:class:`ctxbench.models.gateway
.ErrorInfo`, ``CallResult.error``, the retry and error messages), progress events, every log record
(:func:`install`: a log-record factory, so Prefect's and litellm's handlers see the redacted text), warnings and
the CLI's error line. Every writer downstream (Parquet, cache, report, Prefect artifacts and events) then only
ever sees redacted text.

What is replaced by :data:`MARK`:

* the value of every credential in use: environment variables whose name ends in ``KEY``, ``API_KEY``,
  ``TOKEN``, ``SECRET``, ``PASSWORD`` or ``PASSWD`` (``OPENAI_API_KEY``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``,
  ...), and the values registered by :func:`register` (the gateway registers the key it sends, whatever
  ``--api-key-env`` names, and the password and key parameters of a ``--base-url``); also their URL-encoded and
  JSON-escaped spellings, and a part of one (6 characters or more) cut off at either end of the text;
* whatever stands in a credential's place, known or not: the value of an ``Authorization`` /
  ``Proxy-Authorization`` header or JSON field (after its scheme: ``Bearer [redacted]``), of an ``api-key``,
  ``x-api-key``, ``x-goog-api-key``, ``api_key``, ``apikey``, ``access_token``, ``password`` or ``secret`` field,
  the ``key``, ``api_key``, ``token``, ``access_token``, ``sig`` parameters of a URL, a URL's user information
  (``https://[redacted]@host``), and a token-like word after ``Bearer`` (8 characters or more with a digit).

The short-key rule: a known value shorter than :data:`MIN_LITERAL` (8) characters is replaced only where it
stands in a credential's place (above), never as a bare substring, so a test key such as ``abc`` or ``test`` does
not blank out every ``abc`` and ``test`` of an error message; real keys are far longer (OpenAI 51+, Anthropic
108, Gemini 39 characters).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

MARK = "[redacted]"
MIN_LITERAL = 8   # shorter known values are replaced only in a credential's place (module docstring)
MIN_PART = 6      # the shortest cut-off part of a known value replaced at an end of the text

# environment variables holding a credential, by the end of their name
CREDENTIAL_ENV_RE = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.I)
# values that are never a credential (placeholders, switches)
NOT_SECRET = frozenset({"sk-no-key", "true", "false", "none", "null", "0", "1", "yes", "no", ""})

_registered: set[str] = set()
_lock = threading.Lock()

_HEADER_RE = re.compile(
    r"""(?P<name>\b(?:proxy-)?authorization\b["']?\s*[:=]\s*["']?)(?P<scheme>(?:bearer|basic|token|apikey)\s+)?"""
    r"""(?P<value>(?!\[redacted\])(?!(?:bearer|basic|token|apikey)\s)[^\s"',;}\]]+)""", re.I)
_FIELD_RE = re.compile(
    r"""(?P<name>(?<![\w-])(?:x-api-key|api-key|x-goog-api-key|api_key|apikey|access_token|password|secret)"""
    r"""["']?\s*[:=]\s*["']?)(?P<value>(?!\[redacted\])[^\s"',;&}\]]+)""", re.I)
_URL_PARAM_RE = re.compile(r"(?P<name>[?&](?:key|api_key|api-key|apikey|token|access_token|sig|signature)=)"
                           r"(?P<value>(?!\[redacted\])[^&\s\"'#]+)", re.I)
_USERINFO_RE = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<value>(?!\[redacted\])[^/\s@\"'<>]+)@", re.I)
_BEARER_RE = re.compile(r"(?P<name>\bbearer\s+)(?P<value>(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,})", re.I)


def register(*values: str | None) -> None:
    """Add credential values to redact from now on in this process (a key read from any variable, a password in a
    URL). None, blanks and placeholders (``sk-no-key``) are ignored."""
    with _lock:
        for v in values:
            if v and v.strip() and v.strip().lower() not in NOT_SECRET:
                _registered.add(v.strip())


def register_url(url: str | None) -> None:
    """Register the credentials a URL carries: its user information's password (or a user name alone, as tokens
    are sent) and the values of its ``key``/``token``-like query parameters."""
    if not url:
        return
    try:
        u = urlsplit(url)
    except ValueError:
        return
    register(u.password, u.username if u.password is None else None)
    register(*(v for k, v in parse_qsl(u.query) if _URL_PARAM_RE.match(f"?{k}=x")))


def secret_values() -> list[str]:
    """The credential values known now (registered, and the credential variables of the environment), longest
    first (a key containing another is replaced whole)."""
    with _lock:
        vals = set(_registered)
    for k, v in list(os.environ.items()):
        if CREDENTIAL_ENV_RE.search(k) and v and v.strip().lower() not in NOT_SECRET:
            vals.add(v.strip())
    return sorted(vals, key=lambda s: (-len(s), s))


def _spellings(s: str) -> set[str]:
    out = {s, quote(s, safe=""), json.dumps(s, ensure_ascii=False)[1:-1], json.dumps(s)[1:-1]}
    return {x for x in out if x}


def redact(text: Any) -> Any:
    """``text`` with every credential replaced by :data:`MARK` (the rules in the module docstring); a value that
    is not a string is returned as it is. Never raises."""
    if not isinstance(text, str) or not text:
        return text
    try:
        secrets = secret_values()
        for s in secrets:
            if len(s) < MIN_LITERAL:
                continue
            for sp in _spellings(s):
                if sp in text:
                    text = text.replace(sp, MARK)
            # a part cut off at either end (text truncated before it reached here)
            for k in range(len(s) - 1, MIN_PART - 1, -1):
                if text.endswith(s[:k]):
                    text = text[:-k] + MARK
                    break
            for k in range(len(s) - 1, MIN_PART - 1, -1):
                if text.startswith(s[-k:]):
                    text = MARK + text[k:]
                    break
        short = [re.escape(s) for s in secrets if len(s) < MIN_LITERAL]
        if short:
            text = re.sub(r"(?P<name>\bbearer\s+)(?:" + "|".join(short) + r")(?![\w.~+/=-])",
                          lambda m: m.group("name") + MARK, text, flags=re.I)
        text = _HEADER_RE.sub(lambda m: m.group("name") + (m.group("scheme") or "") + MARK, text)
        text = _FIELD_RE.sub(lambda m: m.group("name") + MARK, text)
        text = _URL_PARAM_RE.sub(lambda m: m.group("name") + MARK, text)
        text = _USERINFO_RE.sub(lambda m: m.group("scheme") + MARK + "@", text)
        text = _BEARER_RE.sub(lambda m: m.group("name") + MARK, text)
        return text
    except Exception:  # noqa: BLE001 - redaction never stops a run; an unredactable text is not shown
        return f"{MARK} (an error text that could not be checked for credentials)"


class RedactingFormatterFilter(logging.Filter):
    """A logging filter that redacts a record's message and its exception text (for handlers set up before
    :func:`install`, or by code that makes records without the factory)."""

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record)
        return True


def _redact_record(record: logging.LogRecord) -> None:
    if getattr(record, "_ctxbench_redacted", False):
        return
    try:
        msg = record.getMessage()
    except Exception:  # noqa: BLE001 - a malformed record keeps its own message
        msg = str(record.msg)
    red = redact(msg)
    if red != msg:
        record.msg, record.args = red, ()
    if record.exc_info and record.exc_info[1] is not None:
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    record._ctxbench_redacted = True


_installed = False


def install() -> None:
    """Redact every log record made from now on in this process (a log-record factory wrapping the current one:
    Prefect's API log handler, litellm's logger and the console all see redacted text), every warning shown and
    an unexpected traceback (``sys.excepthook``). Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    old = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = old(*args, **kwargs)
        _redact_record(record)
        return record

    logging.setLogRecordFactory(factory)
    import warnings

    fmt = warnings.formatwarning

    def formatwarning(message: Any, *args: Any, **kwargs: Any) -> str:
        return redact(fmt(message, *args, **kwargs))

    warnings.formatwarning = formatwarning
    import sys
    import traceback

    hook = sys.excepthook

    def excepthook(kind: Any, value: Any, tb: Any) -> None:  # an unexpected traceback: redacted too
        if hook is not sys.__excepthook__:
            return hook(kind, value, tb)
        sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))

    sys.excepthook = excepthook
