"""The ``litellm`` backend: every provider litellm knows (OpenAI, Anthropic, Gemini, Bedrock, ...) by its model
name, through ``litellm.acompletion``; also a ``--base-url`` with ``backend="litellm"`` (sent as ``api_base``).
litellm's own retries are off (the gateway retries); its response is read by the one reply classifier
(:func:`ctxbench.models.replies.completion_result`, :func:`ctxbench.models.replies.litellm_choice`). litellm is
imported on the first call (:func:`ctxbench.models.quiet_litellm`): it is slow to import.
"""

from __future__ import annotations

import time
from typing import Any

from ctxbench.core.backend import CallResult
from ctxbench.models import quiet_litellm
from ctxbench.models.backends.base import BaseBackend, api_key, register_backend
from ctxbench.models.errors import ErrorInfo, classify_error, error_in_body
from ctxbench.models.replies import completion_result, litellm_choice


@register_backend("litellm")
class LitellmBackend(BaseBackend):
    """One ``litellm.acompletion`` per attempt (``num_retries=0``, ``drop_params`` for a provider's own endpoint)."""

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One call; a response without choices is read for an error object and raised classified; litellm's
        exceptions propagate for the gateway to classify (:meth:`classify`)."""
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
