"""Option values the command line checks while it parses, kept here (no numpy, no model client) so that
``ctxbench <command> --help`` and a bad option value import nothing heavy (issue 36): the reasoning efforts of
``--reasoning-effort`` (:mod:`ctxbench.models.effort` maps them to each provider's field), ``--price IN,OUT`` of the
spend cap (:mod:`ctxbench.run.spend`) and the formats of ``export --format`` (:mod:`ctxbench.run.export`). Each is
re-exported from the module that uses it."""

from __future__ import annotations

import math
from typing import Any

from ctxbench.core.errors import InputError

EFFORTS = ("none", "low", "medium", "high")
EXPORT_FORMATS = ("parquet", "hf", "inspect", "jsonl")


def parse_efforts(value: Any) -> list[str] | None:
    """``"none,low"`` or a list → the efforts in order, without repeats; None for none given. Raises ValueError
    naming an unknown effort."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    out = list(dict.fromkeys(str(x).strip().lower() for x in items if str(x).strip()))
    bad = [x for x in out if x not in EFFORTS]
    if bad:
        raise ValueError(f"unknown reasoning effort {', '.join(bad)}: use any of {', '.join(EFFORTS)} "
                         f"(comma-separated)")
    return out or None


def parse_price(value: str | None) -> tuple[float, float] | None:
    """``"IN,OUT"`` (USD per million input and output tokens, e.g. ``"2.5,10"``) → ``(in, out)``; None for None.
    Raises InputError naming ``--price`` for anything else (two non-negative numbers)."""
    if value is None:
        return None
    parts = [p.strip() for p in str(value).split(",")]
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        vals = []
    if len(vals) != 2 or any(not math.isfinite(v) or v < 0 for v in vals):
        raise InputError(f"--price {value!r}: give two non-negative numbers IN,OUT in USD per million input and "
                         f"output tokens, e.g. --price 2.5,10")
    return vals[0], vals[1]
