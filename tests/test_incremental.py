"""Incremental nightly runs (Prefect flow ``nightly``, versioned run root): a run with no new input does nothing
but checks — no build stage, no model call, no score or report recomputed, no file written — and a run with a
changed query set builds a new version beside the old one, calls the model only for the new question, and moves
``latest``; tables of different builds are never mixed."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from ctxbench.core.errors import InputError
from ctxbench.core.storage import builds_of, latest_build, resolve_build
from fakeserver import FakeOpenAIServer

REPO = Path(__file__).resolve().parent.parent


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(mtime_ns, inode) of every file and link under the run root."""
    return {str(p.relative_to(root)): (os.lstat(p).st_mtime_ns, os.lstat(p).st_ino) for p in sorted(root.rglob("*"))}


@pytest.fixture
def counters(monkeypatch):
    """Count calls of every build stage and of score/report's computations (the flows look them up at call time)."""
    import ctxbench.report
    import ctxbench.run.incremental
    import ctxbench.run.score
    from ctxbench.tracks import holobench

    calls: Counter = Counter()

    def counting(mod, name):
        fn = getattr(mod, name)

        def wrapper(*a, **k):
            calls[name] += 1
            return fn(*a, **k)
        monkeypatch.setattr(mod, name, wrapper)

    for stage in ("verbalize_stage", "assemble_stage", "gold_stage", "validate_stage", "write_stage"):
        counting(holobench, stage)
    counting(ctxbench.run.incremental, "score_build")  # where score_if_changed looks it up
    counting(ctxbench.run.incremental, "build_report")
    return calls


@pytest.mark.slow
def test_nightly_does_nothing_without_new_input_and_only_the_new_work_with_it(spider_db, tmp_path, monkeypatch,
                                                                              counters):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from ctxbench.run.evaluate import EvalConfig
    from ctxbench.tracks.holobench import HoloBenchConfig
    from pipelines.flows import nightly

    db = str(spider_db("wine_1"))
    qsrc = yaml.safe_load((REPO / "assets" / "queries" / "wine_1.yaml").read_text())
    queries = tmp_path / "wine_1.yaml"
    held = "wine_1-q02"  # a question that makes instances at this tier (some are quarantined there)
    queries.write_text(yaml.safe_dump({**qsrc, "questions": [q for q in qsrc["questions"] if q["id"] != held]}),
                       encoding="utf-8")
    root = tmp_path / "runs"
    cfg = HoloBenchConfig(db=db, queries=str(queries), lengths=[1024])
    with FakeOpenAIServer() as srv:
        def run() -> tuple[dict, float]:
            t0 = time.perf_counter()
            r = nightly(build=cfg, out=str(root), models=[EvalConfig(model="openai/fake", base_url=srv.base_url)])
            return r, time.perf_counter() - t0

        # 1. first run: everything
        r1, t_full = run()
        b1 = Path(r1["build_dir"])
        n1 = pq.read_table(b1 / "instances.parquet").num_rows
        assert b1.parent == root and b1.name == r1["build"]["build_hash"] and latest_build(root) == b1
        assert counters == Counter({"verbalize_stage": 1, "assemble_stage": 1, "gold_stage": 1, "validate_stage": 1,
                                    "write_stage": 1, "score_build": 1, "build_report": 1})
        assert srv.count == n1 > 0

        # 2. no new input: only checks
        counters.clear()
        before = snapshot(root)
        r2, t_none = run()
        assert r2["build"]["skipped"] and r2["build_dir"] == str(b1)
        assert counters == Counter(), counters  # no build stage, no scoring, no report
        assert srv.count == n1  # no model call
        assert r2["evaluations"]["openai/fake"]["already_stored"] == n1
        assert snapshot(root) == before  # not a file written, not even the latest link
        print(f"no-change nightly: {t_none:.2f} s, full run {t_full:.2f} s ({t_none / t_full:.2f})")

        # 3. a new question in the query set: a new build beside the old one; only the new question is asked
        queries.write_text(yaml.safe_dump(qsrc), encoding="utf-8")
        r3, _ = run()
        b2 = Path(r3["build_dir"])
        assert b2 != b1 and b2.parent == root and latest_build(root) == b2 and resolve_build(root) == b2
        assert builds_of(root) == sorted([b1, b2])
        assert counters["write_stage"] == 1 and counters["score_build"] == 1 and counters["build_report"] == 1
        new = pq.read_table(b2 / "instances.parquet").to_pylist()
        added = [r for r in new if r["question_id"] == held]
        assert added and {r["question_id"] for r in new} - {held} == set(
            pq.read_table(b1 / "instances.parquet").column("question_id").to_pylist())
        # contexts of the old questions are unchanged (same seed, tables, tier), so their answers come from the
        # response cache: the model is called for the new question only
        assert srv.count - n1 == len(added)
        ev = r3["evaluations"]["openai/fake"]
        assert (ev["calls"], ev["from_cache"]) == (len(added), len(new) - len(added))
    # the old build is intact and readable; each build's tables carry only its own build hash
    assert snapshot(root / b1.name) == {k[len(b1.name) + 1:]: v for k, v in before.items()
                                        if k.startswith(b1.name + "/")}
    for b in (b1, b2):
        for t in ("instances", "responses", "scores"):
            assert set(pq.read_table(b / f"{t}.parquet").column("build_hash").to_pylist()) == {b.name}, (b, t)


