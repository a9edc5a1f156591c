"""Writes tests/data/server_replies.jsonl: the conformance corpus of server replies and errors (issue 21).

Each entry is one HTTP answer as a server family sends it (``family``, ``http_status``, ``headers``, ``body``: a
JSON value, or text sent as it is) with the instance it answers (``benchmark``, ``gold``, ``sql``) and what
ctxbench must make of it, worked out by hand from the issue's rules (docs/replies.md): ``expect.status`` (a stored
status, ``config_error`` or ``transient``), ``expect.finish_reason`` (as sent), ``expect.response`` /
``expect.reasoning`` (the stored texts), ``expect.answer`` (the final answer the answer pipeline takes: null where
the reply is not scored) and ``expect.scores`` (matcher -> credit; null where the reply is not scored; 0 for a
``cut_off`` reply, which earns no credit). ``needs`` names the branch whose answer pipeline the expectation
relies on (i21a: answers from the reasoning field, ruled-out values, lists joined by words, format characters,
Chinese decimals and negatives). The wordings are those the servers' own sources and public bug reports show.

Run ``python tests/data/make_server_replies.py`` to rewrite the file; the test reads the file, not this script.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).with_name("server_replies.jsonl")
ENTRIES: list[dict] = []
I21A = "i21a"


def chat(content, finish="stop", *, reasoning=None, rkey="reasoning_content", pt=900, ct=40, usage_extra=None,
         model="m", msg_extra=None):
    """An OpenAI chat.completion body (every OpenAI-compatible server's shape)."""
    msg = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg[rkey] = reasoning
    msg.update(msg_extra or {})
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}]}
    if pt is not None:
        body["usage"] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct, **(usage_extra or {})}
    return body


def oai_error(message, type_="invalid_request_error", param=None, code=None):
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def add(id_, family, kind, status, body, expect, *, gold=(96,), benchmark="holobench", sql=None, headers=None,
        needs=None):
    e = {"id": id_, "family": family, "kind": kind, "http_status": status, "headers": headers or {}, "body": body,
         "benchmark": benchmark, "gold": [list(gold)] if benchmark == "holobench" else gold, "sql": sql,
         "max_tokens": 256, "expect": expect}
    if needs:
        e["needs"] = needs
    ENTRIES.append(e)


def ok(response, answer, scores, finish="stop", reasoning=None):
    return {"status": "ok", "finish_reason": finish, "response": response, "reasoning": reasoning,
            "answer": answer, "scores": scores}


def cut(response, finish, reasoning=None, matchers=("row_match",)):
    return {"status": "cut_off", "finish_reason": finish, "response": response, "reasoning": reasoning,
            "answer": None, "scores": {m: 0.0 for m in matchers}}


def fail(status, finish=None, response=None):
    return {"status": status, "finish_reason": finish, "response": response, "reasoning": None, "answer": None,
            "scores": None}


STEPS = "Step 1: the table lists the Darius II with 96 points and the Kestrel with 81. "
CUT = STEPS + "Step 2: but first I should check whether"
RIGHT = STEPS + "Step 2: the largest is 96.\nAnswer: 96"
WRONG = STEPS + "Step 2: the smallest is 81.\nAnswer: 81"
ROW1, ROW0 = {"row_match": 1.0}, {"row_match": 0.0}

# -- every OpenAI-compatible family: the same reply kinds in each one's spelling ---------------------------------
COMPAT = ["openai", "azure", "anthropic_proxy", "gemini_openai", "mistral", "deepseek", "vllm", "sglang", "tgi",
          "ollama", "llamacpp", "litellm_proxy"]
LENGTH = {"anthropic_proxy": "max_tokens", "gemini_openai": "length", "mistral": "length"}
for fam in COMPAT:
    add(f"{fam}-ok", fam, "answer", 200, chat(RIGHT), ok(RIGHT, "96", ROW1))
    add(f"{fam}-wrong", fam, "answer", 200, chat(WRONG), ok(WRONG, "81", ROW0))
    fin = LENGTH.get(fam, "length")
    # kind 1: the budget ended the reply after it quoted the gold as evidence: no credit
    add(f"{fam}-cut", fam, "cut_off", 200, chat(CUT, fin, ct=256), cut(CUT, fin))
    # the same cut with no usage at all: the finish reason alone decides
    add(f"{fam}-cut-nousage", fam, "cut_off", 200, chat(CUT, fin, pt=None), cut(CUT, fin))
    add(f"{fam}-unknown-shape", fam, "unrecognised", 200, {"id": "x", "object": "response", "output_text": "96"},
        fail("error"))
    add(f"{fam}-filter", fam, "refusal", 200, chat("", "content_filter", ct=0), fail("refused_by_provider",
                                                                                     "content_filter", ""))

# kind 9: an empty 200 with a length finish and 0 completion tokens (the server dropped the prompt)
for fam in ("vllm", "sglang", "tgi", "llamacpp", "litellm_proxy", "openai"):
    add(f"{fam}-empty-length", fam, "empty_reply", 200, chat("", "length", ct=0), fail("error", "length", ""))
add("vllm-empty-null-length", "vllm", "empty_reply", 200, chat(None, "length", ct=0), fail("error", "length"))

# kind 3: the reply only in the reasoning field, finish stop (a reasoning parser's known bug)
REASONED = "The Darius II has 96 points, the Kestrel 81, so the largest is 96.\nAnswer: 96"
for fam, content, rkey in (("vllm", None, "reasoning_content"), ("vllm", None, "reasoning"),
                           ("sglang", None, "reasoning_content"), ("deepseek", "", "reasoning_content"),
                           ("llamacpp", "", "reasoning_content"), ("litellm_proxy", None, "reasoning_content"),
                           ("openai", None, "reasoning"), ("ollama", "", "reasoning")):
    add(f"{fam}-reasoning-only-{rkey}-{'null' if content is None else 'empty'}", fam, "reasoning_only", 200,
        chat(content, "stop", reasoning=REASONED, rkey=rkey), ok(content, "96", ROW1, reasoning=REASONED),
        needs=I21A)
