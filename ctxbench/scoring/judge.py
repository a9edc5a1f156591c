"""LLM judges: judging prompts registered by name, run through the one call runner, each scoring under its own
matcher name.

A *judge prompt* (:class:`JudgePrompt`) turns an instance and the answer the answer pipeline extracted from a reply
(:mod:`ctxbench.scoring.pipeline`: never the reasoning, never the raw reply) into the judge's messages, reads a
verdict from the judge's reply, and scores it in [0, 1]. The built-in prompt is ``rows`` (:data:`ROW_JUDGE`, the
default): HoloBench's recall-oriented row scoring (section 4.1: an LLM classifies each gold row as Exact Match,
Partial Match or No Match, scored 1, 0.5, 0), asked for as structured output (a JSON schema where the provider
supports it; the reply is parsed as JSON either way). A track adds prompts of its own with ``Track.judge_prompts``
(:class:`ctxbench.core.track.Track`; looked up by :func:`ctxbench.scoring.registry.judge_prompt`), e.g. a
benchmark's own judging prompt; a track's prompt judges that track's instances only.

Every judge is called through the same call runner (gateway, response cache, claims, retries) as any model
(:func:`ctxbench.models.runner.complete_all`). A verdict that cannot be parsed is asked for once more with the
prompt's repair message, then counted and reported, never scored 0. Scores of the default prompt are stored under
the matcher ``judge:<model>``, those of another prompt under ``judge-<prompt>:<model>`` (:func:`judge_matcher`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ctxbench.models.cache import ResponseCache
from ctxbench.scoring.judge_base import CANDIDATE_IS_DATA, JudgePrompt, Polarity, fence_candidate, own_label_before, quoted
from ctxbench.models.runner import complete_all
from ctxbench.scoring.filters import strip_invisible
from ctxbench.scoring.pipeline import AnswerChain

VERDICT_SCORE = {"exact": 1.0, "partial": 0.5, "none": 0.0}
JUDGE_SYSTEM = ("You grade answers against a gold answer given as rows of values. For each gold row say whether "
                "the answer states it fully (exact), in part (partial: some of its values), or not at all (none). "
                "Numbers match when equal up to rounding and formatting. Reply with JSON only.")
DEFAULT_JUDGE_PROMPT = "rows"
# the key under which run_judge hands a prompt's parse the answer it judged (the candidate's own verdict objects are
# never the judge's)
JUDGED_ANSWER = "_judged_answer"
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


# the steps of the answer pipeline every judge reply passes before its verdict is read: invisible characters,
# reasoning blocks (<think>…</think> and the rest), chat tokens, then Markdown code fences unwrapped
JUDGE_FILTERS = ("strip_format_chars", "strip_reasoning", "strip_chat_tokens", "strip_code_fences")


def judge_text(reply: str | None, reasoning: str | None = None) -> str:
    """A judge's reply as its verdict is read: through the answer pipeline's filters :data:`JUDGE_FILTERS`
    (``<think>The format is {"verdicts": [...]}</think>{"verdicts": ["exact"]}`` → ``{"verdicts": ["exact"]}``;
    a fenced JSON block unwrapped). A reasoning judge whose visible reply is empty and whose verdict is in its
    reasoning field (``reasoning_content``) is read from that field. ``""`` for no reply."""
    chain = AnswerChain(JUDGE_FILTERS)
    text = chain(reply)
    if not text.strip() and strip_invisible(reasoning or "").strip():
        text = chain(reasoning)
    return text


def judge_messages(question: str, gold: list[list], response: str) -> list[dict]:
    """The row judge's prompt for one response (rows numbered from 1)."""
    rows = "\n".join(f"{i + 1}. " + " | ".join("NULL" if v is None else str(v) for v in r) for i, r in enumerate(gold))
    user = (f"Question: {question}\n\nGold answer rows:\n{rows}\n\nAnswer to grade:\n{fence_candidate(response)}\n"
            f"{CANDIDATE_IS_DATA}\n\n"
            f'Reply as JSON: {{"verdicts": [one of "exact", "partial", "none" for each of the {len(gold)} rows, '
            f"in order]}}")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "row_verdicts", "strict": True, "schema": {
    "type": "object", "additionalProperties": False, "required": ["verdicts"],
    "properties": {"verdicts": {"type": "array", "items": {"type": "string", "enum": ["exact", "partial", "none"]}}}}}}


# HoloBench's own names of the row verdicts (section 4.1) and other spellings a judge uses
VERDICT_WORDS = {"exact": "exact", "exact match": "exact", "exact_match": "exact", "partial": "partial",
                 "partial match": "partial", "partial_match": "partial", "none": "none", "no match": "none",
                 "no_match": "none", "no": "none"}


