"""A needles build on the real 宋元學案 corpus, evaluated through the gateway against a local server, scored and
reported: the contract between the build (instances, manifest needle set) and the matcher, the failure tags and the
report's needles section. The fake models read the haystack themselves (they look for the planted statement of the
needle set's template in the prompt), so the expected verdicts follow from what is in each context."""

from __future__ import annotations

import json
import re
import shutil

import pyarrow.parquet as pq
import pytest
import yaml
from fakeserver import FakeOpenAIServer, message_text

from ctxbench.tracks.needles.analysis import analyse
from ctxbench.core.config import assets_dir
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.report.html import build_report
from ctxbench.run.score import score_build

# the build side of the track (issue 6 parts 1-6) lands separately; until then there is nothing to build
pytest.importorskip("ctxbench.tracks.needles", reason="the needles build track (ctxbench.tracks.needles) is absent")


@pytest.fixture(scope="module")
def zh_build(shared_data, tmp_path_factory):
    from conftest import require_path

    from ctxbench.tracks.needles import NeedlesConfig, build_needles

    corpus = require_path(shared_data / "classical" / "songyuan_xuean" / "volumes", "宋元學案 volumes")
    out = tmp_path_factory.mktemp("nsc") / "zh"
    build_needles(NeedlesConfig(corpus=str(corpus), models=["gpt-4.1", "claude-sonnet-4"], lengths=[6000],
                                output_budget=256), out)
    return out


@pytest.fixture(scope="module")
def ns() -> dict:
    return yaml.safe_load((assets_dir() / "needles" / "zh-classical.yaml").read_text(encoding="utf-8"))


def reader(body: dict, ns: dict) -> str:
    """Answers from the prompt: the value in the planted statement of the asked needle (in Arabic digits where it
    is a Chinese numeral with one, to exercise the matcher), the chain's answer where all its statements are
    there."""
    text = message_text(body["messages"][-1]["content"])
    for n in ns["needles"]:
        if n["question"] in text:
            pat = re.escape(n["statement"]).replace(re.escape("{value}"), "(.+?)")
            m = re.search(pat, text)
            if not m:
                return "文中未提及。"
            v = m.group(1)
            return "Answer: " + {"六十": "60", "七十三": "73"}.get(v, v)
    for c in ns["chains"]:
        if c["question"] in text:
            if all(s in text for s in c["statements"]):
                return "Answer: " + c["answer"]
            return "文中未提及。"
    return "?"


def reciter(body: dict, ns: dict) -> str:
    """Always the historically known value (never reads the haystack); chains: the teacher's name only."""
    text = message_text(body["messages"][-1]["content"])
    for n in ns["needles"]:
        if n["question"] in text:
            return f"據史籍，{n['real']['value']}。"
    for c in ns["chains"]:
        if c["question"] in text:
            return f"其師為{c['names'][1]}。"
    return "?"


def run(build, tmp_path, monkeypatch, answer_fn, name, ns):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = tmp_path / name
    shutil.copytree(build, b)
    with FakeOpenAIServer(answer_fn=lambda body: answer_fn(body, ns)) as srv:
        evaluate_build(b, EvalConfig(model=f"openai/{name}", base_url=srv.base_url, max_tokens=64))
    score_build(b)
    return b


def test_a_model_that_reads_scores_everything(zh_build, ns, tmp_path, monkeypatch):
    b = run(zh_build, tmp_path, monkeypatch, reader, "reader", ns)
    n = pq.read_table(b / "instances.parquet").num_rows
    # 2 sizing models × (3 needles × 2 variants × 3 depths + 5 chains)
    assert n == 2 * (3 * 2 * 3 + 5)
    s = pq.read_table(b / "scores.parquet").to_pylist()
    assert len(s) == n and all(r["matcher"] == "substring" and r["score"] == 1.0 for r in s)
    a = analyse(b)
    assert all(r["accuracy"] == 1.0 for r in a.accuracy)
    assert {r["sizing_model"]: (r["real_correct"], r["altered_correct"], r["asymmetric"]) for r in a.memorization} \
        == {"gpt-4.1": (9, 9, False), "claude-sonnet-4": (9, 9, False)}
    doc = build_report(b).read_text(encoding="utf-8")
    # one depth × tier heatmap per sizing model (plotly figures, their data in the page)
    assert doc.count("on haystacks sized for") == 2
    assert "Approximate tokenizer.</b> Haystacks for claude-sonnet-4" in doc


def test_a_model_that_recites_memory(zh_build, ns, tmp_path, monkeypatch):
    b = run(zh_build, tmp_path, monkeypatch, reciter, "reciter", ns)
    a = analyse(b)
    for m in a.memorization:            # one tier: the pooled rows only
        # right on every real cell (9), wrong on every altered one, each answered with the real value
        assert (m["real_correct"], m["altered_correct"], m["altered_answered_real"]) == (9, 0, 9)
        assert m["asymmetry"] == 1.0 and m["asymmetric"] is True
    tags = {}
    for r in pq.read_table(b / "scores.parquet").to_pylist():
        if r["score"] == 0.0:
            # the needle set was found through the manifest: chain names known
            assert json.loads(r["detail"])["facts"] == "needle_set:zh-classical.yaml"
            for t in json.loads(r["tags"]):
                tags[t] = tags.get(t, 0) + 1
    # 2 sizing models × 9 altered cells; 2 × 5 chains stopping at the teacher
    assert tags == {"fabrication": 18, "memorized_value": 18, "truncated_chain": 10}
