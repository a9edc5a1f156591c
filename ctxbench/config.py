"""Paths and environment: where assets, shared data and the response cache live."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def installed_file(distribution: str, suffix: str) -> Path | None:
    """The first existing file of an installed distribution whose path ends with ``suffix`` (found through
    ``importlib.metadata``, without importing the package); None when the distribution or the file is absent."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if str(f).endswith(suffix):
            p = Path(dist.locate_file(f))
            if p.exists():
                return p
    return None


def assets_dir() -> Path:
    """Directory holding templates, query sets and registries (``$CTXBENCH_ASSETS`` or the repo's ``assets/``)."""
    return Path(os.environ.get("CTXBENCH_ASSETS", REPO_ROOT / "assets"))


def shared_data_dir() -> Path:
    """Real test data (``$CTXBENCH_SHARED_DATA`` or ``../shared/data`` beside the checkout)."""
    return Path(os.environ.get("CTXBENCH_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def ctxbench_home() -> Path:
    """``$CTXBENCH_HOME`` (default ``~/.ctxbench``): the response cache and other state shared across builds."""
    return Path(os.environ.get("CTXBENCH_HOME", Path.home() / ".ctxbench"))


def cache_dir() -> Path:
    """Response cache directory (``$CTXBENCH_HOME/cache``), outside every build directory."""
    return ctxbench_home() / "cache"
