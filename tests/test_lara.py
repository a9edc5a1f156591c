"""LaRA import (counts recomputed independently from the files; quarantine of queries whose corpus is absent) and
the deterministic fallback matchers (worked cases; refusal detection on LaRA's own reference answers)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.report import build_report
from ctxbench.run.score import score_build
from ctxbench.scoring.refusal import is_refusal
from ctxbench.scoring.pipeline import score_reply
from ctxbench.tracks.lara.scoring import containment, token_f1
from ctxbench.scoring.registry import matchers_for

TASK = {"location": "location", "reasoning": "reasoning", "comp": "comparison", "hallu": "hallucination"}


def _expected(lara: Path) -> tuple[Counter, Counter, int]:
    """Per (tier, task): queries whose corpus file exists, and those whose file is absent, read with plain json."""
    present, absent = Counter(), Counter()
    for f in sorted((lara / "queries").glob("*.jsonl")):
        tier, ctype, task = f.stem.split("_")
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                ok = (lara / "corpora" / tier / ctype / rec["file"]).is_file()
                (present if ok else absent)[(tier, TASK[task])] += 1
    return present, absent, sum(present.values())


@pytest.fixture(scope="module")
def lara(shared_data, tmp_path_factory):
    d = shared_data / "lara"
    if not (d / "queries").is_dir():
        pytest.skip("LaRA data not in the shared data directory")
    out = tmp_path_factory.mktemp("lara") / "build"
    r = CliRunner().invoke(app, ["import", "lara", "--data", str(d), "--out", str(out)])
    assert r.exit_code == 0, r.output
    return d, out


def test_import_counts_and_quarantine(lara, tiktoken_enc):
    d, out = lara
    present, absent, n = _expected(d)
    inst = pq.read_table(out / "instances.parquet").to_pylist()
    assert len(inst) == n
    assert Counter((i["source_tier"], i["skill"]) for i in inst) == present
    q = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert sum(absent.values()) > 0 and len(q) == sum(absent.values())
    assert all(r["stage"] == "fetch" and "corpus file absent" in r["reason"] for r in q)
    for r in q:
        assert not (d / json.loads(r["detail"])["file"]).exists()
    enc = tiktoken_enc("cl100k_base")
    one = inst[0]
    assert one["benchmark"] == "lara" and json.loads(one["gold"]) == [[json.loads(
        (d / "queries" / one["question_id"].split(":")[0]).read_text().splitlines()[
            int(one["question_id"].split(":")[1]) - 1])["answer"]]]
    assert one["context"] == (d / "corpora" / one["source_id"]).read_text(encoding="utf-8")
    assert one["context_tokens"] == one["target_tokens"] == len(enc.encode_ordinary(one["context"]))
    assert {i["evidence_spans"] for i in inst} == {"[]"}
    # answer segments: location 0..4 and reasoning 0..2 at 32k on novels and financial statements only
    for i in inst:
        if i["answer_segment"] is not None:
            assert i["skill"] in ("location", "reasoning") and i["context_type"] != "paper"
            assert i["n_segments"] == {"location": 5, "reasoning": 3}[i["skill"]]
            assert 0 <= i["answer_segment"] < i["n_segments"]
    segs = Counter(i["answer_segment"] for i in inst if i["skill"] == "location" and i["answer_segment"] is not None)
    assert set(segs) == {0, 1, 2, 3, 4}
    # a second import of the same data is recognised by its build hash
    r = CliRunner().invoke(app, ["import", "lara", "--data", str(d), "--out", str(out)])
    assert r.exit_code == 0 and "already" in r.output


def test_refusals_among_laras_reference_answers(shared_data):
    d = shared_data / "lara" / "queries"
    if not d.is_dir():
        pytest.skip("LaRA data absent")
    for f in d.glob("*.jsonl"):
        hallu = f.stem.endswith("hallu")
        for line in f.read_text(encoding="utf-8").splitlines():
            ans = json.loads(line)["answer"]
            assert is_refusal(ans) == hallu, (f.name, ans)


def lara_fallback(reply, inst):
    """LaRA's primary fallback matcher on a reply after the track's answer pipeline, as ``score`` runs it."""
    return score_reply(reply, {**inst, "benchmark": "lara"}, names=["lara_fallback"])[0].result


def test_fallback_matchers_worked_cases():
    # tokens (articles dropped): answer [cat, sat, on, mat] vs reference [cat, sat, on, red, mat]
    assert token_f1("The cat sat on the mat.", "A cat sat on the red mat") == pytest.approx(2 * 1 * 0.8 / 1.8)
    assert token_f1("", "x") == 0.0
    # content tokens of the reference (stopwords dropped; a number is one token, its value):
    # {net, loss, decreased, 1093095} (4); the answer holds {net, loss, 1093095} → 3/4
    assert containment("Net loss was $1,093,095.", "The net loss decreased to $1,093,095.") == pytest.approx(3 / 4)
    hallu = {"skill": "hallucination", "gold": [["The text does not mention the horse's name."]]}
    loc = {"skill": "location", "gold": [["$2,576,340."]]}
    assert lara_fallback("Reasoning...\nAnswer: The document does not provide this information.", hallu).score == 1.0
    r = lara_fallback("Answer: The horse was called Bess.", hallu)
    assert r.score == 0.0 and r.tags == ["fabrication"]
    assert lara_fallback("Answer: $2,576,340", loc).score == 1.0
    r = lara_fallback("Answer: This is not mentioned in the context.", loc)
    assert r.score == 0.0 and r.tags == ["refusal"]
    assert lara_fallback("Answer: $2,576,000", loc).score == 0.0  # one number, 2576000 ≠ 2576340
    assert matchers_for("lara")[0] == "lara_fallback"


def test_scoring_an_imported_lara_build(lara):
    _, out = lara
    inst = pq.read_table(out / "instances.parquet", columns=["instance_id", "skill", "gold"]).to_pylist()
    from ctxbench.core.storage import to_table, write_parquet

    hallu = next(i for i in inst if i["skill"] == "hallucination")
    loc = next(i for i in inst if i["skill"] == "location")
    rows = [{"request_key": f"k{n}", "instance_id": i["instance_id"], "model": "m", "mode": "lc", "sample": 0,
             "prompt_variant": "cot", "response": resp, "cached": False, "status": "ok", "retries": 0}
            for n, (i, resp) in enumerate([(hallu, "Answer: not mentioned in the text"),
                                           (loc, "Answer: " + json.loads(loc["gold"])[0][0])])]
    write_parquet(to_table("responses", rows), out / "responses.parquet")
    try:
        score_build(out)
        sc = {(r["instance_id"], r["matcher"]): r["score"] for r in pq.read_table(out / "scores.parquet").to_pylist()}
        assert sc[(hallu["instance_id"], "lara_fallback")] == 1.0
        assert sc[(loc["instance_id"], "lara_fallback")] == 1.0 and sc[(loc["instance_id"], "f1")] == 1.0
        page = build_report(out).read_text(encoding="utf-8")
        assert "deterministic <b>fallback</b>" in page  # labelled as such in the report
    finally:
        (out / "responses.parquet").unlink()
        (out / "scores.parquet").unlink(missing_ok=True)
        shutil.rmtree(out / "report", ignore_errors=True)


def test_per_length_samples_per_tier_for_imports_with_measured_lengths():
    """--per-length N takes N per LaRA tier (source_tier), not N per measured file length: 3 files of the 32k tier
    with 3 different lengths and 2 of the 128k tier give 2 + 2 with N=2 (before: one group per length, 5)."""
    import pyarrow as pa

    from ctxbench.run.evaluate import select_instances

    rows = [("a", 30001, "32k"), ("b", 30002, "32k"), ("c", 30003, "32k"), ("d", 120001, "128k"),
            ("e", 120002, "128k"), ("f", 4096, None), ("g", 4096, None), ("h", 4096, None)]
    tbl = pa.table({"instance_id": [r[0] for r in rows], "target_tokens": [r[1] for r in rows],
                    "source_tier": [r[2] for r in rows]})
    got = select_instances(tbl, 2, seed=0).to_pylist()
    per = {}
    for r in got:
        per[r["source_tier"] or r["target_tokens"]] = per.get(r["source_tier"] or r["target_tokens"], 0) + 1
    assert per == {"32k": 2, "128k": 2, 4096: 2}
    assert select_instances(tbl.drop_columns(["source_tier"]), 1).num_rows == 6  # no tiers: per length as before
