"""The report's needles section on a hand-made scored build; holobench reports keep no trace of it."""

from __future__ import annotations


import pytest
from needles_build import T1, T2, write_needles_build

from ctxbench.report.html import build_report
from ctxbench.report.plots import figure_data, figures_in_html
from ctxbench.tracks.needles.report import approximate_notes, heatmap_figure
from ctxbench.run.score import score_build


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


def test_needles_section(tmp_path):
    b = write_needles_build(tmp_path / "b")
    score_build(b)
    doc = build_report(b).read_text(encoding="utf-8")
    assert "<h2>Planted facts (needles)</h2>" in doc
    # one heatmap per model × sizing model; gpt-4.1's 75% row at T2 is 1/4 (refusal, 建陽, 浦城 wrong; 73 right)
    heat = [f for f in figures_in_html(doc) if f["data"][0]["type"] == "heatmap"]
    assert len(heat) == 2
    m = next(f for f in heat if f["layout"]["title"]["text"] == "gpt-4.1 (lc) on haystacks sized for gpt-4.1")
    tr = m["data"][0]
    cells = dict(zip(tr["y"], tr["text"]))
    assert cells == {"25%": ["3/4", "4/4"], "75%": ["3/4", "1/4"], "chain": ["1/1", "0/1"]}
    assert tr["x"] == [f"{T1:,}", f"{T2:,}"]
    # a cell opens its instances: the model, tier and requested depth
    assert tr["customdata"][0][0] == [f"instances.html#model=gpt-4.1&mode=lc&sizing_model=gpt-4.1&length={T1}"
                                      "&depth=0.25&score=scored"]
    # the claude haystack was sized with an approximate tokenizer (registry: approximate, 10% margin)
    assert "Approximate tokenizer" in doc and "claude-sonnet-4-20250514" in doc and "10% safety margin" in doc
    assert "gpt-4.1 were sized" not in doc
    for h in ("Decay regime across tiers", "Memorization probe", "Failure modes"):
        assert h in doc
    assert "truncated chain" in doc and "unclassified" in doc
    # memorization probe: real 6/8; asymmetry interval 0.125 ± 0.735 (worked in test_needles_analysis)
    assert "<td>6/8 = 0.75</td>" in doc and "[-0.610, +0.860]" in doc
    assert "<th>subject substitution</th>" in doc and "<th>memorized value</th>" in doc
    assert "1,000: 7/9 · 2,000: 5/9" in doc
    assert "http://" not in doc and "https://" not in doc      # no network assets
    for t in ("needles_accuracy", "needles_regimes", "needles_memorization", "needles_failures"):
        assert (b / "report" / f"{t}.parquet").exists()


def test_unscored_needles_build_says_so(tmp_path):
    b = write_needles_build(tmp_path / "b")
    from ctxbench.core.storage import to_table, write_parquet

    write_parquet(to_table("scores", []), b / "scores.parquet")
    doc = build_report(b).read_text(encoding="utf-8")
    assert "<h2>Planted facts (needles)</h2>" in doc and "No scores yet." in doc


def test_heatmap_values_labels_and_missing_cells():
    h = {"tiers": [1000, 2000], "depths": ["25%", "chain"], "cells": {("25%", 1000): (0, 2), ("chain", 2000): (3, 4)}}
    fig = figure_data(heatmap_figure("m", h, lambda d, t: f"instances.html#depth={d}&length={t}"))
    tr = fig["data"][0]
    assert tr["type"] == "heatmap" and tr["x"] == ["1,000", "2,000"] and tr["y"] == ["25%", "chain"]
    assert tr["z"] == [[0.0, None], [None, 0.75]]           # accuracy 0 (red end), a missing cell left blank
    assert tr["text"] == [["0/2", ""], ["", "3/4"]]
    assert tr["customdata"] == [[["instances.html#depth=25%&length=1000"], [""]],
                                [[""], ["instances.html#depth=chain&length=2000"]]]
    assert tr["zmin"] == 0 and tr["zmax"] == 1


def test_approximate_notes_follow_the_registry():
    assert approximate_notes(["gpt-4.1", "gpt-4o"]) == []
    notes = approximate_notes(["claude-sonnet-4-20250514"])
    assert len(notes) == 1 and "claude-legacy" in notes[0]


def test_regime_thresholds_from_the_cli(tmp_path):
    from typer.testing import CliRunner

    from ctxbench.cli import app

    b = write_needles_build(tmp_path / "b")
    runner = CliRunner()
    r = runner.invoke(app, ["score", "--build", str(b)])
    assert r.exit_code == 0 and "needles failure tags: tagged by rules 6" in r.output
    # gpt-4.1's curve 7/9 → 5/9 is unclassified by default and stable with the floor at 0.5
    r = runner.invoke(app, ["report", "--build", str(b)])
    assert r.exit_code == 0
    doc = (b / "report" / "index.html").read_text(encoding="utf-8")
    assert "<td>unclassified</td>" in doc and "<td>stable</td>" not in doc
    r = runner.invoke(app, ["report", "--build", str(b), "--regime", "stable_floor=0.5"])
    assert r.exit_code == 0
    doc = (b / "report" / "index.html").read_text(encoding="utf-8")
    assert "<td>stable</td>" in doc and "every tier ≥ 0.5" in doc
    for bad, said in (("stable_flor=0.5", "stable_flor"), ("high", "KEY=VALUE"), ("high=x", "not a number")):
        r = runner.invoke(app, ["report", "--build", str(b), "--regime", bad])
        assert r.exit_code == 2 and said in r.output, r.output


def test_flagged_approximate_sizing_is_noted():
    notes = approximate_notes(["some-local-model"], {"some-local-model"})
    assert len(notes) == 1 and "sizing_approximate" in notes[0]
    assert approximate_notes(["some-local-model"]) == []
