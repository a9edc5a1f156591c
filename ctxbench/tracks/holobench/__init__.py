"""Verbalized-database track (HoloBench): its build (``build``) and the modules only this track uses."""

from ctxbench.tracks.holobench.build import (
    HoloBenchConfig,
    build_hash_of,
    build_context,
    Loaded,
    Assembled,
    hash_inputs,
    load_stage,
    verbalize_stage,
    assemble_stage,
    gold_stage,
    validate_stage,
    write_stage,
    build_holobench,
)

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
