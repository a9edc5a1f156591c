"""Output directories: the one rule for every command that writes a directory (``build``, ``import``, ``run``,
``export``, ``compare``, ``fetch corpus``, ``fetch s2``, ``questions import``), and the lock a build holds on
its output directory (issue 31, defects 3 and 4).

The rule (:func:`check_out_dir`): a new or empty directory is written; a directory holding the command's own
earlier output is written again (each command says how it recognises it: the marker file
``.ctxbench-output.json`` that :func:`mark_out_dir` writes before anything else, or its own manifest such as a
build's ``manifest.json``); anything else is refused with one line naming what is there (its first few
entries) and offering ``--force``. ctxbench's own hidden files (locks, temporary and staging files, part
directories) do not count as content.

The lock (:func:`out_dir_lock`): a build holds an exclusive lock (the ``filelock`` library: ``fcntl.flock`` on
``.<OUT's name>.ctxbench.lock`` beside ``OUT``, so that the build directory itself holds only the build's files
and a refused directory gets nothing) from its first stage to its manifest. A second build into the same directory does not
wait: it stops at once with :class:`DirectoryBusy` naming the process (PID and host) that holds the lock, so a
nightly job never hangs behind a forgotten one and two builds never mix their files. The lock is released when
the build ends, by any means (an exception, a kill: the operating system drops a dead process's locks).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench import __version__

MARKER = ".ctxbench-output.json"
SHOWN = 5  # entries named in the refusal


class DirectoryBusy(CtxbenchError):
    """Another process holds the lock on an output directory (a build into it is running). The CLI exits 75
    (stopped to be resumed): rerun the same command once that process has finished."""


def _ours(name: str) -> bool:
    """ctxbench's own hidden entries: the marker, locks, temporary/staging files and part directories."""
    return name.startswith(".") and (name.startswith(".ctxbench") or ".tmp" in name
                                     or name.endswith((".staging", ".lock", ".parts", ".ctxbench.owner")))


def foreign_entries(out: str | Path, own: Iterable[str] = ()) -> list[str]:
    """Sorted names of the entries of the directory ``out`` that are neither ctxbench's hidden files nor in
    ``own`` (names the command itself writes); [] when ``out`` is missing or not a directory."""
    out, own = Path(out), set(own)
    try:
        return sorted(p.name for p in out.iterdir() if p.name not in own and not _ours(p.name))
    except (NotADirectoryError, FileNotFoundError):
        return []


def marked_by(out: str | Path) -> str | None:
    """The command that marked ``out`` as its output (:func:`mark_out_dir`), or None."""
    try:
        d = json.loads((Path(out) / MARKER).read_text(encoding="utf-8"))
        return d.get("command") if isinstance(d, dict) else None
    except (OSError, ValueError):
        return None


def check_out_dir(out: str | Path, command: str, *, force: bool = False, own: Iterable[str] = (),
                  is_own: bool = False, what: str | None = None) -> bool:
    """Check the directory ``out`` that ``ctxbench <command>`` is about to write.

    Returns True when ``out`` holds the command's own earlier output (``is_own``, given by the caller from its
    manifest, or the marker of :func:`mark_out_dir` naming ``command``), else False (new, empty, only
    ``own`` names, or ``force``). Raises InputError when ``out`` is a file, or a non-empty directory with
    other content and not ``force``: one line naming ``out``, its first few entries and the way out
    (another --out, or --force). ``what``: the kind of output in the message (default ``command``'s output)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file: pass a directory for {what or f'`ctxbench {command}`'}")
    if is_own or marked_by(out) == command:
        return True
    foreign = foreign_entries(out, own)
    if foreign and not force:
        shown = ", ".join(foreign[:SHOWN]) + (f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else "")
        raise InputError(f"--out {out} is not empty and holds no ctxbench {what or f'{command} output'} (it holds "
                         f"{shown}): choose an empty or new directory, or pass --force to write into it")
    return False


def mark_out_dir(out: str | Path, command: str) -> None:
    """Create ``out`` (and its parents) and mark it as ``command``'s output (the hidden ``.ctxbench-output.json``)
    so that a later run of the same command, even after an interruption, writes it again."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if marked_by(out) != command:
        (out / MARKER).write_text(json.dumps({"command": command, "ctxbench": __version__}) + "\n", encoding="utf-8")


def claim_out_dir(out: str | Path, command: str, *, force: bool = False, own: Iterable[str] = (),
                  is_own: bool = False, what: str | None = None) -> bool:
    """:func:`check_out_dir`, then :func:`mark_out_dir`; returns what the check returned."""
    was_own = check_out_dir(out, command, force=force, own=own, is_own=is_own, what=what)
    mark_out_dir(out, command)
    return was_own


