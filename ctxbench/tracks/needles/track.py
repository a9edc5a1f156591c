"""The planted-fact track (needles in a real corpus) as a registered :class:`~ctxbench.core.track.Track`."""

from __future__ import annotations

from pathlib import Path

from ctxbench.core.track import Stage, Track, register_track
from ctxbench.tracks.needles.config import NeedlesConfig

_P = "ctxbench.tracks.needles"  # stages are looked up on the package when they run


@register_track
class Needles(Track):
    """Real and altered facts and multi-hop chains planted in a real corpus at chosen depths, with a haystack per
    sizing model and tier ("Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows", sections 3.1-3.5)."""

    name = "needles"
    title = "Planted facts (needles): real/altered needles and chains in per-model haystacks of a real corpus"
    Config = NeedlesConfig
    stages = (
        Stage("load", f"{_P}:load_stage", ("cfg", "out", "force", "versioned"), ("loaded",), retries=2),
        Stage("verify", f"{_P}:verify_stage", ("loaded",), ("checked",)),
        Stage("count", f"{_P}:count_stage", ("loaded",), ("counts",)),
        Stage("assemble", f"{_P}:assemble_stage", ("loaded", "counts", "progress"), ("asm",)),
        Stage("validate", f"{_P}:validate_stage", ("asm",)),
        Stage("write", f"{_P}:write_stage", ("loaded", "asm", "checked"), ("result",), retries=2),
        Stage("certify", "ctxbench.verify:certify_stage", ("result",)),
    )
    verifier = "ctxbench.tracks.needles.verify:certify"
    matchers = {"substring": "ctxbench.tracks.needles.scoring:substring_match"}
    # the paper scores the expected value anywhere in the reply (section 3.6): no narrowing to its last sentence
    answer_filters = ("-last_statement",)
    tagger = "ctxbench.tracks.needles.analysis:tag_failures"
    report_sections = ("ctxbench.tracks.needles.report:needles_section",)
    report_options = {"regime": "ctxbench.tracks.needles.analysis:check_threshold_overrides"}
    cli_checks = {"needles": "ctxbench.tracks.needles.questions:needle_asset_path",
                  "models": "ctxbench.models.registry:check_sizing_model"}
    template_keys = ("template_id", "question_id", "needle_id")

    def select_for_model(self, build_dir: Path, model: str) -> set[str] | None:
        """A needles build holds one haystack per sizing model (sized with that model's tokenizer and window): a
        model that is one of the build's sizing models answers its own haystacks only (names compared without
        case and without a provider prefix such as ``openai/``); any other model answers every instance."""
        import pyarrow.parquet as pq

        from ctxbench.tracks.needles import build  # lazy: the build's code, loaded when a build is read

        ipath = Path(build_dir) / "instances.parquet"
        cols = [c for c in ("instance_id", "sizing_model") if c in pq.read_schema(ipath).names]
        tbl = pq.read_table(ipath, columns=cols)
        kept = build.own_haystacks(tbl, model)
        return None if kept.num_rows == tbl.num_rows else set(kept.column("instance_id").to_pylist())

    def result_lines(self, result) -> list[str]:
        """One line per haystack: its sizing numbers (tokens of the model's tokenizer, characters, paragraphs)."""
        out = []
        for h in getattr(result, "haystacks", []):
            note = f" (approximate tokenizer, {h['safety_margin']:.0%} margin)" if h["approximate"] else ""
            out.append(f"  {h['model']} @ {h['tier']:,}: haystack {h['tokens']:,} tokens of {h['tokenizer']} "
                       f"({h['chars']:,} characters, {h['k']:,} paragraphs), budget {h['budget']:,}{note}")
        return out
