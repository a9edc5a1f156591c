"""Avg / wAvg over context lengths (HoloBench table 5) and the clustered confidence interval."""

from __future__ import annotations

import math
import statistics

import pytest

from ctxbench.scoring.metrics import clustered_mean_ci, length_averages

LENGTHS = [4000, 8000, 16000, 32000, 64000]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("scores,expected", [
    # HoloBench table 5, Llama-3.1-405B, constant amount of relevant information
    ([64.0, 61.0, 57.5, 55.1, 44.8], (56.5, 53.5, 59.4)),
    # ... and constant information density
    ([64.0, 59.4, 55.1, 41.4, 30.2], (50.0, 44.3, 55.7)),
])
def test_holobench_table5(scores, expected):
    a = length_averages(dict(zip(LENGTHS, scores)))
    assert (round(a["Avg"], 1), round(a["wAvg(inc)"], 1), round(a["wAvg(dec)"], 1)) == expected


def test_weights_follow_length_order_not_insertion_order():
    scores = dict(zip(LENGTHS, [64.0, 61.0, 57.5, 55.1, 44.8]))
    shuffled = {k: scores[k] for k in (32000, 4000, 64000, 16000, 8000)}
    assert length_averages(shuffled) == length_averages(scores)


def test_length_averages_small_cases():
    assert length_averages({1024: 0.8}) == {"Avg": 0.8, "wAvg(inc)": 0.8, "wAvg(dec)": 0.8}
    a = length_averages({1024: 1.0, 2048: 0.0})
    # weights 1,2 (inc) and 2,1 (dec) over 3
    assert a["Avg"] == 0.5 and a["wAvg(inc)"] == pytest.approx(1 / 3) and a["wAvg(dec)"] == pytest.approx(2 / 3)
    e = length_averages({})
    assert all(math.isnan(v) for v in e.values())


def test_clustered_ci_mean_and_hand_computed_interval():
    # mean 0.75; cluster sums of residuals: a = -0.5, b = 0.25, c = 0.25 → Σ² = 0.375
    # var = G/(G-1) · Σ² / n² = 1.5 · 0.375 / 16 = 0.03515625, sd = 0.1875, half-width = 1.96 · 0.1875 = 0.3675
    m, lo, hi = clustered_mean_ci([1.0, 0.0, 1.0, 1.0], ["a", "a", "b", "c"])
    assert m == 0.75
    assert lo == pytest.approx(0.75 - 0.3675)
    assert hi == 1.0  # 1.1175 clipped to the score range
    assert lo <= m <= hi


def test_clustered_ci_with_singleton_clusters_is_the_usual_standard_error():
    vals = [0.0, 0.5, 1.0, 1.0, 0.5, 0.0, 1.0, 0.5]
    m, lo, hi = clustered_mean_ci(vals, [str(i) for i in range(len(vals))])
    se = statistics.stdev(vals) / math.sqrt(len(vals))
    assert m == pytest.approx(statistics.mean(vals))
    assert (hi - lo) / 2 == pytest.approx(1.96 * se)
    assert lo < m < hi


def test_clustering_widens_the_interval_for_correlated_answers():
    # same values, two ways: each question answered at 4 lengths with the same outcome (perfectly correlated
    # within a question) vs 16 independent questions
    vals = [1.0] * 4 + [0.0] * 4 + [1.0] * 4 + [1.0] * 4
    _, lo_c, hi_c = clustered_mean_ci(vals, [f"q{i // 4}" for i in range(16)])
    _, lo_i, hi_i = clustered_mean_ci(vals, [f"q{i}" for i in range(16)])
    assert (hi_c - lo_c) > (hi_i - lo_i)


def test_clustered_ci_degenerate_cases():
    assert clustered_mean_ci([0.2, 0.4, 0.9], ["q", "q", "q"]) == pytest.approx((0.5, 0.5, 0.5))
    assert clustered_mean_ci([0.3], ["q"]) == (0.3, 0.3, 0.3)
    assert all(math.isnan(x) for x in clustered_mean_ci([], []))
    m, lo, hi = clustered_mean_ci([1.0, 1.0, 1.0], ["a", "b", "c"])  # no variance
    assert (m, lo, hi) == (1.0, 1.0, 1.0)
