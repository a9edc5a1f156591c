"""Issue 31, defect 2: a server whose error body repeats the credentials it was sent (the ``Authorization`` header,
the key in its message) in every status family: a 200 with an error body, 400, 401, 403, 429, 500, 503. Through
``ctxbench evaluate`` (CLI, a key variable whose name is not a known provider's), then ``score`` and ``report``:
the key reaches the server with every request and is found in no file the run wrote (build, CTXBENCH_HOME cache,
report) and in nothing it printed. The same through the Prefect flow ``evaluate_flow`` with Prefect's database
scanned (slow). And :func:`ctxbench.core.redact.redact`'s rules, the short-key rule included."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.core.redact import MARK, redact, register, register_url
from fakeserver import FakeOpenAIServer, message_text
from test_crash_safety import Q_RE, make_toy_build

REPO = Path(__file__).resolve().parent.parent
KEY = "sk-echo-3f9a1c7e52b84d06a9e1c4b7d2f08e61"  # held in CTXB_ECHO_CRED (a name no provider uses)
CORE = KEY.rsplit("-", 1)[1]


def echo(status: int) -> dict:
    """A response echoing the request's credentials the way servers do: in the message and as the headers."""
    words = {401: "Incorrect API key provided", 403: "Incorrect API key provided", 429: "Rate limit reached",
             500: "The server had an error", 503: "The engine is overloaded"}.get(status, "Invalid request")
    err = {"message": f"{words}: {KEY}. You sent Authorization: Bearer {KEY}",
           "type": {429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}.get(
               status, "invalid_request_error"),
           "request_headers": {"authorization": f"Bearer {KEY}", "x-api-key": KEY}}
    return {"status": status, "body": {"error": err}, "headers": {"Retry-After": "0"} if status == 429 else {}}


# instance number -> behaviour: every status family, each echoing the key; the others answer. A transient one
# (429, 500, 503) is retried: it echoes twice, then the call is answered (a run that pauses stores nothing)
FAMILIES = {1: echo(200), 2: echo(400), 3: echo(429), 4: echo(500), 5: echo(503)}
TRANSIENT_TRIES = 2
_seen: Counter = Counter()


def rule(body: dict):
    if body["model"] == "fake-401":
        return echo(401)
    if body["model"] == "fake-403":
        return echo(403)
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    i = int(Q_RE.search(user).group(1)[1:])
    _seen[i] += 1
    if i in (3, 4, 5) and _seen[i] > TRANSIENT_TRIES:
        return None
    return FAMILIES.get(i)


def needles() -> list[bytes]:
    return [KEY.encode(), CORE.encode(), CORE[:16].encode(), CORE[-16:].encode(), CORE.encode("utf-16-le"),
            base64.b64encode(KEY.encode()), base64.b64encode(f"Bearer {KEY}".encode())]


def leaks(root: Path) -> list[str]:
    """Files under ``root`` holding the key or a part of it (raw bytes: SQLite, Parquet, JSON, JS, logs)."""
    found = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            found += [f"{p.relative_to(root)}: {n[:12]!r}" for n in needles() if n in data]
    return found


