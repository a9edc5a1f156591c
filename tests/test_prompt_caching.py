"""Prompt caching (issue 17 item 5): every evaluation prompt puts the context first, so the requests on one context
share a prefix that ends with the document; Claude requests mark it with ``cache_control``, others stay plain
(their request keys unchanged); evaluate runs the first call of each context before the others, so a provider's
cache serves the rest; ``--dry-run`` prints costs with and without cached input (figures checked by hand)."""

from __future__ import annotations

import functools
import json
import threading
import time

import pyarrow.parquet as pq
import pytest
import yaml

import ctxbench.run.evaluate as ev
from ctxbench.core.config import assets_dir
from ctxbench.run.dryrun import estimate
from ctxbench.run.evaluate import EvalConfig, evaluate_build, plan_requests
from ctxbench.models.cache import ResponseCache, endpoint_id, request_key
from ctxbench.models.gateway import RetryPolicy
from ctxbench.models.prompts import messages_text, render_messages, shared_prefix, takes_cache_hint
from ctxbench.core.storage import to_table, write_parquet
from ctxbench.tokenizers import get_tokenizer
from fakeserver import FakeOpenAIServer

EVAL_PROMPTS = sorted(p.stem for p in (assets_dir() / "prompts").glob("*.yaml")
                      if {"cot", "direct"} <= set(yaml.safe_load(p.read_text(encoding="utf-8"))))


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def _user_text(msgs: list[dict]) -> str:
    c = msgs[1]["content"]
    return c if isinstance(c, str) else "".join(b["text"] for b in c)


@pytest.mark.parametrize("benchmark", EVAL_PROMPTS)
@pytest.mark.parametrize("variant", ["cot", "direct"])
@pytest.mark.parametrize("rag,fmt", [(False, None), (False, "tables"), (True, None)])
def test_context_is_a_stable_prefix_of_every_evaluation_prompt(benchmark, variant, rag, fmt):
    ctx = "Row one says 7.\nRow two says </document> and 9."  # a context holding the closing tag itself
    a = render_messages(ctx, "What does row one say?", variant, "gpt-4o", rag, benchmark, fmt)
    b = render_messages(ctx, "Which row says 9?", variant, "gpt-4o", rag, benchmark, fmt)
    pa, pb = shared_prefix(a, ctx), shared_prefix(b, ctx)
    assert pa == pb and pa.endswith(ctx + "\n</document>")
    assert messages_text(a).startswith(pa) and messages_text(b).startswith(pb)
    assert "What does row one say?" not in pa and a[0] == b[0]  # the question comes after the whole context
    # plain (no hint) for providers that cache by themselves: one string, so the request key is the plain one
    assert isinstance(a[1]["content"], str)
    # Claude: the first block (cache breakpoint) is exactly the shared user part and carries the hint
    c = render_messages(ctx, "What does row one say?", variant, "anthropic/claude-sonnet-4-20250514", rag,
                        benchmark, fmt)
    first, rest = c[1]["content"]
    assert first["cache_control"] == {"type": "ephemeral"} and "cache_control" not in rest
    assert c[0]["content"] + "\n" + first["text"] == pa
    assert first["text"] + rest["text"] == _user_text(a)


def test_cache_hint_only_for_claude_routes():
    for m in ("claude-sonnet-4-20250514", "anthropic/claude-3-5-haiku", "bedrock/anthropic.claude-3-5-sonnet",
              "vertex_ai/claude-3-5-sonnet", "openrouter/anthropic/claude-3.5-sonnet"):
        assert takes_cache_hint(m), m
    for m in ("gpt-4o", "openai/fake", "deepseek/deepseek-chat", "openai/claude-distill", "gemini/gemini-2.0-flash"):
        assert not takes_cache_hint(m), m
    # the request key of a plain model is the hash of the plain messages (no content blocks, no hint)
    msgs = render_messages("doc", "q?", "direct", "gpt-4o")
    assert msgs == [{"role": "system", "content": msgs[0]["content"]},
                    {"role": "user", "content": _user_text(msgs)}]


# -- a build of 2 long contexts x 3 questions ----------------------------------------------------------------------

WORDS = "amber basil cobalt dune ember fjord garnet harbor indigo jasper kelp lumen".split()


def _context(c: int) -> str:
    return " ".join(f"Entry {i} of ledger {c} lists {WORDS[(i + c) % 12]} at shelf {i * 7 % 101}." for i in range(120))


