"""Scientific-article track (SciTrek): its build (``build``) and the modules only this track uses."""

# The build's names are imported on first use (PEP 562): registering the track (its Config, in .config) and
# ``ctxbench build --help`` import none of the build's libraries (issue 36); a stage named
# "ctxbench.tracks.scitrek:<stage>" loads the build when it runs.
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


def __getattr__(name: str):
    if name in __all__:
        from ctxbench.tracks.scitrek import build  # lazy: the build's libraries load when a build runs (start-up time)

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
