"""A fifth track in one file (issue 12, "Done when"): this module defines a toy track — "which code does item k
have?" over a list of item codes — with its config, stages, matcher, report section and per-model selection, and
runs it through everything generic without any other file knowing it: ``ctxbench build toy`` (a subprocess that
finds the track through CTXBENCH_TRACKS, and an entry point), the Prefect build flow and the nightly flow, the luigi
engine, evaluate, score, report and export.

The fake model (tests/fakeserver.py) reads the context and answers item k's code for even k and the code plus one
for odd k, so every expected score below is worked out from the items themselves."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, Field

from ctxbench.core.hashing import canonical_json, file_sha256, seeded_rng, stable_hash
from ctxbench.report import ReportContext
from ctxbench.scoring.matchers import MatchResult
from ctxbench.core.track import Stage, Track, register_track
from ctxbench.tracks.common import BuildWriter
from ctxbench.core.manifest import BuildResult

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent


# ================================================================================================ the toy track

class ToyConfig(BaseModel):
    """Configuration of a toy build."""

    lengths: list[int] = Field(default_factory=lambda: [128, 256], description="tiers in tokens")
    items: int = Field(4, ge=1, le=50, description="items listed per context (one question each)")
    tokenizer: str = Field("cl100k_base", description="tokenizer that counts context lengths")
    seed: int = Field(0, description="seed of the item codes")


@dataclass
class Loaded:
    cfg: ToyConfig
    out: Path
    build_hash: str
    existing: BuildResult | None
    writer: BuildWriter


def codes(cfg: ToyConfig, tier: int) -> list[int]:
    """The code of each item at a tier (seeded from the configuration)."""
    rng = seeded_rng(cfg.seed, "toy", tier)
    return [rng.randrange(1000, 10000) for _ in range(cfg.items)]


def load(cfg: ToyConfig, out, force: bool, versioned: bool) -> Loaded:
    """Hash the configuration; the writer checks the build directory."""
    bhash = stable_hash("toy", cfg.model_dump(), length=20)
    w = BuildWriter(out, bhash, force, versioned)
    return Loaded(cfg, w.dir, bhash, w.existing, w)


def make(loaded: Loaded) -> tuple[list[dict], list[dict]]:
    """One instance per item and tier: the list of items padded to the tier; a tier too small is quarantined."""
    from ctxbench.tokenizers import get_tokenizer

    cfg, tok = loaded.cfg, get_tokenizer(loaded.cfg.tokenizer)
    instances, quarantine = [], []
    for tier in cfg.lengths:
        lines = [f"Item {k} has code {c}." for k, c in enumerate(codes(cfg, tier))]
        context = "\n".join(lines) + "\n"
        while tok.count(context + "Nothing else.\n") <= tier:
            context += "Nothing else.\n"
        if tok.count(context) > tier:
            quarantine.append({"input": f"tier {tier}", "stage": "assemble", "reason": "the items do not fit",
                               "detail": None})
            continue
        for k, c in enumerate(codes(cfg, tier)):
            q = f"What is the code of item {k}?"
            instances.append({
                "instance_id": stable_hash(loaded.build_hash, tier, k, length=24), "benchmark": "toy",
                "source_id": f"toy-{tier}", "question": q, "question_id": f"{tier}/item-{k}", "gold": canonical_json([[c]]),
                "context": context, "tokenizer": cfg.tokenizer, "target_tokens": tier,
                "context_tokens": tok.count(context), "context_format": "full_text", "query_types": "[]",
                "evidence_spans": "[]", "build_hash": loaded.build_hash})
    return instances, quarantine


def write(loaded: Loaded, instances: list[dict], quarantine: list[dict]) -> BuildResult:
    """The shared writer: tables against their schemas, the typed manifest last."""
    from ctxbench.tokenizers import get_tokenizer

    return loaded.writer.write("toy", loaded.cfg.model_dump(), instances, quarantine, seed=loaded.cfg.seed,
                               tokenizer=get_tokenizer(loaded.cfg.tokenizer))


def code_match(answer: str | None, instance: dict) -> MatchResult:
    """1 when the first number of the answer is the item's code, else 0."""
    m = re.search(r"\d+", answer or "")
    ok = m is not None and int(m.group()) == instance["gold"][0][0]
    return MatchResult(float(ok), [float(ok)], [] if ok else ["wrong_value"])


