"""``evaluate --max-cost`` / ``--price`` (a hard spend cap) and ``evaluate --target-ci`` (sequential stopping with an
anytime-valid confidence sequence), end to end through the CLI against the local OpenAI-compatible fake server
(issue 24 items 3 and 4). Spend is recomputed here from what the server received and answered (its own token
counts), the stopping point from the stored answers with the paper's recursion written out in
tests/test_stats_decide.py, never read back from the code under test."""

from __future__ import annotations

import functools
import hashlib
import json
import re

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import ctxbench.run.evaluate as ev
from ctxbench.cli import app
from ctxbench.models.gateway import RetryPolicy
from ctxbench.core.storage import to_table, write_parquet
from fakeserver import FakeOpenAIServer, message_text, prompt_token_count, token_count
from test_stats_decide import _cs_loop

PIN, POUT = 2.0, 8.0  # --price 2,8: USD per million input / output tokens
MAX_TOKENS = 64


def code(i: int) -> int:
    return 1000 + (i * 7919) % 9000


def wrong(i: int) -> bool:
    """The fake model misreads every fourth item (by a hash): accuracy ~0.75."""
    return int(hashlib.sha256(str(i).encode()).hexdigest(), 16) % 4 == 0


def make_build(d, per_length=40, lengths=(1024, 2048)):
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for L in lengths:
        for k in range(per_length):
            i = L * 10 + k
            rows.append({
                "instance_id": f"i{i}", "benchmark": "holobench", "source_id": "toy",
                "question": f"What is the code of item X{i}?", "question_id": f"q{i}", "sql": None,
                "gold": json.dumps([[code(i)]]), "context": f"Record {i}. The code of item X{i} is {code(i)}.",
                "tokenizer": "cl100k_base", "target_tokens": L, "context_tokens": 20, "setting": "amount",
                "context_format": "full_text", "position": "beginning", "query_types": "[]", "difficulty": "easy",
                "evidence_spans": "[]", "build_hash": "spendbuild"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "spendbuild", "track": "holobench"}), encoding="utf-8")
    return d


def answer(body: dict) -> str:
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    i = int(re.search(r"What is the code of item X(\d+)\?", user).group(1))
    return f"Answer: {code(i) + (1 if wrong(i) else 0)}"


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def run(build, srv, *extra):
    return CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                                    srv.base_url, "--max-tokens", str(MAX_TOKENS), "--concurrency", "4", *extra])


def server_spend(srv, bodies=None) -> float:
    """USD of the requests the server answered, from its own usage counts (cl100k_base, 3 per message)."""
    total = 0.0
    for body in (srv.requests if bodies is None else bodies):
        total += prompt_token_count(body["messages"]) * PIN / 1e6 + token_count(answer(body)) * POUT / 1e6
    return total


def stored(build):
    p = build / "responses.parquet"
    return pq.read_table(p).to_pylist() if p.exists() else []


def test_max_cost_stops_before_the_cap_and_a_larger_cap_asks_only_the_rest(tmp_path):
    build = make_build(tmp_path / "b", per_length=20)
    with FakeOpenAIServer(answer_fn=answer) as srv:
        cap = 0.006
        r = run(build, srv, "--max-cost", str(cap), "--price", f"{PIN},{POUT}")
        assert r.exit_code == 3, r.output
        sent = srv.count
        assert 0 < sent < 40
        spent = server_spend(srv)
        assert spent <= cap  # never passed the cap, by the server's own counts
        m = re.search(r"spent \$([0-9.]+) of --max-cost \$([0-9.]+) on (\d+) calls; (\d+) calls not sent", r.output)
        assert m, r.output
        assert abs(float(m.group(1)) - spent) < 1e-4 and int(m.group(3)) == sent and int(m.group(4)) == 40 - sent
        # the next call did not fit: cap − spent is below its worst case (prompt tokens + the whole output budget)
        assert "rerun the same command with a larger --max-cost" in r.output
        assert len(stored(build)) == sent  # every answer kept
        first = {json.dumps(b["messages"]) for b in srv.requests}
        srv.reset_counts()
        r = run(build, srv, "--max-cost", "1", "--price", f"{PIN},{POUT}")
        assert r.exit_code == 0, r.output
        assert srv.count == 40 - sent
        assert not first & {json.dumps(b["messages"]) for b in srv.requests}  # only the rest was asked
        assert len(stored(build)) == 40 and len({x["request_key"] for x in stored(build)}) == 40


