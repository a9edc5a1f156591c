"""LLM judge scoring through the gateway and cache, against the local fake OpenAI-compatible server."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq

from ctxbench.evaluate import evaluate_build
from ctxbench.scoring.judge import JUDGE_SYSTEM, parse_verdicts
from ctxbench.score import score_build
from fakeserver import FakeOpenAIServer, message_text
from test_evaluate import _env, answer_from_document, cfg, make_build  # noqa: F401 (fixture reused)


def judge_or_model(body: dict) -> str:
    """The fake model answers documents; as a judge it marks every gold row 'exact', except that for the
    question about Cedar it replies with text that is not JSON."""
    if body["messages"][0]["content"] == JUDGE_SYSTEM:
        user = message_text(body["messages"][-1]["content"])
        if "item Cedar" in user:
            return "I think it is fine."
        n = len(re.findall(r"(?m)^\d+\. ", user.split("Answer to grade:")[0]))
        return json.dumps({"verdicts": ["exact"] * n})
    return answer_from_document(body)


def test_judge_scores_and_counts_unparseable(tmp_path):
    build = make_build(tmp_path / "b")
    with FakeOpenAIServer(answer_fn=judge_or_model) as srv:
        evaluate_build(build, cfg(srv))
        s = score_build(build, judge="openai/judge", judge_base_url=srv.base_url)
        assert s.judged == 10
        assert s.unparseable_verdicts == 1          # Cedar's verdict is not JSON: counted, not scored
        rows = pq.read_table(build / "scores.parquet").to_pylist()
        judged = [r for r in rows if r["matcher"] == "judge:openai/judge"]
        assert len(judged) == 9
        assert all(r["score"] == 1.0 for r in judged)
        assert len([r for r in rows if r["matcher"] == "row_match"]) == 10
        # a second scoring reads the judge's verdicts from the response cache: no new judge call
        n_judge_calls = sum(1 for b in srv.requests if b["messages"][0]["content"] == JUDGE_SYSTEM)
        assert n_judge_calls == 10
        s2 = score_build(build, judge="openai/judge", judge_base_url=srv.base_url)
        assert sum(1 for b in srv.requests if b["messages"][0]["content"] == JUDGE_SYSTEM) == n_judge_calls
        assert (s2.rows, s2.unparseable_verdicts) == (s.rows, 1)


def test_parse_verdicts():
    assert parse_verdicts('{"verdicts": ["exact", "partial"]}', 2) == ["exact", "partial"]
    assert parse_verdicts('Sure: {"verdicts": ["none"]} done', 1) == ["none"]
    assert parse_verdicts('{"verdicts": ["exact"]}', 2) is None      # wrong number of rows
    assert parse_verdicts('{"verdicts": ["maybe"]}', 1) is None      # not a verdict
    assert parse_verdicts("no json here", 1) is None
    assert parse_verdicts(None, 1) is None
