"""Comparing query results, as the gold engine (:mod:`ctxbench.gold.execute`) and every later check of a stored gold
answer do: rows as plain Python values (:func:`norm_rows`), equality as lists or multisets with numbers within a
relative tolerance of 1e-6 (:func:`results_equal`, check 6 "engines agree" of HoloBench section 3.2, step 4), a
total order for storing unordered answers (:func:`sort_key`), and tie groups of an ordered answer
(:func:`tie_groups`, :func:`equal_in_tie_groups`)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["REL_TOL", "equal_in_tie_groups", "norm_rows", "results_equal", "row_equal", "sort_key", "tie_groups"]

REL_TOL = 1e-6


def _py(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return v
    if v is None or isinstance(v, (int, float, str)):
        return v
    return str(v)


def norm_rows(rows) -> list[list[Any]]:
    """Result rows as lists of plain Python values (SQLite/DuckDB types converted as gold answers store them)."""
    return [[_py(v) for v in r] for r in rows]


def _value_equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-9)
    return str(a) == str(b)


def _value_equal_strict(a: Any, b: Any) -> bool:
    """:func:`_value_equal` without its leniencies: two integers equal only exactly, a number never equals a
    text ("10" is not 10), floats within the same tolerance."""
    if a is None or b is None:
        return a is None and b is None
    na = isinstance(a, (int, float)) and not isinstance(a, bool)
    nb = isinstance(b, (int, float)) and not isinstance(b, bool)
    if na and nb:
        if type(a) is int and type(b) is int:
            return a == b
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-9)
    if na or nb:
        return False
    return type(a) is type(b) and a == b if isinstance(a, (str, bytes)) else str(a) == str(b)


def row_equal(a: list, b: list, eq=_value_equal) -> bool:
    """Whether two rows are equal value by value under ``eq`` (default: numbers within :data:`REL_TOL`)."""
    return len(a) == len(b) and all(eq(x, y) for x, y in zip(a, b))


def _strict_key(row: list) -> tuple:
    """:func:`sort_key` with each integer's exact value as a tie-break (integers beyond 2**53 that round to one
    float still sort apart)."""
    return tuple((k[0], k[1], v if type(v) is int else 0, k[2]) for k, v in zip(sort_key(row), row))


def sort_key(row: list) -> tuple:
    """A total order key for a result row of mixed values (None first, then numbers, then text, as SQLite sorts
    its storage classes), used to compare and store unordered answers canonically."""
    out = []
    for v in row:
        if v is None:
            out.append((0, 0.0, ""))
        elif isinstance(v, (int, float)):
            out.append((1, round(float(v), 6), ""))
        else:
            out.append((2, 0.0, str(v)))
    return tuple(out)


def results_equal(a: list[list[Any]], b: list[list[Any]], ordered: bool, strict: bool = False) -> bool:
    """Equal as lists (``ordered``) or as multisets; numbers within relative tolerance 1e-6. ``strict`` (a stored
    gold against an answer re-derived by the same engine, :func:`ctxbench.verify.gold_mismatch`): integers equal
    only exactly and a number never equals a text; floats keep the tolerance (a sum's last bits depend on the rows'
    order)."""
    if len(a) != len(b):
        return False
    if not ordered:
        key = _strict_key if strict else sort_key
        a, b = sorted(a, key=key), sorted(b, key=key)
    eq = _value_equal_strict if strict else _value_equal
    return all(row_equal(x, y, eq) for x, y in zip(a, b))



def tie_groups(keys: list[list[Any]]) -> list[int]:
    """The tie group of each row of an ordered answer, from its rows' ORDER BY keys in answer order: consecutive
    rows with equal keys (numbers within 1e-6) share a group number (0, 1, ...). Rows of one group are tied: no
    engine's order among them is the answer's (``ORDER BY AVG(total) DESC`` with two equal averages)."""
    out: list[int] = []
    for i, k in enumerate(keys):
        out.append(0 if i == 0 else out[-1] + (not row_equal(keys[i - 1], k)))
    return out


def equal_in_tie_groups(a: list[list[Any]], b: list[list[Any]], groups: list[int], equal) -> bool:
    """Whether the ordered answers ``a`` and ``b`` are the same rows in the same order except inside tie groups
    (``groups``: :func:`tie_groups` of ``a``'s rows), where they are compared as multisets:
    ``equal(rows_a, rows_b, False)`` is called per group (e.g. :func:`results_equal`; the build's gold check and
    ``questions import``'s check against the original file share this). False when the lengths differ."""
    if len(a) != len(b) or len(groups) != len(a):
        return False
    i = 0
    while i < len(a):
        j = i + 1
        while j < len(a) and groups[j] == groups[i]:
            j += 1
        if not equal(a[i:j], b[i:j], False):
            return False
        i = j
    return True
