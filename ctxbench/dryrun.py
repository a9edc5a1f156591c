"""``evaluate --dry-run``: calls, input and output tokens and estimated cost before anything is spent."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq

from .errors import InputError
from .evaluate import EvalConfig, select_instances
from .models.cache import ResponseCache, request_key
from .models.registry import model_info
from .prompts import messages_text, render_messages
from .storage import read_table


def estimate(build: str | Path, cfg: EvalConfig) -> dict:
    """Count the calls an evaluation would make (stored and cached ones excluded), their input tokens (the model's
    tokenizer where registered, else cl100k_base, marked as estimated) and output budget, and the cost from
    litellm's price table without and with prompt caching (a context's later calls read its prefix from cache)."""
    build = Path(build)
    if not (build / "instances.parquet").exists():
        raise InputError(f"{build} is not a build directory (no instances.parquet): run `ctxbench build` first")
    info = model_info(cfg.model)
    from .tokenizers import get_tokenizer

    tokname = info.tokenizer if info.tokenizer and info.tokenizer != "local-server" else "cl100k_base"
    tok = get_tokenizer(tokname)
    K = cfg.samples or info.default_samples
    max_tokens = cfg.max_tokens or info.max_output_tokens
    temperature = info.fixed_temperature if info.fixed_temperature is not None else cfg.temperature
    tbl = select_instances(pq.read_table(build / "instances.parquet",
                                         columns=["instance_id", "context", "question", "target_tokens"]),
                           cfg.per_length, cfg.seed)
    stored = set(read_table(build / "responses.parquet", "responses").column("request_key").to_pylist())
    cache = ResponseCache()
    calls = inp = ctx_tokens_repeat = 0
    seen_ctx: set[str] = set()
    keys = []
    for ctx, q in zip(tbl.column("context").to_pylist(), tbl.column("question").to_pylist()):
        msgs = render_messages(ctx, q, cfg.prompt_variant, cfg.model)
        n = tok.count(messages_text(msgs))
        c = tok.count(ctx)
        h = hashlib.sha256(ctx.encode()).hexdigest()
        for k in range(K):
            key = request_key(cfg.model, msgs, {"temperature": temperature, "seed": k}, max_tokens, k)
            if key in stored:
                continue
            keys.append(key)
            calls += 1
            inp += n
            if h in seen_ctx:
                ctx_tokens_repeat += c
            seen_ctx.add(h)
    cached = len(cache.get_many(keys))
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
