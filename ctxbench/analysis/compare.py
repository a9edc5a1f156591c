"""A leaderboard across runs: models × benchmarks × context lengths from many build directories and run roots.

Builds are found under the given directories (a build directory; a run root, whose ``latest`` and versioned builds
are all taken; or any directory holding such), and a DuckDB catalogue is made over all of them
(:func:`ctxbench.core.storage.builds_catalogue`: a ``builds`` table and views of every build's instances, responses and
scores). The leaderboard is computed from the catalogue's rows with the report's own analysis code: per-instance
mean scores (:func:`ctxbench.analysis.core.score_rows`), each track's primary matcher and the judges
(:func:`ctxbench.analysis.core.primary_rows`), cell means with 95% intervals clustered by question
(:func:`ctxbench.analysis.core.group_scores`), and Avg / wAvg(inc) / wAvg(dec) over lengths (HoloBench section 4.1)
with their clustered intervals (:func:`ctxbench.scoring.metrics.length_averages_ci`).

Comparable instances only. Scores are compared within one build hash (the same build hash means the same
instances; builds of different hashes — another version of a run root, another configuration — are separate
columns of the leaderboard, never pooled). Within a build hash, a context length's cells are computed on the
instances that every model scored there, among the models that answer the instance (a track may give each model
its own instances, e.g. haystacks sized for one model: :meth:`ctxbench.core.track.Track.select_for_model`); a
model's instances outside that set are counted in ``dropped``. A model's averages need a comparable cell at every
length of its build. Every cell left out is a ``missing`` row saying why: not evaluated on that build (and on which
builds it was), not at that length, every response over the model's window (or truncated, refused, failed),
responses not scored yet, or no instance in common with the other models.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pyarrow.parquet as pq

from ctxbench.core.errors import InputError
from ctxbench.scoring.metrics import length_averages_ci
from ctxbench.models.effort import display_model, effort_labels
from ctxbench.analysis.core import INSTANCE_COLUMNS, group_scores, primary_rows, score_rows
from ctxbench.analysis.decide import effective_rows, pair_rows
from ctxbench.analysis.irt import adaptive_models
from ctxbench.core.storage import LATEST, build_benchmark, find_builds, latest_build
from ctxbench.core.track import track_of_build

AVERAGES = (("Avg", "avg"), ("wAvg(inc)", "wavg_inc"), ("wAvg(dec)", "wavg_dec"))  # (name, column prefix)


def length_text(tokens: int) -> str:
    """A context length as the page writes it: ``4,096``."""
    return f"{int(tokens):,}"


def _is_build(d: Path) -> bool:
    return (d / "manifest.json").exists() and (d / "instances.parquet").exists()


def discover_builds(dirs: list[str | Path]) -> list[dict]:
    """Every completed build under ``dirs`` (each a build directory, a run root, or a directory holding run roots or
    builds; symlinks such as ``latest`` followed, each build taken once), as catalogue rows: ``build_dir`` (absolute,
    resolved), ``run_root`` (the directory holding it when that is a run root with a ``latest`` link, else None),
    ``is_latest`` (whether ``latest`` points at it; None outside a run root), ``build_hash``, ``benchmark``,
    ``track``, ``given`` (the directory named on the command line). Sorted by run root, then latest first, then
    path. Raises InputError naming a directory that holds no build."""
    import json


    out: dict[Path, dict] = {}
    for given in dirs:
        g = Path(given)
        if not g.is_dir():
            raise InputError(f"{g} is not a directory: give build directories or run roots")
        found = [g] if _is_build(g) else find_builds(g)
        found += [lb for lb in [latest_build(g)] if lb is not None and _is_build(lb)]
        if not found:
            raise InputError(f"{g} holds no completed build (a directory with manifest.json and instances.parquet): "
                             f"give build directories or run roots made by `ctxbench build` or `ctxbench run`")
        for d in found:
            real = d.resolve()
            if real in out:
                continue
            parent = real.parent
            root_latest = latest_build(parent) if (parent / LATEST).is_symlink() else None
            man = json.loads((real / "manifest.json").read_text(encoding="utf-8"))
            out[real] = {"build_dir": str(real), "run_root": str(parent) if root_latest is not None else None,
                         "is_latest": (root_latest == real) if root_latest is not None else None,
                         "build_hash": str(man.get("build_hash") or real.name), "benchmark": build_benchmark(real),
                         "track": man.get("track"), "source": build_source(man), "given": str(g)}
    return sorted(out.values(), key=lambda b: (b["run_root"] or "", not b["is_latest"], b["build_dir"]))


@dataclass
class Leaderboard:
    """The tables :func:`leaderboard` computes: ``cells`` (one row per model × benchmark build × mode × matcher ×
    context length, present or missing, with the reason), ``averages`` (one row per model × benchmark build × mode ×
    matcher), ``groups`` (one row per benchmark build compared: benchmark, build hash, label, its directories,
    context lengths, models)."""

    cells: list[dict] = field(default_factory=list)
    averages: list[dict] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    pairs: list[dict] = field(default_factory=list)  # paired differences (ctxbench.analysis.decide.pair_rows)
    effective: list[dict] = field(default_factory=list)  # effective context lengths (decide.effective_rows)

    @property
    def missing(self) -> list[dict]:
        return [c for c in self.cells if c["reason"] is not None]


def _columns(con, view: str) -> set[str]:
    return {r[0] for r in con.execute(f"DESCRIBE {view}").fetchall()}


def _rows(con, sql: str, params: list) -> list[dict]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _mode_of(mode: str, rag_tokens: Any) -> str:
    return mode if rag_tokens is None else f"{mode}@{rag_tokens}"


def tier_name(tokens: int) -> str:
    """A context length as people write it: ``2048`` → ``2K``, ``1048576`` → ``1M``, ``1000000`` → ``1,000,000``
    (binary multiples only, so a label never rounds a length)."""
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if tokens >= size and tokens % size == 0:
            return f"{tokens // size}{unit}"
    return f"{tokens:,}"


def build_source(manifest: dict) -> str:
    """What a build was made from, in words, read from its manifest: the database (HoloBench: ``db_id``), the
    corpus (needles: ``corpus.id``), the article collection (SciTrek: articles read and their sources), else the
    track's own data (e.g. a LaRA import)."""
    if manifest.get("db_id"):
        return f"{manifest['db_id']} database"
    corpus = manifest.get("corpus")
    if isinstance(corpus, dict) and corpus.get("id"):
        return f"corpus {corpus['id']}"
    src = manifest.get("source")
    if isinstance(src, dict) and src.get("articles") is not None:
        by = ", ".join(f"{k} {n}" for k, n in (src.get("sources") or {}).items() if n)
        return f"collections of {src['articles']} articles" + (f" ({by})" if by else "")
    return f"{manifest.get('track') or 'its own'} data"


