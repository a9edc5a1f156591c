"""Reasoning effort as an evaluation axis (issue 25): ``evaluate --reasoning-effort none,low,medium,high`` and
``--thinking-budget N``, mapped to each provider's own request field.

Reasoning models fail needle tests when thinking is on and the output budget is small (issue 25 cites 92.2% with
thinking off against 60.0% with it on at a 2,048-token cap), so how much a model thinks is a factor like context
length. Each provider names it differently; :func:`native_fields` gives the request-body fields of each, in the
shape its API documents:

* **OpenAI** (Chat Completions): ``"reasoning_effort": "low"`` (``none`` for models that accept it, e.g. GPT-5.1);
  OpenAI has no token budget for reasoning, so ``--thinking-budget`` adds nothing there.
* **Anthropic** (Messages, extended thinking): ``"thinking": {"type": "enabled", "budget_tokens": N}``, with
  ``{"type": "disabled"}`` for ``none``. The budget must be at least 1,024 tokens and below ``max_tokens``
  (:func:`check_budget`); thinking is not compatible with a modified temperature, so the temperature is not sent
  while thinking is on.
* **Gemini** (generateContent): ``"generationConfig": {"thinkingConfig": {"thinkingBudget": N}}``, 0 for
  ``none`` (thinking off).
* **vLLM / SGLang / llama.cpp chat templates** (any OpenAI-compatible ``--base-url``):
  ``"chat_template_kwargs": {"enable_thinking": false}`` for ``none`` (true otherwise; Qwen3's template switch),
  and ``"reasoning_effort"`` beside it, which an OpenAI-compatible server reads as OpenAI does.

Budgets for an effort without ``--thinking-budget`` are litellm's defaults for mapping ``reasoning_effort`` to a
budget (``DEFAULT_REASONING_EFFORT_{LOW,MEDIUM,HIGH}_THINKING_BUDGET``: 1,024, 2,048, 4,096 tokens; 0 for none),
so a run through litellm and one through a provider's batch API send the same numbers.

The gateway sends the sampling dict it is given as keyword arguments to ``litellm.acompletion`` or as fields of an
OpenAI-compatible request body, so :func:`apply_effort` puts the fields there (litellm passes OpenAI's
``reasoning_effort`` and Anthropic's ``thinking`` through, and turns ``thinking`` into Gemini's
``thinkingConfig.thinkingBudget``), and the request key, which hashes the sampling dict, holds the effort: runs at
two efforts never share an answer, and a run without one keeps its keys. The stored ``model`` is the name given
on the CLI; :func:`display_model` is the label the report and ``compare`` show (``model@effort``).
"""

from __future__ import annotations

from typing import Any

from ctxbench.core.values import EFFORTS, parse_efforts  # noqa: F401 (defined there, light to import)
from ctxbench.models.providers import request_shape
from ctxbench.models.replies import is_length_finish

# litellm's defaults (litellm.constants DEFAULT_REASONING_EFFORT_*_THINKING_BUDGET), fixed here so that the request
# key does not move with an installed litellm
EFFORT_BUDGETS = {"none": 0, "low": 1024, "medium": 2048, "high": 4096}
ANTHROPIC_MIN_BUDGET = 1024  # Messages API: budget_tokens must be >= 1024 and less than max_tokens
PROVIDERS = ("openai", "anthropic", "gemini", "openai_compatible", "other")


def provider_of(model: str, base_url: str | None = None) -> str:
    """The request shape a call of ``model`` takes: ``anthropic``, ``gemini``, ``openai``, ``openai_compatible``
    (a ``--base-url`` server that is not a provider's own API host) or ``other``
    (:func:`ctxbench.models.providers.request_shape`)."""
    return request_shape(model, base_url)


def budget_of(effort: str | None, thinking_budget: int | None) -> int | None:
    """The reasoning budget in tokens: ``thinking_budget`` where given, else the effort's default
    (:data:`EFFORT_BUDGETS`), None with neither; 0 for ``none`` whatever the budget."""
    if effort == "none":
        return 0
    if thinking_budget is not None:
        return int(thinking_budget)
    return EFFORT_BUDGETS[effort] if effort is not None else None


