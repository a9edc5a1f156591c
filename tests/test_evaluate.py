"""evaluate → score → report on a hand-made build, against a fake OpenAI-compatible server that fails about 30% of
requests with mixed transient errors: every instance ends with one ok row, reruns and cache hits make no call,
backfills call only the new model, samples get distinct request keys, permanent errors are stored and not scored."""

from __future__ import annotations

import functools
import json
import re

import pyarrow.parquet as pq
import pytest

import ctxbench.run.evaluate as ev
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.models.gateway import RetryPolicy
from ctxbench.models.registry import model_info
from ctxbench.report import build_report
from ctxbench.run.score import score_build
from ctxbench.core.storage import to_table, write_parquet
from fakeserver import FakeOpenAIServer, message_text

CODES = [4821, 1937, 7065, 3310, 5582, 6149, 2706, 8453, 9018, 1264]
NAMES = ["Aster", "Birch", "Cedar", "Dahlia", "Elm", "Fern", "Gorse", "Hazel", "Iris", "Juniper"]


def _gold(i: int) -> list[list]:
    """Gold rows, designed against what the fake model answers (exactly the asked item's code)."""
    if i == 7:
        return [[CODES[i]], [999_999]]          # one of two rows stated → 0.5
    if i == 8:
        return [[CODES[i] + 1]]                 # wrong number → 0.0
    if i == 9:
        return [[CODES[i], "Nowhere Street"]]   # one of the row's two values stated → 0.5
    return [[CODES[i]]]                         # → 1.0


EXPECTED_SCORE = {f"inst-{i:02d}": (0.5 if i in (7, 9) else 0.0 if i == 8 else 1.0) for i in range(10)}


def _context(i: int) -> str:
    facts = [f"The code of item {NAMES[j]} is {CODES[j]}." for j in range(10)]
    facts = facts[i:] + facts[:i]  # a different order (and so a different context) per instance
    filler = f"This is record set number {i} of the inventory, kept in building {i + 3}."
    return " ".join([filler] + facts)


def make_build(d, n=10, question=None):
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        rows.append({
            "instance_id": f"inst-{i:02d}", "benchmark": "holobench", "source_id": "toy",
            "question": question(i) if question else f"What is the code of item {NAMES[i]}?",
            "question_id": f"q{i % 5}", "sql": None, "gold": json.dumps(_gold(i)),
            "context": _context(i), "tokenizer": "cl100k_base", "target_tokens": 1024 if i < 5 else 2048,
            "context_tokens": 120, "setting": "amount", "context_format": "full_text",
            "position": "beginning" if i % 2 == 0 else "end", "query_types": json.dumps(["Max/Min"]),
            "difficulty": "easy", "evidence_spans": "[]", "build_hash": "toybuild"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "toybuild", "track": "holobench"}), encoding="utf-8")
    return d


def answer_from_document(body: dict) -> str:
    """A fake model that reads the document: the code of the item the question names."""
    user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    q = re.search(r"Question: What is the code of item (\w+)\?", user)
    codes = dict(re.findall(r"The code of item (\w+) is (\d+)\.", user))
    if not q or q.group(1) not in codes:
        return "I could not find it.\nAnswer: unknown"
    return f"The document says the code of item {q.group(1)} is listed.\nAnswer: {codes[q.group(1)]}"


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    # fast backoff: EvalConfig exposes max_retries and timeout_s but not the base delay
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


@pytest.fixture
def flaky():
    with FakeOpenAIServer(answer_fn=answer_from_document, fail_rate=0.3, seed=7, retry_after="0") as s:
        yield s


def read_rows(build):
    return pq.read_table(build / "responses.parquet").to_pylist()


def cfg(srv, model="openai/fake", **kw):
    return EvalConfig(model=model, base_url=srv.base_url, concurrency=4, max_retries=8, timeout_s=10, **kw)


