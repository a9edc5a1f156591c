"""LLM judge scoring through the gateway and cache, against the local fake OpenAI-compatible server."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq

from ctxbench.run.evaluate import evaluate_build
from ctxbench.scoring.judge import JUDGE_SYSTEM, parse_verdicts
from ctxbench.scoring.judge_base import fenced_candidate
from ctxbench.run.score import score_build
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
        # Cedar's reply was asked for once more with the repair prompt (and stayed unreadable): 10 + 1 judge calls
        n_judge_calls = sum(1 for b in srv.requests if b["messages"][0]["content"] == JUDGE_SYSTEM)
        assert n_judge_calls == 11
        repair = [b for b in srv.requests if len(b["messages"]) == 4]
        assert len(repair) == 1 and repair[0]["messages"][2] == {"role": "assistant", "content": "I think it is fine."}
        assert "Reply with JSON only" in repair[0]["messages"][3]["content"]
        unscored = pq.read_table(build / "judge_unscored.parquet").to_pylist()
        # the fake judge answers the repair prompt (which lists no gold rows) with no verdict: still unreadable
        assert [(r["instance_id"], r["reason"], r["reply"]) for r in unscored] == [
            ("inst-02", "unparseable verdict", '{"verdicts": []}')]
        # a second scoring reads the judge's verdicts (and the repair's answer) from the cache: no new judge call
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


def test_judge_and_matchers_see_the_extracted_answer_not_the_draft(tmp_path):
    """A reasoning model's reply: the judge prompt holds the final answer only (no <think> draft, no chat token)
    and every scores row stores that answer as extracted_answer; an answer-less reply costs no judge call."""
    build = make_build(tmp_path / "b", n=4)

    def thinking(body: dict) -> str:
        if body["messages"][0]["content"] == JUDGE_SYSTEM:
            return judge_or_model(body)
        user = message_text(body["messages"][-1]["content"])
        if "Question: What is the code of item Cedar?" in user:      # cut inside its reasoning: no answer
            return "<think>maybe 999, the document is long and"
        return "<think>maybe 999?</think>\n" + answer_from_document(body) + "<|im_end|>"

    with FakeOpenAIServer(answer_fn=thinking) as srv:
        evaluate_build(build, cfg(srv))
        score_build(build, judge="openai/judge", judge_base_url=srv.base_url)
        judge_users = [message_text(b["messages"][-1]["content"]) for b in srv.requests
                       if b["messages"][0]["content"] == JUDGE_SYSTEM]
    rows = pq.read_table(build / "scores.parquet").to_pylist()
    resp = {r["request_key"]: r["response"] for r in pq.read_table(build / "responses.parquet").to_pylist()}
    empty = [k for k, v in resp.items() if v.startswith("<think>maybe 999, the")]
    assert len(empty) == 1 and len(judge_users) == len(resp) - 1 == 3
    for u in judge_users:
        graded = fenced_candidate(u)                                   # fenced as data (issue 30)
        assert re.fullmatch(r"\d+|unknown", graded), graded          # the code after "Answer:", nothing else
        assert "999" not in u and "<think>" not in u and "<|im_end|>" not in u
    for r in rows:
        stored = resp[r["request_key"]]
        want = "" if r["request_key"] in empty else stored.split("Answer: ", 1)[1].replace("<|im_end|>", "")
        assert r["extracted_answer"] == want, (r, stored)
        if r["request_key"] in empty:
            assert r["score"] == 0.0 and r["tags"] == '["null_answer"]'


def test_an_unparseable_verdict_is_repaired_once_and_then_scored(tmp_path):
    """A judge that first answers in prose and, asked again with the repair prompt, in JSON: the repaired verdict
    is scored (and marked repaired); a judge that never answers JSON is asked exactly once more."""
    build = make_build(tmp_path / "b", n=3)

    def prose_then_json(body: dict) -> str:
        if body["messages"][0]["content"] != JUDGE_SYSTEM:
            return answer_from_document(body)
        if len(body["messages"]) == 2:
            return "The answer looks right to me."
        n = len(re.findall(r"(?m)^\d+\. ", message_text(body["messages"][1]["content"]).split("Answer to grade:")[0]))
        return json.dumps({"verdicts": ["partial"] * n})

    with FakeOpenAIServer(answer_fn=prose_then_json) as srv:
        evaluate_build(build, cfg(srv))
        s = score_build(build, judge="openai/judge", judge_base_url=srv.base_url)
        calls = [b for b in srv.requests if b["messages"][0]["content"] == JUDGE_SYSTEM]
    assert (s.judged, s.unparseable_verdicts, s.repaired_verdicts, s.judge_failed) == (3, 0, 3, 0)
    assert len(calls) == 6  # one first call and one repair per response
    judged = [r for r in pq.read_table(build / "scores.parquet").to_pylist() if r["matcher"] == "judge:openai/judge"]
    assert sorted(r["score"] for r in judged) == [0.5, 0.5, 0.5]  # every gold row "partial"
    assert all(json.loads(r["detail"])["repaired"] for r in judged)
    assert not (build / "judge_unscored.parquet").exists()