def make_build(d, contexts=2, questions=3, long=True):
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for c in range(contexts):
        for q in range(questions):
            rows.append({
                "instance_id": f"c{c}q{q}", "benchmark": "holobench", "source_id": "toy",
                "question": f"Which shelf holds entry {q + 1} of ledger {c}?", "question_id": f"q{q}", "sql": None,
                "gold": json.dumps([[(q + 1) * 7 % 101]]), "context": _context(c) if long else f"Ledger {c}.",
                "tokenizer": "cl100k_base", "target_tokens": 4096, "context_tokens": 2000, "setting": "amount",
                "context_format": "full_text", "position": "uniform", "query_types": "[]", "difficulty": "easy",
                "evidence_spans": "[]", "build_hash": "cachebuild"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "cachebuild", "track": "holobench"}), encoding="utf-8")
    return d


PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6, "cache_read_input_token_cost": 1e-7}


@pytest.fixture
def priced(monkeypatch):
    """Two made-up models in litellm's price table: an OpenAI one (automatic caching, no write price) and a Claude
    one (cache writes at 1.25x input, the hint in its messages)."""
    import litellm

    table = dict(litellm.model_cost)
    table["test-gpt-cheap"] = {**PRICES, "litellm_provider": "openai", "mode": "chat"}
    table["claude-test-cheap"] = {**PRICES, "cache_creation_input_token_cost": 1.25e-6,
                                  "litellm_provider": "anthropic", "mode": "chat"}
    monkeypatch.setattr(litellm, "model_cost", table)


def _dollars(s: str) -> float:
    return float(s.split()[0].lstrip("$"))


def _counts(build, model):
    tok = get_tokenizer("cl100k_base")
    plan = plan_requests(build, EvalConfig(model=model, max_tokens=100), ResponseCache())
    n = {t["instance_id"]: tok.count(messages_text(t["_messages"])) for t in plan.todo}
    p = {t["instance_id"]: tok.count(shared_prefix(t["_messages"], t["_context"])) for t in plan.todo}
    return plan, n, p


def test_dry_run_costs_with_and_without_cached_input_by_hand(tmp_path, priced):
    build = make_build(tmp_path / "b")
    plan, n, p = _counts(build, "test-gpt-cheap")
    assert len(plan.todo) == 6
    P0, P1 = p["c0q0"], p["c1q0"]  # each context's prefix: the same for its three questions
    assert P0 == p["c0q1"] == p["c0q2"] and P1 == p["c1q1"] == p["c1q2"] and min(P0, P1) >= 1024
    est = estimate(build, EvalConfig(model="test-gpt-cheap", max_tokens=100))
    assert est["calls"] == 6 and est["calls to make"] == 6
    assert est["input tokens"].startswith(f"{sum(n.values()):,} (cl100k_base, estimated)")
    assert est["input tokens repeating a context prefix (cacheable)"] == f"{2 * P0 + 2 * P1:,}"
    plain = sum(n.values()) * 1e-6 + 6 * 100 * 4e-6
    # OpenAI: the 2nd and 3rd call on each context read its prefix at 0.1 $/Mtok instead of 1 $/Mtok
    cached = plain - (2 * P0 + 2 * P1) * (1e-6 - 1e-7)
    assert _dollars(est["estimated cost"]) == pytest.approx(plain, abs=1e-4)
    assert _dollars(est["estimated cost with cached input"]) == pytest.approx(cached, abs=1e-4)
    # batch: OpenAI's discount (assets/models.yaml: 0.5) on every price, cached input included
    assert _dollars(est["estimated cost through the batch API (--batch)"]) == pytest.approx(plain / 2, abs=1e-4)
    assert _dollars(est["estimated cost through the batch API (--batch) with cached input"]) == \
        pytest.approx(cached / 2, abs=1e-4)

    # Claude: the hint is in the messages; the first call on each context writes its prefix at 1.25x
    plan, n, p = _counts(build, "claude-test-cheap")
    P0, P1 = p["c0q0"], p["c1q0"]
    est = estimate(build, EvalConfig(model="claude-test-cheap", max_tokens=100))
    plain = sum(n.values()) * 1e-6 + 6 * 100 * 4e-6
    cached = plain - (2 * P0 + 2 * P1) * (1e-6 - 1e-7) + (P0 + P1) * (1.25e-6 - 1e-6)
    assert _dollars(est["estimated cost"]) == pytest.approx(plain, abs=1e-4)
    assert _dollars(est["estimated cost with cached input"]) == pytest.approx(cached, abs=1e-4)
    assert _dollars(est["estimated cost through the batch API (--batch) with cached input"]) == \
        pytest.approx(cached / 2, abs=1e-4)