def test_a_call_that_could_pass_the_cap_is_never_sent(tmp_path):
    build = make_build(tmp_path / "b", per_length=3)
    with FakeOpenAIServer(answer_fn=answer) as srv:
        # one call's worst case is ≥ 64 output tokens × $8/M = $0.000512: a cap below it sends nothing
        r = run(build, srv, "--max-cost", "0.0005", "--price", f"{PIN},{POUT}")
        assert r.exit_code == 3 and srv.count == 0 and "6 calls not sent" in r.output, r.output
        assert stored(build) == []


def test_max_cost_without_a_price_is_refused_before_any_call(tmp_path):
    build = make_build(tmp_path / "b", per_length=3)
    with FakeOpenAIServer(answer_fn=answer) as srv:
        r = run(build, srv, "--max-cost", "1")
        assert r.exit_code != 0 and "--price IN,OUT" in r.output and srv.count == 0
        r = run(build, srv, "--max-cost", "1", "--price", "two,8")
        assert r.exit_code != 0 and "--price" in r.output and srv.count == 0
        r = run(build, srv, "--price", "2,8")
        assert r.exit_code != 0 and "--max-cost" in r.output and srv.count == 0


def test_spend_without_server_usage_counts_prompt_and_reply_tokens(tmp_path):
    build = make_build(tmp_path / "b", per_length=10)
    with FakeOpenAIServer(answer_fn=answer, usage=False) as srv:
        r = run(build, srv, "--max-cost", "0.004", "--price", f"{PIN},{POUT}")
        assert r.exit_code == 3, r.output
        spent = float(re.search(r"spent \$([0-9.]+) in this invocation", r.output).group(1))
        # counted here: prompt text tokens (cl100k_base) + reply tokens; the server adds 3 per message, so the
        # counted spend is a little under the server's own count and above its text-only count
        assert 0 < spent <= 0.004
        text_only = sum(sum(token_count(message_text(m["content"])) for m in b["messages"]) * PIN / 1e6
                        + token_count(answer(b)) * POUT / 1e6 for b in srv.requests)
        assert spent >= text_only * 0.95


def test_batch_path_obeys_the_cap(tmp_path):
    build = make_build(tmp_path / "b", per_length=20)
    with FakeOpenAIServer(answer_fn=answer) as srv:
        r = run(build, srv, "--batch", "--batch-poll", "0.02", "--max-cost", "0.006", "--price", f"{PIN},{POUT}")
        assert r.exit_code == 3, r.output
        asked = [ln["body"] for b in srv.batches.values() for ln in b["lines"]]
        assert 0 < len(asked) < 40 and server_spend(srv, asked) <= 0.006
        assert len(stored(build)) == len(asked)
        r = run(build, srv, "--batch", "--batch-poll", "0.02", "--max-cost", "5", "--price", f"{PIN},{POUT}")
        assert r.exit_code == 0, r.output
        asked2 = [ln["body"] for b in srv.batches.values() for ln in b["lines"]]
        assert len(asked2) == 40 and len(stored(build)) == 40


def _order(ids_by_ctx: dict[str, str], seed=0) -> list[str]:
    """The seeded order, worked out here: SHA-256 of "{seed}|target-ci|{sha256(context)}"."""
    return sorted(ids_by_ctx, key=lambda c: hashlib.sha256(f"{seed}|target-ci|{c}".encode()).hexdigest())


def _check_prefix_and_width(build, W, per_length):
    inst = {r["instance_id"]: r for r in pq.read_table(build / "instances.parquet").to_pylist()}
    answered = {r["instance_id"] for r in stored(build)}
    widths = {}
    for L in (1024, 2048):
        ctx = {hashlib.sha256(r["context"].encode()).hexdigest(): iid for iid, r in inst.items()
               if r["target_tokens"] == L}
        order = [ctx[c] for c in _order(ctx)]
        asked = [i for i in order if i in answered]
        k = len(asked)
        assert asked == order[:k], "asked in the seeded order, a prefix of it"
        assert k < per_length
        xs = [0.0 if wrong(int(i[1:])) else 1.0 for i in asked]
        seq = _cs_loop(xs)
        hw = (seq[-1][1] - seq[-1][0]) / 2
        assert hw <= W  # stopped at the target
        widths[L] = (k, hw)
    return widths


