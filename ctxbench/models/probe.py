"""A short measured probe of a local model server's speed, for the forecast ``ctxbench run`` prints before its
first call (issue 26: a slow model must not look like a hung one).

Two requests with slices of the run's own first context (about ``chars`` / 3 and ``chars`` characters; the second
reuses the first's prefix in the server's prompt cache) and a small output budget each. llama.cpp's server reports
its own ``timings`` (``prompt_n``/``prompt_ms``, ``predicted_n``/``predicted_ms``): the time per prompt token at two
stretches of positions, and per generated token at two context lengths, give a time per token that grows linearly
with the position (attention reads every earlier token: SmolLM2-135M on 2 cores reads 135 tokens/s at 400 tokens
and about 80 at 5,000), so a 4,096-token prompt is not forecast at a short slice's speed. A server without
``timings`` is timed from outside (a 1-token request for prompt processing, then the same prompt, cached, with
``decode_tokens`` more for generation), with no growth.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Speed:
    """Measured tokens per second: ``prefill`` (prompt processing) and ``decode`` (generation), at the first probe;
    ``prefill_slope`` / ``decode_slope``: seconds per token added by each token of position (context) before it,
    0 where not measured. Times: :meth:`prefill_seconds`, :meth:`decode_seconds`."""

    prefill: float
    decode: float
    prefill_slope: float = 0.0
    decode_slope: float = 0.0
    at: float = 0.0         # the mean position of the prompt tokens ``prefill`` was measured over
    decode_at: float = 0.0  # the context at which ``decode`` was measured

    @staticmethod
    def _base(per_s: float, slope: float, at: float) -> float:
        return max(1.0 / max(per_s, 1e-9) - slope * at, 1e-6)  # seconds per token at position 0

    def prefill_seconds(self, start: int, end: int) -> float:
        """Seconds to read the prompt tokens at positions ``start`` … ``end`` (a kept prefix: ``start`` > 0)."""
        a = self._base(self.prefill, self.prefill_slope, self.at)
        return a * (end - start) + self.prefill_slope * (end * end - start * start) / 2

    def decode_seconds(self, context: int, n: int) -> float:
        """Seconds to generate ``n`` tokens after ``context`` tokens."""
        a = self._base(self.decode, self.decode_slope, self.decode_at)
        return n * (a + self.decode_slope * (context + n / 2))


def forecast_seconds(speed: Speed, spans: list[tuple[int, int]], max_tokens: int,
                     typical_reply_tokens: int = 64) -> tuple[float, float]:
    """Seconds the calls take at ``speed``: each call reads its prompt positions (``spans``: (start, end) in
    tokens, a kept prefix starting later than 0) and generates after its prompt either ``typical_reply_tokens``
    (the first figure) or its whole budget ``max_tokens`` (the second)."""
    pre = sum(speed.prefill_seconds(a, b) for a, b in spans)
    typical = min(typical_reply_tokens, max_tokens)
    return (pre + sum(speed.decode_seconds(b, typical) for _, b in spans),
            pre + sum(speed.decode_seconds(b, max_tokens) for _, b in spans))


def _post(base_url: str, model: str, text: str, max_tokens: int, timeout_s: float) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = httpx.post(f"{base_url.rstrip('/')}/chat/completions", timeout=timeout_s,
                   json={"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                         "temperature": 0, "cache_prompt": True})
    r.raise_for_status()
    return r.json(), time.monotonic() - t0


def _point(body: dict) -> tuple[float, float, float, float] | None:
    """(mid position of the prompt tokens read, seconds per prompt token, context of generation, seconds per
    generated token) from llama.cpp's ``timings`` and ``usage``; None without them."""
    t = body.get("timings") or {}
    n_total = (body.get("usage") or {}).get("prompt_tokens")
    pn, pms, dn, dms = t.get("prompt_n"), t.get("prompt_ms"), t.get("predicted_n"), t.get("predicted_ms")
    if not (n_total and pn and pms and dn and dms):
        return None
    return n_total - pn / 2, pms / pn / 1000, n_total + dn / 2, dms / dn / 1000


def _slope(p: tuple[float, float], q: tuple[float, float]) -> float:
    """Seconds per token added per position between two (position, seconds per token) points; 0 when they are
    too close to tell (under 200 positions apart) or the later one is not slower."""
    return max((q[1] - p[1]) / (q[0] - p[0]), 0.0) if q[0] - p[0] >= 200 else 0.0


def probe_speed(base_url: str, model: str, text: str, chars: int = 3000, decode_tokens: int = 16,
                timeout_s: float = 120.0) -> Speed | None:
    """Prompt and generation tokens/s of the server at ``base_url`` (OpenAI-compatible) on the first ``chars``
    characters of ``text`` (module docstring), with their growth per token of context where the server reports
    ``timings``. None when the server does not answer or reports no usable figure; never raises."""
    tag = time.time_ns()
    first = text[:chars // 3] + f"\n\n(speed probe {tag}) Reply with a short sentence."
    try:
        body, _ = _post(base_url, model, first, decode_tokens, timeout_s)
        t = body.get("timings") or {}
        if t.get("prompt_per_second") and t.get("predicted_per_second"):
            a = _point(body)
            sp = Speed(float(t["prompt_per_second"]), float(t["predicted_per_second"]))
            if a is None or len(text) <= chars // 3:
                return sp
            second = text[:chars] + f"\n\n(speed probe {tag}, longer) Reply with a short sentence."
            b = _point(_post(base_url, model, second, decode_tokens, timeout_s)[0])
            if b is None:
                return sp
            return Speed(sp.prefill, sp.decode, _slope(a[:2], b[:2]), _slope(a[2:], b[2:]), a[0], a[2])
        sample = first + " "  # another prompt: timed from outside
        body, pre_s = _post(base_url, model, sample, 1, timeout_s)
        n_prompt = (body.get("usage") or {}).get("prompt_tokens")
        body, all_s = _post(base_url, model, sample, decode_tokens, timeout_s)
        n_out = (body.get("usage") or {}).get("completion_tokens")
        if not n_prompt or not n_out or n_out < 2 or pre_s <= 0:
            return None
        return Speed(n_prompt / pre_s, (n_out - 1) / max(all_s - 0.05, 1e-3))
    except (httpx.HTTPError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
