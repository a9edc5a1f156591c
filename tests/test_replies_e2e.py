"""Issue 21, end to end through ``ctxbench evaluate`` and ``ctxbench score`` (the CLI) against a scripted local server
(tests/fakeserver.py): per-instance outcomes (a reply cut by the output budget, a context overflow worded as vLLM's
500, an empty 200, a reasoning-only reply, an unknown reply shape, a content filter) exit 0 and are named in the
summary; a run whose every call is refused for a parameter stops within 12 HTTP requests, exits non-zero naming the
setting, and the same command answers it in full once the server accepts it; stored error rows are asked again;
Ollama's uncached prompt counting is not truncation; the judge path reads neither a cut_off reply nor a refused
configuration as verdicts."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from fakeserver import FakeOpenAIServer, message_text
from test_crash_safety import Q_RE, code, make_toy_build
from test_server_errors import reader

cli = CliRunner()


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def item(body: dict) -> int:
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return int(Q_RE.search(user).group(1)[1:])


def rows_of(build) -> dict[str, dict]:
    return {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}


# item -> what the server does with its request (the others answer "Answer: <code>" with finish_reason stop)
PER_INSTANCE = {1: "cut_off", 2: "prompt_too_long500", 3: "empty_length", 4: "reasoning_only", 5: "unknown_shape",
                6: "content_filter"}


def cut_reply(body: dict) -> str:
    """Item 1's reply quotes the gold as evidence, then the budget ends it (kind 1 of the issue)."""
    if item(body) == 1:
        return (f"Step 1: the record set lists item Q01 with code {code(1)} and item Q02 with code {code(2)}. "
                f"Step 2: but first I should check whether")
    return reader(body)


def test_per_instance_outcomes_exit_0_and_are_named(tmp_path):
    build = make_toy_build(tmp_path / "b", 8)
    with FakeOpenAIServer(answer_fn=cut_reply, rule=lambda body: PER_INSTANCE.get(item(body))) as srv:
        r = cli.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url", srv.base_url,
                             "--max-tokens", "200"])
        per_item: dict[int, int] = {}
        for b in srv.requests:
            per_item[item(b)] = per_item.get(item(b), 0) + 1
    # the model's own outcomes (over length, cut off, refused) alone would exit 0; the empty reply and the unknown
    # shape are failed calls stored as error rows, so the run exits 1 naming them (issue 31, docs/reference/exit-codes.md)
    assert r.exit_code == 1, r.output
    out = " ".join(r.output.split())
    assert "1 over length, 1 cut off by the output budget" in out and "1 refused by the provider" in out
    assert "2 failed" in out  # the empty reply and the unknown shape
    assert "error: 2 call(s) failed" in out and "inst-03" in out and "inst-05" in out and "asks them again" in out
    assert "--max-tokens" in out and "budget of 200 tokens" in out
    assert "1 replies of a shape ctxbench does not recognise, 1 empty 200 replies" in out
    # the context overflow is one request (no retry of vLLM's 500), the empty 200 is asked once more
    assert per_item[2] == 1 and per_item[3] == 2 and all(per_item[i] == 1 for i in (0, 1, 4, 5, 6, 7))

    rows = rows_of(build)
    got = {i: (rows[f"inst-{i:02d}"]["status"], rows[f"inst-{i:02d}"]["finish_reason"]) for i in range(8)}
    assert got == {0: ("ok", "stop"), 1: ("cut_off", "length"), 2: ("over_length", None), 3: ("error", "length"),
                   4: ("ok", "stop"), 5: ("error", None), 6: ("refused_by_provider", "content_filter"),
                   7: ("ok", "stop")}
    assert rows["inst-01"]["completion_tokens"] == 200 and str(code(1)) in rows["inst-01"]["response"]
    assert rows["inst-03"]["error"].startswith("empty reply") and rows["inst-03"]["retries"] == 1
    assert rows["inst-05"]["error"].startswith("unrecognised reply shape")
    # the reasoning-only reply: content empty as sent, the reply kept in the reasoning column, no budget blamed
    assert rows["inst-04"]["response"] is None and rows["inst-04"]["reasoning"] == f"Answer: {code(4)}"
    assert rows["inst-04"]["error"] is None

    s = cli.invoke(app, ["score", "--build", str(build)])
    assert s.exit_code == 0, s.output
    scores = pq.read_table(build / "scores.parquet").to_pylist()
    by = {(x["instance_id"], x["matcher"]): x["score"] for x in scores}
    # the cut reply quotes the gold (1037) but is no answer: no credit (no score row, or a 0 tagged cut_off once the
    # answer pipeline scores cut_off rows)
    assert all(v == 0.0 for (iid, _), v in by.items() if iid == "inst-01")
    assert by[("inst-00", "row_match")] == 1.0 and by[("inst-07", "row_match")] == 1.0
    assert {iid for iid, _ in by} <= {"inst-00", "inst-01", "inst-04", "inst-07"}