# a reasoning model's answer in content with its reasoning beside it: the content answers
add("deepseek-reasoner-both", "deepseek", "answer", 200,
    chat("Answer: 96", reasoning="Compare 96 and 81 ... the answer is 81? No, 96.",
         usage_extra={"prompt_cache_hit_tokens": 512, "prompt_cache_miss_tokens": 388}),
    ok("Answer: 96", "96", ROW1, reasoning="Compare 96 and 81 ... the answer is 81? No, 96."))
# a reasoning model whose budget ran out while it reasoned: cut off, the budget blamed
add("deepseek-reasoning-cut", "deepseek", "cut_off", 200, chat("", "length", reasoning="Let me compare 96 and",
                                                               ct=256),
    cut("", "length", reasoning="Let me compare 96 and"))

# -- native (non-OpenAI) shapes -------------------------------------------------------------------------------------
def anthropic(blocks, stop, inp=900, out=40):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": blocks,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": inp, "output_tokens": out}}


add("anthropic-ok", "anthropic", "answer", 200, anthropic([{"type": "text", "text": RIGHT}], "end_turn"),
    ok(RIGHT, "96", ROW1, "end_turn"))
add("anthropic-thinking", "anthropic", "answer", 200,
    anthropic([{"type": "thinking", "thinking": "96 > 81", "signature": "s"}, {"type": "text", "text": "Answer: 96"}],
              "end_turn"), ok("Answer: 96", "96", ROW1, "end_turn", reasoning="96 > 81"))
add("anthropic-cut", "anthropic", "cut_off", 200, anthropic([{"type": "text", "text": CUT}], "max_tokens", out=256),
    cut(CUT, "max_tokens"))
add("anthropic-refusal", "anthropic", "refusal", 200, anthropic([{"type": "text", "text": ""}], "refusal", out=0),
    fail("refused_by_provider", "refusal", ""))
add("anthropic-stop-sequence", "anthropic", "answer", 200,
    anthropic([{"type": "text", "text": "Answer: 96"}], "stop_sequence"), ok("Answer: 96", "96", ROW1,
                                                                              "stop_sequence"))


def gemini(parts, finish, pt=900, ct=40, thoughts=0):
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": pt, "candidatesTokenCount": ct, "totalTokenCount": pt + ct,
                              **({"thoughtsTokenCount": thoughts} if thoughts else {})},
            "modelVersion": "gemini-2.5-flash"}


add("gemini-ok", "gemini", "answer", 200, gemini([{"text": RIGHT}], "STOP"), ok(RIGHT, "96", ROW1, "STOP"))
add("gemini-thought", "gemini", "answer", 200,
    gemini([{"text": "96 beats 81", "thought": True}, {"text": "Answer: 96"}], "STOP", thoughts=12),
    ok("Answer: 96", "96", ROW1, "STOP", reasoning="96 beats 81"))
add("gemini-cut", "gemini", "cut_off", 200, gemini([{"text": CUT}], "MAX_TOKENS", ct=256), cut(CUT, "MAX_TOKENS"))
add("gemini-safety", "gemini", "refusal", 200, gemini([], "SAFETY", ct=0), fail("refused_by_provider", "SAFETY"))
add("gemini-recitation", "gemini", "refusal", 200, gemini([{"text": "The"}], "RECITATION", ct=1),
    fail("refused_by_provider", "RECITATION", "The"))
add("gemini-wrong", "gemini", "answer", 200, gemini([{"text": WRONG}], "STOP"), ok(WRONG, "81", ROW0, "STOP"))


def ollama(content, done_reason, pe=900, ev=40, thinking=None):
    msg = {"role": "assistant", "content": content}
    if thinking is not None:
        msg["thinking"] = thinking
    return {"model": "llama3.1", "created_at": "2025-01-01T00:00:00Z", "message": msg, "done_reason": done_reason,
            "done": True, "total_duration": 1, "prompt_eval_count": pe, "eval_count": ev}


add("ollama-native-ok", "ollama", "answer", 200, ollama(RIGHT, "stop"), ok(RIGHT, "96", ROW1))
add("ollama-native-cut", "ollama", "cut_off", 200, ollama(CUT, "length", ev=256), cut(CUT, "length"))
add("ollama-native-empty", "ollama", "empty_reply", 200, ollama("", "length", ev=0), fail("error", "length", ""))
add("ollama-native-thinking-only", "ollama", "reasoning_only", 200, ollama("", "stop", thinking=REASONED),
    ok("", "96", ROW1, reasoning=REASONED), needs=I21A)