def _label(benchmark: str, build_hash: str, builds: list[dict], lengths: list[int] | None = None) -> str:
    """The leaderboard's name of a build: track, source and tiers first, the hash and run roots as a detail, e.g.
    ``holobench · nycflights13 database · 2K, 4K tokens (build 5e423ea5d9e3; default latest)``."""
    roots = sorted({f"{Path(b['run_root']).name}{' latest' if b['is_latest'] else ''}" for b in builds
                    if b["run_root"]})
    source = next((b["source"] for b in builds if b.get("source")), None)
    name = " · ".join([benchmark, *([source] if source else []),
                       *([", ".join(tier_name(n) for n in lengths) + " tokens"] if lengths else [])])
    return f"{name} (build {build_hash[:12]}" + (f"; {', '.join(roots)})" if roots else ")")


def _selected(build_dir: str, model: str) -> set[str] | None:
    """The instances a model answers in a build (its track's selection), None for all of them."""
    try:
        keep = track_of_build(Path(build_dir)).select_for_model(Path(build_dir), model)
    except Exception:  # noqa: BLE001 - an unregistered track: every model answers every instance
        return None
    return None if keep is None else set(keep)


def leaderboard(con, builds: list[dict]) -> Leaderboard:
    """The leaderboard (module docstring) from a catalogue ``con`` made over ``builds``
    (:func:`discover_builds` rows)."""
    have_inst, have_resp = _columns(con, "instances"), _columns(con, "responses")
    icols = [c for c in INSTANCE_COLUMNS if c in have_inst]
    lb = Leaderboard()
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for b in builds:
        groups[(b["benchmark"], b["build_hash"])].append(b)
    all_models: set[str] = set()
    per_group: dict[tuple[str, str], dict] = {}
    for key, bs in groups.items():
        dirs = [b["build_dir"] for b in bs]
        marks = ", ".join("?" for _ in dirs)
        inst: dict[str, dict] = {}
        for r in _rows(con, f"SELECT {', '.join(icols)} FROM instances WHERE build_dir IN ({marks})", dirs):
            inst.setdefault(r["instance_id"], r)
        ctx_of = _context_ids(con, have_inst, dirs, marks)
        seen, scores = set(), []
        order = {d: i for i, d in enumerate(dirs)}
        for r in sorted(_rows(con, f"SELECT build_dir, model, mode, matcher, instance_id, sample, score, request_key "
                                   f"FROM scores WHERE build_dir IN ({marks})", dirs),
                        key=lambda r: order[r["build_dir"]]):
            # the response's request key: answers at two reasoning efforts share model, instance and sample
            k = (r["model"], r["mode"], r["matcher"], r["instance_id"], r["sample"], r["request_key"])
            if k not in seen:  # the same build hash in two directories: one score per response
                seen.add(k)
                scores.append(r)
        rag = "rag_tokens" in have_resp
        eff = "reasoning_effort" in have_resp
        responses = _rows(con, f"SELECT build_dir, request_key, model, instance_id, mode, status"
                               f"{', rag_tokens' if rag else ', NULL AS rag_tokens'}"
                               f"{', reasoning_effort' if eff else ', NULL AS reasoning_effort'} FROM responses "
                               f"WHERE build_dir IN ({marks})", dirs)
        budget = {r["request_key"]: r["rag_tokens"] for r in responses if r["rag_tokens"] is not None}
        effort = effort_labels(responses)
        base_of: dict[str, str] = {}
        for r in responses:  # a run at a reasoning effort is its own column: model@effort (display label only)
            label = display_model(r["model"], r["reasoning_effort"])
            base_of[label] = r["model"]
            r["model"] = label
        rows = primary_rows(score_rows(inst, scores, budget, effort))
        models = sorted({r["model"] for r in responses} | {r["model"] for r in rows})
        all_models |= set(models)
        per_group[key] = {"builds": bs, "inst": inst, "rows": rows, "responses": responses, "models": models,
                          "ctx_of": ctx_of, "base_of": base_of, "adaptive": _adaptive_estimates(dirs)}
    evaluated_on: dict[str, list[str]] = defaultdict(list)
    for (bench, bh), g in sorted(per_group.items()):
        for m in g["models"]:
            evaluated_on[m].append(f"{bench} · build {bh[:12]}")
    for (bench, bh), g in sorted(per_group.items()):
        bs, inst, rows = g["builds"], g["inst"], g["rows"]
        lengths = sorted({i["target_tokens"] for i in inst.values() if i.get("target_tokens") is not None})
        label = _label(bench, bh, bs, lengths)
        lb.groups.append({"benchmark": bench, "build_hash": bh, "label": label,
                          "build_dirs": [b["build_dir"] for b in bs],
                          "run_roots": sorted({b["run_root"] for b in bs if b["run_root"]}),
                          "is_latest": any(b["is_latest"] for b in bs), "lengths": lengths, "models": g["models"],
                          "instances": len(inst)})
        base = {"benchmark": bench, "build_hash": bh, "build": label}
        selected = {m: _selected(bs[0]["build_dir"], g["base_of"].get(m, m)) for m in g["models"]}
        variants = sorted({(r["mode"], r["matcher"]) for r in rows}) or [("lc", None)]
        for mode, matcher in variants:
            mine = [r for r in rows if (r["mode"], r["matcher"]) == (mode, matcher)]
            comparable_by_len: dict[int, dict[str, list[dict]]] = {}
            for L in lengths:
                by_model: dict[str, dict[str, dict]] = defaultdict(dict)
                for r in mine:  # a model evaluated adaptively answered a few instances: not a comparable run
                    if r["target_tokens"] == L and r["model"] not in g["adaptive"]:
                        by_model[r["model"]][r["instance_id"]] = r
                ids = {i for v in by_model.values() for i in v}
                keep = {i for i in ids if all(i in by_model[m] for m in by_model
                                              if selected[m] is None or i in selected[m])}
                comparable_by_len[L] = {m: [v[i] for i in sorted(keep) if i in v] for m, v in by_model.items()}
            table = {"benchmark": bench, "build_hash": bh, "build": label, "mode": mode, "matcher": matcher}
            clustered = {L: {m: [{**r, "context_id": g["ctx_of"].get(r["instance_id"], r["instance_id"])}
                                 for r in rs] for m, rs in per_m.items()} for L, per_m in comparable_by_len.items()}
            in_table = sorted({m for per_m in comparable_by_len.values() for m, rs in per_m.items() if rs})
            lb.pairs += pair_rows(clustered, in_table, table)
            lb.effective += effective_rows(clustered, in_table, table)
            for m in sorted(all_models):
                by_length: dict[int, list[tuple[float, str]]] = {}
                gap = None
                for L in lengths:
                    cell = {**base, "mode": mode, "matcher": matcher, "model": m, "context_length": L,
                            "context_length_text": length_text(L), "n": 0, "score": None, "ci_low": None,
                            "ci_high": None, "dropped": 0, "reason": None, "estimate": False}
                    rs = comparable_by_len[L].get(m) or []
                    scored = sum(1 for r in mine if r["model"] == m and r["target_tokens"] == L)
                    est = g["adaptive"].get(m, {}).get((mode, L))
                    if est is not None:  # issue 34: the adaptive estimate of the full grid, marked as one
                        cell.update(n=est["n_asked"], score=est["estimate"], ci_low=est["ci_low"],
                                    ci_high=est["ci_high"], estimate=True)
                        by_length[L] = []
                    elif rs:
                        [agg] = group_scores(rs, lambda r: [(r["model"],)])
                        cell.update(n=agg["n"], score=agg["score"], ci_low=agg["ci_low"], ci_high=agg["ci_high"],
                                    dropped=scored - len(rs))
                        by_length[L] = [(r["score"], r["question_id"]) for r in rs]
                    else:
                        cell["reason"] = _why_missing(m, L, mode, g, scored, evaluated_on[m], bench, bh)
                        cell["dropped"] = scored
                        gap = gap or L
                    lb.cells.append(cell)
                avg = {**base, "mode": mode, "matcher": matcher, "model": m,
                       "lengths": " / ".join(length_text(L) for L in lengths), "reason": None, "estimate": False}
                whole = g["adaptive"].get(m, {}).get((mode, None))
                if gap is None and whole is not None:  # the whole-build estimate (every instance, asked or not)
                    for _, col in AVERAGES:
                        avg[col] = avg[f"{col}_ci_low"] = avg[f"{col}_ci_high"] = None
                    avg.update(avg=whole["estimate"], avg_ci_low=whole["ci_low"], avg_ci_high=whole["ci_high"],
                               estimate=True)
                elif gap is None and by_length:
                    ci = length_averages_ci(by_length)
                    for name, col in AVERAGES:
                        avg[col], avg[f"{col}_ci_low"], avg[f"{col}_ci_high"] = ci[name]
                else:
                    for _, col in AVERAGES:
                        avg[col] = avg[f"{col}_ci_low"] = avg[f"{col}_ci_high"] = None
                    avg["reason"] = ("not evaluated on this build" if m not in g["models"]
                                     else f"no comparable score at {length_text(gap)} tokens" if gap is not None
                                     else "no comparable score")
                lb.averages.append(avg)
    return lb


