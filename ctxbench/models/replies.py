"""The one reply classifier: every provider reply (a 200 of an OpenAI-compatible server, a litellm response, a line of
a batch's output) becomes a :class:`~ctxbench.core.backend.CallResult` with its status here, and nothing else
reads a reply's fields.

A 200 is ``ok`` only when it is positively a finished answer (:func:`completion_result`: a finish reason in
:data:`FINISHED_FINISH_REASONS` and text); a provider error inside a 200 (``finish_reason: "error"``,
``choices[0].error``) is retried as a transient failure and stored as ``error`` if it persists; tokens generated
with no text returned are ``empty_reply``; any other finish reason is ``error`` "not a finished answer". Reply
shapes read: OpenAI's chat completion (and legacy completion), Anthropic's Messages API, Gemini's
``generateContent``, Ollama's ``/api/chat`` (:func:`reply_parts`), litellm's ``Choices`` (:func:`litellm_choice`).
Failures go through the error table (:mod:`ctxbench.models.errors`). Split out of :mod:`ctxbench.models.gateway`,
which re-exports every name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ctxbench.core.backend import CallResult, clean_text
from ctxbench.core.redact import redact
from ctxbench.models.errors import ErrorInfo, PermanentError, TransientError, classify_error, error_in_body
from ctxbench.models.pricing import model_prices

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


def litellm_result(model: str, response: Any, max_tokens: int | None = None) -> CallResult:
    """The :class:`CallResult` of one ``litellm.acompletion`` response: its first choice through
    :func:`completion_result` (the finish as :func:`litellm_choice` reads it; zeros in usage read as no usage, as
    litellm writes them where the server reported none). A response without choices is read for an error object
    (:func:`~ctxbench.models.errors.error_in_body`) and raised through the error table (TransientError or
    PermanentError)."""
    choices = getattr(response, "choices", None)
    if not choices:  # a body without an answer: an error object where the server sent one
        body = response.model_dump() if hasattr(response, "model_dump") else response
        err = error_in_body(body if isinstance(body, dict) else {})
        raise classify_error(ErrorInfo(err[0] if err else None,
                                       f"no answer in the response: {(err[1] if err else str(body))[:2000]}"))
    choice = choices[0]
    msg = getattr(choice, "message", None)
    return completion_result(model, litellm_choice(choice),
                             {"content": getattr(msg, "content", None),
                              "reasoning_content": getattr(msg, "reasoning_content", None),
                              "reasoning": getattr(msg, "reasoning", None),
                              "refusal": getattr(msg, "refusal", None),
                              "tool_calls": getattr(msg, "tool_calls", None)},
                             getattr(response, "usage", None), zeros_mean_none=True, max_tokens=max_tokens)


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