# the wording table's families, and a plain 400 the table does not know ("Invalid value for 'temperature'"), which
# the structural rule stops (the first calls all refused alike) and whose stored error rows the rerun replaces
WORDINGS = ["temperature400", "seed422", "no_template400", "invalid_model400", "400"]
SETTING = {"temperature400": "--temperature", "seed422": "`seed`", "no_template400": "chat template",
           "invalid_model400": "the model name", "400": "--temperature"}


@pytest.mark.parametrize("wording", WORDINGS)
def test_a_refused_parameter_stops_the_run_and_the_same_command_answers_it_later(tmp_path, wording):
    build = make_toy_build(tmp_path / "b", 18)
    refuse = {"on": True}
    with FakeOpenAIServer(answer_fn=reader, rule=lambda body: wording if refuse["on"] else None) as srv:
        args = ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url", srv.base_url,
                "--concurrency", "16"]
        r = cli.invoke(app, args)
        out = " ".join(r.output.split())
        assert r.exit_code == 1, r.output
        assert srv.count <= 12 and srv.count == 3  # the first calls one at a time; three alike stop the run
        assert "configuration error" in out and SETTING[wording] in out
        dry = cli.invoke(app, args + ["--dry-run"])
        assert dry.exit_code == 0 and "calls: 18" in dry.output  # the 3 error rows are not "already stored"
        refuse["on"] = False
        srv.reset_counts()
        again = cli.invoke(app, args)
        assert again.exit_code == 0, again.output
        again_out = " ".join(again.output.split())
        assert srv.count == 18 and "18 calls made" in again_out
        # a wording the table knows is a config_error (never stored); the unknown one left 3 error rows, replaced
        assert ("3 error rows asked again" in again_out) == (wording == "400")
    rows = rows_of(build)
    assert len(rows) == 18 and {r["status"] for r in rows.values()} == {"ok"}
    assert all(rows[f"inst-{i:02d}"]["response"] == f"Answer: {code(i)}" for i in range(18))


def test_one_bad_request_among_answers_is_a_per_instance_error(tmp_path):
    """The stop is for the first calls all failing alike; a 400 for one instance after answers is its own row."""
    build = make_toy_build(tmp_path / "b", 6)
    with FakeOpenAIServer(answer_fn=reader, rule=lambda body: "400" if item(body) == 4 else None) as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url))
        assert s.status == "complete" and s.errors == 1 and srv.count == 6
    assert rows_of(build)["inst-04"]["status"] == "error"


def test_a_missing_api_key_is_never_retried(monkeypatch):
    """litellm's openai provider without OPENAI_API_KEY: a config_error at once, no retry (was 12 retries, 38 s)."""
    import asyncio
    import random

    from ctxbench.models.gateway import Gateway, RetryPolicy

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gw = Gateway("gpt-4o-mini", policy=RetryPolicy(max_retries=6, base_delay_s=0.5))
    res = asyncio.run(gw.complete([{"role": "user", "content": "hi"}], 16, {"temperature": 0.0}, random.Random(0)))
    assert res.status == "config_error" and res.retries == 0 and res.retry_delay_s == 0
    assert "OPENAI_API_KEY" in res.error and res.error.startswith("configuration error: the credentials")


def test_ollama_counting_only_uncached_prompt_tokens_is_not_truncation(tmp_path):
    """Ollama reports prompt_eval_count without the cached prefix: a 32,768 window it reports rules truncation out."""
    build = make_toy_build(tmp_path / "b", 4)
    with FakeOpenAIServer(answer_fn=reader, window=32768, window_style="ollama", truncate_to=5) as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url))
    assert s.truncated == 0
    assert {r["status"] for r in rows_of(build).values()} == {"ok"}
    with FakeOpenAIServer(answer_fn=reader, window=8, window_style="ollama", truncate_to=5) as srv:
        s = evaluate_build(make_toy_build(tmp_path / "c", 4), EvalConfig(model="openai/fake", base_url=srv.base_url))
    assert s.truncated == 4  # a window that cannot hold the prompt: truncation stands


