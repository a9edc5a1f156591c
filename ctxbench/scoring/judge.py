"""LLM judge for HoloBench's recall-oriented row scoring (section 4.1: an LLM classifies each gold row as Exact
Match, Partial Match or No Match, scored 1, 0.5, 0).

The judge is called through the same gateway and response cache as any model, with structured output (a JSON
schema where the provider supports it; the reply is parsed as JSON either way). A verdict that cannot be parsed
is counted and reported, never scored 0.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from dataclasses import dataclass

from ..models.cache import ResponseCache, request_key
from ..models.gateway import Gateway, RetryPolicy

VERDICT_SCORE = {"exact": 1.0, "partial": 0.5, "none": 0.0}
JUDGE_SYSTEM = ("You grade answers against a gold answer given as rows of values. For each gold row say whether "
                "the answer states it fully (exact), in part (partial: some of its values), or not at all (none). "
                "Numbers match when equal up to rounding and formatting. Reply with JSON only.")


def judge_messages(question: str, gold: list[list], response: str) -> list[dict]:
    """The judge prompt for one response (rows numbered from 1)."""
    rows = "\n".join(f"{i + 1}. " + " | ".join("NULL" if v is None else str(v) for v in r) for i, r in enumerate(gold))
    user = (f"Question: {question}\n\nGold answer rows:\n{rows}\n\nAnswer to grade:\n{response}\n\n"
            f'Reply as JSON: {{"verdicts": [one of "exact", "partial", "none" for each of the {len(gold)} rows, '
            f"in order]}}")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "row_verdicts", "strict": True, "schema": {
    "type": "object", "additionalProperties": False, "required": ["verdicts"],
    "properties": {"verdicts": {"type": "array", "items": {"type": "string", "enum": ["exact", "partial", "none"]}}}}}}


def parse_verdicts(text: str | None, n_rows: int) -> list[str] | None:
    """Verdicts from the judge's reply, or None when unparseable or of the wrong length."""
    if not text:
        return None
    m = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        obj = json.loads(m.group(0) if m else text)
        v = [str(x).strip().lower() for x in obj["verdicts"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if len(v) != n_rows or any(x not in VERDICT_SCORE for x in v):
        return None
    return v


@dataclass
class JudgeOutcome:
    score: float | None
    verdicts: list[str] | None
    raw: str | None
    cached: bool


def complete_all(messages: list[list[dict]], model: str, base_url: str | None = None, concurrency: int = 8,
                 cache: ResponseCache | None = None, api_key_env: str | None = None,
                 sampling: dict | None = None, max_tokens: int = 256) -> list[tuple[str | None, bool]]:
    """Judge-style calls: one completion per message list through the gateway and the response cache (keyed by
    model, messages, sampling and max tokens, so a rerun pays nothing). Returns ``(text, cached)`` per item, text
    None for a failed call (which is not cached)."""
    cache = cache or ResponseCache()
    gw = Gateway(model, base_url, concurrency, RetryPolicy(), api_key_env=api_key_env)
    sampling = sampling or {"temperature": 0.0}

    async def one(msgs) -> tuple[str | None, bool]:
        key = request_key(model, msgs, sampling, max_tokens, 0)
        hit = cache.get(key)
        if hit is not None:
            return hit.get("response"), True
        r = await gw.complete(msgs, max_tokens, sampling, random.Random(key))
        if r.status == "ok":
            cache.put(key, model, r.payload())
        return r.response, False

    async def main():
        try:
            return await asyncio.gather(*(one(m) for m in messages))
        finally:
            await gw.aclose()

    return list(asyncio.run(main()))


def judge_all(items: list[tuple[str, list[list], str]], model: str, base_url: str | None = None,
              concurrency: int = 8, cache: ResponseCache | None = None,
              api_key_env: str | None = None) -> list[JudgeOutcome]:
    """Judge ``(question, gold, response)`` items; returns one outcome per item (score None when unparseable)."""
    outs = complete_all([judge_messages(q, gold, resp) for q, gold, resp in items], model, base_url, concurrency,
                        cache, api_key_env, {"temperature": 0.0, "response_format": RESPONSE_FORMAT}, 256)
    res = []
    for (_, gold, _), (text, cached) in zip(items, outs):
        v = parse_verdicts(text, len(gold))
        score = sum(VERDICT_SCORE[x] for x in v) / len(v) if v else None
        res.append(JudgeOutcome(score, v, text, cached))
    return res