def test_evaluate_rerun_cache_backfill_samples_score_report(tmp_path, flaky):
    build = make_build(tmp_path / "build")
    assert model_info("openai/fake").registered is False  # an unknown name is accepted

    # 1. first run: every instance answered despite ~30% transient failures
    s = evaluate_build(build, cfg(flaky))
    rows = read_rows(build)
    assert len(rows) == 10 and s.new_rows == 10
    assert sorted(r["instance_id"] for r in rows) == sorted(EXPECTED_SCORE)
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    assert (s.selected, s.calls, s.from_cache, s.already_stored, s.unfinished, s.errors) == (10, 10, 0, 0, 0, 0)
    assert s.retries > 0
    failures = sum(b != "ok" for b in flaky.behaviours)
    assert s.retries == failures == sum(r["retries"] for r in rows)
    assert flaky.count == 10 + s.retries
    assert set(flaky.count_by_model()) == {"fake"}
    assert len({r["request_key"] for r in rows}) == 10
    for r in rows:
        assert r["model"] == "openai/fake" and r["mode"] == "lc" and r["sample"] == 0
        assert r["prompt_variant"] == "cot" and r["cached"] is False
        assert r["cost_usd"] is None  # price unknown: null
        assert r["prompt_tokens"] > 0 and r["completion_tokens"] > 0
        i = int(r["instance_id"][-2:])
        assert r["response"].endswith(f"Answer: {CODES[i]}")
    first = {r["request_key"]: r for r in rows}

    # 2. rerun: nothing sent, no row added
    flaky.reset_counts()
    s = evaluate_build(build, cfg(flaky))
    assert flaky.count == 0
    assert (s.already_stored, s.new_rows, s.calls, s.from_cache) == (10, 0, 0, 0)
    assert {r["request_key"]: r for r in read_rows(build)} == first

    # 3. responses.parquet lost: every answer comes from the response cache, still no request
    (build / "responses.parquet").unlink()
    s = evaluate_build(build, cfg(flaky))
    assert flaky.count == 0
    assert (s.from_cache, s.calls, s.new_rows) == (10, 0, 10)
    rows = read_rows(build)
    assert len(rows) == 10 and all(r["cached"] is True and r["status"] == "ok" for r in rows)
    assert {r["request_key"]: r["response"] for r in rows} == {k: r["response"] for k, r in first.items()}
    before_backfill = sorted(rows, key=lambda r: r["request_key"])

    # 4. backfill: a new model is called, the old rows stay exactly as they were
    s = evaluate_build(build, cfg(flaky, model="openai/fake2"))
    assert set(flaky.count_by_model()) == {"fake2"}
    assert flaky.count == 10 + s.retries and s.calls == 10 and s.new_rows == 10
    rows = read_rows(build)
    assert len(rows) == 20
    assert sorted((r for r in rows if r["model"] == "openai/fake"), key=lambda r: r["request_key"]) == before_backfill
    new = [r for r in rows if r["model"] == "openai/fake2"]
    assert len(new) == 10 and all(r["status"] == "ok" and not r["cached"] for r in new)
    assert not {r["request_key"] for r in new} & {r["request_key"] for r in before_backfill}

    # 5. samples=3 for the first model: sample 0 is already stored, samples 1 and 2 are new calls
    flaky.reset_counts()
    s = evaluate_build(build, cfg(flaky, samples=3))
    assert s.already_stored == 10 and s.calls == 20 and s.new_rows == 20
    ok_seeds = sorted(b["seed"] for b, how in zip(flaky.requests, flaky.behaviours) if how == "ok")
    assert ok_seeds == [1] * 10 + [2] * 10
    rows = read_rows(build)
    mine = [r for r in rows if r["model"] == "openai/fake"]
    assert len(mine) == 30
    for iid in EXPECTED_SCORE:
        rs = [r for r in mine if r["instance_id"] == iid]
        assert sorted(r["sample"] for r in rs) == [0, 1, 2]
        assert len({r["request_key"] for r in rs}) == 3
    assert len({r["request_key"] for r in rows}) == len(rows) == 40

    # 6. score: one row per ok response, matcher row_match, designed scores
    n = score_build(build).rows
    sc = pq.read_table(build / "scores.parquet").to_pylist()
    assert n == len(sc) == 40
    assert all(r["matcher"] == "row_match" and 0.0 <= r["score"] <= 1.0 for r in sc)
    assert {(r["request_key"]) for r in sc} == {r["request_key"] for r in rows}
    for r in sc:
        assert r["score"] == EXPECTED_SCORE[r["instance_id"]], r
        assert isinstance(json.loads(r["tags"]), list)
    # scoring is deterministic: a second run writes the same rows
    score_build(build)
    assert pq.read_table(build / "scores.parquet").to_pylist() == sc

    # 7. report
    p = build_report(build)
    assert p == build / "report" / "index.html" and p.exists()
    html = p.read_text(encoding="utf-8")
    from ctxbench.report.plots import figures_in_html

    assert "openai/fake2" in html
    # the accuracy-by-length figure: one line per model × mode, named in full
    names = {t["name"] for t in figures_in_html(html)[0]["data"]}
    assert {"openai/fake (lc)", "openai/fake2 (lc)"} <= names, names
    by_len = pq.read_table(build / "report" / "by_length.parquet").to_pylist()
    got = {(r["model"], r["context_length"]): (r["n"], round(r["score"], 6)) for r in by_len}
    # lengths 1024: instances 0-4 all score 1; 2048: instances 5..9 score 1, 1, .5, 0, .5 → 0.6
    assert got == {("openai/fake", 1024): (5, 1.0), ("openai/fake", 2048): (5, 0.6),
                   ("openai/fake2", 1024): (5, 1.0), ("openai/fake2", 2048): (5, 0.6)}
    counts = {r["model"]: r for r in pq.read_table(build / "report" / "counts.parquet").to_pylist()}
    assert counts["openai/fake"]["calls"] == 30 and counts["openai/fake"]["ok"] == 30
    assert counts["openai/fake"]["cached"] == 10
    assert counts["openai/fake2"]["cached"] == 0


