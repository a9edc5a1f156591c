"""Scientific-article track (SciTrek): its build (``build``) and the modules only this track uses."""

from ctxbench.tracks.scitrek.build import (
    SciTrekConfig,
    S2Fetch,
    fetch_s2_stage,
    Loaded,
    Converted,
    Collected,
    fetch_stage,
    convert_stage,
    database_stage,
    collections_stage,
    Question,
    questions_stage,
    instances_stage,
    validate_stage,
    write_stage,
    build_scitrek,
)

__all__ = [
    "SciTrekConfig",
    "S2Fetch",
    "fetch_s2_stage",
    "Loaded",
    "Converted",
    "Collected",
    "fetch_stage",
    "convert_stage",
    "database_stage",
    "collections_stage",
    "Question",
    "questions_stage",
    "instances_stage",
    "validate_stage",
    "write_stage",
    "build_scitrek",
]