@pytest.mark.slow
def test_echoed_key_is_written_nowhere_cli(tmp_path):
    _seen.clear()
    build = make_toy_build(tmp_path / "build", n=8)
    env = {**os.environ, "CTXBENCH_HOME": str(tmp_path / "home"), "CTXB_ECHO_CRED": KEY, "COLUMNS": "200",
           "PYTHONPATH": str(REPO)}
    logs = tmp_path / "logs"
    logs.mkdir()

    def run(name: str, *args: str) -> tuple[int, str]:
        with open(logs / f"{name}.log", "wb") as f:
            rc = subprocess.run([sys.executable, "-m", "ctxbench.cli", *args], cwd=tmp_path, env=env, stdout=f,
                                stderr=subprocess.STDOUT, timeout=300).returncode
        return rc, (logs / f"{name}.log").read_text(errors="replace")

    with FakeOpenAIServer(rule=rule) as srv:
        for model in ("openai/fake", "openai/fake-401", "openai/fake-403"):
            rc, out = run(model.split("/")[1], "evaluate", "--build", str(build), "--model", model, "--base-url",
                          srv.base_url, "--api-key-env", "CTXB_ECHO_CRED", "--concurrency", "8")
            assert rc != 2, out  # ran: not a bad-input stop
            if model == "openai/fake":
                assert out.count("retry openai/fake: HTTP") == 3 * TRANSIENT_TRIES, out  # the retries were shown
            assert "Traceback" not in out, out
            if model != "openai/fake":  # the credentials error is named, with the key's place marked
                assert "credentials" in out and "Incorrect API key provided" in out, out
        auth = set(srv.auth)
        statuses = {b["status"] for b in srv.behaviours if isinstance(b, dict)}
    assert auth == {f"Bearer {KEY}"}  # the key was really sent, with every request
    assert statuses == {200, 400, 401, 403, 429, 500, 503}, statuses
    rows = pq.read_table(build / "responses.parquet").to_pylist()
    errors = [r["error"] for r in rows if r["status"] == "error"]
    # the 200 error body and the 400 are stored as errors (the retried 429/500/503 answered at their third try)
    assert len(errors) == 2 and all(MARK in e for e in errors), errors
    assert sum(r["status"] == "ok" for r in rows) == 6
    assert any("Invalid request: [redacted]. You sent Authorization: Bearer [redacted]" in e for e in errors), errors
    rc, out = run("score", "score", "--build", str(build))
    assert rc == 0, out
    rc, out = run("report", "report", "--build", str(build))
    assert rc == 0, out
    assert (build / "report").exists()
    found = leaks(tmp_path)
    assert not found, found


def test_redaction_rules(monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "acme-0123456789abcdef")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # not a credential: "false" is left everywhere
    assert redact("key acme-0123456789abcdef and %s" % json.dumps("acme-0123456789abcdef")) == \
        f'key {MARK} and "{MARK}"'
    # cut off at the end of a truncated text: the part is replaced too
    assert redact("you sent acme-0123456") == f"you sent {MARK}"
    # a credential's place, known or not
    assert redact('{"Authorization": "Bearer zz-unknown-9"}') == '{"Authorization": "Bearer [redacted]"}'
    assert redact("x-api-key: q7") == "x-api-key: [redacted]"
    assert redact("GET https://h/v1/m?key=AIza-1&alt=json") == "GET https://h/v1/m?key=[redacted]&alt=json"
    assert redact("at https://user:hunter22@h/v1 refused") == "at https://[redacted]@h/v1 refused"
    assert redact("Bearer 4f7a91b2c3d4e5f6") == "Bearer [redacted]"
    # words a classifier reads are kept
    for t in ("HTTP 401: Unauthorized", "Authorization header missing", "api_key client option must be set",
              "invalid_api_key", "Bearer token missing", "use --api-key-env false"):
        assert redact(t) == t
    # the short-key rule: a 3-character key is replaced in a credential's place only, never as a bare word
    register("abc")
    assert redact("Authorization: Bearer abc; the abc of it, abcdef") == \
        "Authorization: Bearer [redacted]; the abc of it, abcdef"
    assert redact("sent Bearer abc") == "sent Bearer [redacted]"
    register_url("https://u:pw-8c2e1f09@host/v1?token=tok-77a1b9e0c")
    assert redact("pw-8c2e1f09 / tok-77a1b9e0c") == f"{MARK} / {MARK}"


FLOW = """
import sys
from pipelines.flows import evaluate_flow
from ctxbench.run.evaluate import EvalConfig
build, url = sys.argv[1:3]
evaluate_flow(build, EvalConfig(model="openai/fake", base_url=url, api_key_env="CTXB_ECHO_CRED", max_retries=3,
                                retry_base_delay_s=0.01))
print("FLOW DONE", flush=True)
"""


