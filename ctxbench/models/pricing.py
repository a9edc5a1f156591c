"""Token prices of a model (USD per token) from litellm's price table, with prompt caching and batch discounts.

litellm's table (``litellm.model_cost``, the copy shipped with litellm: ``LITELLM_LOCAL_MODEL_COST_MAP``) gives
``input_cost_per_token``, ``output_cost_per_token``, ``cache_read_input_token_cost`` (cached input) and
``cache_creation_input_token_cost`` (Anthropic's cache writes, 1.25x input), and for some models their batch prices
(``*_batches``). Where a batch price is missing, the provider's ``batch_discount`` from ``assets/models.yaml``
(``providers:``) multiplies the ordinary price, as the providers bill it (OpenAI Batch API and Anthropic Message
Batches: 50% of every token price, cached input and cache writes included). Unknown prices are None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxbench.models.registry import provider_info
from ctxbench.models.providers import price_entry, price_provider


@dataclass(frozen=True)
class Prices:
    """USD per token. ``cache_read``: a cached input token (None: the provider's cache price is unknown, counted at
    ``input``); ``cache_write``: an input token written to the cache (None: writing costs ``input``, as with
    OpenAI's automatic caching)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0,
             written_tokens: int = 0) -> float:
        """USD of one call: ``prompt_tokens`` in all (of them ``cached_tokens`` read from and ``written_tokens``
        written to the prompt cache) and ``completion_tokens``."""
        plain = prompt_tokens - cached_tokens - written_tokens
        return (plain * self.input + cached_tokens * (self.cache_read if self.cache_read is not None else self.input)
                + written_tokens * (self.cache_write if self.cache_write is not None else self.input)
                + completion_tokens * self.output)


def provider_of(model: str) -> str | None:
    """The litellm provider ``model`` is billed by (``openai`` for ``gpt-4o``), else None
    (:func:`ctxbench.models.providers.price_provider`)."""
    return price_provider(model)


def model_prices(model: str, batch: bool = False) -> Prices | None:
    """The token prices of ``model`` (:class:`Prices`), in the provider's batch API with ``batch``; None when
    litellm has no input price for it, or (``batch``) neither a batch price nor a ``batch_discount`` of its
    provider is known."""
    p = price_entry(model)
    if p.get("input_cost_per_token") is None:
        return None
    keys = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
            "cache_creation_input_token_cost")
    vals = [None if p.get(k) is None else float(p[k]) for k in keys]
    if batch:
        discount = provider_info(price_provider(model)).get("batch_discount")
        out = []
        for k, v in zip(keys, vals):
            b = p.get(f"{k}_batches")
            if b is not None:
                out.append(float(b))
            elif v is None:
                out.append(None)
            elif discount is None:
                return None
            else:
                out.append(v * float(discount))
        vals = out
    return Prices(vals[0], vals[1] or 0.0, vals[2], vals[3])


def cache_min_tokens(model: str) -> int:
    """The shortest prompt prefix (tokens) the prompt cache of ``model``'s provider stores (``providers:`` in
    ``assets/models.yaml``; 1,024, OpenAI's and Anthropic's, for an unlisted provider)."""
    return int(provider_info(price_provider(model)).get("cache_min_tokens", 1024))