def rank_with_estimates(averages: list[dict]) -> list[tuple[dict, dict[str, float]]]:
    """Adaptive and full runs of one table (one benchmark build × mode × matcher) ranked together by their Avg
    (:data:`AVERAGES`' first; an adaptive run's is its whole-build estimate), each with the probability that the
    full grid ranks it above each other run: ``Φ((s_a − s_b) / √(se_a² + se_b²))`` with ``se`` = half the 95%
    interval / 1.96 for an estimate and 0 for a full run (its full-grid score is known: two full runs give 1, 0,
    or ½ for a tie). Rows without an Avg are left out. Returns ``[(row, {other model: probability})]``, best
    first."""
    rows = [a for a in averages if a.get("avg") is not None]
    rows.sort(key=lambda a: -a["avg"])

    def se(a: dict) -> float:
        if not a.get("estimate") or a.get("avg_ci_low") is None:
            return 0.0
        return (a["avg_ci_high"] - a["avg_ci_low"]) / 2 / 1.959963984540054

    out = []
    for a in rows:
        probs = {}
        for b in rows:
            if b is a:
                continue
            d, s = a["avg"] - b["avg"], math.hypot(se(a), se(b))
            probs[b["model"]] = (0.5 if d == 0 else float(d > 0)) if s == 0 else NormalDist().cdf(d / s)
        out.append((a, probs))
    return out


