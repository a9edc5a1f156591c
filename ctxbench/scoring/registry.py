"""Which deterministic matchers score which benchmark.

A matcher is ``fn(response: str | None, instance: dict) -> MatchResult`` where ``instance`` is the instance's row
from ``instances.parquet`` with ``gold`` (and ``accepted_answers`` where present) already parsed from JSON. Each
track names its matchers here (``"module:function"``, imported on first use); ``score`` runs every matcher of an
instance's benchmark on every ok response and writes one ``scores.parquet`` row per response × matcher.
"""

from __future__ import annotations

import importlib
from typing import Callable

from ..errors import InputError

# matcher name → "module:function"
MATCHERS: dict[str, str] = {
    "row_match": "ctxbench.scoring.matchers:row_match_instance",
    "substring": "ctxbench.scoring.numerals:substring_match",
    "lara_fallback": "ctxbench.tracks.lara.scoring:lara_fallback",
    "f1": "ctxbench.tracks.lara.scoring:f1_instance",
    "containment": "ctxbench.tracks.lara.scoring:containment_instance",
    "exact_match": "ctxbench.tracks.scitrek.scoring:exact_match",
    # "<benchmark>/<name>": the benchmark's own matcher of that name (SciTrek's F1 is over answer items, LaRA's
    # over tokens; both are reported as "f1")
    "scitrek/f1": "ctxbench.tracks.scitrek.scoring:f1",
}

# benchmark → matcher names, the first being the benchmark's primary score in tables and reports
BENCHMARK_MATCHERS: dict[str, list[str]] = {
    "holobench": ["row_match"],
    "needles": ["substring"],
    "lara": ["lara_fallback", "f1", "containment"],  # deterministic fallback; LaRA's LLM judge: score --judge
    "scitrek": ["exact_match", "f1"],
}

# benchmark → "module:function" that refines its rows' failure tags once the whole build is known (e.g. another
# needle's subject named in a reply): fn(rows, instances, responses, judge=None, build_dir=None) -> summary, where
# rows are the scores rows of that benchmark (changed in place), instances id → row, responses request key → row
# and judge {"model", "base_url", "api_key_env"} or None
TAGGERS: dict[str, str] = {
    "needles": "ctxbench.tracks.needles.analysis:tag_failures",
}

# matchers that only approximate the benchmark's own scoring: reports label them "fallback"
FALLBACK_MATCHERS: set[str] = {"lara_fallback", "f1", "containment"}

_loaded: dict[str, Callable] = {}


def is_fallback(name: str, benchmark: str | None = None) -> bool:
    """Whether matcher ``name`` is a fallback for ``benchmark``'s instances (a benchmark that registers its own
    ``<benchmark>/<name>`` scores with that one, which is not a fallback)."""
    return name in FALLBACK_MATCHERS and not (benchmark and f"{benchmark}/{name}" in MATCHERS)


def matcher(name: str, benchmark: str | None = None) -> Callable:
    """The matcher function registered as ``name`` (``<benchmark>/<name>`` first where the benchmark registers its
    own of that name); InputError for an unknown name."""
    if benchmark and f"{benchmark}/{name}" in MATCHERS:
        name = f"{benchmark}/{name}"
    if name not in _loaded:
        if name not in MATCHERS:
            raise InputError(f"unknown matcher {name!r}; known: {', '.join(sorted(MATCHERS))}")
        mod, fn = MATCHERS[name].split(":")
        _loaded[name] = getattr(importlib.import_module(mod), fn)
    return _loaded[name]


def matchers_for(benchmark: str | None) -> list[str]:
    """Matcher names for a benchmark (``row_match`` for a benchmark that names none)."""
    return BENCHMARK_MATCHERS.get(benchmark or "holobench", ["row_match"])


def tagger(benchmark: str | None) -> Callable | None:
    """The failure tagger registered for a benchmark (see :data:`TAGGERS`), or None."""
    spec = TAGGERS.get(benchmark or "")
    if spec is None:
        return None
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)
