"""LaRA import track (RAG versus long context): its build (``build``) and the modules only this track uses."""

from ctxbench.core.track import lazy_attributes

# The build's names are imported on first use (ctxbench.core.track.lazy_attributes, issue 36).
__all__ = [
    "LaraConfig",
    "Loaded",
    "import_lara",
    "instances_stage",
    "load_stage",
    "validate_stage",
    "write_stage",
]


__getattr__ = lazy_attributes(__name__, "build", __all__)
