"""ctxbench: a benchmark factory and evaluation harness for long-context language models.

The library is plain Python (no Prefect import); ``pipelines/`` wires it into Prefect flows.
"""

__version__ = "0.1.0"


# -- import paths of before the layers change (issue 33), kept for one release -----------------------------------
# A module that moved is still importable under its old name: importing it gives the module at its new path (the
# same object) with a DeprecationWarning naming that path. CHANGELOG.md lists them; ctxbench.tracks.base, the
# documented path of the track contract, is a module of its own (ctxbench/tracks/base.py).
import importlib as _importlib  # noqa: E402
import importlib.abc as _abc  # noqa: E402
import importlib.util as _util  # noqa: E402
import sys as _sys  # noqa: E402
import warnings as _warnings  # noqa: E402

MOVED_MODULES = {
    **{f"ctxbench.{m}": f"ctxbench.core.{m}" for m in ("errors", "config", "hashing", "progress", "interrupt",
                                                       "sidecar", "buildcache", "extras", "storage", "userfiles",
                                                       "redact", "outdir")},
    **{f"ctxbench.{m}": f"ctxbench.run.{m}" for m in ("evaluate", "score", "incremental", "spend", "dryrun",
                                                      "planning", "backfill", "export", "engine_log")},
    **{f"ctxbench.analysis.{m}": f"ctxbench.features.{m}" for m in ("difficulty", "language", "overlap")},
    "ctxbench.prompts": "ctxbench.models.prompts",
    "ctxbench.validate": "ctxbench.tracks.validate",
    "ctxbench.config_options": "ctxbench.cli.options",
    "ctxbench.help_format": "ctxbench.cli.help_format",
    "ctxbench.questions.generate": "ctxbench.tracks.holobench.generate",
}


class _MovedModule(_abc.MetaPathFinder, _abc.Loader):
    """Finds an old module name of :data:`MOVED_MODULES` and loads it as the module at its new path."""

    def find_spec(self, fullname, path=None, target=None):
        return _util.spec_from_loader(fullname, self) if fullname in MOVED_MODULES else None

    def create_module(self, spec):
        new = MOVED_MODULES[spec.name]
        _warnings.warn(f"{spec.name} moved to {new} (CHANGELOG.md); the old path goes in the next release",
                       DeprecationWarning, stacklevel=2)
        return _importlib.import_module(new)

    def exec_module(self, module):
        pass


if not any(isinstance(f, _MovedModule) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedModule())  # before any other finder: an old name is never another file

