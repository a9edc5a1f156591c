"""The ``litellm`` backend: every provider litellm knows (OpenAI, Anthropic, Gemini, Bedrock, ...) by its model
name, through ``litellm.acompletion``; also a ``--base-url`` with ``backend="litellm"`` (sent as ``api_base``).
litellm's own retries are off (the gateway retries); its response is read by the one reply classifier
(:func:`ctxbench.models.replies.litellm_result`). litellm is
imported on the first call (:func:`ctxbench.models.quiet_litellm`): it is slow to import.
"""

from __future__ import annotations

import time
from typing import Any

from ctxbench.core.backend import CallResult
from ctxbench.models import quiet_litellm
from ctxbench.models.backends.base import BaseBackend, api_key, register_backend
from ctxbench.models.replies import litellm_result


@register_backend("litellm")
class LitellmBackend(BaseBackend):
    """One ``litellm.acompletion`` per attempt (``num_retries=0``, ``drop_params`` for a provider's own endpoint)."""

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One call, its response read by :func:`ctxbench.models.replies.litellm_result` (``latency_s`` set);
        litellm's exceptions propagate for the gateway to classify (:meth:`classify`)."""
        t0 = time.perf_counter()
        litellm = quiet_litellm()

        # a provider that lacks a parameter (seed, response_format) ignores it; not for a base URL, where litellm
        # would also answer a 422 (TGI's context-length error) by sending the request again
        extra = {"api_base": self.base_url, "api_key": api_key(self.api_key_env, self.base_url)} \
            if self.base_url else {}
        r = await litellm.acompletion(model=self.model, messages=messages, max_tokens=max_tokens,
                                      num_retries=0, max_retries=0, timeout=self.timeout_s,
                                      drop_params=not self.base_url, **extra, **sampling)
        lat = time.perf_counter() - t0
        res = litellm_result(self.model, r, max_tokens)
        res.latency_s = lat
        return res