def off_by_one(rows: list[dict], instances: dict, responses: dict, judge=None, build_dir=None) -> dict:
    """Failure tagger: a wrong answer one above the item's code is tagged ``off_by_one``; returns the count."""
    n = 0
    for r in rows:
        m = re.search(r"\d+", r["extracted_answer"] or "")
        if r["score"] < 1 and m and int(m.group()) == instances[r["instance_id"]]["gold"][0][0] + 1:
            r["tags"] = canonical_json(["off_by_one"])
            n += 1
    return {"off_by_one": n}


def toy_section(ctx: ReportContext) -> str:
    """Report section: the number of toy instances per tier."""
    t = pq.read_table(ctx.build_dir / "instances.parquet", columns=["target_tokens"]).column(0).to_pylist()
    rows = [{"tier": x, "instances": t.count(x)} for x in sorted(set(t))]
    return "<h2>Toy items</h2>" + ctx.table(rows, ["tier", "instances"])


@register_track
class Toy(Track):
    name = "toy"
    title = "Toy item codes"
    Config = ToyConfig
    stages = (Stage("load", load, ("cfg", "out", "force", "versioned"), ("loaded",)),
              Stage("assemble", make, ("loaded",), ("instances", "quarantine")),
              Stage("write", write, ("loaded", "instances", "quarantine")))
    matchers = {"code_match": f"{__name__}:code_match"}
    tagger = f"{__name__}:off_by_one"
    prompts = {"system": "You look items up in lists."}
    report_sections = (f"{__name__}:toy_section",)

    def select_for_model(self, build_dir: Path, model: str) -> set[str] | None:
        """A model whose name ends in ``-short`` answers the smallest tier only."""
        if not model.endswith("-short"):
            return None
        t = pq.read_table(Path(build_dir) / "instances.parquet", columns=["instance_id", "target_tokens"]).to_pylist()
        low = min(r["target_tokens"] for r in t)
        return {r["instance_id"] for r in t if r["target_tokens"] == low}


# ================================================================================================ the tests

def toy_answer(body: dict) -> str:
    """The fake model: the right code for even items, the code plus one for odd items."""
    text = "".join(m["content"] if isinstance(m["content"], str) else "" for m in body["messages"])
    k = int(re.search(r"What is the code of item (\d+)\?", text).group(1))
    code = int(re.search(rf"Item {k} has code (\d+)\.", text).group(1))
    return f"I looked it up.\nAnswer: {code + (k % 2)}"


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    return subprocess.run([sys.executable, "-m", "ctxbench.cli", *args], capture_output=True, text=True, env=e,
                          timeout=600)


def expected_rows(cfg: ToyConfig) -> int:
    return cfg.items * len(cfg.lengths)


