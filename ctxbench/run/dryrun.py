"""``evaluate --dry-run``: calls, input and output tokens and estimated cost before anything is spent.

Costs (litellm's price table through :mod:`ctxbench.models.pricing`) are given four ways: without prompt caching,
with cached input, and both through the provider's batch API (``evaluate --batch``). Cached input: requests on one
context share the prompt up to the end of the document (:func:`ctxbench.models.prompts.shared_prefix`; evaluate runs the
first call of each context before the others, so they find it cached). The first pending call of each prefix pays
for it in full (at the cache-write price where the provider bills writes: Anthropic, whose requests carry the
``cache_control`` hint), each later one reads it at the cached-input price; a prefix shorter than the provider's
``cache_min_tokens`` is never cached, and a provider without a cached-input price caches nothing.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from pathlib import Path

from ctxbench.core.errors import EmptySelection
from ctxbench.run.evaluate import EvalConfig, plan_requests
from ctxbench.models.cache import ResponseCache
from ctxbench.models.pricing import Prices, cache_min_tokens, model_prices
from ctxbench.models.registry import model_info
from ctxbench.models.prompts import messages_text, shared_prefix, takes_cache_hint
from ctxbench.run.spend import ESTIMATE_MARGIN, Ledger, cap_prices
from ctxbench.tokenizers import get_tokenizer


@dataclass
class CallTokens:
    """Tokens of one planned call: ``prompt`` in all, ``prefix`` of them shared with the other calls on its
    context (``prefix_id`` names the prefix), ``output`` its output budget."""

    prompt: int
    prefix: int
    prefix_id: str
    output: int


def cached_costs(calls: list[CallTokens], prices: Prices, min_prefix: int, hinted: bool) -> tuple[float, float]:
    """``(cost without prompt caching, cost with cached input)`` in USD of ``calls`` in the order they are made:
    the first call of each prefix writes it (``cache_write`` price where the provider bills writes), later ones read
    it (``cache_read``); prefixes under ``min_prefix`` tokens, a provider without a ``cache_read`` price, and a
    provider that bills writes when the messages carry no cache hint (``hinted`` False) cache nothing."""
    plain = sum(prices.cost(c.prompt, c.output) for c in calls)
    caches = prices.cache_read is not None and (hinted or prices.cache_write is None)
    seen: set[str] = set()
    with_cache = 0.0
    for c in calls:
        if not caches or c.prefix < min_prefix:
            with_cache += prices.cost(c.prompt, c.output)
        elif c.prefix_id in seen:
            with_cache += prices.cost(c.prompt, c.output, cached_tokens=c.prefix)
        else:
            seen.add(c.prefix_id)
            with_cache += prices.cost(c.prompt, c.output, written_tokens=c.prefix if hinted else 0)
    return plain, with_cache


def estimate(build: str | Path, cfg: EvalConfig) -> dict:
    """What ``evaluate`` with ``cfg`` would do on the build, without calling: ``calls`` (requests not yet stored),
    those whose answer the response cache holds (free), the calls to make, those over the model's window (not
    made), their input tokens (the model's tokenizer where registered, else cl100k_base, marked as estimated) and
    the part of them that repeats a context prefix, the output budget, and the cost as four figures (module
    docstring); "unknown" where litellm has no price."""
    info = model_info(cfg.model)

    tokname = info.tokenizer if info.tokenizer and info.tokenizer != "local-server" else "cl100k_base"
    tok = get_tokenizer(tokname)
    plan = plan_requests(Path(build), cfg, ResponseCache())  # the very requests (and keys) evaluate would make
    if plan.selected == 0:  # the same refusal as evaluate: a dry run of nothing must not look like a free run
        raise EmptySelection(str(plan.empty_reason))
    max_tokens = plan.max_tokens
    todo = sorted((t for t in plan.pending if not t.get("_hit")), key=lambda t: (t["_ctx"], t["sample"]))
    counted: dict[int, tuple[int, int]] = {}
    calls: list[CallTokens] = []
    over = 0
    limit = int(info.window * (1 - info.safety_margin)) - max_tokens if info.window else None
    for t in todo:
        msgs = t["_messages"]
        if id(msgs) not in counted:  # samples of one instance share their messages object: count it once
            counted[id(msgs)] = (tok.count(messages_text(msgs)), tok.count(shared_prefix(msgs, t["_context"])))
        n, p = counted[id(msgs)]
        if limit is not None and n > limit:
            over += 1  # evaluate's pre-check stores these as over_length without a call
            continue
        calls.append(CallTokens(n, p, t["_prefix"], max_tokens))
    adaptive = None
    if cfg.adaptive_calls is not None:  # the selector picks as answers come in: the longest calls it may make
        left = max(0, cfg.adaptive_calls - len(plan.stored))  # stored calls count towards N, as in evaluate
        adaptive = f"at most {min(left, len(calls))} (--adaptive-calls {cfg.adaptive_calls}, {len(plan.stored)} " \
                   f"stored; picked as answers come in: the tokens and costs below are those of the longest)"
        if len(calls) > left:
            keep = set(sorted(range(len(calls)), key=lambda i: -calls[i].prompt)[:left])
            calls = [c for i, c in enumerate(calls) if i in keep]
    repeat, seen = 0, set()
    for c in calls:
        if c.prefix_id in seen:
            repeat += c.prefix
        seen.add(c.prefix_id)
    est = "" if tokname == info.tokenizer else ", estimated"
    out = {"calls": len(plan.todo), "already in the response cache (free)": len(plan.todo) - len(todo),
           "calls to make": adaptive or len(calls), "over the model's window (not called)": over,
           "input tokens": f"{sum(c.prompt for c in calls):,} ({tokname}{est})",
           "input tokens repeating a context prefix (cacheable)": f"{repeat:,}",
           "output tokens (upper bound)": f"{sum(c.output for c in calls):,}"}
    repl = sum(1 for t in todo if t["mode"] == "repl")
    if repl:  # a REPL answer's turns and sub-calls depend on the model's code: only its first turn is counted
        out["--mode repl answers (first turn counted only)"] = (
            f"{repl}: each makes at least one root call, and up to --max-steps {cfg.repl.max_steps} plus its "
            f"llm_query sub-calls; bound the spend with --max-cost or --repl-max-cost")
    hinted, min_prefix = takes_cache_hint(cfg.model), cache_min_tokens(cfg.model)
    for label, batch in (("", False), (" through the batch API (--batch)", True)):
        prices = model_prices(cfg.model, batch=batch)
        if prices is None:
            why = "no batch price or batch discount for this provider" if batch and model_prices(cfg.model) \
                else "no price for this model"
            out[f"estimated cost{label}"] = f"unknown ({why})"
            out[f"estimated cost{label} with cached input"] = "unknown"
            continue
        plain, cached = cached_costs(calls, prices, min_prefix, hinted)
        out[f"estimated cost{label}"] = f"${plain:.4f}"
        out[f"estimated cost{label} with cached input"] = f"${cached:.4f}" + (
            "" if prices.cache_read is not None else " (no cached-input price: same as without)")
    if cfg.max_cost is not None:  # what the spend cap lets through: the Ledger evaluate reserves with
        from types import SimpleNamespace


        ledger = Ledger(cfg.max_cost, cap_prices(cfg.model, cfg.price, cfg.batch), tok.count)
        margin = ESTIMATE_MARGIN if est else 1.0  # the prompts are counted above: the margin applied once here
        reqs = [SimpleNamespace(expected_prompt_tokens=math.ceil(c.prompt * margin), max_tokens=c.output)
                for c in calls]
        fit = len(ledger.fit(reqs)[0])
        out["spend cap (--max-cost)"] = (
            f"${cfg.max_cost:.4f}: the worst case of all {len(calls)} calls (input + whole output budget) is "
            f"${sum(map(ledger.worst_case, reqs)):.4f}; " + ("every call fits" if fit == len(calls) else
                                      f"{fit} of {len(calls)} calls fit before the cap (the rest: a rerun with a "
                                      f"larger --max-cost)"))
    return out
