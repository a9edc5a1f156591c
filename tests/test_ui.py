"""The Prefect UI in a real browser, as a user would use it.

``bash infra/start.sh`` (the one command of the README) starts a Prefect server (SQLite in a temporary PREFECT_HOME)
on a free port and serves every deployment; headless Debian Chromium, driven by Playwright, opens the ``evaluate``
deployment's run form, fills it (a toy build, the local fake OpenAI-compatible server), changes a parameter from its
default (``per_length`` 3 instead of every instance; ``concurrency`` 2 instead of 8), submits, and waits on the
flow-run page until the run is Completed. The run's outputs are checked: ``responses.parquet`` holds exactly the 3
instances per context length that ``per_length`` selects (by a different method: the selection rule recomputed
here), the fake server saw exactly those calls, and the run's Prefect artifact reports them. Screenshots of the form
and of the completed run are saved in the test's temporary directory (the path is printed;
``CTXBENCH_TEST_OUTPUT=DIR`` copies them there).

Skipped where Chromium or Playwright is absent; under ``CI=true`` their absence fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fakeserver import FakeOpenAIServer
from test_crash_safety import code, make_toy_build
from test_service import reader

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
EXPECTED = {"nightly", "build_holobench", "evaluate", "backfill", "score", "report"}


def _require(cond: bool, why: str) -> None:
    if not cond:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why + " (required under CI=true)")
        pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(url: str, path: str, body: dict | None = None):
    req = urllib.request.Request(url + path, data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST" if body is not None
                                 else "GET")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """``bash infra/start.sh`` on a free port; yields (UI base URL, API URL, CTXBENCH_HOME) once every deployment is
    registered; stops the server and the serve process (their process group) afterwards."""
    _require(os.path.exists(CHROMIUM), f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _require(False, "playwright is not installed (pip install -e '.[service]')")
    d = tmp_path_factory.mktemp("prefect-stack")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(d / "prefect"), "PREFECT_PORT": str(port), "PREFECT_API_URL": api,
           "CTXBENCH_HOME": str(d / "ctxbench"), "PREFECT_LOGGING_LEVEL": "INFO"}
    env.pop("PREFECT_API_DATABASE_CONNECTION_URL", None)
    env.pop("PREFECT_SERVER_DATABASE_CONNECTION_URL", None)
    log = open(d / "start.log", "wb")
    proc = subprocess.Popen(["bash", str(REPO / "infra" / "start.sh")], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, names = time.monotonic() + 420, set()
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                names = {x["name"] for x in _api(api, "/deployments/filter", {})}
                if EXPECTED <= names:
                    break
            except OSError:
                pass
            time.sleep(2)
        assert EXPECTED <= names, f"deployments registered: {sorted(names)}\n{(d / 'start.log').read_text()[-3000:]}"
        yield f"http://127.0.0.1:{port}", api, d / "ctxbench", d / "start.log"
    finally:
        for sig, wait in ((signal.SIGTERM, 8), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()


def _prop(page, label: str):
    """The input area of the schema-form property whose label starts with ``label`` (Prefect UI's form)."""
    return page.locator(
        "xpath=//div[contains(concat(' ', normalize-space(@class), ' '), ' schema-form-property ')]"
        f"[div[contains(@class, 'p-label__header')]//span[contains(@class, 'schema-form-property__label')"
        f" and (normalize-space()='{label}' or starts-with(normalize-space(), '{label} ('))]]"
        "/div[contains(@class, 'p-label__body')]").first


def _selected_by_rule(build: Path, per_length: int) -> set[str]:
    """The instances ``per_length`` keeps, recomputed from its documented rule: per context length, the
    ``per_length`` smallest SHA-256("seed|instance_id") (seed 0)."""
    t = pq.read_table(build / "instances.parquet", columns=["instance_id", "target_tokens"]).to_pylist()
    out = set()
    for L in {r["target_tokens"] for r in t}:
        ids = sorted((hashlib.sha256(f"0|{r['instance_id']}".encode()).hexdigest(), r["instance_id"])
                     for r in t if r["target_tokens"] == L)
        out |= {i for _, i in ids[:per_length]}
    return out


@pytest.mark.slow
def test_a_run_started_from_the_ui_completes_with_the_changed_parameter(stack, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    ui, api, home, start_log = stack
    build = make_toy_build(tmp_path / "build")
    shots = Path(os.environ.get("CTXBENCH_TEST_OUTPUT") or tmp_path) / "prefect-ui"  # kept as test artifacts
    shots.mkdir(parents=True, exist_ok=True)
    dep = next(x for x in _api(api, "/deployments/filter", {}) if x["name"] == "evaluate")
    with FakeOpenAIServer(answer_fn=reader) as srv, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(f"{ui}/deployments")
            page.get_by_role("link", name="evaluate", exact=True).first.click()  # the deployment page
            page.wait_for_url(re.compile(r"/deployments/deployment/"))
            page.goto(f"{ui}/deployments/deployment/{dep['id']}/run")  # its "Custom run" form
            expect(page.get_by_role("button", name="Submit")).to_be_visible()

            _prop(page, "build").locator("textarea").fill(str(build))
            _prop(page, "Model").locator("textarea").fill("openai/fake")
            base = _prop(page, "Base Url")
            base.get_by_role("button", name="str", exact=True).click()
            base.locator("textarea, input").first.fill(srv.base_url)
            conc = _prop(page, "Concurrency").locator("input")
            assert conc.input_value() == "8"  # the default from EvalConfig, shown by the form
            conc.fill("2")
            per = _prop(page, "Per Length")
            per.get_by_role("button", name="int", exact=True).click()
            per.locator("input").fill("3")
            run_name = page.locator(".flow-run-name-input input").input_value()
            assert run_name
            page.screenshot(path=str(shots / "1-form.png"), full_page=True)
            page.get_by_role("button", name="Submit").click()

            # the UI returns to the deployment's runs; open the new run from there
            page.wait_for_url(re.compile(r"/deployments/deployment/.*tab=Runs"))
            page.get_by_role("link", name=run_name, exact=True).first.click()
            page.wait_for_url(re.compile(r"/runs/flow-run/[0-9a-f-]{36}"))
            run_id = re.search(r"/runs/flow-run/([0-9a-f-]{36})", page.url).group(1)
            expect(page.get_by_text("Completed", exact=True).first).to_be_visible(timeout=400_000)
            page.reload()
            expect(page.get_by_text("Completed", exact=True).first).to_be_visible()
            page.screenshot(path=str(shots / "2-completed.png"), full_page=True)
            page.get_by_text("Artifacts", exact=True).first.click()
            expect(page.get_by_text("ctxbench-evaluation").first).to_be_visible()
            page.screenshot(path=str(shots / "3-artifacts.png"), full_page=True)
        finally:
            browser.close()
        calls = srv.count_by_model()

    run = _api(api, f"/flow_runs/{run_id}")
    assert run["state"]["type"] == "COMPLETED", run["state"]
    assert run["parameters"]["cfg"]["per_length"] == 3 and run["parameters"]["cfg"]["concurrency"] == 2
    want = _selected_by_rule(build, 3)
    assert len(want) == 6  # 3 per context length, two lengths
    rows = pq.read_table(build / "responses.parquet").to_pylist()
    assert {r["instance_id"] for r in rows} == want and len(rows) == 6
    assert all(r["status"] == "ok" and r["response"] == f"Answer: {code(int(r['instance_id'][5:]))}" for r in rows)
    assert calls == {"fake": 6}
    arts = _api(api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}})
    md = next(a for a in arts if a["key"] == "ctxbench-evaluation")["data"]
    assert "openai/fake" in md and "| 0 | complete | 6 | 6 |" in md, md
    out = os.environ.get("CTXBENCH_TEST_OUTPUT")
    if out:
        shutil.copytree(shots, Path(out) / "ui", dirs_exist_ok=True)
    print(f"screenshots: {sorted(str(p) for p in shots.iterdir())}")