def _adaptive_estimates(dirs: list[str]) -> dict[str, dict[tuple[str, Any], dict]]:
    """The ``adaptive.parquet`` rows of the models ``evaluate --adaptive-calls`` ran on these build directories:
    model → (mode, context length or None for the whole build) → row (:func:`ctxbench.analysis.irt.adaptive_rows`).
    Only models with rows there (``score`` writes none for a model that has since answered every instance)."""
    out: dict[str, dict] = {}
    for d in dirs:
        runs = adaptive_models(d)
        p = Path(d) / "adaptive.parquet"
        if runs and p.exists():
            for r in pq.read_table(p).to_pylist():
                if r["model"] in runs:
                    out.setdefault(r["model"], {}).setdefault((r["mode"], r["context_length"]), r)
    return out


def _context_ids(con, have: set[str], dirs: list[str], marks: str) -> dict[str, str]:
    """Instance id → the identity of its context (MD5 of the context text, computed in DuckDB): the cluster of the
    paired differences. Without a context column: the source and tier (``source_id|target_tokens``)."""
    if "context" in have:
        sql = f"SELECT instance_id, md5(context) FROM instances WHERE build_dir IN ({marks})"
    else:
        sql = (f"SELECT instance_id, coalesce(CAST(source_id AS VARCHAR), '') || '|' || CAST(target_tokens AS VARCHAR)"
               f" FROM instances WHERE build_dir IN ({marks})")
    return {i: c for i, c in con.execute(sql, dirs).fetchall()}


