"""LLM judges: judging prompts registered by name, run through the one call runner, each scoring under its own
matcher name.

A *judge prompt* (:class:`JudgePrompt`) turns an instance and the answer the answer pipeline extracted from a reply
(:mod:`ctxbench.scoring.pipeline`: never the reasoning, never the raw reply) into the judge's messages, reads a
verdict from the judge's reply, and scores it in [0, 1]. The built-in prompt is ``rows`` (:data:`ROW_JUDGE`, the
default): HoloBench's recall-oriented row scoring (section 4.1: an LLM classifies each gold row as Exact Match,
Partial Match or No Match, scored 1, 0.5, 0), asked for as structured output (a JSON schema where the provider
supports it; the reply is parsed as JSON either way). A track adds prompts of its own with ``Track.judge_prompts``
(:class:`ctxbench.tracks.base.Track`; looked up by :func:`ctxbench.scoring.registry.judge_prompt`), e.g. a
benchmark's own judging prompt; a track's prompt judges that track's instances only.

Every judge is called through the same call runner (gateway, response cache, claims, retries) as any model
(:func:`ctxbench.models.runner.complete_all`). A verdict that cannot be parsed is asked for once more with the
prompt's repair message, then counted and reported, never scored 0. Scores of the default prompt are stored under
the matcher ``judge:<model>``, those of another prompt under ``judge-<prompt>:<model>`` (:func:`judge_matcher`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..models.cache import ResponseCache

VERDICT_SCORE = {"exact": 1.0, "partial": 0.5, "none": 0.0}
JUDGE_SYSTEM = ("You grade answers against a gold answer given as rows of values. For each gold row say whether "
                "the answer states it fully (exact), in part (partial: some of its values), or not at all (none). "
                "Numbers match when equal up to rounding and formatting. Reply with JSON only.")
DEFAULT_JUDGE_PROMPT = "rows"
PROMPT_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_JUDGE_MATCHER_RE = re.compile(r"^judge(?:-([a-z][a-z0-9_]*))?:(.+)$")


def judge_matcher(prompt: str, model: str) -> str:
    """The ``scores.matcher`` of a judge: ``judge:<model>`` for the default prompt (:data:`DEFAULT_JUDGE_PROMPT`),
    ``judge-<prompt>:<model>`` for another (e.g. ``judge-lara:gpt-4o``)."""
    return f"judge:{model}" if prompt == DEFAULT_JUDGE_PROMPT else f"judge-{prompt}:{model}"


def parse_judge_matcher(name: str) -> tuple[str, str] | None:
    """``(prompt, model)`` of a judge's matcher name (:func:`judge_matcher`), or None for another matcher."""
    m = _JUDGE_MATCHER_RE.match(name or "")
    return None if m is None else (m.group(1) or DEFAULT_JUDGE_PROMPT, m.group(2))


def is_judge_matcher(name: str) -> bool:
    """Whether a ``scores.matcher`` value is an LLM judge's (any prompt)."""
    return parse_judge_matcher(name) is not None


class JudgePrompt:
    """A judging prompt: subclass it, set ``name`` (a lower-case identifier: it becomes part of the matcher name)
    and implement :meth:`messages`, :meth:`parse`, :meth:`score` and :meth:`repair`; bump ``version`` when the
    prompt changes (its module's code is hashed too, so ``score`` reruns: :mod:`ctxbench.scoring.versions`).
    ``sampling`` and ``max_tokens`` (tokens of the judge's reply) are part of every judge call's request key.

    ``instance`` is the ``instances.parquet`` row with ``gold`` parsed from JSON; ``answer`` the extracted answer
    (never empty: an empty answer scores 0 without a call)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    title: ClassVar[str] = ""
    sampling: ClassVar[Mapping[str, Any]] = {"temperature": 0.0}
    max_tokens: ClassVar[int] = 256

    def messages(self, instance: dict, answer: str) -> list[dict]:
        """The chat messages asking the judge about ``answer``."""
        raise NotImplementedError

    def parse(self, reply: str | None, instance: dict) -> Any | None:
        """The verdict read from the judge's reply, or None when it cannot be read."""
        raise NotImplementedError

    def score(self, verdict: Any, instance: dict) -> float:
        """The score in [0, 1] of a parsed verdict."""
        raise NotImplementedError

    def repair(self, instance: dict, reply: str | None) -> str:
        """The follow-up user message asked once when a reply cannot be parsed."""
        raise NotImplementedError

    def detail(self, verdict: Any) -> dict:
        """What ``scores.detail`` stores of a verdict (besides ``repaired``)."""
        return {"verdict": verdict}


