"""Issue 32 item 9, the smaller things a newcomer met: `score` and `report` print the primary score per model and
length (as `run` does); `plan` never says "18 tier(s)" of a 2-tier build; a missing API key is named before any
call (exit 2), never labelled with an HTTP status no server sent; `--max-cost` on a model without a price is refused
before the progress bar; `--target-ci` says before any call when the build has too few contexts to reach it."""

from __future__ import annotations

import asyncio
import math
import os
import random

import pytest
from scipy.stats import norm
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.core.progress import listening
from fakeserver import FakeOpenAIServer
from test_compare_pairs import S, build
from test_crash_safety import make_toy_build
from test_server_errors import reader

runner = CliRunner()


@pytest.fixture
def no_keys(monkeypatch):
    for k in list(os.environ):
        if k.endswith("_API_KEY") or k in ("OLLAMA_API_BASE",):
            monkeypatch.delenv(k, raising=False)


# ------------------------------------------------------------------------------ score and report print the figure

def test_report_prints_the_primary_score_per_model_and_length(tmp_path, monkeypatch):
    """The hand-written build of test_compare_pairs: m-a answers 11 of 12 at 1,000 tokens (0.917) and 10 of 12 at
    2,000 (0.833); m-b 7/12 (0.583) and 3/12 (0.250)."""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = build(tmp_path / "b", S)
    r = runner.invoke(app, ["report", "--build", str(b)])
    assert r.exit_code == 0, r.output
    assert "ctxbench results" in r.output
    rows = [line for line in r.output.splitlines() if "row_match" in line]
    assert any("m-a" in x and "1,000" in x and "0.917" in x for x in rows), r.output
    assert any("m-a" in x and "2,000" in x and "0.833" in x for x in rows), r.output
    assert any("m-b" in x and "2,000" in x and "0.250" in x for x in rows), r.output


def test_score_prints_the_primary_score_per_model_and_length(tmp_path, monkeypatch):
    """The toy build answered by a fake server that reads the document: every reply is right (1.000 per length)."""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = make_toy_build(tmp_path / "b", 4)
    with FakeOpenAIServer(answer_fn=reader) as srv:
        evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url))
    r = runner.invoke(app, ["score", "--build", str(b)])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if "openai/fake" in line and "row_match" in line]
    assert any("1,024" in x and "1.000" in x for x in rows) and any("2,048" in x and "1.000" in x for x in rows), \
        r.output


# -------------------------------------------------------------------------------------------------- plan's tiers

def _independent_n(p1: float, p2: float) -> int:
    pbar = (p1 + p2) / 2
    n = (norm.ppf(0.975) * math.sqrt(2 * pbar * (1 - pbar)) + norm.ppf(0.8) * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
         ) ** 2 / (p1 - p2) ** 2
    return math.ceil(n)


def test_plan_never_counts_more_tiers_than_the_build_has(tmp_path, monkeypatch):
    """A build of 2 tiers of 12 instances. 0.7 vs 0.5 needs about 93 instances (worked out by the formula here):
    more than the build's 24, so plan says the build holds 24 and is n − 24 short, and that ceil(n / 12) tiers of
    this size would do; it never says "{ceil(n/12)} tier(s) of this build". 0.9 vs 0.4 needs 14: 2 of its 2."""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = build(tmp_path / "b", S)
    n = _independent_n(0.7, 0.5)
    r = runner.invoke(app, ["plan", "--accuracy", "0.7", "--mde", "0.2", "--build", str(b)])
    assert r.exit_code == 0, r.output
    assert (f"pooled over lengths: this build's 2 tier(s) hold 24 instances, {n - 24:,} short of {n:,}; it would "
            f"take {math.ceil(n / 12)} tiers of this size") in r.output, r.output
    assert "tier(s) of this build hold" not in r.output
    n = _independent_n(0.9, 0.4)
    assert n <= 24
    r = runner.invoke(app, ["plan", "--accuracy", "0.9", "--mde", "0.5", "--build", str(b)])
    assert f"pooled over lengths: {math.ceil(n / 12)} of this build's 2 tier(s) hold that many instances" in r.output