def check_out_file(out: str | Path, command: str, *, force: bool = False, is_own: bool = False) -> None:
    """The same rule for a command that writes one file (``questions generate --out FILE``): a new file, or the
    command's own earlier output (``is_own``), is written; an existing file of anything else is refused with one
    line offering ``--force``. Raises InputError."""
    out = Path(out)
    if out.is_dir():
        raise InputError(f"--out {out} is a directory: give a file name")
    if out.exists() and not is_own and not force:
        raise InputError(f"--out {out} exists and is no earlier output of `ctxbench {command}`: choose a new file "
                         f"name, or pass --force to replace it")


# what a build directory may hold before its manifest is written (an interrupted build restarts over these)
BUILD_ENTRIES = frozenset({"instances.parquet", "quarantine.parquet", "articles.parquet", "source.sqlite",
                           "collections", "responses.parquet", "scores.parquet", "report", "calibration.json"})


def is_run_root(root: str | Path) -> bool:
    """Whether ``root`` holds a run root's files: a ``latest`` link, or a build directory (its manifest, or a
    build hash's name: an interrupted build) below it."""
    import re

    root = Path(root)
    try:
        return (root / "latest").exists() or any(
            p.is_dir() and ((p / "manifest.json").exists() or re.fullmatch(r"[0-9a-f]{12,64}", p.name))
            for p in root.iterdir())
    except OSError:
        return False


def check_build_out(out: str | Path, force: bool = False, versioned: bool = False) -> None:
    """The rule for a build's ``out``, checked before its lock is taken and anything is created: a run root
    (``versioned``: :func:`is_run_root`, or marked by ``ctxbench run``) or a build directory (its manifest, or
    the files of :data:`BUILD_ENTRIES`), else empty, unless ``force``. Raises InputError naming what is there."""
    out = Path(out)
    if versioned:
        check_out_dir(out, "run", force=force, own={"latest"}, is_own=is_run_root(out), what="run root")
    elif not (out / "manifest.json").exists():
        check_out_dir(out, "build", force=force, own=BUILD_ENTRIES, what="build")


_held: dict[Path, list] = {}  # directory -> [FileLock, depth]: re-entrant within one process
_held_guard = threading.Lock()


def lock_files(out: str | Path) -> tuple[Path, Path]:
    """The lock file of the output directory ``out`` and the note of its holder: ``.<name>.ctxbench.lock`` and
    ``.<name>.ctxbench.owner`` beside ``out`` (in its parent directory)."""
    o = Path(out).resolve()
    return o.parent / f".{o.name}.ctxbench.lock", o.parent / f".{o.name}.ctxbench.owner"


def lock_holder(out: str | Path) -> str:
    """Who holds the lock on ``out``: ``PID n on host h`` as the holder recorded it, else ``another process``."""
    try:
        d = json.loads(lock_files(out)[1].read_text(encoding="utf-8"))
        return f"PID {d['pid']} on host {d['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


@contextlib.contextmanager
def out_dir_lock(out: str | Path, command: str = "build", check: Callable[[], Any] | None = None) -> Iterator[None]:
    """Hold the exclusive lock on the output directory ``out`` while the block runs (module docstring; the lock
    file is beside ``out``, whose parent is created when missing). Re-entrant within one process. ``check``: called first, before anything is created (the
    directory rule, so that a refused directory gets no lock file). Raises :class:`DirectoryBusy` at once when
    another process holds it, naming that process (PID and host) and the directory."""
    from filelock import FileLock, Timeout

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file: pass a directory for `ctxbench {command}`")
    if check is not None:
        check()
    key = out.resolve()
    with _held_guard:
        if key in _held:
            _held[key][1] += 1
            entry = _held[key]
        else:
            entry = None
    lock_path, owner = lock_files(out)
    if entry is None:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(lock_path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise DirectoryBusy(f"--out {out} is in use: {lock_holder(out)} is writing a build into it (lock "
                                f"{lock_path}); wait for it to finish and rerun, or choose another --out") from None
        try:
            owner.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                         "command": command}) + "\n", encoding="utf-8")
        except OSError:
            pass  # the lock holds without the note; a second build then names "another process"
        with _held_guard:
            _held[key] = entry = [lock, 1]
    try:
        yield
    finally:
        with _held_guard:
            entry[1] -= 1
            last = entry[1] == 0
            if last:
                del _held[key]
        if last:
            with contextlib.suppress(OSError):
                owner.unlink()
            entry[0].release()
