"""Helper processes beside a build, for work that needs no state of the build and would otherwise hold its main
process: importing great-expectations and running the data-quality suite (helper ``validate``, ctxbench.tracks.validate),
and detecting the language of contexts (helper ``language``, ctxbench.features.language). A build starts them at its
first stage (:func:`start`); the main process goes on assembling while the helpers import their libraries on the
other core, and hands them work later (:func:`submit`). Each helper works through its own requests in order, so a
short build's language requests do not wait behind the validation library's import. Results are the functions' own
results: a helper runs the same code on the same arguments, so a build's bytes do not depend on whether it ran
(``CTXBENCH_SIDECAR=off`` runs everything in the main process).

The helper is a fresh Python process (``python -c``, not a fork: the main process holds threads of Arrow and the
tokenizers) reading length-prefixed pickles of ``(id, "module:function", args)`` on its stdin and answering
``(id, ok, value)`` on its stdout, one request at a time in order. Each request carries the main process's
``CTXBENCH_*`` settings at the time it is sent (its cache home, the caches' switches), and the helper runs the
function under exactly those, so one helper serves a long-lived process (a Prefect worker, a test session) whose
settings change between builds, without a new start (and a new import of great-expectations, about 5 s of CPU). It
ends when its stdin closes (the main process ended, however) or at :func:`stop`. Any failure of the helper (it
cannot start, dies, answers an error) makes :meth:`Pending.result` raise :class:`SidecarError`; callers then compute
the result themselves.
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

_HEADER = struct.Struct("<Q")


class SidecarError(RuntimeError):
    """The helper process could not give a result (not started, died, or the function raised there)."""


def enabled() -> bool:
    """Whether builds may use a helper process (``CTXBENCH_SIDECAR`` is not ``off``/``0``/``false``)."""
    return os.environ.get("CTXBENCH_SIDECAR", "on").strip().lower() not in ("off", "0", "false", "no")


def _send(stream, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _recv(stream) -> Any:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the other side closed the pipe")
    n = _HEADER.unpack(head)[0]
    data = stream.read(n)
    if len(data) < n:
        raise EOFError("the other side closed the pipe")
    return pickle.loads(data)


def _call(target: str, args: tuple) -> Any:
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(*args)


def _apply(settings: tuple) -> None:
    """Make this process's ``CTXBENCH_*`` environment exactly ``settings`` (pairs, as :func:`_settings` gives)."""
    want = dict(settings)
    for k in [k for k in os.environ if k.startswith("CTXBENCH_") and k not in want]:
        del os.environ[k]
    os.environ.update(want)


def serve(stdin=None, stdout=None) -> None:
    """The helper's loop: answer requests until stdin closes (module docstring)."""
    stdin = stdin or sys.stdin.buffer
    if stdin is sys.stdin.buffer and threading.current_thread() is threading.main_thread():
        # a Ctrl-C in the terminal reaches the whole process group: the parent decides what it stops; this
        # helper ends when the parent closes its stdin (or dies), never with a KeyboardInterrupt traceback
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if stdout is None:
        # the answers get their own copy of the stdout pipe; anything the functions print goes to stderr
        stdout = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    while True:
        try:
            rid, target, args, settings = _recv(stdin)
        except EOFError:
            return
        try:
            _apply(settings)
            out = (rid, True, _call(target, args))
        except BaseException as e:  # noqa: BLE001 - reported to the main process, which computes it itself
            out = (rid, False, f"{type(e).__name__}: {e}")
        try:
            _send(stdout, out)
        except (BrokenPipeError, pickle.PicklingError, TypeError) as e:
            try:
                _send(stdout, (rid, False, f"answer not sent: {e}"))
            except BrokenPipeError:
                return


class Pending:
    """A request handed to the helper; :meth:`result` waits for its answer."""

    def __init__(self, helper: "Sidecar | None", rid: int, error: str = ""):
        self.helper, self.rid, self.error = helper, rid, error
        self._got: tuple[bool, Any] | None = None

    def result(self) -> Any:
        """The function's return value (waited for at the first call, kept for the next). Raises SidecarError
        when the helper could not give it."""
        if self._got is None:
            if self.helper is None:
                self._got = (False, self.error or "no helper process")
            else:
                try:
                    self._got = (True, self.helper._wait(self.rid))
                except SidecarError as e:
                    self._got = (False, str(e))
        if not self._got[0]:
            raise SidecarError(self._got[1])
        return self._got[1]


