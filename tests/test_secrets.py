"""Secrets: a run with a fake API key in the environment (and in a Prefect Secret block) — build, evaluate, score
with a judge, report, through the Prefect flows and through the CLI — and a scan of every file it left (build
directories, response cache, Prefect's database and home) and of everything it printed or logged: the key is used
(the server saw it in every request's Authorization header) and found nowhere."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakeserver import FakeOpenAIServer

REPO = Path(__file__).resolve().parent.parent
KEY = "sk-ctxbench-fake-7c1e93b0d5a24f68be0f2a9d41c7e835"
BLOCK_KEY = "sk-ctxbench-block-52d0f7a1c9e84b36a1f0e7c2d9b4a685"

FLOW_SCRIPT = """
import os, sys
from prefect.blocks.system import Secret
from pipelines.flows import evaluate_flow, nightly, report_flow, score_flow
from ctxbench.run.evaluate import EvalConfig
from ctxbench.run.score import score_build
from ctxbench.tracks.holobench import HoloBenchConfig

db, out, url = sys.argv[1:4]
nightly(build=HoloBenchConfig(db=db, lengths=[1024]), out=out,
        models=[EvalConfig(model="openai/fake", base_url=url, api_key_env="CTXBENCH_FAKE_KEY")])
build = str(next(p.parent for p in __import__("pathlib").Path(out).rglob("manifest.json")))
# a key held in a Prefect Secret block, put into the evaluating process's environment by the flow
Secret(value=os.environ.pop("CTXBENCH_BLOCK_KEY")).save("ctxbench-fake-key", overwrite=True)
evaluate_flow(build, EvalConfig(model="openai/fake-block", base_url=url, api_key_env="BLOCK_KEY"),
              secrets={"BLOCK_KEY": "ctxbench-fake-key"})
score_build(build, judge="openai/fake-judge", judge_base_url=url, judge_api_key_env="CTXBENCH_FAKE_KEY")
score_flow(build)
report_flow(build)
print("FLOWS DONE", flush=True)
"""


def judge_or_answer(body: dict) -> str:
    if body.get("response_format"):
        return '{"verdicts": ["exact"]}'
    return "The document says so.\nAnswer: 42"


def leaks(root: Path, needles: list[bytes]) -> list[str]:
    """Files under ``root`` holding any of ``needles`` (raw bytes: SQLite pages, Parquet pages, logs, JSON)."""
    found = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            found += [f"{p.relative_to(root)}: {n[:12]!r}..." for n in needles if n in data]
    return found


@pytest.mark.slow
def test_a_run_leaves_the_key_nowhere(tmp_path, spider_db):
    db = str(spider_db("wine_1"))
    env = {**os.environ, "CTXBENCH_HOME": str(tmp_path / "home"), "PREFECT_HOME": str(tmp_path / "prefect"),
           "PREFECT_LOGGING_LEVEL": "DEBUG", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "CTXBENCH_FAKE_KEY": KEY, "CTXBENCH_BLOCK_KEY": BLOCK_KEY, "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)
    logs = tmp_path / "logs"
    logs.mkdir()

    def run(name: str, args: list[str]) -> str:
        with open(logs / f"{name}.log", "wb") as f:
            rc = subprocess.run([sys.executable, *args], cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                timeout=400).returncode
        text = (logs / f"{name}.log").read_text(errors="replace")
        assert rc == 0, text[-4000:]
        return text

    with FakeOpenAIServer(answer_fn=judge_or_answer) as srv:
        out = run("flows", ["-c", FLOW_SCRIPT, db, str(tmp_path / "runs"), srv.base_url])
        assert "FLOWS DONE" in out
        cli = tmp_path / "cli-build"
        cmds = {"build": ["build", "holobench", "--db", db, "--lengths", "1024", "--out", str(cli)],
                "evaluate": ["evaluate", "--build", str(cli), "--model", "openai/fake-cli", "--base-url",
                             srv.base_url, "--api-key-env", "CTXBENCH_FAKE_KEY"],
                "score": ["score", "--build", str(cli), "--judge", "openai/fake-judge-cli", "--judge-base-url",
                          srv.base_url, "--judge-api-key-env", "CTXBENCH_FAKE_KEY"],
                "report": ["report", "--build", str(cli)]}
        for name, args in cmds.items():
            run(f"cli-{name}", ["-m", "ctxbench.cli", *args])
        by_model: dict[str, set] = {}
        for body, auth in zip(srv.requests, srv.auth):
            by_model.setdefault(body["model"], set()).add(auth)

    # the keys were really used: every request of each model carried its key
    assert by_model["fake"] == {f"Bearer {KEY}"} and by_model["fake-cli"] == {f"Bearer {KEY}"}
    assert by_model["fake-judge"] == {f"Bearer {KEY}"} and by_model["fake-judge-cli"] == {f"Bearer {KEY}"}
    assert by_model["fake-block"] == {f"Bearer {BLOCK_KEY}"}
    # what the run left: builds, response cache, Prefect's database and home, every printed/logged line
    assert list((tmp_path / "prefect").rglob("*.db")), "no Prefect database to scan"
    assert list((tmp_path / "runs").rglob("responses.parquet")) and (cli / "scores.parquet").exists()
    needles = []
    for k in (KEY, BLOCK_KEY):
        core = k.rsplit("-", 1)[1]
        needles += [k.encode(), core.encode(), core.encode("utf-16-le"), base64.b64encode(k.encode())]
    found = leaks(tmp_path, needles)
    assert not found, found