@pytest.mark.slow
def test_echoed_key_is_not_in_prefects_database(tmp_path):
    _seen.clear()
    build = make_toy_build(tmp_path / "build", n=8)
    env = {**os.environ, "CTXBENCH_HOME": str(tmp_path / "home"), "PREFECT_HOME": str(tmp_path / "prefect"),
           "PREFECT_LOGGING_LEVEL": "DEBUG", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "CTXB_ECHO_CRED": KEY,
           "PYTHONPATH": str(REPO)}
    env.pop("PREFECT_API_URL", None)
    with FakeOpenAIServer(rule=rule) as srv:
        p = subprocess.run([sys.executable, "-c", FLOW, str(build), srv.base_url], cwd=REPO, env=env,
                           capture_output=True, timeout=500)
        assert set(srv.auth) == {f"Bearer {KEY}"}
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert "FLOW DONE" in out, out[-4000:]
    assert list((tmp_path / "prefect").rglob("*.db")), "no Prefect database to scan"
    rows = pq.read_table(build / "responses.parquet").to_pylist()
    assert any(r["status"] == "error" and MARK in (r["error"] or "") for r in rows)
    assert not any(n in p.stdout + p.stderr for n in needles()), out[-4000:]
    found = leaks(tmp_path)
    assert not found, found


def test_logs_warnings_and_tracebacks_are_redacted(tmp_path):
    """:func:`ctxbench.core.redact.install` (done by the CLI and by importing the gateway): a log record (what Prefect's
    and litellm's handlers send), a warning and an unexpected traceback carry no key."""
    script = ("import logging, warnings\nimport ctxbench.models.gateway\nlogging.basicConfig()\n"
              "logging.getLogger('prefect.x').warning('sent %s', 'Bearer ' + KEY)\n"
              "warnings.warn('server said ' + KEY)\nraise RuntimeError('echo ' + KEY)\n")
    env = {**os.environ, "CTXB_ECHO_CRED": KEY, "PYTHONPATH": str(REPO)}
    gate = "import os\nos.environ['ZZ_TOKEN'] = os.environ.pop('CTXB_ECHO_CRED')\nKEY = os.environ['ZZ_TOKEN']\n"
    p = subprocess.run([sys.executable, "-c", gate + script], env=env, capture_output=True, timeout=120)
    err = p.stderr.decode()
    assert p.returncode == 1 and "RuntimeError: echo [redacted]" in err, err
    assert "sent Bearer [redacted]" in err and "server said [redacted]" in err, err
    assert CORE not in err and CORE[:12] not in err


@pytest.mark.parametrize("backend", ["http", "litellm"])
@pytest.mark.parametrize("status", [200, 400, 401, 403, 429, 500, 503])
def test_gateway_results_and_events_carry_no_key(monkeypatch, backend, status):
    """Each status family on ctxbench's HTTP client and through litellm: the stored error, the exception texts
    and every progress event (the retry lines) are free of the key, its place marked."""
    import asyncio

    from ctxbench.core import progress
    from ctxbench.models.gateway import Gateway, RetryPolicy

    monkeypatch.setenv("CTXB_ECHO_CRED", KEY)
    events: list[str] = []
    policy = RetryPolicy(max_retries=1, base_delay_s=0.0, max_delay_s=0.0, timeout_s=60)
    with FakeOpenAIServer(rule=lambda body: echo(status)) as srv, progress.listening(lambda e: events.append(e.detail)):
        gw = Gateway("openai/fake", srv.base_url, 1, policy, api_key_env="CTXB_ECHO_CRED", backend=backend)
        res = asyncio.run(gw.complete([{"role": "user", "content": "hi"}], 16, {}))
        assert set(srv.auth) == {f"Bearer {KEY}"}
    text = " ".join([res.error or "", *events])
    assert res.status != "ok" and MARK in (res.error or ""), res
    assert CORE[:10] not in text and CORE[-10:] not in text, text