@pytest.mark.slow
def test_toy_track_end_to_end(tmp_path, monkeypatch):
    from fakeserver import FakeOpenAIServer

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    cfg = ToyConfig()
    plugin = {"CTXBENCH_TRACKS": str(HERE), "CTXBENCH_HOME": str(tmp_path / "home")}

    # 1. the CLI, in a subprocess that finds the track through CTXBENCH_TRACKS (a plain file)
    r = cli("tracks", "--json", env=plugin)
    assert r.returncode == 0, r.stderr
    toy = {d["name"]: d for d in json.loads(r.stdout)}["toy"]
    assert toy["stages"] == ["load", "assemble", "write"] and toy["matchers"] == ["code_match"]
    r = cli("build", "toy", "--help", env=plugin)
    assert "--lengths" in r.stdout and "--items" in r.stdout and "items listed per context" in r.stdout
    out = tmp_path / "cli"
    r = cli("build", "toy", "--lengths", "128,256", "--out", str(out), env=plugin)
    assert r.returncode == 0, r.stderr
    inst = pq.read_table(out / "instances.parquet").to_pylist()
    assert len(inst) == expected_rows(cfg) and {i["benchmark"] for i in inst} == {"toy"}
    man = json.loads((out / "manifest.json").read_text())
    assert man["track"] == "toy" and man["format_version"] == 2 and man["counts"]["instances"] == len(inst)
    # a track in a plain file: the manifest names its module and the file's hash
    assert man["track_source"] == {"module": HERE.stem, "distribution": "", "version": "",
                                   "file_sha256": file_sha256(HERE)}
    assert {json.loads(i["gold"])[0][0] for i in inst if i["target_tokens"] == 128} == set(codes(cfg, 128))
    assert cli("build", "toy", "--out", str(out), env=plugin).stdout.startswith("already built")
    r = cli("build", "toy", "--items", "0", "--out", str(tmp_path / "bad"), env=plugin)
    assert r.returncode == 2 and "--items" in r.stderr  # the Config's validation, named by its CLI word

    # 2. the Prefect flow generated from the stages: the same build hash as the CLI's
    from pipelines.flows import get_build_flow

    res = get_build_flow("toy")(cfg, str(tmp_path / "flow"))
    assert res["build_hash"] == man["build_hash"] and res["n_instances"] == len(inst)

    # 3. the luigi engine: build → evaluate → score → report, versioned under a run root
    from ctxbench.run.evaluate import EvalConfig
    from pipelines.luigi_tasks import run_luigi

    with FakeOpenAIServer(answer_fn=toy_answer) as srv:
        lr = run_luigi(cfg, tmp_path / "luigi", [EvalConfig(model="openai/fake", base_url=srv.base_url)])
        b = Path(lr["build_dir"])
        assert b.name == man["build_hash"] and srv.count == len(inst)
        # the track's own prompt wording reached the model
        assert {m["messages"][0]["content"] for m in srv.requests} == {"You look items up in lists."}
        sc = pq.read_table(b / "scores.parquet").to_pylist()
        by_id = {i["instance_id"]: i for i in inst}
        # even items right, odd items wrong
        assert {s["instance_id"]: s["score"] for s in sc} == {
            iid: float(int(i["question_id"].rsplit("-", 1)[1]) % 2 == 0) for iid, i in by_id.items()}
        assert "<h2>Toy items</h2>" in (b / "report" / "index.html").read_text()

        # the nightly flow builds whatever tracks its configuration names (here only the toy, versioned)
        from pipelines.flows import nightly

        n = nightly(build=None, models=[EvalConfig(model="openai/fake", base_url=srv.base_url)],
                    tracks=[{"track": "toy", "config": {"lengths": [128], "items": 2}, "out": str(tmp_path / "n")}])
        (t,) = n["tracks"]
        assert t["track"] == "toy" and t["build"]["n_instances"] == 2 and t["scores"] == 2
        assert Path(t["build_dir"]).parent == tmp_path / "n" and (tmp_path / "n" / "latest").is_symlink()

        # 4. evaluate, score, report and export through the CLI on the CLI's build; the track's selection
        r = cli("evaluate", "--build", str(out), "--model", "openai/fake-short", "--base-url", srv.base_url,
                env=plugin)
        assert r.returncode == 0, r.stderr
    resp = pq.read_table(out / "responses.parquet").to_pylist()
    assert len(resp) == cfg.items and {by_id[x["instance_id"]]["target_tokens"] for x in resp} == {128}
    r = cli("score", "--build", str(out), env=plugin)
    assert r.returncode == 0, r.stderr
    scores = pq.read_table(out / "scores.parquet").to_pylist()
    assert sorted(s["score"] for s in scores) == sorted(float(k % 2 == 0) for k in range(cfg.items))
    assert all(s["matcher"] == "code_match" for s in scores)
    # the tagger's dict summary is printed; every wrong answer (odd items: code + 1) is tagged off_by_one
    odd = cfg.items // 2
    assert f"toy failure tags: off by one {odd}" in " ".join(r.stdout.split())
    assert sorted(s["tags"] for s in scores) == sorted(["[]"] * (cfg.items - odd) + ['["off_by_one"]'] * odd)
    r = cli("report", "--build", str(out), env=plugin)
    assert r.returncode == 0, r.stderr
    page = (out / "report" / "index.html").read_text()
    assert "<h2>Toy items</h2>" in page and "<td>128</td><td>4</td>" in page
    r = cli("export", "--build", str(out), "--format", "jsonl", "--test-fraction", "0.5", "--out",
            str(tmp_path / "exp"), env=plugin)
    assert r.returncode == 0, r.stderr
    split = json.loads((tmp_path / "exp" / "split.json").read_text())
    assert split["shared_sources"] == [] and split["shared_templates"] == []
    assert split["train"] == split["test"] == cfg.items  # one tier (source) on each side