def test_dry_run_excludes_cached_answers_and_short_prefixes(tmp_path, priced):
    build = make_build(tmp_path / "b")
    cfg = EvalConfig(model="test-gpt-cheap", max_tokens=100)
    plan, n, p = _counts(build, "test-gpt-cheap")
    first = next(t for t in plan.todo if t["instance_id"] == "c0q0")
    ResponseCache().put(first["request_key"], "test-gpt-cheap", {"status": "ok", "response": "Answer: 7"})
    est = estimate(build, cfg)
    assert est["calls"] == 6 and est["already in the response cache (free)"] == 1 and est["calls to make"] == 5
    rest = sum(v for k, v in n.items() if k != "c0q0")
    plain = rest * 1e-6 + 5 * 100 * 4e-6
    # c0q1 is now the first call on context 0 (the provider's cache is cold): only c0q2, c1q1, c1q2 read a prefix
    cached = plain - (p["c0q0"] + 2 * p["c1q0"]) * (1e-6 - 1e-7)
    assert _dollars(est["estimated cost"]) == pytest.approx(plain, abs=1e-4)
    assert _dollars(est["estimated cost with cached input"]) == pytest.approx(cached, abs=1e-4)

    short = make_build(tmp_path / "s", long=False)  # prefixes far under the 1,024-token minimum: nothing cached
    est = estimate(short, cfg)
    assert est["estimated cost"] == est["estimated cost with cached input"]
    unknown = estimate(short, EvalConfig(model="openai/no-such-price", max_tokens=100))
    assert unknown["estimated cost"].startswith("unknown")


def test_first_call_per_context_runs_first_and_later_ones_hit_the_provider_cache(tmp_path):
    build = make_build(tmp_path / "b")
    arrived, answered = {}, {}
    lock = threading.Lock()

    def rule(body):
        with lock:
            arrived[body["messages"][1]["content"].rsplit("Question: ", 1)[1].split("\n")[0]] = time.monotonic()

    def answer(body):
        q = body["messages"][1]["content"].rsplit("Question: ", 1)[1].split("\n")[0]
        with lock:
            answered[q] = time.monotonic()
        return "Answer: 7"

    with FakeOpenAIServer(answer_fn=answer, rule=rule, latency_s=0.3, prompt_cache=True) as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=8))
        assert s.calls == 6 and srv.count == 6
        endpoint = endpoint_id("openai/fake", srv.base_url)
    rows = pq.read_table(build / "responses.parquet").to_pylist()
    for c in range(2):
        qs = [f"Which shelf holds entry {q + 1} of ledger {c}?" for q in range(3)]
        lead = min(qs, key=lambda q: arrived[q])
        assert all(answered[lead] <= arrived[q] for q in qs if q != lead)  # the others waited for the first
    # concurrency kept across contexts: the run's very first call goes alone (the start gate, which stops a run
    # whose first calls are all refused alike: issue 21); once it is answered, the other context's first call runs
    # at the same time as the first context's followers, not after them
    firsts = sorted(((min(arrived[f"Which shelf holds entry {q + 1} of ledger {c}?"] for q in range(3))), c)
                    for c in range(2))
    followers = [arrived[f"Which shelf holds entry {q + 1} of ledger {firsts[0][1]}?"] for q in range(3)]
    followers.remove(firsts[0][0])
    assert firsts[1][0] - min(followers) < 0.25 and firsts[1][0] - firsts[0][0] < 0.3 + 0.25
    by_cached = sorted(r["cached_prompt_tokens"] for r in rows)
    assert by_cached[:2] == [0, 0] and all(v >= 1024 for v in by_cached[2:])  # 4 of 6 read the cached prefix
    # the request key is the plain one: model, endpoint, the plain messages, sampling, output budget (4,096: the
    # default of an unregistered instruct model, docs/replies.md), sample
    r = next(r for r in rows if r["instance_id"] == "c1q2")
    msgs = render_messages(_context(1), "Which shelf holds entry 3 of ledger 1?", "cot", "openai/fake")
    assert r["request_key"] == request_key("openai/fake", msgs, {"temperature": 0.0, "seed": 0}, 4096, 0,
                                           endpoint)
