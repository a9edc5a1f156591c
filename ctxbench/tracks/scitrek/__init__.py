"""Scientific-article track (SciTrek): its build (``build``) and the modules only this track uses."""

from ctxbench.core.track import lazy_attributes

# The build's names are imported on first use (ctxbench.core.track.lazy_attributes, issue 36).
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


__getattr__ = lazy_attributes(__name__, "build", __all__)
