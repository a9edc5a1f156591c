"""Versions of scoring code: what makes stored scores current besides the build's tables.

``score`` reruns when a matcher, the failure tagger, an answer filter or a judge prompt changes, not only when
instances or responses change (:func:`ctxbench.run.incremental.score_inputs_hash`). A piece of scoring code is
identified by its ``version`` attribute where it declares one and by :func:`code_hash`: a hash of the source of the
module that defines it and of every ctxbench module that module imports at its top level (transitively), of the
data files it declares in a module-level ``SCORING_DATA`` (paths under ``assets/``), and of the installed versions of
the third-party packages those modules import anywhere (cn2an, opencc, text2num …: a new release may read numerals
differently). So a fix to the number reader reruns every matcher that reads numbers, and a change to a report
module reruns nothing.
"""

from __future__ import annotations

from ctxbench.scoring.codehash import code_hash, module_closure
from ctxbench.core.track import tracks
from ctxbench.scoring.judge import DEFAULT_JUDGE_PROMPT
from ctxbench.scoring.pipeline import chain_for
from ctxbench.scoring.registry import judge_prompt, matcher, matchers_for, tagger

__all__ = ["code_hash", "module_closure", "scoring_fingerprint"]


def scoring_fingerprint(benchmarks: list[str] | None = None, judge: str | None = None,
                        judge_prompts: list[str] | tuple[str, ...] | None = None) -> dict:
    """What scores of ``benchmarks`` (default: every registered track) depend on besides the build's tables: per
    benchmark its matchers (reference and :func:`code_hash`), failure tagger and answer chain
    (:meth:`ctxbench.scoring.pipeline.AnswerChain.fingerprint`); with a judge, each judge prompt's version and code
    (``judge_prompts``, default the row judge). Raises InputError for a benchmark no track registers and for an
    unknown judge prompt (as ``score`` would)."""
    names = sorted(set(benchmarks)) if benchmarks is not None else sorted(t.name for t in tracks())
    out: dict = {}
    for b in names:
        tag = tagger(b)
        out[b] = {
            "matchers": {m: code_hash(matcher(m, b)) for m in matchers_for(b)},
            "tagger": None if tag is None else code_hash(tag),
            "answer_filters": chain_for(b).fingerprint(),
        }
    if judge:
        out["judge"] = {"model": judge, "prompts": {p: code_hash(judge_prompt(p)) for p in
                                                    dict.fromkeys(judge_prompts or (DEFAULT_JUDGE_PROMPT,))}}
    return out