def test_fully_cached_run_in_a_new_build_starts_no_server(tmp_path):
    """A second build with the same contexts reuses the cache; the local-server factory is never entered."""
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        a = make_build(tmp_path / "a")
        evaluate_build(a, cfg(srv))
        assert srv.count == 10
        b = make_build(tmp_path / "b")
        started = []

        def server():
            started.append(1)
            raise AssertionError("the server must not start when every answer is cached")

        s = evaluate_build(b, cfg(srv), server=server)
        assert srv.count == 10 and not started
        assert s.from_cache == 10
        assert all(r["cached"] for r in read_rows(b))


def _reject_rule(body):
    user = message_text(body["messages"][-1]["content"])
    if "item Iris" in user.split("Question:")[-1]:
        return "400"
    if "item Juniper" in user.split("Question:")[-1]:
        return "ctx400"
    return None


def test_permanent_errors_are_stored_not_retried_not_scored(tmp_path):
    build = make_build(tmp_path / "build")
    with FakeOpenAIServer(answer_fn=answer_from_document, rule=_reject_rule) as srv:
        s = evaluate_build(build, cfg(srv))
        assert srv.count == 10  # no retry of a permanent error
        assert s.errors == 1 and s.over_length == 1 and s.retries == 0 and s.unfinished == 0
        rows = {r["instance_id"]: r for r in read_rows(build)}
        assert len(rows) == 10
        assert rows["inst-08"]["status"] == "error" and rows["inst-08"]["response"] is None
        assert "400" in rows["inst-08"]["error"]
        assert rows["inst-09"]["status"] == "over_length" and rows["inst-09"]["response"] is None
        assert all(rows[f"inst-{i:02d}"]["status"] == "ok" for i in range(8))

        n = score_build(build).rows
        sc = pq.read_table(build / "scores.parquet").to_pylist()
        assert n == len(sc) == 8
        assert {r["instance_id"] for r in sc} == {f"inst-{i:02d}" for i in range(8)}

        # a rerun asks the error row again (an error is never an answer, issue 21) and replaces it; the over-length
        # row is an outcome and is not asked again
        srv.reset_counts()
        s2 = evaluate_build(build, cfg(srv))
        assert srv.count == 1 and s2.replaced_errors == 1 and s2.errors == 1
        assert len(read_rows(build)) == 10

        p = build_report(build)
        assert p.exists()
        counts = pq.read_table(build / "report" / "counts.parquet").to_pylist()
        assert counts == [{"model": "openai/fake", "mode": "lc", "calls": 10, "ok": 8, "over_length": 1,
                           "failed": 1, "refused": 0, "cached": 0, "retries": 0, "cut_off": 0,
                           "truncated": 0, "empty_reply": 0}]  # issue 30: empty replies counted apart


def test_retry_budget_exhausted_leaves_no_row_and_rerun_retries(tmp_path):
    build = make_build(tmp_path / "build", n=3)
    down = {"on": True}

    def rule(body):
        user = message_text(body["messages"][-1]["content"])
        return "503" if down["on"] and "item Birch" in user.split("Question:")[-1] else None

    with FakeOpenAIServer(answer_fn=answer_from_document, rule=rule) as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url, concurrency=2,
                                             max_retries=2, timeout_s=10))
        assert s.unfinished == 1 and s.errors == 0 and s.new_rows == 2
        assert srv.count == 2 + 3  # two ok, one tried three times
        assert sorted(r["instance_id"] for r in read_rows(build)) == ["inst-00", "inst-02"]
        assert any("inst-01" in n for n in s.notes)

        down["on"] = False
        srv.reset_counts()
        s = evaluate_build(build, cfg(srv))
        assert srv.count == 1 and s.already_stored == 2 and s.new_rows == 1
        rows = {r["instance_id"]: r for r in read_rows(build)}
        assert rows["inst-01"]["status"] == "ok" and rows["inst-01"]["response"].endswith(f"Answer: {CODES[1]}")