def _why_missing(model: str, L: int, mode: str, g: dict, scored: int, evaluated_on: list[str], bench: str,
                 bh: str) -> str:
    """Why a model has no comparable score at length ``L`` of a build (module docstring)."""
    if model not in g["models"]:
        others = [e for e in evaluated_on if e != f"{bench} · build {bh[:12]}"]
        return ("not evaluated on this build" + (f" (evaluated on {', '.join(others)}: other build hashes hold "
                                                  f"other instances, so their scores are not compared)"
                                                  if others else ""))
    if scored:
        return (f"no instance in common with the other models at this length ({scored} scored, none of them "
                f"scored by every model: evaluate the same instances, e.g. the same --per-length sample)")
    inst = g["inst"]
    here = [r for r in g["responses"] if r["model"] == model and _mode_of(r["mode"], r["rag_tokens"]) == mode
            and (inst.get(r["instance_id"]) or {}).get("target_tokens") == L]
    if not here:
        return (f"not evaluated at this length in mode {mode} (no response: a per-length sample, a filter, or "
                f"not run yet)")
    counts: dict[str, int] = defaultdict(int)
    for r in here:
        counts[r["status"]] += 1
    if counts.get("ok"):
        return (f"{counts['ok']} responses not scored yet: run `ctxbench score --build "
                f"{g['builds'][0]['build_dir']}`")
    what = {"over_length": "over the model's context window", "truncated": "cut by the server (truncated)",
            "cut_off": "cut off by the output budget (raise --max-tokens)",
            "refused_by_provider": "refused by the provider", "error": "failed",
            "empty_reply": "empty replies (tokens generated, no text returned: a server fault)"}
    return "no scorable response: " + ", ".join(f"{n} {what.get(s, s)}" for s, n in sorted(counts.items()))


def relative_link(target: str | Path, start: str | Path) -> str:
    """``target`` as a link relative to the directory ``start`` (a page), with ``/`` separators."""
    return Path(os.path.relpath(Path(target), Path(start))).as_posix()