def test_cached_tokens_explain_a_short_prompt_count():
    from ctxbench.models.runner import TruncationCheck

    chk = TruncationCheck(len, 0.05, "x", True)
    # 1000 sent, the server counts 100 uncached + 900 cached: all read
    assert chk.is_truncated(100, 1000) and not chk.is_truncated(100, 1000, cached=900)
    # a known window holds 1000 tokens even if our count is 5% low: 1000 / 0.95 + 16 = 1068.6
    assert not chk.is_truncated(100, 1000, window=1069) and chk.is_truncated(100, 1000, window=1068)


def test_the_judge_path_reads_no_cut_off_reply_and_stops_on_a_config_error(tmp_path):
    from ctxbench.core.errors import InputError
    from ctxbench.models.cache import ResponseCache
    from ctxbench.models.runner import complete_all

    msgs = [[{"role": "user", "content": f"Question: What is the code of item Q{i:02d}?"}] for i in range(4)]
    with FakeOpenAIServer(answer_fn=lambda b: '{"verdicts": ["exact"]}',
                          rule=lambda b: "cut_off" if item(b) == 1 else None) as srv:
        out = complete_all(msgs, "openai/judge", srv.base_url, cache=ResponseCache(tmp_path / "c1"))
    assert [c.status for c in out] == ["ok", "failed", "ok", "ok"] and out[1].text is None
    assert "cut off" in out[1].error
    with FakeOpenAIServer(rule=lambda b: "temperature400") as srv:
        with pytest.raises(InputError, match="temperature"):
            complete_all(msgs * 5, "openai/judge", srv.base_url, cache=ResponseCache(tmp_path / "c2"))
        assert srv.count == 3


def test_finish_reasons_are_stored_as_sent_through_litellm(tmp_path):
    """The litellm path (backend litellm at the same base URL) stores the finish reason and the cut_off status."""
    import asyncio
    import random

    from ctxbench.models.gateway import Gateway, RetryPolicy

    with FakeOpenAIServer(answer_fn=lambda b: "Answer: 12 because", rule=lambda b: "cut_off") as srv:
        gw = Gateway("openai/fake", srv.base_url, 1, RetryPolicy(max_retries=0), backend="litellm")

        async def go():
            try:
                return await gw.complete([{"role": "user", "content": "q"}], 32, {"temperature": 0.0},
                                         random.Random(0))
            finally:
                await gw.aclose()
        res = asyncio.run(go())
    assert res.status == "cut_off" and res.finish_reason == "length" and res.completion_tokens == 32
    assert json.loads(json.dumps(res.payload()))["finish_reason"] == "length"


def test_the_default_output_budget_rule():
    """1/8 of a known window in 2,048..8,192 (instruct), 1/4 in 8,192..32,768 (reasoning); 4,096 / 16,384 unknown."""
    from ctxbench.models.registry import default_output_budget, model_info

    assert default_output_budget(128000, False) == 8192     # 16,000 clamped
    assert default_output_budget(32768, False) == 4096      # 32,768 / 8
    assert default_output_budget(8192, False) == 2048       # 1,024 raised to the floor
    assert default_output_budget(200000, True) == 32768     # 50,000 clamped
    assert default_output_budget(65536, True) == 16384      # 65,536 / 4
    assert default_output_budget(None, False) == 4096 and default_output_budget(None, True) == 16384
    # unregistered names: by their name (was 1,024 for every unregistered model)
    assert model_info("openai/fake").max_output_tokens == 4096
    assert model_info("openai/o4-mini").max_output_tokens == 16384
    assert model_info("hosted_vllm/deepseek-r1-distill-qwen-7b").max_output_tokens == 16384
    assert model_info("ollama/qwq").reasoning and not model_info("openai/gpt-4o-2024-08-06").reasoning
    # a registry entry's own budget wins
    assert model_info("gpt-4o").max_output_tokens == 4096 and model_info("o3-mini").max_output_tokens == 16384


def test_a_config_stop_later_in_a_run_says_calls_in_a_row(tmp_path):
    """After answers, 3 config errors in a row (e.g. the quota runs out) stop the run too."""
    build = make_toy_build(tmp_path / "b", 10)
    n = {"i": 0}

    def rule(body):
        n["i"] += 1
        return None if n["i"] <= 2 else {"status": 429, "body": {"error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "code": "insufficient_quota"}}}

    with FakeOpenAIServer(answer_fn=reader, rule=rule) as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=1))
        assert s.status == "config_error" and srv.count == 5
    assert "3 calls in a row" in s.notes[0] and "quota" in s.notes[0]