def test_tables_of_two_builds_are_never_mixed(spider_db, tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.run.score import score_build
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    db = str(spider_db("wine_1"))
    a = build_holobench(HoloBenchConfig(db=db, lengths=[1024]), tmp_path / "runs", versioned=True).out
    b = build_holobench(HoloBenchConfig(db=db, lengths=[1024], seed=1), tmp_path / "runs", versioned=True).out
    assert a != b and latest_build(tmp_path / "runs") == b
    with FakeOpenAIServer() as srv:
        evaluate_build(a, EvalConfig(model="openai/fake", base_url=srv.base_url))
    shutil.copy(a / "responses.parquet", b / "responses.parquet")  # a's results put into b's directory
    with pytest.raises(InputError, match=f"other builds.*{a.name}"):
        score_build(b)
    assert not (b / "scores.parquet").exists()
    # evaluating b itself: its responses carry b's hash (the foreign file removed first)
    (b / "responses.parquet").unlink()
    with FakeOpenAIServer() as srv:
        evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url))
    score_build(b)
    assert set(pq.read_table(b / "scores.parquet").column("build_hash").to_pylist()) == {b.name}


def test_scores_follow_the_code_that_made_them(tmp_path, monkeypatch):
    """score reruns when a matcher's version or an answer filter's version changes (issue 12 item 6), not only
    when instances or responses change; the scoring code's fingerprint is stored readable with the scores."""
    import dataclasses
    import json

    from test_evaluate import cfg, make_build

    import ctxbench.run.incremental
    import ctxbench.run.score
    from ctxbench.run.evaluate import evaluate_build
    from ctxbench.run.incremental import SCORING_CODE_KEY, score_if_changed
    from ctxbench.scoring import filters, pipeline
    from ctxbench.tracks.holobench import scoring as matchers

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = make_build(tmp_path / "b", n=3)
    if not (b / "manifest.json").exists():
        (b / "manifest.json").write_text(json.dumps({"build_hash": "toybuild"}))
    with FakeOpenAIServer() as srv:
        evaluate_build(b, cfg(srv))
    runs = Counter()
    real = ctxbench.run.incremental.score_build

    def counting(*a, **k):
        runs["score"] += 1
        return real(*a, **k)

    monkeypatch.setattr(ctxbench.run.incremental, "score_build", counting)
    assert score_if_changed(b)[1] is True and score_if_changed(b)[1] is False and runs["score"] == 1
    code = json.loads(pq.read_schema(b / "scores.parquet").metadata[SCORING_CODE_KEY])
    assert set(code) == {"holobench"} and list(code["holobench"]["matchers"]) == ["row_match"]
    assert [n for n, _ in code["holobench"]["answer_filters"]] == list(pipeline.DEFAULT_FILTERS)
    # a new version of the matcher: rescored once
    monkeypatch.setattr(matchers.row_match_instance, "version", "2", raising=False)
    assert score_if_changed(b)[1] is True and score_if_changed(b)[1] is False and runs["score"] == 2
    code = json.loads(pq.read_schema(b / "scores.parquet").metadata[SCORING_CODE_KEY])
    assert code["holobench"]["matchers"]["row_match"].startswith("2:")
    # a new version of an answer filter: rescored once
    tidy = filters.get_filter("tidy")
    monkeypatch.setitem(filters._FILTERS, "tidy", dataclasses.replace(tidy, version=f"{tidy.version}.1"))
    assert score_if_changed(b)[1] is True and score_if_changed(b)[1] is False and runs["score"] == 3
    # a judge makes the judge prompt's code part of the inputs
    from ctxbench.run.incremental import scoring_code

    assert "judge" in scoring_code(b, "openai/judge") and "judge" not in scoring_code(b)


def test_code_hash_covers_the_modules_a_matcher_imports():
    from ctxbench.scoring.versions import code_hash, module_closure
    from ctxbench.tracks.holobench.scoring import row_match_instance

    mods = module_closure("ctxbench.tracks.holobench.scoring")
    # the number reader and the normalisers are part of row_match's code; the report is not
    assert {"ctxbench.tracks.holobench.scoring", "ctxbench.scoring.numbers", "ctxbench.scoring.normalize"} <= set(mods)
    assert not any(m.startswith(("ctxbench.report", "ctxbench.run.evaluate")) for m in mods)
    assert "ctxbench.tracks.needles.scoring" in module_closure("ctxbench.tracks.needles.analysis")
    assert len(code_hash(row_match_instance)) == 16
