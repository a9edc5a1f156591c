"""Instance filters (language, token range) and the closed-book screen (LURCH inclusion criteria), through
evaluate and the fake OpenAI-compatible server."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.analysis.closed_book import flagged_ids, screen_build, screen_summary
from ctxbench.analysis.filters import InstanceFilter, kept_ids
from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.core.storage import to_table, write_parquet
from fakeserver import FakeOpenAIServer, message_text

# (language, context_tokens, question language) per instance
SPEC = [("en", 100, "en"), ("en", 500, "en"), ("en", 1000, "de"), ("de", 500, "de"), ("zh-cn", 500, "en"),
        ("zh-tw", 2000, "zh-tw")]
CODES = [11, 22, 33, 44, 55, 66]


def make_build(d):
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (lang, n, qlang) in enumerate(SPEC):
        rows.append({"instance_id": f"i{i}", "benchmark": "holobench", "source_id": "toy", "question_id": f"q{i % 3}",
                     "question": f"What is the code of box {i}?", "gold": json.dumps([[CODES[i]]]),
                     "context": f"The code of box {i} is {CODES[i]}.", "tokenizer": "cl100k_base",
                     "target_tokens": 2048, "context_tokens": n, "context_format": "full_text",
                     "query_types": "[]", "evidence_spans": "[]", "language": lang, "question_language": qlang,
                     "build_hash": "toy"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "toy", "track": "holobench"}), encoding="utf-8")
    return d


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def test_language_and_token_filters(tmp_path):
    b = make_build(tmp_path / "b")
    assert kept_ids(b, InstanceFilter()) == {f"i{i}" for i in range(6)}
    assert kept_ids(b, InstanceFilter(language="en")) == {"i0", "i1", "i2"}
    assert kept_ids(b, InstanceFilter(language="zh")) == {"i4", "i5"}          # zh matches zh-cn and zh-tw
    assert kept_ids(b, InstanceFilter(language="en", question_language="en")) == {"i0", "i1"}
    # bounds inclusive: 500 <= n <= 1000
    assert kept_ids(b, InstanceFilter(min_context_tokens=500, max_context_tokens=1000)) == {"i1", "i2", "i3", "i4"}
    assert kept_ids(b, InstanceFilter(language="en", min_context_tokens=101)) == {"i1", "i2"}
    with pytest.raises(InputError, match="above"):
        kept_ids(b, InstanceFilter(min_context_tokens=10, max_context_tokens=5))


def test_evaluate_calls_only_kept_instances(tmp_path):
    b = make_build(tmp_path / "b")
    with FakeOpenAIServer() as srv:
        s = evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url, language="en",
                                         max_context_tokens=500))
        assert s.selected == 2 and srv.count == 2
    got = set(pq.read_table(b / "responses.parquet").column("instance_id").to_pylist())
    assert got == {"i0", "i1"}


def knows_box_1_and_3(body: dict) -> str:
    """Closed-book: the model 'knows' the codes of boxes 1 and 3, and gives a wrong code for box 4."""
    user = message_text(body["messages"][-1]["content"])
    if "<document>" in user:
        return "Answer: " + user.split(" is ")[1].split(".")[0]
    for i, ans in ((1, "22"), (3, "44"), (4, "99")):
        if f"box {i}?" in user:
            return f"Answer: {ans}"
    return "Answer: I do not know."


def test_closed_book_screen(tmp_path):
    b = make_build(tmp_path / "b")
    with pytest.raises(InputError, match="ctxbench screen"):
        flagged_ids(b)
    with FakeOpenAIServer(answer_fn=knows_box_1_and_3) as srv:
        s = screen_build(b, "openai/cb", srv.base_url)
        assert (s.questions, s.instances, s.flagged, s.failed) == (6, 6, 2, 0)
        assert srv.count == 6
        # no document in any closed-book prompt
        assert not any("<document>" in message_text(r["messages"][-1]["content"]) for r in srv.requests)
        assert flagged_ids(b) == {"i1", "i3"}
        s2 = screen_build(b, "openai/cb", srv.base_url)         # rerun: every answer from the cache
        assert srv.count == 6 and s2.from_cache == 6 and s2.flagged == 2
        rows = pq.read_table(b / "closed_book.parquet").to_pylist()
        assert len(rows) == 6 and {r["score"] for r in rows if r["instance_id"] == "i4"} == {0.0}
        assert screen_summary(b) == [{"model": "openai/cb", "instances": 6, "flagged": 2, "failed": 0,
                                      "flagged_share": pytest.approx(2 / 6)}]
        # evaluation without the flagged instances
        ev = evaluate_build(b, EvalConfig(model="openai/m", base_url=srv.base_url, exclude_closed_book=True))
        assert ev.selected == 4
        got = set(pq.read_table(b / "responses.parquet").column("instance_id").to_pylist())
        assert got == {"i0", "i2", "i4", "i5"}


def test_screen_cli_and_evaluate_filter_flags(tmp_path):
    b = make_build(tmp_path / "b")
    runner = CliRunner()
    with FakeOpenAIServer(answer_fn=knows_box_1_and_3) as srv:
        r = runner.invoke(app, ["screen", "--build", str(b), "--model", "openai/cb", "--base-url", srv.base_url])
        assert r.exit_code == 0, r.output
        assert "2 of 6 instances answered correctly closed-book" in r.output
        r = runner.invoke(app, ["evaluate", "--build", str(b), "--model", "openai/m", "--base-url", srv.base_url,
                                "--language", "zh", "--exclude-closed-book"])
        assert r.exit_code == 0, r.output
        assert "2 instances selected" in r.output