def test_target_ci_stops_per_length_and_a_smaller_target_continues(tmp_path):
    per = 400
    build = make_build(tmp_path / "b", per_length=per)
    with FakeOpenAIServer(answer_fn=answer) as srv:
        r = run(build, srv, "--target-ci", "0.2")
        assert r.exit_code == 0, r.output
        first = _check_prefix_and_width(build, 0.2, per)
        assert "--target-ci 0.2" in r.output and "target reached" in r.output
        n1 = srv.count
        assert n1 == sum(k for k, _ in first.values())
        keys1 = {json.dumps(b["messages"]) for b in srv.requests}
        r = run(build, srv, "--target-ci", "0.12")
        assert r.exit_code == 0, r.output
        second = _check_prefix_and_width(build, 0.12, per)
        assert all(second[L][0] > first[L][0] for L in first)
        assert srv.count - n1 == sum(second[L][0] - first[L][0] for L in first)  # only the new ones asked
        assert not keys1 & {json.dumps(b["messages"]) for b in srv.requests[n1:]}
        # a rerun with the same target asks nothing
        n2 = srv.count
        r = run(build, srv, "--target-ci", "0.12")
        assert r.exit_code == 0 and srv.count == n2


def cut(i: int) -> bool:
    """The budget cuts the reply of every fifth item (by another hash) half-way: finish_reason length."""
    return int(hashlib.sha256(f"cut{i}".encode()).hexdigest(), 16) % 5 == 0


def _item(body: dict) -> int:
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    return int(re.search(r"What is the code of item X(\d+)\?", user).group(1))


def test_target_ci_counts_a_cut_off_reply_as_score_0(tmp_path):
    """A reply cut by the output budget earns 0 from scoring (status cut_off), so --target-ci counts it as a 0, not
    as no answer: the stopping point and the half-width are those of the 0/1 scores with cut replies as 0, and every
    asked context is one of the observations the summary names."""
    per = 400
    build = make_build(tmp_path / "b", per_length=per)
    with FakeOpenAIServer(answer_fn=answer, rule=lambda b: "cut_off" if cut(_item(b)) else None) as srv:
        r = run(build, srv, "--target-ci", "0.2")
        assert r.exit_code == 0, r.output
        rows = stored(build)
        assert {x["status"] for x in rows if cut(int(x["instance_id"][1:]))} == {"cut_off"}
        inst = {x["instance_id"]: x for x in pq.read_table(build / "instances.parquet").to_pylist()}
        answered = {x["instance_id"] for x in rows}
        n_cut = 0
        for L in (1024, 2048):
            ctx = {hashlib.sha256(x["context"].encode()).hexdigest(): iid for iid, x in inst.items()
                   if x["target_tokens"] == L}
            order = [ctx[c] for c in _order(ctx)]
            asked = [i for i in order if i in answered]
            k = len(asked)
            assert asked == order[:k] and 0 < k < per
            xs = [0.0 if (wrong(int(i[1:])) or cut(int(i[1:]))) else 1.0 for i in asked]
            n_cut += sum(cut(int(i[1:])) for i in asked)
            seq = _cs_loop(xs)
            hw = (seq[-1][1] - seq[-1][0]) / 2
            assert hw <= 0.2
            m = re.search(rf"at {L:,} tokens: half-width ([0-9.]+) over (\d+) contexts \(target reached\)",
                          r.output.replace("\n", " "))
            assert m, r.output
            assert int(m.group(2)) == k  # the cut replies are observations too
            assert abs(float(m.group(1)) - hw) < 1e-4
        assert n_cut > 0
        # a rerun with the same target counts the stored cut_off rows as 0 again and asks nothing
        n = srv.count
        r = run(build, srv, "--target-ci", "0.2")
        assert r.exit_code == 0 and srv.count == n, r.output


@pytest.mark.parametrize("extra", [("--target-ci", "0.2"), ("--max-cost", "1", "--price", f"{PIN},{POUT}"),
                                   ("--target-ci", "0.2", "--max-cost", "1", "--price", f"{PIN},{POUT}")])
