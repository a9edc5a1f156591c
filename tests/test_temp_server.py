"""Prefect's temporary API server for `ctxbench run` (pipelines/temp_server.py): started in a session of its own
(a terminal's Ctrl-C reaches ctxbench only, which stops the flow and the server in order, instead of the server
dying first and the flow engine retrying it for minutes), found by Prefect's clients, stopped on exit."""

from __future__ import annotations

import os

import httpx
import pytest

pytestmark = pytest.mark.timeout(300)


def test_temporary_server_runs_in_its_own_session_and_stops(monkeypatch):
    from prefect.server.api import server as srv
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.temp_server import temporary_server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # no server named (the suite names its shared one)
    before = srv.SubprocessASGIServer._instances.get(None)
    with temporary_settings(restore_defaults={PREFECT_API_URL}), temporary_server() as url:
        assert url is not None
        inst = srv.SubprocessASGIServer._instances[None]
        assert srv.SubprocessASGIServer() is inst  # what Prefect's clients get when no API URL is set
        proc = inst.server_process
        assert proc is not None and proc.poll() is None
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)  # a session (and process group) of its own
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    assert proc.poll() is not None  # stopped
    assert srv.SubprocessASGIServer._instances.get(None) is before
