"""A short measured probe of a local model server's speed, for the forecast ``ctxbench run`` prints before its
first call (issue 26: a slow model must not look like a hung one).

One request with a slice of the run's own first context (about ``chars`` characters) and a small output budget;
llama.cpp's server reports its own ``timings`` (``prompt_per_second``, ``predicted_per_second``), which are used
as they are; a server without them is timed from outside (a 1-token request for prompt processing, then the same
prompt, cached, with ``decode_tokens`` more for generation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Speed:
    """Measured tokens per second: ``prefill`` (prompt processing) and ``decode`` (generation)."""

    prefill: float
    decode: float


def _post(base_url: str, model: str, text: str, max_tokens: int, timeout_s: float) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = httpx.post(f"{base_url.rstrip('/')}/chat/completions", timeout=timeout_s,
                   json={"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                         "temperature": 0, "cache_prompt": True})
    r.raise_for_status()
    return r.json(), time.monotonic() - t0


def probe_speed(base_url: str, model: str, text: str, chars: int = 2000, decode_tokens: int = 24,
                timeout_s: float = 120.0) -> Speed | None:
    """Prompt and generation tokens/s of the server at ``base_url`` (OpenAI-compatible) on the first ``chars``
    characters of ``text``. None when the server does not answer or reports no usable figure; never raises."""
    sample = text[:chars] + f"\n\n(speed probe {time.time_ns()}) Reply with a short sentence."
    try:
        body, _ = _post(base_url, model, sample, decode_tokens, timeout_s)
        t = body.get("timings") or {}
        if t.get("prompt_per_second") and t.get("predicted_per_second"):
            return Speed(float(t["prompt_per_second"]), float(t["predicted_per_second"]))
        sample = sample + " "  # another prompt: timed from outside
        body, pre_s = _post(base_url, model, sample, 1, timeout_s)
        n_prompt = (body.get("usage") or {}).get("prompt_tokens")
        body, all_s = _post(base_url, model, sample, decode_tokens, timeout_s)
        n_out = (body.get("usage") or {}).get("completion_tokens")
        if not n_prompt or not n_out or n_out < 2 or pre_s <= 0:
            return None
        return Speed(n_prompt / pre_s, (n_out - 1) / max(all_s - 0.05, 1e-3))
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
