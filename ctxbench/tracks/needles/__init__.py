"""Planted-fact track (classical-Chinese 1M needle study): its build (``build``) and the modules only this track uses."""

from ctxbench.core.track import lazy_attributes

# The build's names are imported on first use (ctxbench.core.track.lazy_attributes, issue 36).
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


__getattr__ = lazy_attributes(__name__, "build", __all__)