# ---------------------------------------------------------------------------------------------- a missing API key

def test_a_missing_key_has_no_http_status(no_keys):
    """litellm labels OpenAI's missing key a 500 (and Anthropic's a 401), yet no request left the machine."""
    from ctxbench.models.gateway import Gateway, RetryPolicy

    for model in ("gpt-4o-mini", "anthropic/claude-3-5-haiku-latest"):
        gw = Gateway(model, policy=RetryPolicy(max_retries=0))
        res = asyncio.run(gw.complete([{"role": "user", "content": "hi"}], 16, {"temperature": 0.0},
                                      random.Random(0)))
        assert res.status == "config_error" and res.http_status is None, (model, res.http_status, res.error)


@pytest.mark.parametrize("model, var", [("gpt-4o-mini", "OPENAI_API_KEY"),
                                        ("anthropic/claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"),
                                        ("mistral/mistral-small-latest", "MISTRAL_API_KEY")])
def test_evaluate_names_the_missing_key_before_any_call(tmp_path, monkeypatch, no_keys, model, var):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = make_toy_build(tmp_path / "b", 4)
    r = runner.invoke(app, ["evaluate", "--build", str(b), "--model", model])
    assert r.exit_code == 2, r.output
    assert var in r.output and "nothing was called" in r.output and "HTTP 500" not in r.output, r.output
    assert not (b / "responses.parquet").exists() or "config_error" not in (b / "responses.parquet").read_bytes().decode("latin-1")


def test_a_judge_without_its_key_is_named_too(tmp_path, monkeypatch, no_keys):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = make_toy_build(tmp_path / "b", 4)
    with FakeOpenAIServer(answer_fn=reader) as srv:
        evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url))
    r = runner.invoke(app, ["score", "--build", str(b), "--judge", "gpt-4o-mini"])
    assert r.exit_code == 2 and "OPENAI_API_KEY" in r.output and "nothing was called" in r.output, r.output


# ------------------------------------------------------------------------------------------------- --max-cost first

def test_max_cost_without_a_price_is_refused_before_the_progress_bar(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = make_toy_build(tmp_path / "b", 4)
    r = runner.invoke(app, ["evaluate", "--build", str(b), "--model", "openai/no-such-priced-model",
                            "--base-url", "http://127.0.0.1:9/v1", "--max-cost", "1"])
    assert r.exit_code == 2 and "has no price" in r.output and "--price IN,OUT" in r.output, r.output
    assert "calling" not in r.output  # the progress bar never showed


# ------------------------------------------------------------------------------------ --target-ci out of reach

def test_target_ci_out_of_reach_is_said_before_any_call(tmp_path, monkeypatch):
    """The toy build has 2 contexts per length: even 2 identical scores leave the confidence sequence at its
    widest (half-width 0.5, ctxbench.analysis.sequential), far above 0.05; the line comes before the first call's
    progress event, and the run then asks everything."""
    from ctxbench.analysis.sequential import half_width

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = make_toy_build(tmp_path / "b", 4)
    best = half_width([1.0, 1.0])[2]
    assert best > 0.05
    events = []
    with listening(lambda ev: events.append(ev)), FakeOpenAIServer(answer_fn=reader) as srv:
        s = evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url, target_ci=0.05))
    said = [i for i, ev in enumerate(events) if ev.stage == "target"]
    first_call = next(i for i, ev in enumerate(events) if ev.stage == "calls" and (ev.done or 0) >= 1)
    assert len(said) == 2 and max(said) < first_call  # one per length, before any answer
    line = events[said[0]].detail
    assert "the build has 2 context(s)" in line and f"{best:.3f} > 0.05" in line and "cannot be reached" in line
    assert any("cannot be reached" in n for n in s.notes) and srv.count == 4
