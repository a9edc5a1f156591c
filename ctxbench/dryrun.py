"""``evaluate --dry-run``: calls, input and output tokens and estimated cost before anything is spent."""

from __future__ import annotations

from pathlib import Path

from .evaluate import EvalConfig, plan_requests
from .models.cache import ResponseCache
from .models.registry import model_info
from .prompts import messages_text


def estimate(build: str | Path, cfg: EvalConfig) -> dict:
    """Count the calls an evaluation would make (stored and cached ones excluded), their input tokens (the model's
    tokenizer where registered, else cl100k_base, marked as estimated) and output budget, and the cost from
    litellm's price table without and with prompt caching (a context's later calls read its prefix from cache)."""
    info = model_info(cfg.model)
    from .tokenizers import get_tokenizer

    tokname = info.tokenizer if info.tokenizer and info.tokenizer != "local-server" else "cl100k_base"
    tok = get_tokenizer(tokname)
    plan = plan_requests(Path(build), cfg, ResponseCache())  # the very requests (and keys) evaluate would make
    calls, cached = len(plan.todo), len(plan.hits)
    inp = ctx_tokens_repeat = 0
    prompt_tokens: dict[int, int] = {}
    ctx_tokens: dict[str, int] = {}
    for t in plan.todo:
        # samples of one instance share their messages object: count it once
        n = prompt_tokens.setdefault(id(t["_messages"]), tok.count(messages_text(t["_messages"])))
        inp += n
        if t["_ctx"] in ctx_tokens:
            ctx_tokens_repeat += ctx_tokens[t["_ctx"]]
        else:
            ctx_tokens[t["_ctx"]] = tok.count(t["_context"])
    max_tokens = plan.max_tokens
    out_tok = (calls - cached) * max_tokens
    price_in = price_out = price_cache = None
    try:
        import litellm

        p = litellm.model_cost.get(cfg.model) or litellm.model_cost.get(cfg.model.split("/", 1)[-1]) or {}
        price_in, price_out = p.get("input_cost_per_token"), p.get("output_cost_per_token")
        price_cache = p.get("cache_read_input_token_cost", price_in)
    except Exception:  # noqa: BLE001
        pass
    if price_in is None:
        cost, cost_cached = "unknown (no price for this model)", "unknown"
    else:
        cost = inp * price_in + out_tok * (price_out or 0)
        cost_cached = (inp - ctx_tokens_repeat) * price_in + ctx_tokens_repeat * (price_cache or price_in) + \
            out_tok * (price_out or 0)
        cost, cost_cached = f"${cost:.4f}", f"${cost_cached:.4f}"
    return {"calls": calls, "already in the response cache (free)": cached,
            "input tokens": f"{inp} ({tokname}{', estimated' if tokname != info.tokenizer else ''})",
            "output tokens (upper bound)": out_tok, "estimated cost": cost,
            "estimated cost with prompt caching": cost_cached}
