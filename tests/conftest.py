"""Shared fixtures. The fixtures at the top (shared_data, spider_db, tiktoken_enc) are used by the source, context,
gold and build tests; other fixtures may be added below them."""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Prefect's temporary server logs its shutdown at interpreter exit, after pytest closed the captured streams
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")  # slow under load

REPO_ROOT = Path(__file__).resolve().parent.parent

# The suite never touches the user's homes. It runs in several processes (pytest-xdist's -n in the README's test
# command): the first process (pytest's own) makes one ctxbench home (response cache, prepared sources, converted
# PDFs), which its workers share as one process would (the cache is made for several processes at once), and each
# process has its own Prefect home (its temporary server's SQLite database, which two servers must not share). A
# test that needs other homes still sets its own (monkeypatch.setenv).
_TEST_HOMES = Path(tempfile.mkdtemp(prefix=f"ctxbench-test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-"))
if os.environ.get("CTXBENCH_TEST_HOME_OWNER") is None:  # pytest's own process (the workers inherit its home)
    os.environ["CTXBENCH_TEST_HOME_OWNER"] = str(os.getpid())
    os.environ["CTXBENCH_HOME"] = str(_TEST_HOMES / "ctxbench")
os.environ["PREFECT_HOME"] = str(_TEST_HOMES / "prefect")
atexit.register(shutil.rmtree, _TEST_HOMES, ignore_errors=True)


def _start_shared_prefect_server() -> subprocess.Popen | None:
    """One Prefect API server for the whole run, started by pytest's own process before its workers and put in
    ``PREFECT_API_URL`` for every process of the run (the workers' in-process flows, the ``ctxbench run`` and
    ``evaluate`` subprocesses). Without it each process that runs a flow starts Prefect's temporary server: about
    15 of them per run, 7-20 s of CPU each. It is Prefect's temporary server itself (the same command line and
    environment as ``SubprocessASGIServer``), in a home of its own. Not started when ``PREFECT_API_URL`` is set
    already, or when ``CTXBENCH_TEST_PREFECT=own`` (each process then starts its own, as before). Tests that need a
    server of their own (its database, its pause states, its start-up) still start one: they remove the URL from
    their environment or use ``prefect_test_harness``."""
    if os.environ.get("PREFECT_API_URL") or os.environ.get("CTXBENCH_TEST_PREFECT", "shared") != "shared":
        return None
    import socket

    from ctxbench.models.local_server import die_with_parent

    spec = importlib.util.find_spec("prefect")  # where Prefect is installed, without importing it here (1 s)
    assert spec is not None and spec.origin, "prefect is not installed"
    app_dir = Path(spec.origin).parent.parent  # what SubprocessASGIServer passes: prefect.__module_path__.parent

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(_TEST_HOMES / "prefect-shared"), "PREFECT_UI_ENABLED": "0",
           "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    (_TEST_HOMES / "prefect-shared").mkdir(parents=True, exist_ok=True)
    log = open(_TEST_HOMES / "prefect-shared" / "server.log", "wb")  # its retried-event notices stay off the terminal
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
         "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "error",
         "--lifespan", "on"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=functools.partial(die_with_parent, os.getpid()))  # gone with pytest, even when pytest is killed
    os.environ["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
    os.environ["CTXBENCH_TEST_PREFECT_SHARED"] = os.environ["PREFECT_API_URL"]
    return proc


# started here, before pytest-xdist starts its workers (they inherit the URL) and while they collect the tests;
# each process waits for it to answer before its first test (_shared_prefect_server_ready)
_SHARED_PREFECT = _start_shared_prefect_server() if os.environ["CTXBENCH_TEST_HOME_OWNER"] == str(os.getpid()) \
    else None


@pytest.fixture(scope="session", autouse=True)
def _shared_prefect_server_ready():
    """Waits (once per process, at most 180 s) until the run's shared Prefect server answers /health."""
    url = os.environ.get("CTXBENCH_TEST_PREFECT_SHARED")
    if not url:
        return
    import time

    import httpx

    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if _SHARED_PREFECT is not None and _SHARED_PREFECT.poll() is not None:
            log = (_TEST_HOMES / "prefect-shared" / "server.log").read_text(errors="replace")[-3000:]
            pytest.fail(f"the run's Prefect server exited with {_SHARED_PREFECT.returncode}:\n{log}")
        if time.monotonic() > deadline:
            pytest.fail(f"the run's Prefect server at {url} did not answer within 180 s")
        time.sleep(0.2)


def _shared_data_path() -> Path:
    env = os.environ.get("CTXBENCH_SHARED_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def require_path(p: Path, what: str) -> Path:
    """Skip (or fail under CI=true) when ``p`` is absent."""
    if not p.exists():
        msg = f"{what} not found at {p} (set CTXBENCH_SHARED_DATA to the shared data directory)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return p


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real test data directory ($CTXBENCH_SHARED_DATA, default ../shared/data beside the checkout).

    Skips the test when absent; fails it instead when CI=true (the data must be there in CI)."""
    return require_path(_shared_data_path(), "shared test data")


@pytest.fixture(scope="session")
def spider_db(shared_data):
    """``spider_db("wine_1")`` -> Path of Spider's ``database/wine_1/wine_1.sqlite`` (skip/fail when absent)."""

    def get(db_id: str) -> Path:
        return require_path(shared_data / "spider" / "database" / db_id / f"{db_id}.sqlite", f"Spider database {db_id}")

    return get


def _litellm_tokenizer_dir() -> Path:
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.submodule_search_locations, "litellm is not installed"
    return Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"


@pytest.fixture(scope="session")
def tiktoken_enc():
    """``tiktoken_enc("cl100k_base")`` -> a tiktoken Encoding loaded directly by tiktoken from the BPE files litellm
    ships (TIKTOKEN_CACHE_DIR pointed at them), independent of ctxbench's tokenizer registry."""
    import tiktoken

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            prev = os.environ.get("TIKTOKEN_CACHE_DIR")
            os.environ["TIKTOKEN_CACHE_DIR"] = str(_litellm_tokenizer_dir())
            try:
                cache[name] = tiktoken.get_encoding(name)
            finally:
                if prev is None:
                    os.environ.pop("TIKTOKEN_CACHE_DIR", None)
                else:
                    os.environ["TIKTOKEN_CACHE_DIR"] = prev
        return cache[name]

    return get


@pytest.fixture(scope="session")
def shared_pdf_conversions(shared_data) -> Path:
    """Every PDF of the shared article set (``articles/pdfs/metadata.json``) converted into the run's conversion
    cache (``$CTXBENCH_HOME/cache/convert`` of the run's shared home, keyed by PDF hash and converter version), once
    for the whole run: a file lock makes the processes that need them wait for one conversion instead of each
    converting the same PDFs (about 110 s of CPU each time). Returns the cache directory."""
    import json

    from filelock import FileLock

    from ctxbench.convert.pdf import convert_cache_dir, convert_pdfs

    pdfs = require_path(shared_data / "articles" / "pdfs", "shared article PDFs")
    files = [pdfs / m["file"] for m in json.loads((pdfs / "metadata.json").read_text(encoding="utf-8"))]
    cache = convert_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache.parent / "convert-shared-pdfs.lock")):
        convert_pdfs(files, cache_dir=cache)
    return cache


