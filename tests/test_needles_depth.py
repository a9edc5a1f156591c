"""Needle depth means tokens (issue 13, item 12): a needle labelled 50% sits at 50% of the context's tokens in the
sizing model's tokenizer (within 2 points, or one sentence where sentences are longer), for single needles and
every statement of a chain, at a small and a large tier of a model sized with an approximate tokenizer; a build
whose placement misses the label quarantines that instance; the analysis labels depths by the token depth reached."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.tracks.needles import NeedlesConfig, build_needles
from ctxbench.tracks.needles.analysis import depth_label
from ctxbench.tracks.needles.questions import (apply_insertions, load_needle_set, plan_insertions,
                                               plan_token_insertions)

from conftest import _litellm_tokenizer_dir, require_path

TIERS = [16384, 131072]


@pytest.fixture(scope="module")
def zh_corpus(shared_data) -> Path:
    return require_path(shared_data / "classical" / "songyuan_xuean" / "volumes", "宋元學案 corpus")


@pytest.fixture(scope="module")
def claude_count():
    """Token counts with the Claude tokenizer file litellm ships, read by the tokenizers library directly (the
    tokenizer ctxbench sizes claude-sonnet-4 with, which only approximates Claude 4's own)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_litellm_tokenizer_dir() / "anthropic_tokenizer.json"))
    return lambda s: len(tok.encode(s, add_special_tokens=False).ids)


@pytest.fixture(scope="module")
def approx_build(zh_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("depth") / "b"
    cfg = NeedlesConfig(corpus=str(zh_corpus), models=["claude-sonnet-4"], lengths=TIERS)
    r = build_needles(cfg, out)
    return out, r, pq.read_table(out / "instances.parquet").to_pylist()


def _statements(row: dict) -> list[str]:
    ns = load_needle_set("zh-classical")
    if row["variant"] == "chain":
        return next(c["statements"] for c in ns.chains if c["id"] == row["needle_id"])
    n = next(n for n in ns.needles if n["id"] == row["needle_id"])
    return [n["statement"].format(value=n[row["variant"]]["value"])]


def test_labels_match_token_depths_at_16k_and_128k(approx_build, claude_count):
    out, r, rows = approx_build
    assert r.n_quarantined == 0 and r.n_instances == len(rows) == 2 * (3 * 2 * 3 + 5)
    assert {x["target_tokens"] for x in rows} == set(TIERS) and all(x["sizing_approximate"] for x in rows)
    for x in rows:
        ctx = x["context"]
        total = claude_count(ctx)
        assert total == x["context_tokens"]
        wanted = json.loads(x["needle_depths"])
        reached = []
        for st, d in zip(_statements(x), wanted):
            pos = ctx.index(st)
            reached.append(claude_count(ctx[:pos]) / total)
        # every statement within 2 points of its label (this corpus's sentences are far shorter than 2 points)
        assert reached == pytest.approx(wanted, abs=0.02), (x["needle_id"], x["target_tokens"])
        assert json.loads(x["needle_depths_achieved"]) == [round(v, 6) for v in reached]
        assert x["achieved_depth"] == round(min(reached), 6) and x["depth_tolerance"] == 0.02
        if x["variant"] != "chain":
            assert x["depth"] == wanted[0]
            assert depth_label(x["depth"], x["variant"], x["achieved_depth"], x["depth_tolerance"]) == \
                f"{round(x['depth'] * 100):g}%"


def test_paragraph_index_placement_missed_those_labels(approx_build, claude_count):
    """The kind the issue names: the same haystacks with the needle before paragraph round(depth × n) put the
    "50%" needle far from half the tokens at 128K (the paragraphs are of very unequal length)."""
    out, _, rows = approx_build
    x = next(r for r in rows if r["target_tokens"] == 131072 and r["needle_id"] == "N1" and r["variant"] == "real"
             and r["depth"] == 0.5)
    st = _statements(x)[0]
    base = x["context"].replace(st, "").split("\n")[:-1]
    assert len(base) == x["haystack_paragraphs"]
    ins = plan_insertions(base, [st], [0.5], "sentence")
    res, where, _ = apply_insertions(base, ins)
    text = "".join(p + "\n" for p in res)
    i, a, _ = where[0]
    old = claude_count(text[: sum(len(p) + 1 for p in res[:i]) + a]) / claude_count(text)
    assert abs(old - 0.5) > 0.05  # 43% of the tokens for the label 50%
    assert abs(x["achieved_depth"] - 0.5) <= 0.02


def test_a_placement_off_its_label_is_quarantined(zh_corpus, tmp_path, monkeypatch, claude_count):
    import ctxbench.tracks.needles.build as build

    def by_paragraph_index(paragraphs, para_tokens, statements, statement_tokens, depths, boundary, token_offset):
        return plan_insertions(paragraphs, statements, depths, boundary)

    monkeypatch.setattr(build, "plan_token_insertions", by_paragraph_index)
    cfg = NeedlesConfig(corpus=str(zh_corpus), models=["claude-sonnet-4"], lengths=[16384], chains=False)
    r = build_needles(cfg, tmp_path / "q")
    rows = pq.read_table(tmp_path / "q" / "instances.parquet").to_pylist()
    quar = pq.read_table(tmp_path / "q" / "quarantine.parquet").to_pylist()
    assert r.n_instances + r.n_quarantined == 3 * 2 * 3 and quar
    for x in rows:  # what was kept meets its label, counted here
        st = _statements(x)[0]
        assert abs(claude_count(x["context"][: x["context"].index(st)]) / claude_count(x["context"]) - x["depth"]) \
            <= 0.02
    for q in quar:
        d = json.loads(q["detail"])
        assert q["stage"] == "assemble" and "needle depth off its label" in q["reason"]
        assert abs(d["achieved"][0] - d["depths"][0]) > d["allowed"][0] == 0.02
        assert f"{d['depths'][0]:.1%}" in q["reason"] and f"{d['achieved'][0]:.1%}" in q["reason"]


def test_token_planner_nearest_boundary_and_sentence_tolerance():
    # four paragraphs of 10 tokens (one token per character here), a sentence end after the 5th character of the third
    paras = ["aaaaaaaaa", "bbbbbbbbb", "cccc. ddd", "eeeeeeeee"]
    counts = [10, 10, 10, 10]

    def offset(j, c):
        return c

    # a 2-token statement: the context will hold 42 tokens; 50% → token 21 → the sentence end after "cccc." (25)
    # is 4 away, the paragraph boundary before paragraph 2 (20) is 1 away
    ins = plan_token_insertions(paras, counts, ["S."], [2], [0.5], "sentence", offset)
    assert (ins[0].j, ins[0].char_in_par, ins[0].unit_tokens) == (2, None, 5)
    # 60% → token 25.2 → the sentence end inside paragraph 2 (offset 25)
    ins = plan_token_insertions(paras, counts, ["S."], [2], [0.6], "sentence", offset)
    assert (ins[0].j, ins[0].char_in_par) == (2, 5)
    # paragraph boundaries only: 60% → boundary 30 (4.8 away) vs 20 (5.2 away); the unit is the paragraph
    ins = plan_token_insertions(paras, counts, ["S."], [2], [0.6], "paragraph", offset)
    assert (ins[0].j, ins[0].char_in_par, ins[0].unit_tokens) == (3, None, 10)
    # a chain: the second statement's target counts the first one's tokens; 0 and 1 are the two ends
    ins = plan_token_insertions(paras, counts, ["A.", "B.", "C."], [2, 2, 2], [0.0, 0.5, 1.0], "sentence", offset)
    # context 46 tokens: A at 0; B at 23 of the context = 21 of the paragraphs (+2 of A) → boundary 20; C at the end
    assert [(x.j, x.char_in_par) for x in ins] == [(0, None), (2, None), (4, None)]
    res, where, _ = apply_insertions(paras, ins)
    assert res == ["A.", "aaaaaaaaa", "bbbbbbbbb", "B.", "cccc. ddd", "eeeeeeeee", "C."]


def test_analysis_labels_depths_by_the_tokens_reached(tmp_path):
    """A build placed by paragraph index (no achieved_depth column, the old meaning) whose "25%" needles at tier T2
    sat at 85% of the tokens: the depth axis shows 85% for them; the within-tolerance rows keep their label; the
    real/altered pairs still pair by requested depth."""
    import pyarrow as pa

    from ctxbench.run.score import score_build
    from ctxbench.tracks.needles.analysis import analyse
    from needles_build import T2, write_needles_build

    b = write_needles_build(tmp_path / "b")
    t = pq.read_table(b / "instances.parquet")
    rows = t.to_pylist()
    for r in rows:
        r.pop("achieved_depth")
        r.pop("depth_tolerance")
        if r["target_tokens"] == T2 and r["depth"] == 0.25:
            r["achieved_depth_tokens"] = round(0.85 * r["context_tokens"])
    schema = pa.schema([f for f in t.schema if f.name not in ("achieved_depth", "depth_tolerance")])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), b / "instances.parquet")
    score_build(b)
    a = analyse(b)
    labels = {(r["tier"], r["depth"]) for r in a.accuracy if r["model"] == "gpt-4.1" and r["variant"] != "chain"}
    assert labels == {(1000, "25%"), (1000, "75%"), (T2, "85%"), (T2, "75%")}
    r85 = next(r for r in a.accuracy if r["tier"] == T2 and r["depth"] == "85%" and r["variant"] == "real")
    assert r85["achieved_min"] == pytest.approx(0.85, abs=1e-3) and r85["n"] == 2
    h = a.heatmaps[("gpt-4.1", "lc", "gpt-4.1")]
    assert h["depths"] == ["25%", "75%", "85%", "chain"]
    mem = next(m for m in a.memorization if m["model"] == "gpt-4.1" and m["tier"] == "all")
    assert mem["pairs"] == 8  # 2 needles × 2 depths × 2 tiers, paired by requested depth
    assert depth_label(0.5, "real", 0.85) == "85%" and depth_label(0.5, "real", 0.515) == "50%"
    assert depth_label(0.5, "real", 0.54, 0.05) == "50%" and depth_label(None, "chain", 0.25) == "chain"
