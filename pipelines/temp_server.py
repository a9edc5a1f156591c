"""Prefect's temporary API server for a one-off flow run (``ctxbench run``), started in a session of its own.

Prefect starts a temporary server (``SubprocessASGIServer``) when no ``PREFECT_API_URL`` is set, as a child in
the caller's process group: a Ctrl-C in the terminal then reaches it too, it dies at once, and the flow engine
spends minutes retrying it before the interrupt ends the run with hundreds of lines of tracebacks; a SIGKILL of
the run leaves it running. :func:`temporary_server` starts the same server (Prefect's own command, by Prefect's own
class) in a new session that dies with its parent (``PR_SET_PDEATHSIG``), registers it where Prefect looks for its
temporary server, and stops it on exit, so a Ctrl-C reaches only ctxbench, which stops the flow and the server in
order. With ``PREFECT_API_URL`` set (a real server), it does nothing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
from typing import Iterator


@contextlib.contextmanager
def temporary_server() -> Iterator[str | None]:
    """Context manager: Prefect's temporary API server in its own session for the flows run inside it; yields
    its API URL (None when ``PREFECT_API_URL`` points at a server, which is then used)."""
    from prefect.server.api import server as srv
    from prefect.settings import PREFECT_API_URL

    from ctxbench.models.local_server import die_with_parent

    if PREFECT_API_URL.value():
        yield None
        return

    class OwnSession(srv.SubprocessASGIServer):
        def _run_uvicorn_command(self) -> subprocess.Popen:
            real = subprocess.Popen

            def popen(*args, **kwargs):
                kwargs.setdefault("start_new_session", True)
                kwargs.setdefault("preexec_fn", functools.partial(die_with_parent, os.getpid()))
                return real(*args, **kwargs)

            # Prefect's own command line and environment, started our way (the module attribute is swapped for
            # this one call only)
            srv.subprocess.Popen = popen
            try:
                return super()._run_uvicorn_command()
            finally:
                srv.subprocess.Popen = real

    before = srv.SubprocessASGIServer._instances.get(None)
    server = object.__new__(OwnSession)  # not through __new__: Prefect's registry is set below, by hand
    server.__init__(None)
    srv.SubprocessASGIServer._instances[None] = server  # what Prefect's clients find when no API URL is set
    try:
        server.start()
        yield server.api_url
    finally:
        # the flow's logs still queued for this server are sent before it stops (else Prefect's log worker writes
        # "--- Error logging to API ---" to the terminal after the run)
        with contextlib.suppress(Exception):
            from prefect.logging.handlers import APILogWorker

            APILogWorker.drain_all(timeout=5)
        server.stop()
        if before is not None:
            srv.SubprocessASGIServer._instances[None] = before
        else:
            srv.SubprocessASGIServer._instances.pop(None, None)
