"""LaRA import track (RAG versus long context): its build (``build``) and the modules only this track uses."""

from ctxbench.tracks.lara.build import (
    LaraConfig,
    Loaded,
    import_lara,
    instances_stage,
    load_stage,
    validate_stage,
    write_stage,
)

__all__ = [
    "LaraConfig",
    "Loaded",
    "import_lara",
    "instances_stage",
    "load_stage",
    "validate_stage",
    "write_stage",
]
