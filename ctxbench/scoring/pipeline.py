"""The one answer pipeline: a declared chain of registered filters that turns a stored reply into the answer every
matcher and the LLM judge receive.

Shape (in the manner of lm-evaluation-harness' filter chains: ``filter_list`` in a task's YAML, filters registered
with ``@register_filter`` and applied in order by a ``FilterEnsemble``): a *filter* is a small step
``fn(text: str, ctx: AnswerContext) -> str`` registered under a name; an :class:`AnswerChain` applies named filters
in order. Every benchmark's chain is :data:`DEFAULT_FILTERS` followed by the filters its track adds
(``Track.answer_filters``, :func:`ctxbench.scoring.registry.answer_filters`); ``score`` stores the chain's output as
``scores.extracted_answer``, so what is stored is exactly what was scored. No matcher extracts answers itself.

Default chain
    0. ``strip_format_chars`` — invisible format characters (Unicode category Cf: zero-width space, joiners, BOM,
       direction marks; the soft hyphen) removed: ``6\u200b1`` is ``61``.
    1. ``drop_reasoning_field`` — the provider's separate reasoning field (``responses.reasoning``) repeated inside
       the visible reply (servers and proxies that return it in both) is removed.
    2. ``strip_reasoning`` — reasoning written inline is removed, whichever delimiters the model uses:
       ``<think>…</think>`` (DeepSeek-R1, QwQ, Qwen3, GLM-4.5, MiniMax, Phi-4-reasoning, Hunyuan, ERNIE, OLMo 3),
       ``<thinking>``, ``<thought>``, ``<reasoning>``, ``<reflection>``, ``<scratchpad>``, ``<seed:think>``
       (Seed-OSS), ``◁think▷…◁/think▷`` (Kimi), ``[THINK]…[/THINK]`` (Magistral), ``<|begin_of_thought|>…
       <|end_of_thought|>`` (Sky-T1, OpenThoughts), ``<|START_THINKING|>…<|END_THINKING|>`` (Command A Reasoning),
       gpt-oss' harmony channels (``<|channel|>analysis<|message|>…``, also when a server printed them without their
       special tokens as ``analysis…assistantfinal``) and Granite 3.2's ``Here is my thought process: … Here is my
       response:``. A block that never closes (cut by the output budget) runs to the end of the reply, so the reply
       has no answer; a closing tag without an opening one (the chat template opened the block in the prompt, as
       DeepSeek-R1's and Qwen3's do) ends reasoning that began at the start of the reply.
    3. ``strip_chat_tokens`` — chat special tokens (``<|eot_id|>``, ``<|im_end|>``, ``</s>``, ``<|end|>``,
       ``<end_of_turn>``, ``<|endoftext|>``, ``<｜end▁of▁sentence｜>``, ``<|END_OF_TURN_TOKEN|>``, …): the reply ends
       at the first end-of-turn token that follows an answer (what a server that ignored the stop token generated
       after it is another turn), or that another turn's header follows (``<|im_start|>user``). A token before any
       answer — at the start, after markup only, or right after a final-answer label or an opening answer block
       (``Answer: <|endoftext|> 1003``) — ends nothing: the model went on to give its answer, so the token is
       dropped like any other. Role headers at its start (``<|im_start|>assistant``, ``<start_of_turn>model``,
       ``<|start_header_id|>assistant<|end_header_id|>``) and any other token of these forms (``<|…|>``,
       ``<｜…｜>``, ``<s>``, ``[INST]``) are removed.
    3b. ``cut_repetition`` — a reply that degenerates into repetition loses every copy of the repeated block
       (:func:`repetition_start`; note ``degenerate_repetition``).
    4. ``final_answer`` — the final answer, when the reply marks one: the content of the last answer block
       (``<answer>…</answer>``, Granite's ``<response>``, Reflection's ``<output>``, ``<|begin_of_solution|>``,
       Apriel's ``[BEGIN FINAL RESPONSE]``), else the text after the last final-answer label (a line starting with
       ``Answer:``, ``Final answer:``, ``**Answer:**``, ``### Answer:``, ``答案：``, ``答：``, ``最终答案：``,
       ``回答：``, GSM8K's ``####`` or a heading line that is the label alone, e.g.
       ``**Final Answer**``; else the last inline ``answer:`` / ``the (final) answer is`` / ``答案是``),
       else the last ``\\boxed{…}``, else the whole reply. When the output budget ended the reply (finish reason
       ``length``…) only a finished answer counts, else there is none (note ``cut_off``). The last answer the reply
       asserts is the answer: a corrected or final label inside a line after the last line label (``… Final
       answer: 17``), struck-out text removed (``~~42~~ 17``), and after a withdrawal marker that follows the
       answer (``Wait,``, ``Actually,``, ``No,``, ``Correction:``, ``I mean``, 不对, 应为, 更正, 其实…) the answer is
       read from what follows it alone (note ``withdrawn``; issue 30).
    4b. ``last_statement`` — without a final-answer marker, what the end of the reply asserts (the list that ends
       it, else its last sentence): steps, list numbers and values quoted before it are not the answer.
    4c. ``drop_ruled_out`` — values the answer rules out removed (``17 (not 42)`` → ``17``, ``六十（而非七十三）`` →
       ``六十``).
    5. ``tidy`` — Unicode NFC; ``\\boxed{x}``, ``\\text{x}``, ``$x$`` math delimiters and Markdown emphasis
       (``**x**``, ``__x__``, backticks around the whole answer) unwrapped; spaces collapsed and blank lines at the
       ends removed (line breaks kept: list matchers split on them).

Filters a track may add (``Track.answer_filters``): ``first_line`` (the first non-empty line), ``fold_width``
(NFKC: full-width letters, digits and punctuation to ASCII), ``strip_trailing_period``; ``-name`` removes a
default filter (needles and LaRA: ``-last_statement``). ``strip_code_fences`` serves the judges
(:func:`ctxbench.scoring.judge.judge_text`). :meth:`AnswerChain.extract` adds what the stored response says
besides its text: status ``cut_off``, the finish reason, and the reasoning field when the content is empty.

Where the parts live: this module holds the chain (:class:`AnswerChain`, :func:`answer_chain`, :func:`chain_for`)
and :func:`score_reply`; the filter contract and registry are :mod:`ctxbench.scoring.filters`, the filters
:mod:`ctxbench.scoring.strip` (steps 0–3b), :mod:`ctxbench.scoring.extract` (4–4c) and :mod:`ctxbench.scoring.tidy`
(5, ``strip_code_fences`` and the filters a track may add). Importing this module registers every filter; the names
listed in ``__all__`` stay importable from here.

Versions: each filter has a ``version``; :meth:`AnswerChain.fingerprint` hashes the names, versions and code of the
chain's filters, so ``score`` reruns when a filter changes (:mod:`ctxbench.scoring.versions`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ctxbench.core.errors import InputError
from ctxbench.scoring.matchers import MatchResult
from ctxbench.scoring.codehash import code_hash
from ctxbench.scoring.extract import drop_ruled_out_values, last_statement, sentences
from ctxbench.scoring.filters import (AnswerContext, AnswerFilter, filter_names, finish_kind, get_filter,
                                      register_filter, strip_invisible)
from ctxbench.scoring.registry import answer_filters, matcher, matchers_for
from ctxbench.scoring.strip import repetition_start
from ctxbench.scoring.tidy import unwrap_latex

__all__ = ["DEFAULT_FILTERS", "AnswerChain", "AnswerContext", "AnswerFilter", "Extraction", "MatcherError", "Scored",
           "answer_chain", "chain_for", "drop_ruled_out_values", "filter_names", "finish_kind", "get_filter",
           "gold_rows", "last_statement", "no_credit", "register_filter", "repetition_start", "score_reply",
           "sentences", "strip_invisible", "unwrap_latex"]


DEFAULT_FILTERS: tuple[str, ...] = ("strip_format_chars", "drop_reasoning_field", "strip_reasoning",
                                    "strip_chat_tokens", "cut_repetition", "final_answer", "last_statement",
                                    "drop_ruled_out", "tidy")


@dataclass(frozen=True)
class AnswerChain:
    """Named filters applied in order. Calling it on a stored reply (and the response's reasoning field) gives the
    answer matchers and the judge receive (``""`` for no answer)."""

    names: tuple[str, ...] = DEFAULT_FILTERS

    def __post_init__(self) -> None:
        for n in self.names:
            get_filter(n)

    def __call__(self, response: str | None, reasoning: str | None = None, finish_reason: str | None = None) -> str:
        return self.trace(response, reasoning, finish_reason)[-1][1]

    def trace(self, response: str | None, reasoning: str | None = None, finish_reason: str | None = None,
              ctx: AnswerContext | None = None) -> list[tuple[str, str]]:
        """``[("input", text), (filter name, text after it), ...]``: each step's output, for debugging a score.
        ``ctx`` (optional) collects the filters' notes."""
        ctx = ctx if ctx is not None else AnswerContext(reasoning, finish_reason)
        text = "" if response is None else str(response)
        steps = [("input", text)]
        for n in self.names:
            text = get_filter(n).fn(text, ctx) if text else ""
            steps.append((n, text))
        return steps

    def extract(self, response: str | None, reasoning: str | None = None, finish_reason: str | None = None,
                status: str | None = "ok") -> Extraction:
        """The answer a stored response gives, with what ``score`` tags on its rows (:class:`Extraction`):

        * status ``cut_off`` (the output budget ended the reply before its answer), or a reply the budget ended
          (finish reason ``length``, ``max_tokens``, ``MAX_TOKENS``…) with no finished final answer, or one that
          stops in mid-sentence without a final-answer marker (its last word one that ends no sentence: "…but
          first I should check whether"): no answer, tag ``cut_off``;
        * empty visible content with the reply in the reasoning field (``content: null``, ``reasoning_content``)
          and a finished reply (finish reason ``stop``…; where the finish reason is unknown, only a reasoning that
          marks its final answer): the answer is taken from the reasoning text through this same chain, tag
          ``answer_from_reasoning``;
        * otherwise this chain on the reply; the filters' notes become tags (``degenerate_repetition``,
          ``ruled_out``)."""
        kind = finish_kind(finish_reason)
        if status == "cut_off":
            return Extraction("", ("cut_off",), "content")
        source = "content"
        text, field_reasoning = response, reasoning
        if not strip_invisible(str(response or "")).strip() and strip_invisible(str(reasoning or "")).strip():
            if kind == "length":
                return Extraction("", ("cut_off",), "reasoning")
            source, text, field_reasoning = "reasoning", reasoning, None
        ctx = AnswerContext(field_reasoning, finish_reason)
        answer = self.trace(text, field_reasoning, finish_reason, ctx)[-1][1]
        notes = set(ctx.notes)
        if source == "reasoning":
            if kind != "stop" and "_unmarked" in notes:
                answer = ""                     # finish unknown: only a marked final answer counts
            notes.add("answer_from_reasoning")
        if ("_unmarked" in notes and kind != "stop" and "last_statement" in self.names
                and _ENDS_MID_SENTENCE.search(answer)):
            answer = ""
            notes.add("cut_off")
        if kind == "length" and not answer:
            notes.add("cut_off")                # the budget ended a reply that holds no answer
        if "cut_off" in notes:
            answer = ""
        return Extraction(answer, tuple(sorted(n for n in notes if not n.startswith("_"))), source)

    def fingerprint(self) -> list[list[str]]:
        """``[[filter name, "version:code hash"], ...]`` in chain order: what makes stored answers current."""
        return [[n, f"{get_filter(n).version}:{code_hash(get_filter(n).fn)}"] for n in self.names]


# a reply stopped in mid-sentence: its last word is one no English sentence ends with
_ENDS_MID_SENTENCE = re.compile(r"(?<![\w-])(?:whether|the|a|an|and|or|but|of|to|in|on|at|that|which|who|if|because|"
                                r"with|for|from|by|is|are|was|were|than|then|so|as|its|their|whose|into|since)\s*$",
                                re.IGNORECASE)


@dataclass(frozen=True)
class Extraction:
    """What :meth:`AnswerChain.extract` read from a stored response: the answer (``""`` for none), the tags its
    score rows get (``cut_off``, ``answer_from_reasoning``, ``degenerate_repetition``, ``ruled_out``) and where the
    answer came from (``content`` or ``reasoning``)."""

    answer: str
    tags: tuple[str, ...] = ()
    source: str = "content"


@lru_cache(maxsize=64)
def answer_chain(extra: Sequence[str] = ()) -> AnswerChain:
    """The default chain followed by ``extra`` filter names (a track's ``answer_filters``); a name written
    ``-name`` removes that filter of the default chain instead (a track whose paper scores the whole reply, e.g.
    needles' substring rule, declares ``-last_statement``). Raises InputError for an unknown name and for removing
    a filter the default chain does not hold."""
    drop = {n[1:] for n in extra if n.startswith("-")}
    for n in drop:
        if n not in DEFAULT_FILTERS:
            raise InputError(f"answer filter -{n}: {n!r} is not in the default chain ({', '.join(DEFAULT_FILTERS)})")
    return AnswerChain(tuple(n for n in DEFAULT_FILTERS if n not in drop)
                       + tuple(n for n in extra if not n.startswith("-")))


def chain_for(benchmark: str | None) -> AnswerChain:
    """The answer chain of a benchmark: the default chain and the filters its track adds. Raises InputError for an
    unregistered benchmark or an unknown filter name (naming the track)."""
    extra = tuple(answer_filters(benchmark))
    try:
        return answer_chain(extra)
    except InputError as e:
        raise InputError(f"track {benchmark}: answer_filters: {e}") from None


@dataclass(frozen=True)
class Scored:
    """One matcher's result on one reply, the answer it scored (the answer chain's output) and the extraction's
    tags (``cut_off``, ``answer_from_reasoning``, ``degenerate_repetition``…: already among ``result.tags``)."""

    matcher: str
    result: MatchResult
    answer: str
    extraction: Extraction = Extraction("")


def gold_rows(instance: dict) -> list:
    """The gold rows of an instance (``gold``: a list of rows, each a list of values; a bare value is one row)."""
    gold = instance.get("gold")
    if not isinstance(gold, list):
        return [[gold]]
    return [r if isinstance(r, list) else [r] for r in gold]


def no_credit(instance: dict, tags: Sequence[str]) -> MatchResult:
    """The result of a reply that earns no credit whatever the matcher (a reply the output budget ended before
    its answer): 0 for every gold row, ``tags``."""
    rows = gold_rows(instance)
    return MatchResult(0.0, [0.0] * len(rows), list(tags),
                       [{"gold": r, "credit": 0.0, "text": None} for r in rows])


def score_reply(response: str | None, instance: dict, reasoning: str | None = None,
                names: Sequence[str] | None = None, errors: list | None = None, finish_reason: str | None = None,
                status: str | None = "ok") -> list[Scored]:
    """Score one stored reply the way ``score`` does: the instance's benchmark's answer chain (:func:`chain_for`,
    :meth:`AnswerChain.extract`: ``finish_reason`` and ``status`` as stored in ``responses``), then each of its
    matchers (``names``, default all, the primary first) on that answer. A reply cut off by the output budget
    (status ``cut_off``, or :meth:`AnswerChain.extract` finds it so) earns 0 from every matcher, tag ``cut_off``.
    The extraction's other tags (``answer_from_reasoning``, ``degenerate_repetition``, ``ruled_out``) are added to
    each result's tags. ``instance``: the ``instances.parquet`` row with ``gold`` and ``accepted_answers`` parsed
    from JSON, without ``context`` (``score`` never loads contexts). Raises InputError for an unregistered
    benchmark or an unknown matcher (:mod:`ctxbench.scoring.registry`). A matcher that raises is a
    :class:`MatcherError` (naming the track, the matcher, the instance and the line that raised): raised, or with
    ``errors`` (a list) appended to it while the other matchers still score the reply (``score`` sets that one
    response aside and goes on)."""
    bench = instance.get("benchmark")
    ex = chain_for(bench).extract(response, reasoning, finish_reason, status)
    answer = ex.answer
    out = []
    for n in (names or matchers_for(bench)):
        fn = matcher(n, bench)
        if "cut_off" in ex.tags:
            out.append(Scored(n, no_credit(instance, ex.tags), answer, ex))
            continue
        try:
            res = fn(strip_invisible(answer), instance)
        except Exception as e:  # a matcher's bug: name the track, matcher, instance and the failing line
            err = MatcherError(_matcher_failure(n, bench, instance, e), n, instance.get("instance_id"))
            if errors is None:
                raise err from e
            errors.append(err)
            continue
        res.tags = list(dict.fromkeys([*res.tags, *ex.tags]))
        out.append(Scored(n, res, answer, ex))
    return out


class MatcherError(InputError):
    """A matcher raised on one reply: ``matcher``, ``instance_id`` and the message (:func:`score_reply`)."""

    def __init__(self, msg: str, matcher: str, instance_id: str | None):
        super().__init__(msg)
        self.matcher, self.instance_id = matcher, instance_id


def _matcher_failure(name: str, bench: str | None, instance: dict, e: Exception) -> str:
    """The message of a matcher that raised: track, matcher, instance, exception, the line that raised, and for a
    missing column what the row holds (``context`` is never in it)."""
    import traceback

    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
    msg = (f"matcher {name!r} of track {bench} raised {type(e).__name__}: {e}{where} on instance "
           f"{instance.get('instance_id')}")
    if isinstance(e, KeyError) and e.args and e.args[0] not in instance:
        msg += (f". A matcher receives the instances.parquet row without `context` (contexts can be GBs: score "
                f"never loads them); it holds {', '.join(sorted(instance))}. A failure tag that needs the context "
                f"belongs in the track's `tagger`, which is given the build directory")
    return msg

# the names that moved to the modules beside this one, still importable from here for one release (CHANGELOG.md)
from ctxbench.scoring.strip import (  # noqa: E402,F401
    cut_repetition, drop_reasoning_field, strip_chat_tokens, strip_format_chars, strip_reasoning,
)
from ctxbench.scoring.extract import drop_ruled_out, final_answer, last_statement_filter  # noqa: E402,F401
from ctxbench.scoring.tidy import (  # noqa: E402,F401
    first_line, fold_width, strip_code_fences, strip_trailing_period, tidy,
)
