"""Option values the command line checks while it parses, kept here (no numpy, no model client) so that
``ctxbench <command> --help`` and a bad option value import nothing heavy (issue 36): the reasoning efforts of
``--reasoning-effort`` (:mod:`ctxbench.models.effort` maps them to each provider's field), ``--price IN,OUT`` of the
spend cap (:mod:`ctxbench.run.spend`), the formats of ``export --format`` (:mod:`ctxbench.run.export`), and what the
tracks' Configs validate: context positions and the longest context (:mod:`ctxbench.contexts.packer`), collection
samplings (:mod:`ctxbench.contexts.collections`), tiers and word lists (:func:`check_lengths`,
:func:`check_choices`, also offered by :mod:`ctxbench.core.manifest`). Each is re-exported from the module that
uses it."""

from __future__ import annotations

import math
from typing import Any

from ctxbench.core.errors import InputError

EFFORTS = ("none", "low", "medium", "high")
EXPORT_FORMATS = ("parquet", "hf", "inspect", "jsonl")
POSITIONS = ("beginning", "middle", "end", "uniform", "bimodal")
# the longest context a build accepts (--lengths): 10m in the CLI's shorthand (10 × 1,048,576 tokens), so 10,000,000
# (BABILong's 10M tier) and "10m" are both accepted; builds stay within 4 GiB there (README, bench/build_speed.py)
MAX_CONTEXT_TOKENS = 10 * 1024 * 1024
SAMPLINGS = ("random", "bfs", "dfs")  # how a collection of linked documents is drawn (ctxbench.contexts.collections)


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


def check_lengths(v: list[int], low: int, high: int, example: str) -> list[int]:
    """Validate tiers (tokens): at least one, each in ``low..high``; returns them sorted and deduplicated.
    Raises ValueError naming the bad length (pydantic reports it under --lengths)."""
    if not v:
        raise ValueError(f"give at least one length (--lengths {example})")
    for x in v:
        if x < low or x > high:
            raise ValueError(f"length {x} is outside {low}..{high} tokens")
    return sorted(set(v))


def check_choices(v: list[str], allowed: tuple[str, ...], what: str) -> list[str]:
    """Validate a list of words against ``allowed`` (at least one); returns it deduplicated in order. Raises
    ValueError naming the unknown word and the choices."""
    for s in v:
        if s not in allowed:
            raise ValueError(f"unknown {what} {s!r}: use {', '.join(allowed)}")
    if not v:
        raise ValueError(f"give at least one {what} ({', '.join(allowed)})")
    return list(dict.fromkeys(v))
