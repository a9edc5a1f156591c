"""``ctxbench export``: Parquet, Hugging Face datasets, an inspect_ai task run against the fake server (scored the
same as ``ctxbench score``), and chat JSONL with a train/test split sharing no source and no template."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.run.export import export_build, split_instances
from ctxbench.models.prompts import render_messages
from ctxbench.tracks.holobench.scoring import row_match
from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench
from fakeserver import FakeOpenAIServer, message_text

runner = CliRunner()


@pytest.fixture(scope="module")
def builds(spider_db, tmp_path_factory):
    root = tmp_path_factory.mktemp("export-builds")
    return [build_holobench(HoloBenchConfig(db=str(spider_db(db)), lengths=[1024]), root / db).out
            for db in ("wine_1", "store_1")]


def _tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


def test_parquet_export_equals_the_build_and_leaves_it_untouched(builds, tmp_path):
    before = _tree(builds[0])
    r = runner.invoke(app, ["export", "--build", str(builds[0]), "--format", "parquet", "--out", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    assert pq.read_table(tmp_path / "p" / "instances.parquet").equals(pq.read_table(builds[0] / "instances.parquet"))
    assert pq.read_table(tmp_path / "p" / "quarantine.parquet").equals(pq.read_table(builds[0] / "quarantine.parquet"))
    man = json.loads((builds[0] / "manifest.json").read_text())
    assert json.loads((tmp_path / "p" / "manifests" / f"{man['build_hash']}.json").read_text()) == man
    assert _tree(builds[0]) == before


def test_export_refuses_to_write_into_a_build_or_a_non_empty_dir(builds, tmp_path):
    before = _tree(builds[0])
    r = runner.invoke(app, ["export", "--build", str(builds[0]), "--format", "jsonl", "--out", str(builds[0] / "x")])
    assert r.exit_code == 2 and "immutable" in r.output
    r = runner.invoke(app, ["export", "--build", str(builds[0]), "--format", "jsonl", "--out", str(builds[0])])
    assert r.exit_code == 2
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    r = runner.invoke(app, ["export", "--build", str(builds[0]), "--format", "jsonl", "--out", str(tmp_path / "full")])
    assert r.exit_code == 2 and "not empty" in r.output and (tmp_path / "full" / "keep.txt").exists()
    r = runner.invoke(app, ["export", "--build", str(builds[0]), "--format", "xml", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown export format" in r.output
    assert _tree(builds[0]) == before


def test_hf_export_loads_with_load_from_disk(builds, tmp_path):
    import datasets

    export_build(builds[0], "hf", tmp_path / "hf")
    dd = datasets.load_from_disk(str(tmp_path / "hf"))
    assert list(dd) == ["test"]
    want = pq.read_table(builds[0] / "instances.parquet").to_pylist()
    assert dd["test"].to_list() == want


def test_hf_export_with_split(builds, tmp_path):
    import datasets

    r = export_build(builds, "hf", tmp_path / "hf", test_fraction=0.3)
    dd = datasets.load_from_disk(str(tmp_path / "hf"))
    assert set(dd) == {"train", "test"}
    assert len(dd["train"]) + len(dd["test"]) == r.n_instances
    assert not set(dd["train"]["source_id"]) & set(dd["test"]["source_id"])
    assert not set(dd["train"]["question_id"]) & set(dd["test"]["question_id"])


def test_jsonl_split_shares_no_source_and_no_template(builds, tmp_path):
    r = runner.invoke(app, ["export", "--build", str(builds[0]), "--build", str(builds[1]), "--format", "jsonl",
                            "--test-fraction", "0.3", "--out", str(tmp_path / "j")])
    assert r.exit_code == 0, r.output
    assert "shared sources []" in r.output and "shared templates []" in r.output
    inst = {x["instance_id"]: x for b in builds for x in pq.read_table(b / "instances.parquet").to_pylist()}
    sides = {}
    for side in ("train", "test"):
        ids = [json.loads(ln) for ln in (tmp_path / "j" / f"{side}.ids.jsonl").read_text().splitlines()]
        ex = [json.loads(ln) for ln in (tmp_path / "j" / f"{side}.jsonl").read_text().splitlines()]
        assert len(ids) == len(ex) > 0
        for i, e in zip(ids, ex):
            row = inst[i["instance_id"]]
            system, user, assistant = e["messages"]
            assert [system, user] == render_messages(row["context"], row["question"], "direct")
            assert assistant["role"] == "assistant" and assistant["content"].startswith("Answer: ")
            # the fine-tuning target is a right answer by the benchmark's own matcher
            assert row_match(assistant["content"], json.loads(row["gold"])).score == 1.0, assistant
        sides[side] = [inst[i["instance_id"]] for i in ids]
    assert len(sides["train"]) + len(sides["test"]) == len(inst)
    for col in ("source_id", "question_id"):
        assert not {r[col] for r in sides["train"]} & {r[col] for r in sides["test"]}, col
    rep = json.loads((tmp_path / "j" / "split.json").read_text())
    assert rep["shared_sources"] == [] and rep["shared_templates"] == []
    assert rep["train"] == len(sides["train"]) and rep["test"] == len(sides["test"])


def test_split_groups_by_source_and_template_together():
    # a template shared by two sources ties them into one group; the third source stands alone
    rows = [{"instance_id": f"i{k}", "source_id": s, "question_id": q}
            for k, (s, q) in enumerate([("a", "t1"), ("a", "t2"), ("b", "t2"), ("b", "t3"), ("c", "t4"), ("c", "t5")])]
    train, test, rep = split_instances(rows, 0.3, seed=0)
    groups = {frozenset(rows[i]["source_id"] for i in train), frozenset(rows[i]["source_id"] for i in test)}
    assert groups == {frozenset({"a", "b"}), frozenset({"c"})}
    assert rep["shared_sources"] == [] and rep["groups"] == 2
    with pytest.raises(InputError, match="one group"):
        split_instances(rows[:4], 0.3)


def test_single_source_cannot_be_split(builds, tmp_path):
    r = runner.invoke(app, ["export", "--build", str(builds[0]), "--format", "jsonl", "--test-fraction", "0.3",
                            "--out", str(tmp_path / "j")])
    assert r.exit_code == 2 and "wine_1" in r.output and "--build A --build B" in r.output


def test_inspect_task_runs_the_same_instances_and_scores_like_ctxbench(builds, tmp_path, monkeypatch):
    pytest.importorskip("inspect_ai")
    from inspect_ai import eval as inspect_eval

    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.run.export import gold_text
    from ctxbench.run.score import score_build

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    build = builds[0]
    rows = pq.read_table(build / "instances.parquet").to_pylist()
    by_question = {r["question"]: r for r in rows}

    def answer(body: dict) -> str:  # right for every other instance, a wrong number for the rest
        user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
        q = user.split("Question: ", 1)[1].split("\n", 1)[0]
        r = by_question[q]
        return gold_text(json.loads(r["gold"])) if int(r["instance_id"], 16) % 2 else "Answer: -987654"

    out = tmp_path / "insp"
    runner.invoke(app, ["export", "--build", str(build), "--format", "inspect", "--out", str(out)])
    assert (out / "ctxbench_task.py").exists()
    with FakeOpenAIServer(answer_fn=answer) as srv:
        # ctxbench's own evaluation
        evaluate_build(build_copy := _copy_build(build, tmp_path / "copy"), EvalConfig(model="openai/fake",
                       base_url=srv.base_url))
        score_build(build_copy)
        ours = [b["messages"] for b in srv.requests]
        srv.reset_counts()
        # inspect_ai on the exported task (the chat-completions provider for OpenAI-compatible servers)
        monkeypatch.setenv("FAKE_BASE_URL", srv.base_url)
        monkeypatch.setenv("FAKE_API_KEY", "sk-test")
        monkeypatch.chdir(out)  # inspect_ai resolves a task file relative to the working directory
        log = inspect_eval("ctxbench_task.py", model="openai-api/fake/fake", log_dir=str(tmp_path / "logs"),
                           display="none")[0]
        theirs = [b["messages"] for b in srv.requests]
    assert log.status == "success", log.error
    # the same prompts, instance for instance
    key = lambda m: json.dumps(m, sort_keys=True)  # noqa: E731
    assert sorted(map(key, theirs)) == sorted(map(key, ours)) and len(ours) == len(rows)
    # the same scores, instance for instance, and not all alike
    scores = {r["instance_id"]: r["score"] for r in pq.read_table(build_copy / "scores.parquet").to_pylist()
              if r["matcher"] == "row_match"}
    inspect_scores = {s.id: s.scores["ctxbench_matcher"].value for s in log.samples}
    assert inspect_scores == scores
    assert {0.0, 1.0} <= set(scores.values())


def _copy_build(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst

