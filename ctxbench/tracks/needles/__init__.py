"""Planted-fact track (classical-Chinese 1M needle study): its build (``build``) and the modules only this track uses."""

from ctxbench.tracks.needles.build import (
    NeedlesConfig,
    BuildResult,
    Loaded,
    Haystack,
    load_stage,
    verify_stage,
    count_stage,
    size_haystack,
    Assembled,
    assemble_stage,
    validate_stage,
    write_stage,
    build_needles,
    own_haystacks,
)

__all__ = [
    "NeedlesConfig",
    "BuildResult",
    "Loaded",
    "Haystack",
    "load_stage",
    "verify_stage",
    "count_stage",
    "size_haystack",
    "Assembled",
    "assemble_stage",
    "validate_stage",
    "write_stage",
    "build_needles",
    "own_haystacks",
]