class Sidecar:
    """One helper process (module docstring)."""

    def __init__(self):
        root = str(Path(__file__).resolve().parents[2])
        boot = f"import sys; sys.path.insert(0, {root!r}); from ctxbench.core.sidecar import serve; serve()"
        self.proc = subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env={**os.environ, "GX_ANALYTICS_ENABLED": "false"})
        self._lock = threading.Lock()
        self._next = 0
        self._done: dict[int, tuple[bool, Any]] = {}
        self._dead = ""

    def submit(self, target: str, *args: Any) -> Pending:
        """Ask the helper to run ``target`` (``"module:function"``) on ``args`` (picklable)."""
        with self._lock:
            if self._dead:
                return Pending(None, -1, self._dead)
            rid = self._next
            self._next += 1
            try:
                _send(self.proc.stdin, (rid, target, args, _settings()))
            except (OSError, ValueError, pickle.PicklingError, TypeError) as e:
                self._dead = f"the helper process cannot take requests ({e})"
                return Pending(None, -1, self._dead)
        return Pending(self, rid)

    def _wait(self, rid: int) -> Any:
        with self._lock:
            while rid not in self._done:
                if self._dead:
                    raise SidecarError(self._dead)
                try:
                    got, ok, value = _recv(self.proc.stdout)
                except (EOFError, OSError, pickle.UnpicklingError) as e:
                    self._dead = f"the helper process ended ({e})"
                    raise SidecarError(self._dead) from None
                self._done[got] = (ok, value)
            ok, value = self._done.pop(rid)
        if not ok:
            raise SidecarError(value)
        return value

    def kill(self) -> None:
        """End the helper at once."""
        with self._lock:
            self._dead = self._dead or "stopped"
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def stop(self) -> None:
        """End the helper (it finishes the request it is running) and wait for it."""
        with self._lock:
            self._dead = self._dead or "stopped"
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdout,):
            try:
                f.close()
            except OSError:
                pass


_HELPERS: dict[str, Sidecar] = {}
_GUARD = threading.Lock()


def _settings() -> tuple:
    """ctxbench's environment (``CTXBENCH_*``: the cache home, the caches' switches), sent with every request so
    that a helper never works for a home or switch the main process no longer has (module docstring)."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("CTXBENCH_")))


def _usable(h: Sidecar | None) -> bool:
    """A helper that has not failed, while helpers are enabled (``CTXBENCH_SIDECAR``, read at each use)."""
    return h is not None and not h._dead and enabled()


def _live(h: Sidecar | None) -> bool:
    return _usable(h) and h.proc.poll() is None


def start(name: str = "validate") -> Sidecar | None:
    """The helper process ``name`` of this process, started at the first call (None where disabled or it cannot
    start). Builds call this at their first stage."""
    if not enabled():
        return None
    with _GUARD:
        h = _HELPERS.get(name)
        if _live(h):
            return h
        if h is not None:
            h.kill()  # dead: nothing it would still answer is wanted
        try:
            _HELPERS[name] = h = Sidecar()
        except OSError:
            _HELPERS.pop(name, None)
            return None
        return h


def current(name: str = "validate") -> Sidecar | None:
    """The running helper ``name``, or None when none was started (work is then done in the main process)."""
    h = _HELPERS.get(name)
    return h if _usable(h) else None


def submit(target: str, *args: Any, helper: str = "validate") -> Pending:
    """:meth:`Sidecar.submit` on the running helper ``helper``; a Pending whose result raises SidecarError when
    none runs."""
    h = current(helper)
    return h.submit(target, *args) if h is not None else Pending(None, -1, "no helper process")


def own_peak_rss_mib() -> float:
    """Peak resident memory of the calling process in MiB since it started its program (asked of each helper by
    :func:`peak_rss_mib`): ``VmHWM`` of /proc/self/status, which exec resets, unlike getrusage's maxrss, which
    keeps the peak of the process it was forked from."""
    import resource

    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mib() -> dict[str, float]:
    """Peak resident memory (MiB) of each running helper, by name (helpers that cannot answer are left out)."""
    out = {}
    for name in list(_HELPERS):
        try:
            out[name] = submit("ctxbench.core.sidecar:own_peak_rss_mib", helper=name).result()
        except SidecarError:
            pass
    return out


def stop() -> None:
    """Stop every helper of this process (a later :func:`start` starts new ones)."""
    with _GUARD:
        hs = list(_HELPERS.values())
        _HELPERS.clear()
    for h in hs:
        h.stop()


def _at_exit() -> None:
    for h in list(_HELPERS.values()):  # nothing waits for their answers any more
        h.kill()


atexit.register(_at_exit)
