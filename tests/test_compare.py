"""``ctxbench compare DIR... --out OUT`` (issue 17 item 3): a leaderboard across run roots and build directories,
from a DuckDB catalogue over every build, on comparable instances only, with every missing cell explained.

The builds are written by hand (instances, responses, scores) so that every number is worked out here: cell
means, their intervals clustered by question, Avg / wAvg(inc) / wAvg(dec) and their intervals (the variance of a
weighted mean of per-length means, summed per question cluster, written out below independently of the code).
The page is opened in a real browser (Playwright driving Debian's Chromium) where available."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.analysis.core import results_table
from ctxbench.cli import app
from ctxbench.core.storage import set_latest
from ctxbench.report.compare import compare_runs
from ctxbench.core.storage import to_table, write_parquet

A = "openai/a-very-long-model-name-that-used-to-be-cut-off-2025-05-preview"
B = "anthropic/claude-test-b"
C = "openai/small-window-c"
LENGTHS = (1024, 2048)
# scores[model][length] = per question q0..q3 (None: no score); C's 2048 answers are over its window
SCORES = {
    A: {1024: [1, 0, 1, 1], 2048: [1, 0, 0, 1]},
    B: {1024: [0.5, 1, 0, 1], 2048: [1, 1, None, 0]},   # q2 at 2048 not scored for B: left out for A too
    C: {1024: [1, 1, 1, 0], 2048: [None] * 4},
}


def write_build(d: Path, build_hash: str, scores: dict, over: tuple = ()) -> Path:
    """A scored build of 4 questions × 2 lengths (question ids q0..q3 shared across lengths)."""
    d.mkdir(parents=True, exist_ok=True)
    inst, resp, sc = [], [], []
    for L in LENGTHS:
        for q in range(4):
            iid = f"{build_hash}-{L}-q{q}"
            inst.append({"instance_id": iid, "benchmark": "holobench", "source_id": "toy", "question": f"Q{q}?",
                         "question_id": f"q{q}", "sql": None, "gold": "[[1]]", "context": f"context {L} {q}",
                         "tokenizer": "cl100k_base", "target_tokens": L, "context_tokens": L - 10,
                         "setting": "amount", "context_format": "full_text", "position": "uniform",
                         "query_types": "[]", "difficulty": "easy", "evidence_spans": "[]", "build_hash": build_hash})
            for m, by_len in scores.items():
                v = by_len[L][q]
                key = f"{m}|{iid}"
                status = "over_length" if (m, L) in over else "ok"
                if v is None and status == "ok":
                    continue  # not evaluated
                resp.append({"request_key": key, "instance_id": iid, "model": m, "mode": "lc", "sample": 0,
                             "prompt_variant": "cot", "response": "Answer: 1", "cached": False, "status": status,
                             "retries": 0, "build_hash": build_hash})
                if v is not None:
                    sc.append({"instance_id": iid, "model": m, "mode": "lc", "sample": 0, "matcher": "row_match",
                               "score": float(v), "tags": "[]", "request_key": key, "build_hash": build_hash})
    write_parquet(to_table("instances", inst), d / "instances.parquet")
    write_parquet(to_table("responses", resp), d / "responses.parquet")
    write_parquet(to_table("scores", sc), d / "scores.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": build_hash, "track": "holobench"}), encoding="utf-8")
    return d


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """A run root with an older and a latest build, and a build directory elsewhere (another build hash)."""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    root = tmp_path / "runs" / "nightly"
    write_build(root / "0ldbuild", "0ldbuild", {A: SCORES[A]})
    write_build(root / "newbuild", "newbuild", SCORES, over=((C, 2048),))
    set_latest(root, "newbuild")
    other = write_build(tmp_path / "elsewhere" / "b2", "otherhash", {A: SCORES[A], B: SCORES[B]})
    return root, other


def clustered(values: list[float], clusters: list[str]) -> tuple[float, float, float]:
    """Mean with the cluster-robust 95% interval, written out: var = G/(G-1) · Σ_g (Σ_{i∈g} (y_i − ȳ))² / n²."""
    n, mean = len(values), sum(values) / len(values)
    sums: dict[str, float] = {}
    for v, c in zip(values, clusters):
        sums[c] = sums.get(c, 0.0) + v - mean
    G = len(sums)
    half = 1.96 * math.sqrt(G / (G - 1) * sum(s * s for s in sums.values()) / n ** 2)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def weighted(by_len: dict[int, list[tuple[float, str]]], w: dict[int, float]) -> tuple[float, float, float]:
    """θ = Σ_L w_L ȳ_L with var = G/(G-1) · Σ_g (Σ_{i∈g} w_L (y_i − ȳ_L) / n_L)² (per question cluster g)."""
    means = {L: sum(y for y, _ in v) / len(v) for L, v in by_len.items()}
    theta = sum(w[L] * means[L] for L in by_len)
    sums: dict[str, float] = {}
    for L, v in by_len.items():
        for y, q in v:
            sums[q] = sums.get(q, 0.0) + w[L] * (y - means[L]) / len(v)
    G = len(sums)
    half = 1.96 * math.sqrt(G / (G - 1) * sum(s * s for s in sums.values()))
    return theta, max(0.0, theta - half), min(1.0, theta + half)


def _cell(cells, model, build_hash, L):
    return next(c for c in cells if (c["model"], c["build_hash"], c["context_length"]) == (model, build_hash, L))


def test_leaderboard_numbers_comparable_instances_and_missing_cells(runs, tmp_path):
    root, other = runs
    # the run root, its `latest` link again (taken once) and a build directory elsewhere
    r = compare_runs([root, root / "latest", other], tmp_path / "board")
    assert (r.builds, r.groups, r.models) == (3, 3, 3)
    cells = pq.read_table(tmp_path / "board" / "leaderboard.parquet").to_pylist()
    avgs = pq.read_table(tmp_path / "board" / "averages.parquet").to_pylist()

    # 1,024 tokens of the latest build: all three models scored all four questions
    for m in (A, B, C):
        c = _cell(cells, m, "newbuild", 1024)
        exp = clustered([float(v) for v in SCORES[m][1024]], ["q0", "q1", "q2", "q3"])
        assert (c["n"], c["dropped"], c["reason"], c["context_length_text"]) == (4, 0, None, "1,024")
        assert (c["score"], c["ci_low"], c["ci_high"]) == pytest.approx(exp)
    # 2,048: B has no score on q2, so q2 is left out for A as well (C has no scorable answer there at all)
    a2 = _cell(cells, A, "newbuild", 2048)
    assert (a2["n"], a2["dropped"]) == (3, 1)
    assert (a2["score"], a2["ci_low"], a2["ci_high"]) == pytest.approx(clustered([1.0, 0.0, 1.0], ["q0", "q1", "q3"]))
    c2 = _cell(cells, C, "newbuild", 2048)
    assert c2["score"] is None and c2["reason"] == "no scorable response: 4 over the model's context window"
    # the same numbers as the single-build report where every instance is comparable
    rt = {(x["model"], x["context_length"]): x for x in results_table(root / "newbuild", primary_only=True)}
    assert _cell(cells, B, "newbuild", 1024)["score"] == pytest.approx(rt[(B, 1024)]["score"])
    assert _cell(cells, B, "newbuild", 1024)["ci_low"] == pytest.approx(rt[(B, 1024)]["ci_low"])
    assert rt[(A, 2048)]["n"] == 4  # the report counts all four; the leaderboard only the comparable three

    # averages over 1,024 and 2,048: weights 1/2, 1/2 (Avg), 1/3, 2/3 (inc), 2/3, 1/3 (dec), clusters by question
    by_len = {1024: [(float(v), f"q{i}") for i, v in enumerate(SCORES[A][1024])],
              2048: [(1.0, "q0"), (0.0, "q1"), (1.0, "q3")]}
    a = next(x for x in avgs if (x["model"], x["build_hash"]) == (A, "newbuild"))
    for col, w in (("avg", {1024: .5, 2048: .5}), ("wavg_inc", {1024: 1 / 3, 2048: 2 / 3}),
                   ("wavg_dec", {1024: 2 / 3, 2048: 1 / 3})):
        assert (a[col], a[f"{col}_ci_low"], a[f"{col}_ci_high"]) == pytest.approx(weighted(by_len, w)), col
    assert a["avg"] == pytest.approx((0.75 + 2 / 3) / 2) and a["lengths"] == "1,024 / 2,048"
    c_avg = next(x for x in avgs if (x["model"], x["build_hash"]) == (C, "newbuild"))
    assert c_avg["avg"] is None and c_avg["reason"] == "no comparable score at 2,048 tokens"
    b_old_avg = next(x for x in avgs if (x["model"], x["build_hash"]) == (B, "0ldbuild"))
    assert b_old_avg["avg"] is None and b_old_avg["reason"] == "not evaluated on this build"

    # another build hash is its own table (never pooled): the same scores give the same comparable set there
    assert _cell(cells, A, "otherhash", 2048)["n"] == 3
    # the older build of the run root: only A; B and C are missing there, saying where they were evaluated
    b_old = _cell(cells, B, "0ldbuild", 1024)
    assert b_old["score"] is None and b_old["reason"].startswith("not evaluated on this build (evaluated on "
                                                                 "holobench · build newbuild")
    assert "holobench · build otherhash" in b_old["reason"]
    missing = pq.read_table(tmp_path / "board" / "missing.parquet").to_pylist()
    assert len(missing) == r.missing == sum(c["reason"] is not None for c in cells)


def test_catalogue_holds_every_build_and_the_page_tables(runs, tmp_path):
    root, other = runs
    compare_runs([root, other], tmp_path / "board")
    con = duckdb.connect(str(tmp_path / "board" / "catalogue.duckdb"), read_only=True)
    builds = con.execute("SELECT build_hash, is_latest, run_root IS NOT NULL FROM builds ORDER BY build_hash").fetchall()
    assert builds == [("0ldbuild", False, True), ("newbuild", True, True), ("otherhash", None, False)]
    # views over every build's own files
    n = con.execute("SELECT build_dir, count(*) FROM scores GROUP BY 1 ORDER BY 1").fetchall()
    assert sorted(c for _, c in n) == [8, 8 + 7, 8 + 7 + 4]  # A; A and B (q2 at 2,048 unscored); A, B, C
    assert con.execute("SELECT count(*) FROM instances").fetchone()[0] == 24
    over = con.execute("SELECT count(*) FROM responses WHERE status = 'over_length'").fetchone()[0]
    assert over == 4
    # the page's tables are in the catalogue, equal to the Parquet files beside the page
    lb = con.execute("SELECT * FROM leaderboard ORDER BY build_hash, model, context_length").fetch_arrow_table()
    pqt = pq.read_table(tmp_path / "board" / "leaderboard.parquet").sort_by(
        [("build_hash", "ascending"), ("model", "ascending"), ("context_length", "ascending")])
    assert lb.to_pylist() == pqt.to_pylist()
    assert con.execute("SELECT count(*) FROM missing").fetchone()[0] == len(
        pq.read_table(tmp_path / "board" / "missing.parquet"))
    con.close()


def test_page_offline_full_names_lengths_and_reasons(runs, tmp_path):
    root, other = runs
    r = CliRunner().invoke(app, ["compare", str(root), str(other), "--out", str(tmp_path / "board")])
    assert r.exit_code == 0, r.output
    assert "leaderboard of 3 models on 3 benchmark builds" in r.output
    page = (tmp_path / "board" / "index.html").read_text(encoding="utf-8")
    assert A in page and B in page and C in page  # full names
    assert "<th>1,024</th>" in page and "<th>2,048</th>" in page
    assert "4 over the model&#x27;s context window" in page and "not evaluated on this build" in page
    assert (tmp_path / "board" / "plotly.min.js").exists() and '<script src="plotly.min.js">' in page
    assert "cdn" not in page.lower() and 'src="http' not in page
    bad = CliRunner().invoke(app, ["compare", str(tmp_path / "elsewhere" / "b2" / ".."), "--out",
                                   str(root / "newbuild" / "lb")])
    assert bad.exit_code == 2 and "inside the build" in bad.output
    (tmp_path / "nothing").mkdir()
    bad = CliRunner().invoke(app, ["compare", str(tmp_path / "nothing"), "--out", str(tmp_path / "b3")])
    assert bad.exit_code == 2 and "holds no completed build" in bad.output


CHROMIUM = "/usr/bin/chromium"


def test_leaderboard_in_a_real_browser(runs, tmp_path):
    """Two builds and two models in Chromium, opened as a file: both models and both lengths in the table and in
    the chart (plotly drawn from the local plotly.min.js), nothing requested off the machine."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Chromium not found at {CHROMIUM} (required under CI=true)")
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("playwright is not installed (required under CI=true)")
        pytest.skip("playwright is not installed (pip install -e '.[service]')")
    root, other = runs
    two = tmp_path / "two"
    write_build(two / "x", "buildx", {A: SCORES[A], B: SCORES[B]})
    write_build(two / "y", "buildy", {A: SCORES[A], B: SCORES[B]})
    compare_runs([two], tmp_path / "board")
    shots = Path(os.environ.get("CTXBENCH_TEST_OUTPUT") or tmp_path) / "compare"
    shots.mkdir(parents=True, exist_ok=True)
    external: list[str] = []
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        ctx = b.new_context(viewport={"width": 1400, "height": 1000})

        def route(rt):
            if rt.request.url.startswith(("file:", "data:", "about:", "blob:")):
                rt.continue_()
            else:
                external.append(rt.request.url)
                rt.abort()

        ctx.route("**/*", route)
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto((tmp_path / "board" / "index.html").as_uri())
        pg.wait_for_selector(".js-plotly-plot .legend")
        tables = pg.locator("table").all()[:3]  # the overview, then one table per build
        for t in tables:  # one table per build: both models, both lengths, numbers in every cell
            text = t.inner_text()
            assert A in text and B in text and "1,024" in text and "2,048" in text
            assert "missing" not in text  # every cell of these builds is comparable
        # each build's chart names both models in full (legend text drawn inside the figure)
        legends = pg.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => {
            const box = p.getBoundingClientRect();
            return Array.from(p.querySelectorAll('.legendtext')).map(t => {
                const r = t.getBoundingClientRect();
                return [t.textContent, r.left >= box.left - 1 && r.right <= box.right + 1];
            });
        })""")
        assert len(legends) == 2
        for lg in legends:
            assert sorted(t for t, _ in lg) == sorted([f"{A} (lc)", f"{B} (lc)"]) and all(ok for _, ok in lg)
        # the x axis labels the lengths as token counts
        ticks = pg.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot .xtick text'))"
                            ".map(t => t.textContent)")
        assert {"1,024", "2,048"} <= set(ticks)
        pg.screenshot(path=str(shots / "leaderboard.png"), full_page=True)
        b.close()
    assert external == [] and errors == []
    print(f"screenshot: {shots / 'leaderboard.png'}")
