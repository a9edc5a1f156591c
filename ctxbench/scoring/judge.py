"""LLM judge for HoloBench's recall-oriented row scoring (section 4.1: an LLM classifies each gold row as Exact
Match, Partial Match or No Match, scored 1, 0.5, 0).

The judge is called through the same call runner (gateway, response cache, claims, retries) as any model
(:mod:`ctxbench.models.runner`), with structured output (a JSON schema where the provider supports it; the reply is
parsed as JSON either way). A verdict that cannot be parsed is asked for once more with a repair prompt, then
counted and reported, never scored 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..models.cache import ResponseCache

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


def repair_message(n_rows: int) -> str:
    """The follow-up asked once when a verdict cannot be parsed (:func:`ctxbench.models.runner.complete_all`)."""
    return (f"Your reply could not be read as the JSON asked for. Reply with JSON only, exactly "
            f'{{"verdicts": [...]}} with {n_rows} entries, one per gold row in order, each "exact", "partial" or '
            f'"none".')


@dataclass
class JudgeOutcome:
    """One judged response: ``score`` (None when the verdict could not be parsed, after one repair prompt, or the
    call failed), the verdicts, the judge's raw reply, whether it came from the cache, whether the reply is the
    answer to the repair prompt, and whether the call failed (not stored; a rerun asks again)."""

    score: float | None
    verdicts: list[str] | None
    raw: str | None
    cached: bool
    repaired: bool = False
    failed: bool = False


def judge_all(items: list[tuple[str, list[list], str]], model: str, base_url: str | None = None,
              concurrency: int = 8, cache: ResponseCache | None = None,
              api_key_env: str | None = None) -> list[JudgeOutcome]:
    """Judge ``(question, gold, response)`` items through the call runner (cache, claims, retries, outage pause);
    returns one outcome per item. A verdict that does not parse is asked for once more with a repair prompt
    (:func:`repair_message`) before it counts as unparseable (score None)."""
    from ..models.runner import complete_all

    golds = [gold for _, gold, _ in items]
    outs = complete_all([judge_messages(q, gold, resp) for q, gold, resp in items], model, base_url, concurrency,
                        cache, api_key_env, {"temperature": 0.0, "response_format": RESPONSE_FORMAT}, 256,
                        parse=lambda i, text: parse_verdicts(text, len(golds[i])),
                        repair=lambda i, text: repair_message(len(golds[i])))
    res = []
    for gold, c in zip(golds, outs):
        v = parse_verdicts(c.text, len(gold))
        score = sum(VERDICT_SCORE[x] for x in v) / len(v) if v else None
        res.append(JudgeOutcome(score, v, c.text, c.cached, c.repaired, c.status == "failed"))
    return res