def test_refused_first_calls_stop_the_waves_and_the_same_command_replaces_the_error_rows(tmp_path, extra):
    """The start gate under the wave paths: the first calls go one at a time; three alike permanent failures (an
    unknown 400, stored as error rows) stop the run with exit 1 and nothing more is sent. The same command later asks
    those three again and replaces their rows: one row per request key, every one ok, the stopping rule over them."""
    per = 400 if "--target-ci" in extra else 10
    build = make_build(tmp_path / "b", per_length=per)
    refuse = {"on": True}
    with FakeOpenAIServer(answer_fn=answer, rule=lambda b: "400" if refuse["on"] else None) as srv:
        r = run(build, srv, *extra)
        assert r.exit_code == 1, r.output
        assert srv.count == 3, r.output
        rows = stored(build)
        assert len(rows) == 3 and {x["status"] for x in rows} == {"error"}
        refuse["on"] = False
        first = [json.dumps(b["messages"]) for b in srv.requests]
        srv.reset_counts()
        r = run(build, srv, *extra)
        assert r.exit_code == 0, r.output
        again = [json.dumps(b["messages"]) for b in srv.requests]
        assert set(first) <= set(again)  # the error rows were asked again
        rows = stored(build)
        assert len(rows) == len({x["request_key"] for x in rows}) == srv.count
        assert {x["status"] for x in rows} == {"ok"}
        if "--target-ci" in extra:
            _check_prefix_and_width(build, 0.2, per)
        else:
            assert srv.count == 2 * per


def test_target_ci_rerun_replaces_error_rows_even_where_the_target_is_reached(tmp_path):
    """Under --target-ci, calls failing with an unknown 400 (after the first answers) leave error rows in the asked
    prefix; the same command later asks exactly those again and replaces them, though each group has reached its
    target: one row per request key, no error left, the output's "asked again" count true."""
    import itertools

    build = make_build(tmp_path / "b", per_length=400)
    fail, n = {"on": True}, itertools.count()

    def bad(i):
        return int(hashlib.sha256(f"err{i}".encode()).hexdigest(), 16) % 10 == 0

    rule = lambda b: "400" if next(n) > 5 and fail["on"] and bad(_item(b)) else None  # noqa: E731
    with FakeOpenAIServer(answer_fn=answer, rule=rule) as srv:
        r = run(build, srv, "--target-ci", "0.2")
        rows = stored(build)
        errs = {x["request_key"] for x in rows if x["status"] == "error"}
        assert errs, r.output
        fail["on"] = False
        srv.reset_counts()
        r = run(build, srv, "--target-ci", "0.2")
        assert r.exit_code == 0, r.output
        assert f"{len(errs)} error rows asked again" in " ".join(r.output.split())
        assert srv.count >= len(errs)
        rows = stored(build)
        assert len(rows) == len({x["request_key"] for x in rows})
        assert not [x for x in rows if x["status"] == "error"]
        assert errs <= {x["request_key"] for x in rows}
        _check_prefix_and_width(build, 0.2, 400)


def test_dry_run_says_what_the_spend_cap_lets_through(tmp_path):
    """--dry-run with --max-cost prints the cap against the worst case of every call (its prompt, counted in
    cl100k_base with the 10% margin for a model without a tokenizer, plus its whole output budget): a cap above the
    worst case of all fits every call, a cap below one call's output budget alone fits none, and a cap of exactly
    the first k calls' worst case fits k (worked out from the printed input tokens: 4 calls, each with the same
    token count)."""
    build = make_build(tmp_path / "b", per_length=2, lengths=(1024,))

    def dry(cap):
        r = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url",
                                     "http://127.0.0.1:9", "--max-tokens", "100", "--dry-run", "--max-cost", str(cap),
                                     "--price", "1,2"])
        assert r.exit_code == 0, r.output
        lines = dict(ln.split(": ", 1) for ln in r.output.splitlines() if ": " in ln)
        return lines
    big = dry(100)
    assert big["calls to make"] == "2" and big["spend cap (--max-cost)"].endswith("every call fits")
    n = int(big["input tokens"].split(" ")[0].replace(",", ""))  # both prompts together
    per = -(-n * 11 // 20) * 1e-6 + 100 * 2e-6 if n % 2 == 0 else None  # ceil(n/2 × 1.1) tokens at $1/M + 100 × $2/M
    assert per is not None
    assert f"is ${2 * per:.4f}" in big["spend cap (--max-cost)"]
    assert "0 of 2 calls fit" in dry(0.0001)["spend cap (--max-cost)"]  # 100 output tokens alone cost $0.0002
    assert "1 of 2 calls fit" in dry(round(per * 1.5, 9))["spend cap (--max-cost)"]
