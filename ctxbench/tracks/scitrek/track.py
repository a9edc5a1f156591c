"""The scientific-article track (SciTrek) as a registered :class:`~ctxbench.core.track.Track`."""

from __future__ import annotations

from ctxbench.core.track import Stage, Track, register_track
from ctxbench.tracks.scitrek.config import S2Fetch, SciTrekConfig

_P = "ctxbench.tracks.scitrek"  # stages are looked up on the package when they run


@register_track
class SciTrek(Track):
    """Questions over collections of scientific articles linked by citations ("Who Gets Cited Most?", sections
    3.1-3.4): SQL over the articles' metadata, asked over the full texts (F-*) or the metadata tables (D-*)."""

    name = "scitrek"
    title = "Scientific articles (SciTrek): questions over citation-linked article collections"
    Config = SciTrekConfig
    inputs = {"s2": (S2Fetch | None, None)}  # fetch new Semantic Scholar clusters into cfg.pdfs first
    stages = (
        Stage("fetch-s2", f"{_P}:fetch_s2_stage", ("cfg", "s2"), ("s2_fetched",), retries=3, retry_delay_s=30),
        Stage("fetch", f"{_P}:fetch_stage", ("cfg", "out", "force", "versioned"), ("loaded",), retries=3, retry_delay_s=10),
        Stage("convert", f"{_P}:convert_stage", ("loaded",), ("conversions", "convert_quarantine"), retries=2,
              retry_delay_s=10),
        Stage("database", f"{_P}:database_stage", ("loaded", "conversions"), ("conv",)),
        Stage("collections", f"{_P}:collections_stage", ("loaded", "conv"), ("col",)),
        Stage("questions", f"{_P}:questions_stage", ("loaded", "conv", "col"),
              ("questions", "question_quarantine", "counts"), retries=1, retry_delay_s=10),
        Stage("instances", f"{_P}:instances_stage", ("loaded", "col", "questions"), ("instances",)),
        Stage("validate", f"{_P}:validate_stage", ("loaded", "col", "instances")),
        Stage("write", f"{_P}:write_stage", ("loaded", "conv", "col", "instances", "convert_quarantine",
                                             "question_quarantine", "counts"), ("result",), retries=2),
        Stage("certify", "ctxbench.verify:certify_stage", ("result",)),
    )
    verifier = "ctxbench.tracks.scitrek.verify:certify"
    matchers = {"exact_match": "ctxbench.tracks.scitrek.scoring:exact_match",
                "f1": "ctxbench.tracks.scitrek.scoring:f1"}
    scoring_note = "Exact match and F1 over the answer's items (SciTrek section 4)."
    report_sections = ("ctxbench.tracks.scitrek.report:scitrek_section",)
