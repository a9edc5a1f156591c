"""LURCH scope and dispersion, worked out by hand."""

import pytest

from ctxbench.analysis.difficulty import merge_spans, scope_and_dispersion


def test_merge_overlapping_and_adjacent():
    assert merge_spans([[10, 20], [0, 5], [5, 8], [15, 25]]) == [(0, 8), (10, 25)]


def test_single_interval_has_zero_dispersion():
    assert scope_and_dispersion([[40, 60]], 100) == (0.2, 0.0)


def test_two_intervals():
    # L=100; evidence [0,10) and [90,100): S=20, H=100, non-evidence 80 all between them -> dispersion 1
    assert scope_and_dispersion([[0, 10], [90, 100]], 100) == (0.2, 1.0)
    # evidence [10,20) and [30,40): S=20, H=30, 10 non-evidence tokens inside of 80 -> 0.125
    sc, di = scope_and_dispersion([[10, 20], [30, 40]], 100)
    assert sc == pytest.approx(0.2) and di == pytest.approx(10 / 80)


def test_unknown_spans():
    assert scope_and_dispersion([], 100) == (None, None)