def pytest_collection_modifyitems(config, items):
    """The files holding a test marked ``slow`` come first, each file's tests in their order: pytest-xdist hands
    out whole files in this order (``--dist loadfile``), so the longest start first and none is left alone at the
    end (longest-first scheduling)."""
    slow: dict = {}
    for item in items:
        if item.get_closest_marker("slow"):
            slow[item.path] = slow.get(item.path, 0) + 1
    items.sort(key=lambda item: -slow.get(item.path, 0))  # most slow tests first; stable: a file stays in one piece


def pytest_unconfigure(config):
    """The end of this process's session: stop the Prefect temporary server this process started (for the flows
    its tests ran) and remove its homes. pytest-xdist's worker processes are ended with ``os._exit`` when they take
    more than 10 s to close on busy cores, which skips ``atexit``: that left a server running (about 2% of a core)
    and the homes on disk after the suite."""
    server_module = sys.modules.get("prefect.server.api.server")
    if server_module is not None:
        for server in list(server_module.SubprocessASGIServer._instances.values()):
            with contextlib.suppress(Exception):
                server.stop()
    if _SHARED_PREFECT is not None:
        _SHARED_PREFECT.terminate()
        try:
            _SHARED_PREFECT.wait(30)
        except subprocess.TimeoutExpired:
            _SHARED_PREFECT.kill()
    shutil.rmtree(_TEST_HOMES, ignore_errors=True)