def native_fields(provider: str, effort: str | None, thinking_budget: int | None = None) -> dict[str, Any]:
    """The fields the provider's own API receives for ``effort`` and ``thinking_budget`` (module docstring), as
    they appear in its request body; ``{}`` with neither."""
    if effort is None and thinking_budget is None:
        return {}
    b = budget_of(effort, thinking_budget)
    if provider == "anthropic":
        return {"thinking": {"type": "disabled"}} if b == 0 else {"thinking": {"type": "enabled", "budget_tokens": b}}
    if provider == "gemini":
        return {"generationConfig": {"thinkingConfig": {"thinkingBudget": b}}}
    if provider == "openai_compatible":
        out: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": b != 0}}
        if effort is not None:
            out["reasoning_effort"] = effort
        return out
    return {"reasoning_effort": effort} if effort is not None else {}


def call_fields(provider: str, effort: str | None, thinking_budget: int | None = None) -> dict[str, Any]:
    """The keyword fields the gateway sends for ``effort``: :func:`native_fields` for OpenAI, Anthropic and
    OpenAI-compatible servers (litellm passes ``reasoning_effort`` and ``thinking`` through as they are), and for
    Gemini the Anthropic-style ``thinking`` that litellm turns into ``generationConfig.thinkingConfig.
    thinkingBudget``."""
    if provider == "gemini" and (effort is not None or thinking_budget is not None):
        b = budget_of(effort, thinking_budget)
        return {"thinking": {"type": "disabled" if b == 0 else "enabled", "budget_tokens": b}}
    return native_fields(provider, effort, thinking_budget)


def check_budget(provider: str, effort: str | None, thinking_budget: int | None, max_tokens: int) -> None:
    """Raise ValueError where the provider would refuse the budget: Anthropic's ``budget_tokens`` below 1,024 or
    not below ``max_tokens`` (the output budget holds the thinking)."""
    b = budget_of(effort, thinking_budget)
    if provider == "anthropic" and b:
        if b < ANTHROPIC_MIN_BUDGET:
            raise ValueError(f"--thinking-budget {b}: Anthropic's thinking budget must be at least "
                             f"{ANTHROPIC_MIN_BUDGET} tokens")
        if b >= max_tokens:
            raise ValueError(f"thinking budget {b} tokens is not below the output budget of {max_tokens} tokens "
                             f"(Anthropic counts thinking in max_tokens): raise --max-tokens or lower "
                             f"--thinking-budget")


def apply_effort(sampling: dict[str, Any], model: str, base_url: str | None, effort: str | None,
                 thinking_budget: int | None = None) -> dict[str, Any]:
    """``sampling`` with the provider's fields for ``effort`` added (:func:`call_fields`); unchanged (the same
    dict) with neither an effort nor a budget, so runs without one keep their request keys. Anthropic with
    thinking on gets no temperature (its API refuses one with thinking)."""
    if effort is None and thinking_budget is None:
        return sampling
    provider = request_shape(model, base_url)
    out = {**sampling, **call_fields(provider, effort, thinking_budget)}
    if provider == "anthropic" and budget_of(effort, thinking_budget):
        out.pop("temperature", None)
    return out


def display_model(model: str, effort: str | None) -> str:
    """The label a report shows: ``model@effort``, or the plain name for a run without an effort."""
    return f"{model}@{effort}" if effort else model


def effort_labels(responses: Any) -> dict[str, str]:
    """request key → reasoning effort of the responses (a pyarrow table or rows) that have one; ``{}`` for a
    table without the column."""
    if hasattr(responses, "column_names"):
        if "reasoning_effort" not in responses.column_names:
            return {}
        rows = responses.select(["request_key", "reasoning_effort"]).to_pylist()
    else:
        rows = responses
    return {r["request_key"]: r["reasoning_effort"] for r in rows if r.get("reasoning_effort")}


def is_cut_off(row: dict) -> bool:
    """Whether a stored reply was cut off by the output budget: status ``cut_off``, or a length-like
    ``finish_reason`` (OpenAI ``length``, Anthropic ``max_tokens``, Gemini ``MAX_TOKENS``) where the table has
    one."""
    return row.get("status") == "cut_off" or is_length_finish(row.get("finish_reason"))
