"""The LaRA import (RAG versus long context) as a registered :class:`~ctxbench.core.track.Track`."""

from __future__ import annotations

from ctxbench.core.track import Stage, Track, register_track
from ctxbench.tracks.lara.config import LaraConfig

_P = "ctxbench.tracks.lara"  # stages are looked up on the package when they run


@register_track
class Lara(Track):
    """LaRA's queries and corpora imported as instances (Li et al., ICML 2025, section 3): location, reasoning,
    comparison and hallucination questions over novels, financial statements and papers."""

    name = "lara"
    title = "LaRA import (RAG versus long context): LaRA's queries over its corpora"
    Config = LaraConfig
    verbs = ("build", "import")
    stages = (
        Stage("load", f"{_P}:load_stage", ("cfg", "out", "force", "versioned"), ("loaded",)),
        Stage("instances", f"{_P}:instances_stage", ("loaded",), ("instances", "quarantine")),
        Stage("validate", f"{_P}:validate_stage", ("instances",)),
        Stage("write", f"{_P}:write_stage", ("loaded", "instances", "quarantine"), ("result",), retries=2),
        Stage("certify", "ctxbench.verify:certify_stage", ("result",)),
    )
    # deterministic fallback first; LaRA's own LLM judge: score --judge MODEL --judge-prompt lara
    judge_prompts = {"lara": "ctxbench.tracks.lara.judge:LARA_JUDGE"}
    verifier = "ctxbench.tracks.lara.verify:certify"
    matchers = {"lara_fallback": "ctxbench.tracks.lara.scoring:lara_fallback",
                "f1": "ctxbench.tracks.lara.scoring:f1_instance",
                "containment": "ctxbench.tracks.lara.scoring:containment_instance"}
    fallback_matchers = frozenset({"lara_fallback", "f1", "containment"})
    # free-text answers, judged whole (LaRA section 3.4): no narrowing to the reply's last sentence
    answer_filters = ("-last_statement",)
