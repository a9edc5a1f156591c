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


def build_threads() -> int:
    """Threads a build may use for independent work whose heavy part releases the GIL (tokenizing contexts,
    SQL engines): ``$CTXBENCH_BUILD_THREADS``, default the number of CPUs this process may use, at most 4. Results
    never depend on it (each piece of work is seeded by its own key; results are kept in their sequential order)."""
    v = os.environ.get("CTXBENCH_BUILD_THREADS", "").strip()
    if v:
        try:
            return max(1, int(v))
        except ValueError:
            pass
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def ordered_map(fn, items, threads: int | None = None):
    """``fn`` over ``items`` on up to ``threads`` threads (default :func:`build_threads`), yielding the results in
    the order of ``items`` as each becomes ready (an exception is raised where its item's result would come).
    With one thread (or one item) it runs in the calling thread."""
    items = list(items)
    threads = build_threads() if threads is None else threads
    if threads <= 1 or len(items) <= 1:
        for x in items:
            yield fn(x)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as ex:
        futures = [ex.submit(fn, x) for x in items]
        try:
            for f in futures:
                yield f.result()
        finally:
            for f in futures:
                f.cancel()


def load_yaml(text: str):
    """PyYAML's safe loading of ``text`` (``yaml.safe_load``'s documents), read in C by libyaml's loader where
    PyYAML was built with it. Raises ``yaml.YAMLError`` as ``safe_load`` does."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