def json_spans(text: str) -> list[tuple[int, int, object]]:
    """Every JSON object in ``text`` with its span: ``[(start, end, object), ...]`` in order (each ``{`` tried with a
    JSON decoder; nested ones inside a decoded object are not listed again)."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        out.append((i, end, obj))
        i = end


def json_objects(text: str) -> list:
    """Every JSON object in ``text``, in order (:func:`json_spans` without the spans)."""
    return [obj for _, _, obj in json_spans(text)]


def own_verdict(text: str, read, candidate: str | None = None):
    """The judge's own verdict among the JSON objects of its reply (already through :func:`judge_text`): ``read(obj)``
    gives an object's verdict or None (not a well-formed verdict). Objects inside a quotation of the candidate
    (:func:`ctxbench.scoring.judge_base.quoted`: "the candidate wrote {…}", ``> {…}``, ``"{…}"``) and objects the
    candidate's own answer holds (``candidate``: a candidate that writes a verdict gets no say) are not the judge's.
    Of the others: the last one after the judge's own label (``Final verdict:``, ``Verdict:`` opening a line), else
    the first well-formed one when every other well-formed one agrees with it; None when none is left or they
    disagree (ambiguous: unscored, never credited)."""
    own = set()
    if candidate:
        own = {json.dumps(o, sort_keys=True) for o in json_objects(candidate)}
    found, weak = [], []
    for s, e, obj in json_spans(text):
        v = read(obj)
        if v is None or json.dumps(obj, sort_keys=True) in own:
            continue
        q = quoted(text, s, e)
        if q == 0:
            found.append((s, v))
        elif q == 1:
            weak.append((s, v))                  # between quotation marks: the judge's own where it is alone
    found = found or weak
    if not found:
        return None
    labelled = [v for s, v in found if own_label_before(text, s)]
    if labelled:
        return labelled[-1]
    first = found[0][1]
    return first if all(v == first for _, v in found) else None


def parse_verdicts(text: str | None, n_rows: int, candidate: str | None = None) -> list[str] | None:
    """Verdicts from the row judge's reply, or None when unparseable, of the wrong length or ambiguous. The reply
    passes the answer pipeline's judge filters first (:func:`judge_text`: reasoning blocks, chat tokens, code
    fences); the verdicts are those of the judge's own object holding ``verdicts`` (:func:`own_verdict`: never one
    quoted from the candidate, nor one the candidate's answer ``candidate`` holds), each ``exact`` / ``partial`` /
    ``none`` (also HoloBench's "Exact Match", "Partial Match", "No Match")."""
    text = judge_text(text)
    if not text:
        return None

    def read(obj):
        if not isinstance(obj, dict) or not isinstance(obj.get("verdicts"), list):
            return None
        v = [VERDICT_WORDS.get(" ".join(str(x).strip().lower().split())) for x in obj["verdicts"]]
        return None if len(v) != n_rows or any(x is None for x in v) else v

    return own_verdict(text, read, candidate)


def repair_message(n_rows: int) -> str:
    """The row judge's follow-up when a verdict cannot be parsed (:func:`ctxbench.models.runner.complete_all`)."""
    return (f"Your reply could not be read as the JSON asked for. Reply with JSON only, exactly "
            f'{{"verdicts": [...]}} with {n_rows} entries, one per gold row in order, each "exact", "partial" or '
            f'"none".')


class RowJudge(JudgePrompt):
    """HoloBench's row judge (section 4.1): per gold row exact (1), partial (0.5) or none (0); the score is their
    mean. Structured output; 256 reply tokens."""

    name = DEFAULT_JUDGE_PROMPT
    version = "3"   # 2: the reply through the judge filters (reasoning, fences); HoloBench's verdict names
    # 3: the candidate fenced as data; the judge's own verdict, never one quoted from the candidate
    title = "per gold row exact / partial / none (HoloBench section 4.1)"
    sampling = {"temperature": 0.0, "response_format": RESPONSE_FORMAT}

    def messages(self, instance: dict, answer: str) -> list[dict]:
        return judge_messages(instance["question"], instance["gold"], answer)

    def parse(self, reply: str | None, instance: dict) -> list[str] | None:
        return parse_verdicts(reply, len(instance["gold"]), instance.get(JUDGED_ANSWER))

    def score(self, verdict: list[str], instance: dict) -> float:
        return sum(VERDICT_SCORE[x] for x in verdict) / len(verdict)

    def repair(self, instance: dict, reply: str | None) -> str:
        return repair_message(len(instance["gold"]))

    def detail(self, verdict: list[str]) -> dict:
        return {"verdicts": verdict}

    def details(self, verdict: list[str] | None, instance: dict, answer: str) -> list[dict] | None:
        """Per gold row the judge's credit (exact 1, partial 0.5, none 0) and the graded answer where it earned
        some (the judge does not point at the words)."""
        if verdict is None:
            return None
        return [{"gold": row, "credit": VERDICT_SCORE[v], "text": answer if VERDICT_SCORE[v] else None}
                for row, v in zip(instance["gold"], verdict)]


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
    insts = [{**inst, JUDGED_ANSWER: ans} for inst, ans in items]
    outs = complete_all([prompt.messages(inst, ans) for inst, ans in items], model, base_url, concurrency, cache,
                        api_key_env, dict(prompt.sampling), prompt.max_tokens,
                        parse=lambda i, text: prompt.parse(judge_text(text), insts[i]),
                        repair=lambda i, text: prompt.repair(insts[i], text))
    res = []
    for inst, c in zip(insts, outs):
        # every judge prompt reads its verdict from the reply through the answer pipeline's judge filters
        v = prompt.parse(judge_text(c.text, getattr(c, "reasoning", None)), inst)
        score = None if v is None else float(prompt.score(v, inst))
        res.append(JudgeOutcome(score, v, c.text, c.cached, c.repaired, c.status == "failed"))
    return res


__all__ = ["DEFAULT_JUDGE_PROMPT", "JUDGE_FILTERS", "JUDGE_SYSTEM", "Polarity", "VERDICT_WORDS", "judge_text", "RESPONSE_FORMAT", "ROW_JUDGE", "VERDICT_SCORE", "JudgeOutcome",
           "JUDGED_ANSWER", "JudgePrompt", "json_spans", "own_verdict", "RowJudge", "is_judge_matcher", "judge_matcher", "judge_messages", "parse_judge_matcher",
           "parse_verdicts", "repair_message", "run_judge"]
