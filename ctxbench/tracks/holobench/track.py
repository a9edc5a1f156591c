"""The verbalized-database track (HoloBench) as a registered :class:`~ctxbench.core.track.Track`."""

from __future__ import annotations

from ctxbench.core.track import Stage, Track, register_track
from ctxbench.tracks.holobench.config import HoloBenchConfig

_P = "ctxbench.tracks.holobench"  # stages are looked up on the package when they run


@register_track
class HoloBench(Track):
    """SQL questions over a database whose rows are verbalized into the context (Maekawa et al., sections 3.2-3.3);
    gold answers by executing the SQL over exactly the relevant rows included."""

    name = "holobench"
    title = "Verbalized databases (HoloBench): SQL questions over verbalized rows"
    Config = HoloBenchConfig
    stages = (
        Stage("load", f"{_P}:load_stage", ("cfg", "out", "force", "versioned"), ("loaded",), retries=2),
        Stage("verbalize", f"{_P}:verbalize_stage", ("loaded",), ("src",)),
        Stage("assemble", f"{_P}:assemble_stage", ("loaded", "src", "progress"), ("asm",)),
        Stage("gold", f"{_P}:gold_stage", ("loaded", "asm"), ("instances", "quarantine")),
        Stage("validate", f"{_P}:validate_stage", ("loaded", "src", "instances")),
        Stage("write", f"{_P}:write_stage", ("loaded", "src", "instances", "quarantine", "asm"), ("result",), retries=2),
        Stage("certify", "ctxbench.verify:certify_stage", ("result",)),
    )
    matchers = {"row_match": "ctxbench.tracks.holobench.scoring:row_match_instance"}
    scoring_note = ("Scores use the deterministic row matcher (row_match): each gold row is an exact (1), partial "
                    "(0.5) or no match (0); an instance scores the mean over its gold rows.")
    verifier = "ctxbench.tracks.holobench.verify:certify"
    cli_names = {"positions": "position"}
    cli_hidden = frozenset({"question_ids"})
