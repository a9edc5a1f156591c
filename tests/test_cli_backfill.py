"""`ctxbench backfill` (the backfill flow's library call from the command line), evaluations that select nothing and
builds with no instance: each says why and exits non-zero (issue 17 item 6)."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from fakeserver import FakeOpenAIServer
from test_crash_safety import make_toy_build

runner = CliRunner()


def _reader(body: dict) -> str:
    return "Answer: " + body["messages"][-1]["content"].splitlines()[-1]


def test_backfill_adds_one_model_and_rewrites_no_row(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    runs = tmp_path / "runs"
    b1, b2 = make_toy_build(runs / "a", n=6), make_toy_build(runs / "nested" / "b", n=4)
    other = make_toy_build(runs / "other", n=2)
    man = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**man, "track": "needles"}))
    with FakeOpenAIServer(answer_fn=_reader) as srv:
        for b in (b1, b2):
            evaluate_build(b, EvalConfig(model="openai/old", base_url=srv.base_url))
        old = {b: pq.read_table(b / "responses.parquet").to_pylist() for b in (b1, b2)}
        srv.reset_counts()
        r = runner.invoke(app, ["backfill", "--model", "openai/new", "--base-url", srv.base_url, "--runs", str(runs),
                                "--benchmarks", "holobench"])
        assert r.exit_code == 0, r.output
        # 10 instances, 8 distinct prompts (b2's first two repeat b1's): the response cache answers the repeats
        assert srv.count_by_model() == Counter({"new": 8})
        for b in (b1, b2):
            rows = pq.read_table(b / "responses.parquet").to_pylist()
            assert [x for x in rows if x["model"] == "openai/old"] == old[b]  # other models' rows unchanged
            assert Counter(x["model"] for x in rows)["openai/new"] == len(old[b])
        assert not (other / "responses.parquet").exists()  # a needles build: not asked for
        assert f"{b1}: 6 instances selected; 6 calls made" in r.output
        assert f"{b2}: 4 instances selected; 2 calls made, 2 from cache" in r.output
        # again: everything stored, no call
        srv.reset_counts()
        r = runner.invoke(app, ["backfill", "--model", "openai/new", "--base-url", srv.base_url, "--runs", str(runs),
                                "--benchmarks", "holobench"])
        assert r.exit_code == 0 and srv.count_by_model() == Counter()
        assert "6 already stored" in r.output
    # no build of the benchmark asked for: say what there is, exit non-zero
    r = runner.invoke(app, ["backfill", "--model", "m", "--runs", str(runs), "--benchmarks", "scitrek"])
    assert r.exit_code == 2 and "--benchmarks scitrek" in r.output and "holobench 2" in r.output
    assert "needles 1" in r.output


@pytest.fixture(scope="module")
def wine_build(tmp_path_factory, spider_db):
    out = tmp_path_factory.mktemp("wine") / "b"
    r = runner.invoke(app, ["build", "holobench", "--db", str(spider_db("wine_1")), "--lengths", "2048",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _langs(build):
    return Counter(pq.read_table(build / "instances.parquet", columns=["language"]).column("language").to_pylist())


@pytest.mark.parametrize("args,says", [
    (["--language", "xx"], "--language xx keeps 0 of {n} (in the build: {langs})"),
    (["--min-context-tokens", "100000"], "--min-context-tokens 100000 keeps 0 of {n} (context lengths in the build"),
    (["--language", "en", "--max-context-tokens", "10"], "--max-context-tokens 10 keeps 0 of {n}"),
])
@pytest.mark.parametrize("dry", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_an_evaluation_that_selects_nothing_says_which_filter(wine_build, tmp_path, monkeypatch, args, says, dry):
    """Evaluate and its dry run refuse an empty selection alike: exit 1 naming the filter, no call made."""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    n = pq.read_metadata(wine_build / "instances.parquet").num_rows
    langs = ", ".join(f"{k} {c}" for k, c in _langs(wine_build).most_common())
    with FakeOpenAIServer(answer_fn=_reader) as srv:
        r = runner.invoke(app, ["evaluate", "--build", str(wine_build), "--model", "openai/m", "--base-url",
                                srv.base_url, *args, *dry])
        assert srv.count_by_model() == Counter()
    assert r.exit_code == 1, r.output
    assert "no instance selected" in r.output and says.format(n=n, langs=langs) in r.output, r.output


def test_a_build_with_no_instance_exits_non_zero_saying_why(tmp_path, spider_db, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    q = tmp_path / "q.yaml"
    q.write_text("questions:\n"
                 "  - {id: a, question: 'Which wine at random?', sql: 'SELECT Name FROM wine ORDER BY random() LIMIT 1'}\n"
                 "  - {id: b, question: 'Which wines score above 1000?', sql: 'SELECT Name FROM wine WHERE Score > 1000'}\n",
                 encoding="utf-8")
    out = tmp_path / "b"
    r = runner.invoke(app, ["build", "holobench", "--db", str(spider_db("wine_1")), "--queries", str(q),
                            "--lengths", "2048", "--out", str(out)])
    assert r.exit_code == 1, r.output
    reasons = pq.read_table(out / "quarantine.parquet", columns=["reason"]).column("reason").to_pylist()
    classes = {x.split(":", 1)[0].strip() for x in reasons}
    assert "0 instances" in r.output and all(c in r.output for c in classes), (classes, r.output)
    assert any(c.startswith("non-deterministic") for c in classes) and any("empty" in c for c in classes)
    # the same build again (nothing to do) still says it holds nothing
    r = runner.invoke(app, ["build", "holobench", "--db", str(spider_db("wine_1")), "--queries", str(q),
                            "--lengths", "2048", "--out", str(out)])
    assert r.exit_code == 1 and "0 instances" in r.output


def test_backfill_asks_a_stored_error_row_again_and_replaces_it(tmp_path, monkeypatch):
    """A backfill whose server fails two instances (an unknown 400 after answers: error rows, not a configuration
    stop) leaves their error rows; the same backfill later asks exactly those again and replaces them: one row per
    request key, every one ok, the other model's rows untouched."""
    from test_crash_safety import Q_RE

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    runs = tmp_path / "runs"
    b = make_toy_build(runs / "a", n=8)
    bad = {"Q03", "Q06"}
    fail = {"on": True}

    def rule(body):
        q = Q_RE.search(body["messages"][-1]["content"]).group(1)
        return "400" if fail["on"] and body["model"] == "new" and q in bad else None

    args = ["backfill", "--model", "openai/new", "--runs", str(runs), "--concurrency", "1"]
    with FakeOpenAIServer(answer_fn=_reader, rule=rule) as srv:
        evaluate_build(b, EvalConfig(model="openai/old", base_url=srv.base_url))
        old = [x for x in pq.read_table(b / "responses.parquet").to_pylist()]
        r = runner.invoke(app, args + ["--base-url", srv.base_url])
        rows = pq.read_table(b / "responses.parquet").to_pylist()
        new = {x["instance_id"]: x for x in rows if x["model"] == "openai/new"}
        assert len(new) == 8, r.output
        assert sorted(i for i, x in new.items() if x["status"] == "error") == ["inst-03", "inst-06"], r.output
        fail["on"] = False
        srv.reset_counts()
        r = runner.invoke(app, args + ["--base-url", srv.base_url])
        assert r.exit_code == 0, r.output
        assert srv.count_by_model() == Counter({"new": 2})  # only the two error rows asked
        asked = sorted(Q_RE.search(x["messages"][-1]["content"]).group(1) for x in srv.requests)
        assert asked == ["Q03", "Q06"]
        assert "2 error rows asked again" in " ".join(r.output.split())
    rows = pq.read_table(b / "responses.parquet").to_pylist()
    assert len(rows) == len({x["request_key"] for x in rows}) == 16
    assert [x for x in rows if x["model"] == "openai/old"] == old
    new = {x["instance_id"]: x for x in rows if x["model"] == "openai/new"}
    assert {x["status"] for x in new.values()} == {"ok"}
    # the same prompt as the old model's, the same reader: the same reply
    assert all(new[x["instance_id"]]["response"] == x["response"] for x in old)
