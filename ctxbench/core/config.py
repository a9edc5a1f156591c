"""Paths and environment: where assets, shared data and the response cache live."""

from __future__ import annotations

import os
from pathlib import Path
from ctxbench.core.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]


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


def yaml_error_message(e: Exception, source: str | Path, text: str | None = None, what: str = "file") -> str:
    """One line naming where a YAML text fails to parse: ``"FILE, line L, column C: not a readable YAML WHAT: PROBLEM
    (CONTEXT); the line reads '...'"``, lines and columns counted from 1 (PyYAML's ``problem_mark`` counts from
    0); the line's text from ``text`` (the YAML parsed) or the mark's buffer. An error without a position keeps
    its own words."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = str(getattr(e, "problem", None) or "") or type(e).__name__
    ctx = getattr(e, "context", None)
    if ctx:
        cmark = getattr(e, "context_mark", None)
        ctx_at = f" at line {cmark.line + 1}" if cmark is not None and mark is not None and cmark.line != mark.line \
            else ""
        problem += f" ({ctx}{ctx_at})"
    if mark is None:
        return f"{source} is not a readable YAML {what}: {str(e).splitlines()[0] if str(e) else problem}"
    line = ""
    buf = text if text is not None else getattr(mark, "buffer", None)
    if buf:
        lines = str(buf).rstrip("\0").splitlines()
        if 0 <= mark.line < len(lines) and lines[mark.line].strip():
            line = f"; the line reads {lines[mark.line].strip()[:120]!r}"
    return f"{source}, line {mark.line + 1}, column {mark.column + 1}: not a readable YAML {what}: {problem}{line}"


def read_yaml(path: str | Path, what: str = "file"):
    """The documents of the YAML file ``path`` (:func:`load_yaml`), for every YAML a user gives (query sets,
    templates, needle sets, settings). Raises InputError naming the file, and for a syntax error its line and
    column (:func:`yaml_error_message`); ``what`` names the file's role (``"query set"``: "not a readable YAML query
    set")."""
    import yaml


    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p} does not exist (a YAML {what} was expected there)") from None
    except IsADirectoryError:
        raise InputError(f"{p} is not a readable YAML {what}: it is a directory; give a .yaml file") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{p} is not a readable YAML {what}: not UTF-8 text (byte {e.start}); save it as UTF-8") \
            from None
    except OSError as e:
        raise InputError(f"{p} is not a readable YAML {what}: {e.strerror or e}") from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as e:
        raise InputError(yaml_error_message(e, p, text, what)) from None


def check_keys(data, known, where: str | Path, what: str = "top-level key") -> None:
    """Raise InputError when the mapping ``data`` has a key outside ``known``, naming it and the known key it
    probably meant (``difflib.get_close_matches``), else the keys there are. ``where`` names the file."""
    import difflib


    if not isinstance(data, dict):
        return
    known = list(known)
    for k in data:
        if k in known:
            continue
        near = difflib.get_close_matches(str(k), known, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else f"the {what}s are: {', '.join(known)}"
        raise InputError(f"{where}: unknown {what} {k!r} ({hint})")
