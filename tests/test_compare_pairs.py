"""``ctxbench compare``'s paired differences (OUT/pairs.parquet, the pairwise matrix) and effective context length
(issue 24 items 1 and 5), on hand-written builds: 6 contexts × 2 questions per context at two lengths. Expected
values come from statsmodels' cluster-robust OLS and from the scores written here, never from the code under test."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from ctxbench.report.compare import compare_runs
from ctxbench.core.storage import to_table, write_parquet

LENGTHS = (1000, 2000)
# per model, per length: 12 scores (context c = index // 2)
S = {
    "m-a": {1000: [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1], 2000: [1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1]},
    "m-b": {1000: [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1], 2000: [0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0]},
    "m-c": {1000: [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0], 2000: [1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1]},
}


def build(d, scores, contexts_per_len=6, per_ctx=2, bh="pairhash"):
    d.mkdir(parents=True)
    inst, resp, sc = [], [], []
    for L in LENGTHS:
        for i in range(contexts_per_len * per_ctx):
            iid = f"{bh}-{L}-{i}"
            inst.append({"instance_id": iid, "benchmark": "holobench", "source_id": "toy", "question": f"Q{i}?",
                         "question_id": f"q{i}", "gold": "[[1]]", "context": f"context {L} {i // per_ctx}",
                         "tokenizer": "cl100k_base", "target_tokens": L, "context_tokens": L - 10,
                         "query_types": "[]", "build_hash": bh, "sql": None, "setting": "amount",
                         "context_format": "full_text", "position": "uniform", "difficulty": "easy",
                         "evidence_spans": "[]"})
            for m, by_len in scores.items():
                key = f"{m}|{iid}"
                resp.append({"request_key": key, "instance_id": iid, "model": m, "mode": "lc", "sample": 0,
                             "prompt_variant": "cot", "response": "x", "cached": False, "status": "ok",
                             "retries": 0, "build_hash": bh})
                sc.append({"instance_id": iid, "model": m, "mode": "lc", "sample": 0, "matcher": "row_match",
                           "score": float(by_len[L][i]), "tags": "[]", "request_key": key, "build_hash": bh})
    write_parquet(to_table("instances", inst), d / "instances.parquet")
    write_parquet(to_table("responses", resp), d / "responses.parquet")
    write_parquet(to_table("scores", sc), d / "scores.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": bh, "track": "holobench"}), encoding="utf-8")
    return d


def expected(a, b, clusters):
    import statsmodels.api as sm

    d = np.asarray(a, float) - np.asarray(b, float)
    fit = sm.OLS(d, np.ones(len(d))).fit(cov_type="cluster", cov_kwds={"groups": np.asarray(clusters)})
    G = len(set(clusters))
    q = stats.t.ppf(0.975, G - 1)
    se = float(fit.bse[0])
    return float(d.mean()), d.mean() - q * se, d.mean() + q * se, 2 * stats.t.sf(abs(d.mean() / se), G - 1)


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = build(tmp_path / "b", S)
    o = tmp_path / "out"
    compare_runs([b], o)
    return o


def test_pairs_parquet_paired_clustered_differences_and_holm(out):
    rows = pq.read_table(out / "pairs.parquet").to_pylist()
    for c in ("model_a", "model_b", "benchmark", "context_length", "n", "diff", "ci_low", "ci_high", "p_value",
              "p_holm"):
        assert c in rows[0]
    by = {(r["model_a"], r["model_b"], r["context_length"]): r for r in rows}
    assert len(rows) == 3 * 3  # 3 pairs × (2 lengths + all lengths)
    cl = [i // 2 for i in range(12)]
    for (a, b) in (("m-a", "m-b"), ("m-a", "m-c"), ("m-b", "m-c")):
        for L in LENGTHS:
            r = by[(a, b, L)]
            d, lo, hi, p = expected(S[a][L], S[b][L], cl)
            assert r["n"] == 12 and r["clusters"] == 6 and r["benchmark"] == "holobench"
            assert math.isclose(r["diff"], d) and math.isclose(r["ci_low"], lo) and math.isclose(r["ci_high"], hi)
            assert math.isclose(r["p_value"], p, rel_tol=1e-9)
        r = by[(a, b, None)]  # all lengths: 24 instances, 12 contexts (a context is one length's text)
        d, lo, hi, p = expected(S[a][1000] + S[a][2000], S[b][1000] + S[b][2000], cl + [c + 6 for c in cl])
        assert r["n"] == 24 and r["clusters"] == 12 and math.isclose(r["ci_low"], lo)
    # Holm within each length's matrix of 3 pairs, by hand from the raw p-values
    for L in (*LENGTHS, None):
        ps = sorted((by[k]["p_value"], k) for k in by if k[2] == L)
        run = 0.0
        for j, (p, k) in enumerate(ps):
            run = max(run, min(1.0, (3 - j) * p))
            assert math.isclose(by[k]["p_holm"], run)
            assert by[k]["significant"] == (run <= 0.05)
    # m-a vs m-b at 2000: a answers 10/12, b 3/12 -> a clear, significant difference; m-a vs m-c are near-equal
    assert math.isclose(by[("m-a", "m-b", 2000)]["diff"], 7 / 12) and by[("m-a", "m-b", 2000)]["significant"]
    assert by[("m-a", "m-c", 1000)]["significant"] is False


def test_page_shows_matrix_with_non_significant_marked(out):
    page = (out / "index.html").read_text()
    assert "Paired differences" in page and "cluster-robust (CR1)" in page
    assert page.count('class="pairs"') == 3  # one matrix per length and one over all lengths
    ns = re.findall(r'<td class="ns"[^>]*>([^<]*)<span class="ci">\[([^\]]*)\]</span><span class="ci tag">(.*?)</span>',
                    page)
    assert ns and all("n.s." in t for _, _, t in ns)
    sig = re.findall(r'<td class="sig"[^>]*>([+-][0-9.]+)', page)
    assert "+0.583" in sig and "-0.583" in sig  # m-a − m-b and its mirror m-b − m-a at 2,000 tokens
    assert "Effective context length" in page
    # the leaderboard's intervals are by question, its matrices by context: the page says why (issue 32 item 8)
    assert "clustered by question" in page and "clustered by context" in page and "Why two clusterings" in page


def test_effective_length_in_compare(out):
    rows = pq.read_table(out / "effective_length.parquet").to_pylist()
    by = {(r["model"], r["kind"]): r for r in rows}
    # m-b: 7/12 at 1000, 3/12 at 2000: relative threshold .85·7/12 = .496 -> 1000; absolute .856 -> none
    assert by[("m-b", "relative")]["effective_length"] == 1000
    assert math.isclose(by[("m-b", "relative")]["threshold"], 0.85 * 7 / 12)
    assert by[("m-b", "absolute")]["effective_length"] is None and "shortest tier" in by[("m-b", "absolute")]["reason"]
    # m-a: 11/12, 10/12 -> relative (.779) 2000; absolute .856: 1000 only (10/12 = .833 < .856)
    assert by[("m-a", "relative")]["effective_length"] == 2000
    assert by[("m-a", "absolute")]["effective_length"] == 1000


def test_cli_names_the_pairs(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ctxbench.cli import app

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = build(tmp_path / "b", S)
    r = CliRunner().invoke(app, ["compare", str(b), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    rows = pq.read_table(tmp_path / "o" / "pairs.parquet").to_pylist()
    assert "paired differences: 9 rows" in r.output
    assert f"{sum(1 for x in rows if x['significant'])} significant after Holm" in r.output


def test_fewer_than_five_contexts_no_interval(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    few = {m: {L: v[:8] for L, v in by.items()} for m, by in S.items()}
    b = build(tmp_path / "b", few, contexts_per_len=2, per_ctx=4, bh="fewhash")
    compare_runs([b], tmp_path / "o")
    rows = pq.read_table(tmp_path / "o" / "pairs.parquet").to_pylist()
    r = next(r for r in rows if r["context_length"] == 1000 and r["model_a"] == "m-a" and r["model_b"] == "m-b")
    assert r["ci_low"] is None and r["p_value"] is None and r["p_holm"] is None
    assert math.isclose(r["diff"], (7 - 4) / 8) and "2 contexts" in r["reason"]
    page = (tmp_path / "o" / "index.html").read_text()
    assert "no interval" in page


def test_effective_length_in_the_build_report(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from ctxbench.report import build_report

    b = build(tmp_path / "b", S)
    page = build_report(b).read_text()
    assert "Effective context length" in page
    rows = {(r["model"], r["kind"]): r for r in pq.read_table(b / "report" / "effective_length.parquet").to_pylist()}
    # the same worked values as in compare: m-a 11/12 then 10/12; m-b 7/12 then 3/12
    assert rows[("m-a", "relative")]["effective_length"] == 2000 and rows[("m-a", "absolute")]["effective_length"] == 1000
    assert rows[("m-b", "relative")]["effective_length"] == 1000 and rows[("m-b", "absolute")]["effective_length"] is None
    assert "below the threshold 0.856 already at the shortest tier" in page
    assert "clustered by question" in page and "clustered by context" in page and "Why two clusterings" in page