# -- errors in each family's own words and statuses -----------------------------------------------------------------
E = []  # (id, family, kind, status, body, expected outcome, headers)
E += [
    ("openai-ctx", "openai", "over_length", 400, oai_error(
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. "
        "Please reduce the length of the messages.", param="messages", code="context_length_exceeded"), "over_length"),
    ("openai-temperature", "openai", "config", 400, oai_error(
        "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is "
        "supported.", param="temperature", code="unsupported_value"), "config_error"),
    ("openai-max-tokens-param", "openai", "config", 400, oai_error(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
        "instead.", param="max_tokens", code="unsupported_parameter"), "config_error"),
    ("openai-key", "openai", "config", 401, oai_error(
        "Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/"
        "api-keys.", code="invalid_api_key"), "config_error"),
    ("openai-model", "openai", "config", 404, oai_error(
        "The model `gpt-9` does not exist or you do not have access to it.", code="model_not_found"),
     "config_error"),
    ("openai-quota", "openai", "config", 429, oai_error(
        "You exceeded your current quota, please check your plan and billing details.", "insufficient_quota",
        code="insufficient_quota"), "config_error"),
    ("openai-429", "openai", "transient", 429, oai_error(
        "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, "
        "Requested 1500. Please try again in 2s.", "tokens", code="rate_limit_exceeded"), "transient"),
    ("openai-500", "openai", "transient", 500, oai_error("The server had an error while processing your request.",
                                                        "server_error"), "transient"),
    ("openai-unknown-param", "openai", "config", 400, oai_error("Unrecognized request argument supplied: seed"),
     "config_error"),
    ("azure-ctx", "azure", "over_length", 400, oai_error(
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.",
        code="context_length_exceeded"), "over_length"),
    ("azure-filter-400", "azure", "refusal", 400, {"error": {"message": "The response was filtered due to the prompt "
                                                         "triggering Azure OpenAI's content management policy.",
                                                         "type": None, "param": "prompt", "code": "content_filter",
                                                         "status": 400}}, "refused_by_provider"),
    ("azure-deployment", "azure", "config", 404, {"error": {"code": "DeploymentNotFound", "message": "The API "
                                                  "deployment for this resource does not exist."}}, "config_error"),
    ("azure-429", "azure", "transient", 429, {"error": {"code": "429", "message": "Requests to the ChatCompletions_"
                                              "Create Operation have exceeded call rate limit. Please retry after 7 "
                                              "seconds."}}, "transient"),
    ("azure-key", "azure", "config", 401, {"error": {"code": "401", "message": "Access denied due to invalid "
                                           "subscription key or wrong API endpoint."}}, "config_error"),
    ("anthropic-ctx", "anthropic", "over_length", 400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
     "over_length"),
    ("anthropic-overloaded", "anthropic", "transient", 529, {"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}}, "transient"),
    ("anthropic-key", "anthropic", "config", 401, {"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"}}, "config_error"),
    ("anthropic-temperature", "anthropic", "config", 400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "temperature: range: 0..1"}}, "config_error"),
    ("anthropic-proxy-ctx", "anthropic_proxy", "over_length", 400, oai_error(
        "litellm.BadRequestError: AnthropicException - {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_"
        "error\",\"message\":\"prompt is too long: 204312 tokens > 200000 maximum\"}}"), "over_length"),
    ("anthropic-proxy-credit", "anthropic_proxy", "config", 400, oai_error(
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or "
        "purchase credits."), "config_error"),
    ("gemini-ctx", "gemini", "over_length", 400, {"error": {"code": 400, "message": "The input token count "
                                                  "(1200000) exceeds the maximum number of tokens allowed (1048576).",
                                                  "status": "INVALID_ARGUMENT"}}, "over_length"),
    ("gemini-key", "gemini", "config", 400, {"error": {"code": 400, "message": "API key not valid. Please pass a "
                                             "valid API key.", "status": "INVALID_ARGUMENT", "details": [
                                                 {"reason": "API_KEY_INVALID"}]}}, "config_error"),
    ("gemini-model", "gemini", "config", 404, {"error": {"code": 404, "message": "models/gemini-9 is not found for "
                                               "API version v1beta, or is not supported for generateContent.",
                                               "status": "NOT_FOUND"}}, "config_error"),
    ("gemini-429", "gemini", "transient", 429, {"error": {"code": 429, "message": "Resource has been exhausted "
                                                "(e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}, "transient"),
    ("gemini-503", "gemini", "transient", 503, {"error": {"code": 503, "message": "The model is overloaded. Please "
                                                "try again later.", "status": "UNAVAILABLE"}}, "transient"),
    ("gemini-unknown-field", "gemini", "config", 400, {"error": {"code": 400, "message": "Invalid JSON payload "
                                                       "received. Unknown name \"seed\": Cannot find field.",
                                                       "status": "INVALID_ARGUMENT"}}, "config_error"),
    ("mistral-seed", "mistral", "config", 422, {"object": "error", "message": {"detail": [
        {"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted", "input": 0,
         "url": "https://errors.pydantic.dev/2.6/v/extra_forbidden"}]}, "type": "invalid_request_error",
        "param": None, "code": None}, "config_error"),
    ("mistral-ctx", "mistral", "over_length", 400, {"object": "error", "message": "Prompt contains 40012 tokens and "
                                                    "0 draft tokens, too large for model with 32768 maximum context "
                                                    "length", "type": "invalid_request_error", "param": None,
                                                    "code": "3051"}, "over_length"),
    ("mistral-key", "mistral", "config", 401, {"message": "Unauthorized", "request_id": "abc"}, "config_error"),
    ("mistral-429", "mistral", "transient", 429, {"message": "Requests rate limit exceeded"}, "transient"),
    ("mistral-model", "mistral", "config", 400, {"object": "error", "message": "Invalid model: mistral-huge",
                                                 "type": "invalid_model", "param": None, "code": "1500"},
     "config_error"),
    ("deepseek-ctx", "deepseek", "over_length", 400, oai_error(
        "This model's maximum context length is 65536 tokens. However, you requested 70212 tokens (69956 in the "
        "messages, 256 in the completion). Please reduce the length of the messages or completion."),
     "over_length"),
    ("deepseek-balance", "deepseek", "config", 402, oai_error("Insufficient Balance", "unknown_error"),
     "config_error"),
    ("deepseek-busy", "deepseek", "transient", 503, oai_error("Server is busy, please try again later.",
                                                              "server_error"), "transient"),
    ("deepseek-key", "deepseek", "config", 401, oai_error("Authentication Fails, Your api key: ****abcd is invalid",
                                                          "authentication_error", code="invalid_request_error"),
     "config_error"),
    ("vllm-ctx", "vllm", "over_length", 400, {"object": "error", "message": "This model's maximum context length is "
                                              "4096 tokens. However, you requested 5300 tokens (5044 in the messages, "
                                              "256 in the completion). Please reduce the length of the messages or "
                                              "completion.", "type": "BadRequestError", "param": None, "code": 400},
     "over_length"),
    ("vllm-prompt-too-long-500", "vllm", "over_length", 500, {"object": "error", "message": "Input prompt (5300 "
                                                              "tokens) is too long and exceeds limit of 4096",
                                                              "type": "InternalServerError", "param": None,
                                                              "code": 500}, "over_length"),
    ("vllm-prompt-too-long-400", "vllm", "over_length", 400, {"object": "error", "message": "Input prompt (5300 "
                                                              "tokens) is too long and exceeds limit of 4096",
                                                              "type": "BadRequestError", "param": None, "code": 400},
     "over_length"),
    ("vllm-v1-ctx", "vllm", "over_length", 400, {"object": "error", "message": "Prompt length of 5300 is longer than "
                                                 "the maximum model length of 4096.", "type": "BadRequestError",
                                                 "param": None, "code": 400}, "over_length"),
    ("vllm-template", "vllm", "config", 400, {"object": "error", "message": "As of transformers v4.44, default chat "
                                              "template is no longer allowed, so you must provide a chat template if "
                                              "the tokenizer does not define one.", "type": "BadRequestError",
                                              "param": None, "code": 400}, "config_error"),
    ("vllm-template-2", "vllm", "config", 400, {"object": "error", "message": "Cannot use chat template functions "
                                                "because tokenizer.chat_template is not set and no template argument "
                                                "was passed!", "type": "BadRequestError", "param": None,
                                                "code": 400}, "config_error"),
    ("vllm-model", "vllm", "config", 404, {"object": "error", "message": "The model `llama-9` does not exist.",
                                           "type": "NotFoundError", "param": None, "code": 404}, "config_error"),
    ("vllm-503", "vllm", "transient", 503, {"object": "error", "message": "Service Unavailable", "type":
                                            "ServiceUnavailableError", "param": None, "code": 503}, "transient"),
    ("sglang-ctx-200", "sglang", "over_length", 200, {"object": "error", "message": "The input (5300 tokens) is "
                                                      "longer than the model's context length (4096 tokens).",
                                                      "type": "BadRequestError", "param": None, "code": 400},
     "over_length"),
    ("sglang-ctx-400", "sglang", "over_length", 400, {"object": "error", "message": "Input length (5300 tokens) "
                                                      "exceeds the maximum allowed length (4096 tokens). Use a "
                                                      "shorter input or enable --allow-auto-truncate.",
                                                      "type": "BadRequestError", "param": None, "code": 400},
     "over_length"),
    ("sglang-503", "sglang", "transient", 503, {"object": "error", "message": "The server is overloaded",
                                                "type": "ServiceUnavailable", "code": 503}, "transient"),
    ("tgi-ctx", "tgi", "over_length", 422, {"error": "Input validation error: `inputs` tokens + `max_new_tokens` "
                                            "must be <= 4096. Given: 5044 `inputs` tokens and 256 `max_new_tokens`",
                                            "error_type": "validation"}, "over_length"),
    ("tgi-ctx-2", "tgi", "over_length", 422, {"error": "Input validation error: `inputs` must have less than 4000 "
                                              "tokens. Given: 5300", "error_type": "validation"}, "over_length"),
    ("tgi-overloaded", "tgi", "transient", 429, {"error": "Model is overloaded", "error_type": "overloaded"},
     "transient"),
    ("tgi-budget", "tgi", "config", 422, {"error": "Input validation error: `max_new_tokens` must be <= 2048. Given: "
                                          "4096", "error_type": "validation"}, "config_error"),
    ("ollama-model", "ollama", "config", 404, {"error": "model \"llama3:70b\" not found, try pulling it first"},
     "config_error"),
    ("ollama-ctx", "ollama", "over_length", 400, {"error": "the input length exceeds the context length"},
     "over_length"),
    ("ollama-ctx-500", "ollama", "over_length", 500, {"error": "input exceeds context length"}, "over_length"),
    ("ollama-500", "ollama", "transient", 500, {"error": "llama runner process has terminated: signal: killed"},
     "transient"),
    ("llamacpp-ctx", "llamacpp", "over_length", 400, {"error": {"code": 400, "message": "the request exceeds the "
                                                      "available context size, try increasing it", "type":
                                                      "exceed_context_size_error", "n_prompt_tokens": 5300,
                                                      "n_ctx": 4096}}, "over_length"),
    ("llamacpp-ctx-500", "llamacpp", "over_length", 500, {"error": {"code": 500, "message": "Context size has been "
                                                          "exceeded.", "type": "server_error"}}, "over_length"),
    ("llamacpp-loading", "llamacpp", "transient", 503, {"error": {"code": 503, "message": "Loading model", "type":
                                                        "unavailable_error"}}, "transient"),
    ("llamacpp-template", "llamacpp", "config", 400, {"error": {"code": 400, "message": "this custom template is "
                                                      "not supported, try using --jinja; chat_template error",
                                                      "type": "invalid_request_error"}}, "config_error"),
    ("litellm-invalid-model", "litellm_proxy", "config", 400, {"error": {
        "message": "/chat/completions: Invalid model name passed in model=gpt-9. Call `/v1/models` to view "
                   "available models for your key.", "type": "None", "param": "None", "code": "400"}},
     "config_error"),
    ("litellm-auth", "litellm_proxy", "config", 401, {"error": {
        "message": "Authentication Error, Invalid proxy server token passed. Received API Key = sk-...abcd",
        "type": "auth_error", "param": "None", "code": "401"}}, "config_error"),
    ("litellm-ctx", "litellm_proxy", "over_length", 400, {"error": {
        "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: "
                   "OpenAIException - This model's maximum context length is 8192 tokens.",
        "type": None, "param": None, "code": "400"}}, "over_length"),
    ("litellm-missing-key", "litellm_proxy", "config", 500, {"error": {
        "message": "litellm.APIError: APIError: OpenAIException - The api_key client option must be set either by "
                   "passing api_key to the client or by setting the OPENAI_API_KEY environment variable",
        "type": None, "param": None, "code": "500"}}, "config_error"),
    ("litellm-429", "litellm_proxy", "transient", 429, {"error": {
        "message": "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached",
        "type": "throttling_error", "param": None, "code": "429"}}, "transient"),
    ("litellm-param", "litellm_proxy", "config", 400, {"error": {
        "message": "litellm.UnsupportedParamsError: openai does not support parameters: ['seed'], for model=o1. To "
                   "drop these, set `litellm.drop_params=True`.", "type": None, "param": None, "code": "400"}},
     "config_error"),
]
for id_, fam, kind, st, body, outcome in E:
    add(id_, fam, kind, st, body, fail(outcome))
add("openai-retry-after", "openai", "transient", 503, oai_error("The engine is currently overloaded.", "server_error"),
    fail("transient"), headers={"Retry-After": "2"})
add("proxy-html-502", "litellm_proxy", "transient", 502, "<html><body>502 Bad Gateway</body></html>",
    fail("transient"))
add("proxy-not-json-200", "litellm_proxy", "transient", 200, "upstream connect error or disconnect/reset before "
    "headers", fail("transient"))

# -- answer-side kinds (the answer pipeline: issue 21 kinds 4, 5, 10, 11), in several families' shapes ------------
S = "SELECT name FROM authors"
add("openai-negation", "openai", "negation", 200, chat("Step 1: 17 rows.\nAnswer: 17 (not 42)"),
    ok("Step 1: 17 rows.\nAnswer: 17 (not 42)", "17", ROW0), gold=(42,), needs=I21A)
add("openai-negation-asserted", "openai", "negation", 200, chat("Answer: 17 (not 42)"),
    ok("Answer: 17 (not 42)", "17", ROW1), gold=(17,), needs=I21A)
add("mistral-rather-than", "mistral", "negation", 200, chat("Answer: 17, rather than 42"),
    ok("Answer: 17, rather than 42", "17", ROW0), gold=(42,), needs=I21A)
add("deepseek-zh-negation", "deepseek", "negation", 200, chat("答案：六十（而非七十三）"),
    ok("答案：六十（而非七十三）", "六十", {"substring": 0.0}), benchmark="needles", gold=["七十三"], needs=I21A)
add("anthropic-proxy-and-list", "anthropic_proxy", "list", 200, chat("Answer: John Smith and Jane Doe"),
    ok("Answer: John Smith and Jane Doe", "John Smith and Jane Doe", {"exact_match": 1.0, "f1": 1.0}),
    benchmark="scitrek", gold=[["John Smith"], ["Jane Doe"]], sql=S, needs=I21A)
add("mistral-oxford-list", "mistral", "list", 200, chat("Answer: Ada Byron, Alan Turing and Grace Hopper"),
    ok("Answer: Ada Byron, Alan Turing and Grace Hopper", "Ada Byron, Alan Turing and Grace Hopper",
       {"exact_match": 1.0, "f1": 1.0}), benchmark="scitrek", gold=[["Ada Byron"], ["Alan Turing"], ["Grace Hopper"]],
    sql=S, needs=I21A)
add("openai-comma-list", "openai", "list", 200, chat("Answer: Ada Byron, Alan Turing, and Grace Hopper"),
    ok("Answer: Ada Byron, Alan Turing, and Grace Hopper", "Ada Byron, Alan Turing, and Grace Hopper",
       {"exact_match": 1.0, "f1": 1.0}), benchmark="scitrek", gold=[["Ada Byron"], ["Alan Turing"], ["Grace Hopper"]],
    sql=S)
add("gemini-openai-ampersand-list", "gemini_openai", "list", 200, chat("Answer: John Smith & Jane Doe"),
    ok("Answer: John Smith & Jane Doe", "John Smith & Jane Doe", {"exact_match": 1.0, "f1": 1.0}),
    benchmark="scitrek", gold=[["John Smith"], ["Jane Doe"]], sql=S, needs=I21A)
add("vllm-zero-width", "vllm", "format_chars", 200, chat("Answer: 61\u200b"),
    ok("Answer: 61\u200b", "61", ROW1), gold=(61,), needs=I21A)
add("sglang-zero-width-inside", "sglang", "format_chars", 200, chat("Answer: 6\u200b1"),
    ok("Answer: 6\u200b1", "61", ROW1), gold=(61,), needs=I21A)
add("llamacpp-soft-hyphen", "llamacpp", "format_chars", 200, chat("Answer: 6\u00ad1"),
    ok("Answer: 6\u00ad1", "61", ROW1), gold=(61,), needs=I21A)
add("ollama-zh-decimal", "ollama", "zh_numeral", 200, chat("答案：三点五"),
    ok("答案：三点五", "三点五", {"substring": 0.0}), benchmark="needles", gold=["三"], needs=I21A)
add("llamacpp-zh-negative", "llamacpp", "zh_numeral", 200, chat("答案：负十二"),
    ok("答案：负十二", "负十二", {"substring": 0.0}), benchmark="needles", gold=["十二"], needs=I21A)
add("tgi-zh-plain", "tgi", "zh_numeral", 200, chat("答案：十二"),
    ok("答案：十二", "十二", {"substring": 1.0}), benchmark="needles", gold=["十二"])
add("litellm-think-block", "litellm_proxy", "answer", 200, chat("<think>81 or 96? 96.</think>\nAnswer: 96"),
    ok("<think>81 or 96? 96.</think>\nAnswer: 96", "96", ROW1))


# -- issue 30: a reply is ok only when it is positively a finished answer ---------------------------------------
def choice_extra(body, **extra):
    """``body`` with fields added to its ``choices[0]`` (OpenRouter's ``native_finish_reason`` and ``error``)."""
    body["choices"][0].update(extra)
    return body


PARTIAL = STEPS + "Step 2: the largest is 96.\nAnswer: 96"  # a partial reply that happens to end on the gold
# kind 1: an in-band provider failure on a 200 (OpenRouter's documented shape: finish_reason "error" with
# native_finish_reason and a choices[0].error object {code, message}); retried, stored as error, never scored
add("openrouter-error-partial", "openrouter", "inband_error", 200,
    choice_extra(chat(PARTIAL, "error"), native_finish_reason="error",
                 error={"code": 502, "message": "Upstream provider error: connection reset by peer"}),
    fail("error", "error", PARTIAL))
add("openrouter-error-empty", "openrouter", "inband_error", 200,
    choice_extra(chat("", "error", ct=0), native_finish_reason="error",
                 error={"code": 500, "message": "Provider returned error", "metadata": {"provider_name": "X"}}),
    fail("error", "error", ""))
add("openrouter-native-error", "openrouter", "inband_error", 200,
    choice_extra(chat("Answer: 96", "stop"), native_finish_reason="error"), fail("error", "stop", "Answer: 96"))
add("openrouter-choice-error-stop", "openrouter", "inband_error", 200,
    choice_extra(chat("Answer: 9", "stop"), error={"code": 502, "message": "stream interrupted"}),
    fail("error", "stop", "Answer: 9"))
add("openrouter-error-rate-limit", "openrouter", "inband_error", 200,
    choice_extra(chat("", "error", ct=0), error={"code": 429, "message": "Rate limit exceeded upstream"}),
    fail("error", "error", ""))
add("openrouter-error-ctx", "openrouter", "over_length", 200,
    choice_extra(chat(None, "error", ct=0), error={"code": 400, "message": "This endpoint's maximum context length "
                                                   "is 131072 tokens. However, you requested about 140212 tokens."}),
    fail("over_length", "error"))
add("openrouter-error-moderation", "openrouter", "refusal", 200,
    choice_extra(chat(None, "error", ct=0), error={"code": 403, "message": "Your input was flagged by the content "
                                                   "moderation: violates our usage policies"}),
    fail("refused_by_provider", "error"))
add("openrouter-ok-native-end-turn", "openrouter", "answer", 200,
    choice_extra(chat(RIGHT, "stop"), native_finish_reason="end_turn"), ok(RIGHT, "96", ROW1))
add("openrouter-cut-native", "openrouter", "cut_off", 200,
    choice_extra(chat(CUT, "length", ct=256), native_finish_reason="MAX_TOKENS"), cut(CUT, "length"))
add("vllm-abort", "vllm", "inband_error", 200, chat("Step 1:", "abort", ct=3), fail("error", "abort", "Step 1:"))
add("litellm-cohere-error", "litellm_proxy", "inband_error", 200, chat("Answer: 96", "ERROR"),
    fail("error", "ERROR", "Answer: 96"))
add("zhipu-network-error", "litellm_proxy", "inband_error", 200, chat("Answer: 9", "network_error"),
    fail("error", "network_error", "Answer: 9"))

# kind 2: tokens generated, nothing returned (a reasoning parser that dropped its output): empty_reply, asked once
# more, never scored
add("vllm-null-stop-tokens", "vllm", "empty_reply", 200, chat(None, "stop", ct=734), fail("empty_reply", "stop"))
add("sglang-empty-stop-tokens", "sglang", "empty_reply", 200, chat("", "stop", ct=512),
    fail("empty_reply", "stop", ""))
add("deepseek-null-stop-tokens", "deepseek", "empty_reply", 200, chat(None, "stop", ct=300),
    fail("empty_reply", "stop"))
add("llamacpp-blank-stop-tokens", "llamacpp", "empty_reply", 200, chat("\n\n", "stop", ct=12),
    fail("empty_reply", "stop", "\n\n"))
add("ollama-native-empty-stop", "ollama", "empty_reply", 200, ollama("", "stop", ev=200),
    fail("empty_reply", "stop", ""))
add("anthropic-no-blocks", "anthropic", "empty_reply", 200, anthropic([], "end_turn", out=88),
    fail("empty_reply", "end_turn"))
add("gemini-thoughts-no-parts", "gemini", "empty_reply", 200, gemini([], "STOP", ct=0, thoughts=512),
    fail("empty_reply", "STOP"))
add("gemini-empty-candidate-stop", "gemini", "empty_reply", 200,
    {"candidates": [{"finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 900,
                                                                            "totalTokenCount": 900}},
    fail("empty_reply", "STOP"))
add("together-null-eos", "together", "empty_reply", 200, chat(None, "eos", ct=100), fail("empty_reply", "eos"))

# kind 4: OpenAI refusals (message.refusal, a refusal content part) and content given as parts, read part by part
add("openai-refusal-field", "openai", "refusal", 200,
    chat(None, "stop", ct=9, msg_extra={"refusal": "I'm sorry, I can't help with that."}),
    fail("refused_by_provider", "stop"))
add("openai-refusal-part", "openai", "refusal", 200,
    chat([{"type": "refusal", "refusal": "I can't assist with that request."}], "stop", ct=8),
    fail("refused_by_provider", "stop"))
add("azure-text-and-refusal-parts", "azure", "refusal", 200,
    chat([{"type": "text", "text": "Answer: 96"}, {"type": "refusal", "refusal": "Part withheld."}], "stop"),
    fail("refused_by_provider", "stop", "Answer: 96"))
add("openai-text-parts", "openai", "content_parts", 200,
    chat([{"type": "text", "text": "Step 1: 96 > 81.\n"}, {"type": "text", "text": "Answer: 96"}], "stop"),
    ok("Step 1: 96 > 81.\nAnswer: 96", "96", ROW1))
add("litellm-output-text-part", "litellm_proxy", "content_parts", 200,
    chat([{"type": "output_text", "text": "Answer: 96", "annotations": []}], "stop"), ok("Answer: 96", "96", ROW1))
add("mistral-magistral-thinking-parts", "mistral", "content_parts", 200,
    chat([{"type": "thinking", "thinking": [{"type": "text", "text": "96 beats 81"}]},
          {"type": "text", "text": "Answer: 96"}], "stop"),
    ok("Answer: 96", "96", ROW1, reasoning="96 beats 81"))
add("anthropic-proxy-thinking-parts", "anthropic_proxy", "content_parts", 200,
    chat([{"type": "thinking", "thinking": "96 > 81", "signature": "sig"}, {"type": "text", "text": "Answer: 96"}],
         "stop"), ok("Answer: 96", "96", ROW1, reasoning="96 > 81"))
add("openai-image-part-only", "openai", "unfinished", 200,
    chat([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}], "stop"),
    fail("error", "stop"))
add("gemini-prompt-blocked", "gemini", "refusal", 200,
    {"promptFeedback": {"blockReason": "OTHER"}, "usageMetadata": {"promptTokenCount": 900, "totalTokenCount": 900}},
    fail("refused_by_provider", "OTHER"))

# the structural rule: a finish reason that does not mean a finished answer is no answer (never ok), named
add("openai-tool-calls", "openai", "unfinished", 200,
    chat(None, "tool_calls", msg_extra={"tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "lookup", "arguments": "{}"}}]}), fail("error", "tool_calls"))
add("anthropic-tool-use", "anthropic", "unfinished", 200,
    anthropic([{"type": "text", "text": "Let me look"}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}],
              "tool_use"), fail("error", "tool_use", "Let me look"))
add("anthropic-pause-turn", "anthropic", "unfinished", 200, anthropic([{"type": "text", "text": "Answer: 9"}],
                                                                      "pause_turn"),
    fail("error", "pause_turn", "Answer: 9"))
add("anthropic-window-exceeded", "anthropic", "cut_off", 200,
    anthropic([{"type": "text", "text": CUT}], "model_context_window_exceeded", out=256),
    cut(CUT, "model_context_window_exceeded"))
add("gemini-other", "gemini", "unfinished", 200, gemini([{"text": "Answer: 96"}], "OTHER"),
    fail("error", "OTHER", "Answer: 96"))
add("gemini-unspecified", "gemini", "unfinished", 200, gemini([{"text": "Answer: 96"}], "FINISH_REASON_UNSPECIFIED"),
    fail("error", "FINISH_REASON_UNSPECIFIED", "Answer: 96"))
add("gemini-malformed-call", "gemini", "unfinished", 200, gemini([{"text": "Answer: 9"}], "MALFORMED_FUNCTION_CALL"),
    fail("error", "MALFORMED_FUNCTION_CALL", "Answer: 9"))
add("proxy-no-finish", "litellm_proxy", "unfinished", 200, chat("Answer: 96", None), fail("error", None,
                                                                                         "Answer: 96"))
add("proxy-unknown-finish", "litellm_proxy", "unfinished", 200, chat("Answer: 96", "completed_partially"),
    fail("error", "completed_partially", "Answer: 96"))
add("together-eos", "together", "answer", 200, chat(RIGHT, "eos"), ok(RIGHT, "96", ROW1, "eos"))
add("tgi-eos-token", "tgi", "answer", 200, chat(RIGHT, "eos_token"), ok(RIGHT, "96", ROW1, "eos_token"))

# kind 8: context overflow in more servers' words, as a 500, a 400 and a 200 error body: over_length after one call
DECODER = "decoder prompt of 5300 tokens is longer than the model's maximum length of 4096"
for st in (500, 400, 200):
    add(f"vllm-decoder-prompt-{st}", "vllm", "over_length", st,
        {"object": "error", "message": DECODER, "type": "InternalServerError" if st == 500 else "BadRequestError",
         "param": None, "code": st if st != 200 else 400}, fail("over_length"))
add("vllm-v1-decoder-plus-output", "vllm", "over_length", 400,
    {"object": "error", "message": "The decoder prompt (length 4096) plus the number of requested output tokens (at "
     "least 1) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the "
     "number of text tokens (prompt + requested output tokens).", "type": "BadRequestError", "param": None,
     "code": 400}, fail("over_length"))
add("vllm-max-tokens-over-window", "vllm", "over_length", 400,
    {"object": "error", "message": "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum "
     "context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
     "type": "BadRequestError", "param": None, "code": 400}, fail("over_length"))
add("together-input-longer", "together", "over_length", 400,
    oai_error("The input (250000 tokens) is longer than the model's context length (200000 tokens).",
              code="invalid_request_error"), fail("over_length"))
add("openai-configured-limit", "openai", "over_length", 400,
    oai_error("Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 509178 tokens. "
              "Please reduce the length of the messages.", param="messages", code="context_length_exceeded"),
    fail("over_length"))
add("openai-string-too-long", "openai", "over_length", 400,
    oai_error("Invalid 'messages[1].content': string too long. Expected a string with maximum length 10485760, but "
              "got a string with length 12000000 instead.", param="messages[1].content", code="string_above_max_length"),
    fail("over_length"))
add("sglang-requested-token-count", "sglang", "over_length", 400,
    {"object": "error", "message": "Requested token count exceeds the model's maximum context length of 32768 "
     "tokens. You requested a total of 40100 tokens.", "type": "BadRequestError", "param": None, "code": 400},
    fail("over_length"))

# -- issue 30, answer-side kinds (withdrawn answers, dates and times, inline lists, decimal commas, LaTeX titles) ------
# expectations by hand: the last answer the reply asserts is scored; a date or time compares as one; an inline
# numbered list is a list; "1,23" is one number (1.23); gold and reply pass through the same LaTeX normalisation
NAPA = "Answer: 42\n\nWait, I miscounted the Napa rows. Final answer: 17"
add("openai-withdrawn-final", "openai", "withdrawn", 200, chat(NAPA), ok(NAPA, "17", ROW0), gold=(42,))
add("vllm-withdrawn-final-17", "vllm", "withdrawn", 200, chat(NAPA), ok(NAPA, "17", ROW1), gold=(17,))
add("deepseek-withdrawn-actually", "deepseek", "withdrawn", 200,
    chat("Answer: 42. Actually, 17.", reasoning="42? recount: 17"),
    ok("Answer: 42. Actually, 17.", "17.", ROW1, reasoning="42? recount: 17"), gold=(17,))
add("sglang-withdrawn-strike", "sglang", "withdrawn", 200, chat("Answer: ~~42~~ 17"),
    ok("Answer: ~~42~~ 17", "17", ROW0), gold=(42,))
add("ollama-withdrawn-zh", "ollama", "withdrawn", 200, chat("答案：六十。不对，应为七十三。"),
    ok("答案：六十。不对，应为七十三。", "七十三。", {"substring": 0.0}), benchmark="needles", gold=["六十"])
add("llamacpp-withdrawn-zh-right", "llamacpp", "withdrawn", 200, chat("答案：六十。不对，应为七十三。"),
    ok("答案：六十。不对，应为七十三。", "七十三。", {"substring": 1.0}), benchmark="needles", gold=["七十三"])
add("mistral-withdrawn-list", "mistral", "withdrawn", 200,
    chat("Answer: Ada Byron, Alan Turing\n\nWait, Turing is not listed. Final answer: Ada Byron, Grace Hopper"),
    ok("Answer: Ada Byron, Alan Turing\n\nWait, Turing is not listed. Final answer: Ada Byron, Grace Hopper",
       "Ada Byron, Grace Hopper", {"exact_match": 1.0, "f1": 1.0}), benchmark="scitrek",
    gold=[["Ada Byron"], ["Grace Hopper"]], sql=S)
add("tgi-wait-mentioned", "tgi", "withdrawn", 200, chat("Answer: 42\n\nNote: wait times were excluded."),
    ok("Answer: 42\n\nNote: wait times were excluded.", "42", ROW1), gold=(42,))
add("azure-date-words", "azure", "date_time", 200, chat("Answer: April 1, 2004"),
    ok("Answer: April 1, 2004", "April 1, 2004", ROW1), gold=("2004-04-01 00:00:00",))
add("gemini-openai-date-iso", "gemini_openai", "date_time", 200, chat("Answer: 2004-04-01"),
    ok("Answer: 2004-04-01", "2004-04-01", {"exact_match": 1.0, "f1": 1.0}), benchmark="scitrek",
    gold=[["2004-04-01 00:00:00"]], sql=S)
add("ollama-date-zh", "ollama", "date_time", 200, chat("答案：2004年4月1日"),
    ok("答案：2004年4月1日", "2004年4月1日", {"substring": 1.0}), benchmark="needles", gold=["2004-04-01"])
add("vllm-date-other-day", "vllm", "date_time", 200, chat("Answer: 1 April 2005"),
    ok("Answer: 1 April 2005", "1 April 2005", ROW0), gold=("2004-04-01 00:00:00",))
add("openai-time-12h", "openai", "date_time", 200, chat("Answer: 08:00"),
    ok("Answer: 08:00", "08:00", ROW1), gold=("8:00 AM",))
add("litellm-time-pm", "litellm_proxy", "date_time", 200, chat("Answer: 8:00 PM"),
    ok("Answer: 8:00 PM", "8:00 PM", ROW0), gold=("08:00",))
add("anthropic-proxy-inline-list", "anthropic_proxy", "inline_list", 200, chat("1. John Smith 2. Jane Doe"),
    ok("1. John Smith 2. Jane Doe", "1. John Smith 2. Jane Doe", {"exact_match": 1.0, "f1": 1.0}),
    benchmark="scitrek", gold=[["John Smith"], ["Jane Doe"]], sql=S)
add("sglang-inline-list-parens", "sglang", "inline_list", 200, chat("Answer: (1) John Smith (2) Jane Doe"),
    ok("Answer: (1) John Smith (2) Jane Doe", "(1) John Smith (2) Jane Doe", {"exact_match": 1.0, "f1": 1.0}),
    benchmark="scitrek", gold=[["John Smith"], ["Jane Doe"]], sql=S)
add("vllm-inline-list-markers", "vllm", "inline_list", 200, chat("Answer: 1. 5 2. 7"),
    ok("Answer: 1. 5 2. 7", "1. 5 2. 7", ROW0), gold=(2,))
add("deepseek-decimal-comma", "deepseek", "decimal_comma", 200, chat("Answer: 1,23"),
    ok("Answer: 1,23", "1,23", ROW0), gold=(23,))
add("mistral-decimal-comma-scitrek", "mistral", "decimal_comma", 200, chat("Answer: 1,23"),
    ok("Answer: 1,23", "1,23", {"exact_match": 0.0, "f1": 0.0}), benchmark="scitrek", gold=[[23]], sql=S)
add("llamacpp-decimal-comma-value", "llamacpp", "decimal_comma", 200, chat("Answer: 1,23"),
    ok("Answer: 1,23", "1,23", ROW1), gold=(1.23,))
add("openai-latex-title", "openai", "latex", 200, chat(r"Answer: On $\alpha$-stable processes and \text{SAT}"),
    ok(r"Answer: On $\alpha$-stable processes and \text{SAT}", r"On \alpha-stable processes and SAT",
       {"exact_match": 1.0, "f1": 1.0}), benchmark="scitrek",
    gold=[[r"On $\alpha$-stable processes and \text{SAT}"]], sql=S)
add("azure-latex-title-row", "azure", "latex", 200, chat(r"Answer: The \textbf{Bold} Way"),
    ok(r"Answer: The \textbf{Bold} Way", "The Bold Way", ROW1), gold=(r"The \textbf{Bold} Way",))


def main() -> None:
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids)), "duplicate ids"
    OUT.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in ENTRIES), encoding="utf-8")
    print(f"{len(ENTRIES)} entries, {len({e['family'] for e in ENTRIES})} families -> {OUT}")


if __name__ == "__main__":
    main()