# -- the row judge (the default prompt) ------------------------------------------------------------------------------

def judge_messages(question: str, gold: list[list], response: str) -> list[dict]:
    """The row judge's prompt for one response (rows numbered from 1)."""
    rows = "\n".join(f"{i + 1}. " + " | ".join("NULL" if v is None else str(v) for v in r) for i, r in enumerate(gold))
    user = (f"Question: {question}\n\nGold answer rows:\n{rows}\n\nAnswer to grade:\n{response}\n\n"
            f'Reply as JSON: {{"verdicts": [one of "exact", "partial", "none" for each of the {len(gold)} rows, '
            f"in order]}}")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "row_verdicts", "strict": True, "schema": {
    "type": "object", "additionalProperties": False, "required": ["verdicts"],
    "properties": {"verdicts": {"type": "array", "items": {"type": "string", "enum": ["exact", "partial", "none"]}}}}}}


def parse_verdicts(text: str | None, n_rows: int) -> list[str] | None:
    """Verdicts from the row judge's reply, or None when unparseable or of the wrong length."""
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
    """The row judge's follow-up when a verdict cannot be parsed (:func:`ctxbench.models.runner.complete_all`)."""
    return (f"Your reply could not be read as the JSON asked for. Reply with JSON only, exactly "
            f'{{"verdicts": [...]}} with {n_rows} entries, one per gold row in order, each "exact", "partial" or '
            f'"none".')


class RowJudge(JudgePrompt):
    """HoloBench's row judge (section 4.1): per gold row exact (1), partial (0.5) or none (0); the score is their
    mean. Structured output; 256 reply tokens."""

    name = DEFAULT_JUDGE_PROMPT
    title = "per gold row exact / partial / none (HoloBench section 4.1)"
    sampling = {"temperature": 0.0, "response_format": RESPONSE_FORMAT}

    def messages(self, instance: dict, answer: str) -> list[dict]:
        return judge_messages(instance["question"], instance["gold"], answer)

    def parse(self, reply: str | None, instance: dict) -> list[str] | None:
        return parse_verdicts(reply, len(instance["gold"]))

    def score(self, verdict: list[str], instance: dict) -> float:
        return sum(VERDICT_SCORE[x] for x in verdict) / len(verdict)

    def repair(self, instance: dict, reply: str | None) -> str:
        return repair_message(len(instance["gold"]))

    def detail(self, verdict: list[str]) -> dict:
        return {"verdicts": verdict}


ROW_JUDGE = RowJudge()


# -- running a judge -------------------------------------------------------------------------------------------------

@dataclass
class JudgeOutcome:
    """One judged response: ``score`` (None when the verdict could not be parsed, after one repair prompt, or the
    call failed), the parsed verdict, the judge's raw reply, whether it came from the cache, whether the reply is
    the answer to the repair prompt, and whether the call failed (not stored; a rerun asks again)."""

    score: float | None
    verdict: Any
    raw: str | None
    cached: bool
    repaired: bool = False
    failed: bool = False


def run_judge(prompt: JudgePrompt, items: list[tuple[dict, str]], model: str, base_url: str | None = None,
              concurrency: int = 8, cache: ResponseCache | None = None,
              api_key_env: str | None = None) -> list[JudgeOutcome]:
    """Judge ``(instance, extracted answer)`` items with ``prompt`` through the call runner (cache, claims,
    retries, outage pause); returns one outcome per item, in order. A verdict that does not parse is asked for
    once more with the prompt's repair message before it counts as unparseable (score None)."""
    from ..models.runner import complete_all

    insts = [inst for inst, _ in items]
    outs = complete_all([prompt.messages(inst, ans) for inst, ans in items], model, base_url, concurrency, cache,
                        api_key_env, dict(prompt.sampling), prompt.max_tokens,
                        parse=lambda i, text: prompt.parse(text, insts[i]),
                        repair=lambda i, text: prompt.repair(insts[i], text))
    res = []
    for inst, c in zip(insts, outs):
        v = prompt.parse(c.text, inst)
        score = None if v is None else float(prompt.score(v, inst))
        res.append(JudgeOutcome(score, v, c.text, c.cached, c.repaired, c.status == "failed"))
    return res


__all__ = ["DEFAULT_JUDGE_PROMPT", "JUDGE_SYSTEM", "RESPONSE_FORMAT", "ROW_JUDGE", "VERDICT_SCORE", "JudgeOutcome",
           "JudgePrompt", "RowJudge", "is_judge_matcher", "judge_matcher", "judge_messages", "parse_judge_matcher",
           "parse_verdicts", "repair_message", "run_judge"]
