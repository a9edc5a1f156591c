"""Where a REPL model's code runs (``evaluate --mode repl``): a separate Python process (:mod:`.child`), under
bubblewrap on Linux, that holds the instance's context in the variable ``context`` and whose only way out is
``llm_query`` through a pipe to this process.

Bubblewrap (Debian's ``bubblewrap``, the ``bwrap`` command; the sandbox of Flatpak) runs the child with
``--unshare-all`` (its own network namespace with only a loopback of its own: no listener of the host, not even on
127.0.0.1, is reachable; its own PID, IPC, UTS, user and cgroup namespaces: it sees only its own processes), of
the host only the system's programs and libraries and Python's installation, read-only (:func:`visible_paths`: no
home directory, build or cache, so no gold answer and no key), a private ``/tmp`` (a tmpfs of :attr:`StepLimits.tmp_mb`, gone with the process), a minimal ``/dev`` and its own
``/proc``, the environment cleared (no API key is visible to the code), ``--die-with-parent`` and ``--new-session``.
Per step the child limits its CPU time and address space (rlimits, :mod:`.child`); this process keeps a wall-clock
limit per step (time spent answering the code's ``llm_query`` calls does not count) and ends the whole sandbox at
it. ``--sandbox none`` runs the same child without bubblewrap (rlimits and the wall clock still apply; network and
files are not isolated).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ctxbench.core.errors import InputError

CHILD = Path(__file__).with_name("child.py")
SANDBOXES = ("bwrap", "none")
BWRAP_PACKAGE = "bubblewrap"
# the whole environment bubblewrap (and a bare child) starts with: no variable of ours, so no key, crosses over
SANDBOX_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "PYTHONIOENCODING": "utf-8"}


@dataclass(frozen=True)
class StepLimits:
    """Limits of one step of the model's code: ``wall_s`` seconds of wall-clock time (not counting the time its
    ``llm_query`` calls wait for the sub-model), ``cpu_s`` seconds of CPU time, ``memory_mb`` MiB of address space,
    ``file_mb`` MiB per file it writes, ``tmp_mb`` MiB in its private ``/tmp`` in all (a tmpfs, held in memory)."""

    wall_s: float = 60.0
    cpu_s: float = 60.0
    memory_mb: int = 2048
    file_mb: int = 64
    tmp_mb: int = 256


@dataclass
class StepRun:
    """What one run of code gave: ``output`` (its stdout and stderr, whole), ``final`` (the answer when it called
    ``FINAL``/``FINAL_VAR``, else None), ``timed_out`` (the wall-clock or CPU limit ended it: the sandbox is gone),
    ``ended`` (the process ended otherwise, e.g. ``os._exit`` or a signal: its variables are lost), ``reason``
    (why, in words), ``wait_s`` (seconds spent answering its queries)."""

    output: str
    final: str | None = None
    timed_out: bool = False
    ended: bool = False
    reason: str | None = None
    wait_s: float = 0.0


def _text(s: object) -> str:
    """Text from the child as valid UTF-8 (a lone surrogate the code printed becomes ``?``)."""
    return str(s).encode("utf-8", "replace").decode("utf-8")


def require_sandbox(kind: str) -> None:
    """Check that the sandbox ``kind`` can run here: ``bwrap`` needs the ``bwrap`` command (package bubblewrap)
    and user namespaces; ``none`` needs nothing. Raises InputError (one line naming the package or the setting)."""
    if kind not in SANDBOXES:
        raise InputError(f"--sandbox {kind!r}: use bwrap (bubblewrap, the default) or none")
    if kind == "none":
        return
    exe = shutil.which("bwrap")
    if exe is None:
        raise InputError(f"--mode repl runs the model's code under bubblewrap, which is not installed: install the "
                         f"package {BWRAP_PACKAGE} (apt-get install -y {BWRAP_PACKAGE}), or run the code without a "
                         f"sandbox with `ctxbench evaluate ... --sandbox none`")
    # the interpreter and the REPL program must be visible inside, read-only (visible_paths)
    r = subprocess.run(bwrap_argv(exe) + [python_exe(), "-I", "-c", f"open({str(CHILD)!r}).close()"],
                       capture_output=True, text=True, timeout=30, env=SANDBOX_ENV)
    if r.returncode != 0 and "bwrap:" not in (r.stderr or ""):
        err = " ".join((r.stderr or "").split())[-200:]
        raise InputError(f"--mode repl: the sandbox cannot run Python's {python_exe()} on ctxbench's REPL program "
                         f"{CHILD} ({err}); run the code without a sandbox with `ctxbench evaluate ... --sandbox "
                         f"none`")
    if r.returncode != 0:
        err = " ".join((r.stderr or "").split())[:200]
        raise InputError(f"--mode repl: bubblewrap cannot start a sandbox here ({err}): allow unprivileged user "
                         f"namespaces (sysctl kernel.unprivileged_userns_clone=1), or run the code without a "
                         f"sandbox with `ctxbench evaluate ... --sandbox none`")


def python_exe() -> str:
    """The interpreter the sandboxed child runs: the real file behind ``sys.executable`` (a virtual environment's
    ``python`` is a link to it; the child needs the standard library only)."""
    return os.path.realpath(sys.executable)


def visible_paths() -> list[str]:
    """The host directories the sandbox sees, read-only: the system's programs and libraries (``/usr``, and
    ``/bin``, ``/lib``, ``/lib64``, ``/sbin`` where they are directories rather than links into ``/usr``), the
    interpreter's installation (``sys.base_prefix``) and the child program's folder. Nothing else of the host: no
    home directory, no build, no response cache, no ``/etc`` secrets, so the code cannot read gold answers or keys."""
    paths = ["/usr"] + [d for d in ("/bin", "/lib", "/lib64", "/lib32", "/sbin")
                        if os.path.isdir(d) and not os.path.islink(d)]
    for extra in (os.path.realpath(sys.base_prefix), os.path.dirname(python_exe()), str(CHILD.parent)):
        if not any(extra == p or extra.startswith(p + "/") for p in paths):
            paths.append(extra)
    return paths


def bwrap_argv(exe: str = "bwrap", tmp_mb: int = StepLimits.tmp_mb) -> list[str]:
    """The bubblewrap command line before the program (module docstring); ``tmp_mb``: the size of its private
    ``/tmp`` in MiB."""
    binds: list[str] = []
    for p in visible_paths():
        binds += ["--ro-bind", p, p]
    for d in ("/bin", "/lib", "/lib64", "/lib32", "/sbin"):  # merged-/usr systems: the links, as on the host
        if os.path.islink(d):
            binds += ["--symlink", os.readlink(d), d]
    # the private /tmp first, the binds over it: a checkout or an interpreter under /tmp stays visible (read-only)
    return [exe, "--unshare-all", "--die-with-parent", "--new-session", "--dev", "/dev", "--proc", "/proc",
            "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp", *binds, "--chdir", "/tmp", "--clearenv", "--setenv", "PATH",
            SANDBOX_ENV["PATH"], "--setenv", "HOME", "/tmp", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            "--setenv", "PYTHONIOENCODING", "utf-8", "--remount-ro", "/", "--"]


class Sandbox:
    """One REPL process for one answer: started with the context (:meth:`start`), then code runs in it step by step
    (:meth:`run`), variables kept between steps; :meth:`close` ends it. ``kind``: ``bwrap`` or ``none``."""

    def __init__(self, context: str, kind: str = "bwrap", limits: StepLimits | None = None):
        self.context, self.kind, self.limits = context, kind, limits or StepLimits()
        self.proc: subprocess.Popen | None = None
        self._buf = b""

    def start(self) -> None:
        """Start the process and hand it the context. Raises InputError when the sandbox cannot start, RuntimeError
        when the child does not report ready."""
        argv = [sys.executable, "-I", str(CHILD)]
        # bubblewrap itself (PID 1 in the sandbox, its /proc/1/environ readable by the code) and the bare child get
        # no variable of ours: no API key crosses into the sandbox
        env = dict(SANDBOX_ENV)
        if self.kind == "bwrap":
            exe = shutil.which("bwrap")
            if exe is None:
                require_sandbox("bwrap")
            argv = bwrap_argv(exe, self.limits.tmp_mb) + [python_exe(), "-I", str(CHILD)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                                     cwd="/tmp" if self.kind == "none" else None)
        self._buf = b""
        mb = 1024 * 1024
        # the context itself lives in the child: its address space holds it (UTF-8 and str) plus the limit
        mem = self.limits.memory_mb * mb + 4 * len(self.context.encode("utf-8"))
        self._send({"op": "init", "context": self.context, "memory_bytes": mem,
                    "file_bytes": self.limits.file_mb * mb})
        msg = self._receive(time.monotonic() + 60)
        if msg is None or msg.get("op") != "ready":
            reason = self._exit_reason()  # before close() forgets the process
            self.close()
            raise RuntimeError(f"the REPL process did not start ({reason})")

    def _send(self, msg: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def _receive(self, deadline: float) -> dict | None:
        """The next message of the child, or None when the deadline passes or the child's output ends. A line
        that is not a protocol message (the code wrote into the pipe) gives ``{"op": "bad", ...}``. Reads in
        linear time however much the child writes."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks = [self._buf] if self._buf else []
        if b"\n" not in self._buf:
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0 or not sel.select(left):
                        self._buf = b"".join(chunks)
                        return None
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        self._buf = b"".join(chunks)
                        return None
                    chunks.append(chunk)
                    if b"\n" in chunk:
                        break
        line, _, self._buf = b"".join(chunks).partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            return {"op": "bad", "line": line[:80]}
        return msg if isinstance(msg, dict) and isinstance(msg.get("op"), str) else {"op": "bad", "line": line[:80]}

    def _exit_reason(self) -> str:
        if self.proc is None:
            return "not started"
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "still running"
        sig = -rc if rc < 0 else rc - 128 if rc > 128 else 0  # bubblewrap exits 128 + N for its child's signal N
        if sig in {s.value for s in signal.Signals}:
            name = signal.Signals(sig).name
            return f"ended by {name}" + (" (its CPU-time limit)" if sig == signal.SIGXCPU else "")
        return f"exit code {rc}"

    def run(self, code: str, on_query: Callable[[list[str]], list[str]]) -> StepRun:
        """Run ``code`` in the process (started first if needed). ``on_query(prompts) -> replies`` answers the
        code's ``llm_query`` / ``llm_query_batched`` calls (its time does not count toward the wall-clock limit).
        Never raises for the code's own faults: they are in the result."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self._send({"op": "exec", "code": code, "cpu_s": self.limits.cpu_s})
        deadline = time.monotonic() + self.limits.wall_s
        waited = 0.0
        while True:
            msg = self._receive(deadline)
            if msg is None:
                timed_out = time.monotonic() >= deadline
                self._kill()
                reason = (f"the step ran past its wall-clock limit of {self.limits.wall_s:g} s" if timed_out
                          else f"the REPL process ended ({self._exit_reason()})")
                cpu = "SIGXCPU" in reason
                if cpu:
                    reason = f"the step ran past its CPU-time limit of {self.limits.cpu_s:g} s"
                return StepRun("", timed_out=timed_out or cpu, ended=True, reason=reason, wait_s=waited)
            if msg["op"] == "query" and isinstance(msg.get("prompts"), list):
                t0 = time.monotonic()
                replies = on_query([_text(p) for p in msg["prompts"]])
                spent = time.monotonic() - t0
                waited += spent
                deadline += spent
                self._send({"op": "replies", "texts": [r if r is not None else "" for r in replies]})
            elif msg["op"] == "done":
                final = msg.get("final")
                return StepRun(_text(msg.get("output") or ""), None if final is None else _text(final), wait_s=waited)
            else:  # the code wrote into the protocol's pipe: the step ends, and the process with it
                self._kill()
                return StepRun("", ended=True, reason="the code wrote into the REPL's protocol pipe", wait_s=waited)

    def variable(self, name: str) -> str | None:
        """The value (as text) of variable ``name`` in the REPL, None when it has none (or the process is gone)."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        self._send({"op": "var", "name": name})
        msg = self._receive(time.monotonic() + 30)
        return _text(msg.get("value", "")) if msg and msg.get("op") == "value" and msg.get("found") else None

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # bwrap and everything in its session
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """End the process (and, under bubblewrap, its namespaces and private ``/tmp``)."""
        if self.proc is not None:
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    if f is not None:
                        f.close()
                except OSError:
                    pass
            self._kill()
            self.proc = None

    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