def test_over_length_precheck_for_a_registered_model(tmp_path):
    """A registered window (gpt-4o: 128000, output 4096) with a token counter: a prompt over the window is recorded
    over_length without a call; the rest are called."""
    build = make_build(tmp_path / "build", n=3)

    def count(text):  # the pre-check's counter; below the server's count for the others (not truncation)
        return 200_000 if "item Birch?" in text else len(text.split())

    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        s = evaluate_build(build, cfg(srv, model="openai/gpt-4o"), count_tokens=count)
        assert srv.count == 2 and s.over_length == 1
        rows = {r["instance_id"]: r for r in read_rows(build)}
        assert rows["inst-01"]["status"] == "over_length" and rows["inst-01"]["prompt_tokens"] == 200_000
        assert rows["inst-00"]["status"] == "ok"
        assert all(b["max_tokens"] == 4096 for b in srv.requests)  # the registry's output budget
        assert all(b["model"] == "gpt-4o" for b in srv.requests)


def test_direct_prompt_variant_and_per_length(tmp_path):
    build = make_build(tmp_path / "build")
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        s = evaluate_build(build, cfg(srv, prompt_variant="direct", per_length=2))
        assert s.selected == 4 and srv.count == 4
        rows = read_rows(build)
        assert all(r["prompt_variant"] == "direct" for r in rows)
        lens = sorted(1024 if int(r["instance_id"][-2:]) < 5 else 2048 for r in rows)
        assert lens == [1024, 1024, 2048, 2048]
        # the cot run of the same instances is a different request: new calls
        srv.reset_counts()
        evaluate_build(build, cfg(srv, per_length=2))
        assert srv.count == 4


def test_not_a_build_directory(tmp_path):
    from ctxbench.core.errors import InputError

    with pytest.raises(InputError):
        evaluate_build(tmp_path, EvalConfig(model="openai/fake", base_url="http://127.0.0.1:9/v1"))


def test_auth_error_is_not_stored_and_a_fixed_rerun_calls(tmp_path):
    """A 401 (bad key) is the run's configuration, not the instance: no row is stored, the run reports the calls
    as unfinished, and a rerun against a working server answers them."""
    build = make_build(tmp_path / "b", n=3)
    with FakeOpenAIServer(answer_fn=answer_from_document) as srv:
        srv.script(["401"] * 3)
        s = evaluate_build(build, cfg(srv))
        assert (s.unfinished, s.new_rows) == (3, 0)
        assert not (build / "responses.parquet").exists()
        s2 = evaluate_build(build, cfg(srv))
        assert (s2.calls, s2.new_rows) == (3, 3)
        assert {r["status"] for r in read_rows(build)} == {"ok"}