def test_toy_track_through_an_entry_point(tmp_path):
    """A package declaring the entry-point group ctxbench.tracks registers its track in every process."""
    site = tmp_path / "site"
    dist = site / "toytrack-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toytrack\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[ctxbench.tracks]\ntoy = {HERE.stem}:Toy\n")
    r = cli("tracks", "--json", env={"PYTHONPATH": os.pathsep.join([str(REPO), str(site), str(HERE.parent)])})
    assert r.returncode == 0, r.stderr
    assert "toy" in {d["name"] for d in json.loads(r.stdout)}
    r = cli("build", "nosuch")
    assert r.returncode == 2 and "unknown track 'nosuch'" in r.stderr


@pytest.mark.parametrize("bad,said", [({"matchers": {}}, "declares no matcher"),
                                      ({"matchers": {"code_match": f"{__name__}:no_such_fn"}}, "no_such_fn")])
def test_scoring_a_track_without_a_working_matcher_is_an_error_naming_it(bad, said, monkeypatch):
    from ctxbench.core.errors import InputError
    from ctxbench.scoring.registry import matcher, matchers_for

    for k, v in bad.items():
        monkeypatch.setattr(Toy, k, v)
    with pytest.raises(InputError, match=said):
        [matcher(n, "toy") for n in matchers_for("toy")]


