"""Verbalized-database track (HoloBench): its build (``build``) and the modules only this track uses."""

from ctxbench.core.track import lazy_attributes

# The build's names are imported on first use (ctxbench.core.track.lazy_attributes, issue 36).
__all__ = [
    "HoloBenchConfig",
    "build_hash_of",
    "build_context",
    "Loaded",
    "Assembled",
    "hash_inputs",
    "load_stage",
    "verbalize_stage",
    "assemble_stage",
    "gold_stage",
    "validate_stage",
    "write_stage",
    "build_holobench",
]


__getattr__ = lazy_attributes(__name__, "build", __all__)