def test_concurrent_appends_lose_no_row(tmp_path):
    """Several evaluations appending to one responses.parquet at once (a file lock serialises them)."""
    import threading

    from ctxbench.core.storage import append_rows

    path = tmp_path / "responses.parquet"

    def rows(w):
        return [{"request_key": f"{w}-{i}", "instance_id": f"i{i}", "model": f"m{w}", "mode": "lc", "sample": 0,
                 "prompt_variant": "cot", "status": "ok", "cached": False, "retries": 0} for i in range(5)]

    threads = [threading.Thread(target=lambda w=w: [append_rows(path, "responses", [r]) for r in rows(w)])
               for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = pq.read_table(path).column("request_key").to_pylist()
    assert sorted(keys) == sorted(f"{w}-{i}" for w in range(6) for i in range(5))


def _resp_rows(prefix, n, model="m"):
    return [{"request_key": f"{prefix}{i}", "instance_id": f"i{i}", "model": model, "mode": "lc", "sample": 0,
             "prompt_variant": "cot", "status": "ok", "response": f"{prefix}{i}", "cached": False, "retries": 0}
            for i in range(n)]


def test_appender_writes_parts_and_merges_them_as_appends_would(tmp_path):
    """An evaluation's flushes are part files (O(new rows)); readers see them at once; merged at the end, the
    table holds the bytes that appending the same flushes to the table one by one writes (first row of a key
    wins, a replaced key's row moves to the end)."""
    from ctxbench.core.storage import TableAppender, append_rows, parts_dir, pending_parts, read_table

    flushes = [(_resp_rows("a", 5), set()), (_resp_rows("a", 8), set()),  # a0..a4 again: skipped
               (_resp_rows("b", 3), set()),
               ([{**_resp_rows("a", 3)[2], "response": "again"}], {"a2"})]  # a2 replaced
    ref = tmp_path / "ref" / "responses.parquet"
    ref.parent.mkdir()
    new = tmp_path / "new" / "responses.parquet"
    new.parent.mkdir()
    counts_ref = [append_rows(ref, "responses", rows, replace=r) for rows, r in flushes]
    out = TableAppender(new, "responses")
    counts_new = []
    for rows, r in flushes:
        before = {p.name for p in pending_parts(new)}
        counts_new.append(out.append(rows, replace=r))
        assert len(pending_parts(new)) == len(before) + 1 and not new.exists()  # the table is not rewritten
    assert counts_new == counts_ref == [5, 3, 3, 1]
    seen = read_table(new, "responses")  # before the merge: every row, as the merged table will hold them
    assert seen.column("request_key").to_pylist() == pq.read_table(ref).column("request_key").to_pylist()
    assert seen.column("request_key").to_pylist() == ["a0", "a1", "a3", "a4", "a5", "a6", "a7", "b0", "b1", "b2",
                                                      "a2"]
    out.close()
    assert not parts_dir(new).exists() and new.read_bytes() == ref.read_bytes()
    assert out.append(_resp_rows("a", 2)) == 0  # stored keys stay skipped after the merge


def test_appenders_of_several_processes_lose_and_repeat_nothing(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "responses.parquet"
    code = ("import sys; from ctxbench.core.storage import TableAppender; sys.path.insert(0, sys.argv[3]);"
            "from test_evaluate import _resp_rows; w = int(sys.argv[2]); a = TableAppender(sys.argv[1], 'responses')\n"
            "for k in range(10):\n"
            "    a.append(_resp_rows('k', 40)[k * 4:(k + 1) * 4] + _resp_rows(f'w{w}-', 40)[k * 4:(k + 1) * 4])\n"
            "a.close()")
    import os

    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(w), os.path.dirname(__file__)])
             for w in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    keys = pq.read_table(path).column("request_key").to_pylist()
    assert sorted(keys) == sorted([f"k{i}" for i in range(40)] + [f"w{w}-{i}" for w in range(4) for i in range(40)])
    from ctxbench.core.storage import parts_dir

    assert not parts_dir(path).exists()


def test_parts_of_a_killed_evaluation_are_merged_by_the_next(tmp_path):
    from ctxbench.core.storage import TableAppender, parts_dir, read_table

    build = make_build(tmp_path / "b", n=3)
    rp = build / "responses.parquet"
    TableAppender(rp, "responses").append(_resp_rows("x", 2))  # never closed: a killed run
    assert read_table(rp, "responses").num_rows == 2 and not rp.exists()
    with FakeOpenAIServer() as srv:
        s = evaluate_build(build, EvalConfig(model="openai/fake", base_url=srv.base_url))
    assert s.calls == 3 and not parts_dir(rp).exists()
    assert sorted(pq.read_table(rp).column("request_key").to_pylist())[-2:] == ["x0", "x1"]


def test_unfinished_build_is_not_evaluated(tmp_path):
    """A build killed after instances.parquet but before manifest.json (written last) is refused."""
    from ctxbench.core.errors import InputError

    build = make_build(tmp_path / "b", n=2)
    (build / "manifest.json").unlink()
    with pytest.raises(InputError, match="unfinished build"):
        evaluate_build(build, EvalConfig(model="openai/fake", base_url="http://127.0.0.1:9/v1"))


def test_stale_temporaries_of_killed_writers_are_removed(tmp_path):
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()  # a process id that no longer runs
    stale = tmp_path / f".responses.parquet.tmp-{p.pid}"
    stale.write_bytes(b"PAR1 half written")
    write_parquet(to_table("quarantine", []), tmp_path / "responses.parquet")
    assert not stale.exists()
    assert (tmp_path / "responses.parquet").exists()