def test_a_plugin_module_imported_first_registers_through_its_own_entry_point(tmp_path):
    """A package's track module imported directly (before anything asked the registry) registers itself: its
    decorator loads the built-in tracks only, and the entry point naming that module is not imported again
    (a circular import of the half-initialised module before)."""
    site = tmp_path / "site"
    dist = site / "toytrack-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toytrack\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[ctxbench.tracks]\ntoy = {HERE.stem}:Toy\n")
    code = (f"import {HERE.stem} as m\nfrom ctxbench.core.track import get_track, track_names\n"
            f"assert type(get_track('toy')) is m.Toy\nprint(','.join(track_names()))")
    e = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site), str(HERE.parent)])}
    e.pop("CTXBENCH_TRACKS", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0, r.stderr
    names = r.stdout.strip().split(",")
    assert names[-1] == "toy" and names.count("toy") == 1 and "holobench" in names[:-1]


def ctx_match(answer: str, instance: dict) -> MatchResult:
    """A matcher that (wrongly) reads the context."""
    return MatchResult(float(str(instance["gold"][0][0]) in instance["context"]))


def test_a_matcher_that_raises_is_an_error_naming_track_matcher_instance_and_the_missing_context(monkeypatch):
    from ctxbench.core.errors import InputError
    from ctxbench.scoring.pipeline import score_reply

    monkeypatch.setattr(Toy, "matchers", {"ctx_match": f"{__name__}:ctx_match"})
    row = {"instance_id": "i1", "benchmark": "toy", "gold": [[1234]], "question": "q"}
    with pytest.raises(InputError) as e:
        score_reply("<think>no</think>Answer: 1234", row)
    msg = str(e.value)
    assert "matcher 'ctx_match' of track toy raised KeyError" in msg and "instance i1" in msg
    assert "without `context`" in msg and "tagger" in msg and f"{HERE}:" in msg


def test_a_tracks_prompts_replace_prompt_file_keys_and_are_checked(monkeypatch):
    from ctxbench.core.errors import InputError
    from ctxbench.models.prompts import render_messages
    from ctxbench.core.track import check_track

    msgs = render_messages("CTX", "Q?", benchmark="toy")
    assert msgs[0]["content"] == "You look items up in lists."
    assert "<document>\nCTX\n</document>" in msgs[1]["content"]  # the other keys: default.yaml's
    assert render_messages("CTX", "Q?")[0]["content"] != "You look items up in lists."
    monkeypatch.setattr(Toy, "prompts", {"intro": "x"})
    with pytest.raises(InputError, match="track toy: prompts key 'intro'"):
        check_track(Toy())
    monkeypatch.setattr(Toy, "prompts", {"cot": "{intro} {question}"})
    with pytest.raises(InputError, match=r"lacks \{context\}"):
        check_track(Toy())


def test_tagger_summaries_print_as_counts_and_difficulty_keeps_a_tracks_reasoning_depth():
    from ctxbench.features.difficulty import difficulty_columns
    from ctxbench.run.score import tagging_text

    @dataclass
    class Summary:
        key_echo: int

    assert tagging_text({"other_key_value": 2, "key_echo": 0}) == "other key value 2, key echo 0"
    assert tagging_text(Summary(3)) == "key echo 3"
    row = {"evidence_spans": "[[2, 4]]", "context_tokens": 10}
    assert difficulty_columns({**row, "reasoning_depth": 1}) == {"scope": 0.2, "dispersion": 0.0,
                                                                  "reasoning_depth": 1}
    assert difficulty_columns(row)["reasoning_depth"] is None


def picky_match(answer: str, instance: dict) -> MatchResult:
    """A matcher with a bug on one kind of reply: it raises on an answer holding no digit."""
    return MatchResult(float(int(re.search(r"\d+", answer).group()) == instance["gold"][0][0]))


def test_a_matcher_that_raises_on_one_response_sets_it_aside_and_scores_the_rest(tmp_path, monkeypatch):
    """One bad response (here: a matcher's bug it triggers) is set aside and reported, the rest is scored: the
    other responses get both matchers' scores, the bad one keeps the working matcher's score, score_errors.jsonl
    lists it with the failing matcher, and ``ctxbench score`` exits 1 naming it."""
    from typer.testing import CliRunner

    from ctxbench.cli import app
    from ctxbench.run.score import SCORE_ERRORS
    from ctxbench.core.storage import to_table, write_parquet
    from ctxbench.tracks.holobench.track import HoloBench
    from test_evaluate import make_build

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(HoloBench, "matchers", {**HoloBench.matchers, "picky": f"{__name__}:picky_match"})
    b = make_build(tmp_path / "hb", n=3)
    gold = {r["instance_id"]: json.loads(r["gold"])[0][0]
            for r in pq.read_table(b / "instances.parquet", columns=["instance_id", "gold"]).to_pylist()}
    replies = {"inst-00": f"Answer: {gold['inst-00']}", "inst-01": "I cannot tell.", "inst-02": "Answer: 1"}
    write_parquet(to_table("responses", [
        {"request_key": f"k{i}", "instance_id": iid, "model": "m", "mode": "lc", "sample": 0, "prompt_variant": "cot",
         "response": text, "cached": False, "status": "ok", "retries": 0}
        for i, (iid, text) in enumerate(replies.items())]), b / "responses.parquet")
    r = CliRunner().invoke(app, ["score", "--build", str(b)])
    assert r.exit_code == 1, r.output
    assert "1 response(s) not scored by a matcher that raised (picky 1)" in " ".join(r.output.split())
    scores = {(s["instance_id"], s["matcher"]): s["score"] for s in pq.read_table(b / "scores.parquet").to_pylist()}
    want_picky = {"inst-00": 1.0, "inst-02": float(gold["inst-02"] == 1)}
    assert {k: v for k, v in scores.items() if k[1] == "picky"} == {(i, "picky"): v for i, v in want_picky.items()}
    assert {i for i, m in scores if m == "row_match"} == set(replies)  # the other matcher scored every response
    errs = [json.loads(line) for line in (b / SCORE_ERRORS).read_text(encoding="utf-8").splitlines()]
    assert [(e["instance_id"], e["matcher"], e["request_key"]) for e in errs] == [("inst-01", "picky", "k1")]
    assert "raised AttributeError" in errs[0]["error"] and "instance inst-01" in errs[0]["error"]
    monkeypatch.setattr(HoloBench, "matchers", dict(HoloBench.matchers, picky=f"{__name__}:code_match"))
    r = CliRunner().invoke(app, ["score", "--build", str(b)])  # the matcher fixed: everything scored, list removed
    assert r.exit_code == 0, r.output
    assert not (b / SCORE_ERRORS).exists()
