"""Core aggregates of a scored build: per-instance mean scores, accuracy by context length per model × mode ×
matcher (with Avg / wAvg over lengths), breakdowns by setting, position, query type and difficulty, call counts and
run-to-run variance. Intervals are 95% and clustered by question (:func:`ctxbench.scoring.metrics.clustered_mean_ci`).
The report (:mod:`ctxbench.report`) renders these tables; the CLI and the Prefect artifact print
:func:`results_table`."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow.parquet as pq

from ctxbench.scoring.judge import is_judge_matcher
from ctxbench.scoring.metrics import clustered_mean_ci, length_averages
from ctxbench.core.storage import read_table
from ctxbench.analysis.order import value_order
from ctxbench.models.effort import display_model, effort_labels, is_cut_off
from ctxbench.scoring.registry import matchers_for

INSTANCE_COLUMNS = ["instance_id", "question_id", "question", "target_tokens", "position", "setting", "query_types",
                    "difficulty", "benchmark", "source_id"]


def instance_scores(build_dir: str | Path, only: Callable[[dict], bool] | None = None
                    ) -> tuple[list[dict], dict[str, dict]]:
    """One row per (model, mode, matcher, instance) with the mean score over samples (``score``), the number of
    samples and their variance; and the instances by id. RAG runs with a retrieval budget are their own mode
    (``rag@2048``). ``only``: a predicate on the rows of ``scores.parquet`` (e.g. the request keys one ``ctxbench
    run`` selected, :func:`ctxbench.run.outcome.run_scope`); the rows it refuses are left out."""
    build_dir = Path(build_dir)
    ip = build_dir / "instances.parquet"
    have = set(pq.read_schema(ip).names)
    inst = {r["instance_id"]: r for r in pq.read_table(ip, columns=[c for c in INSTANCE_COLUMNS if c in have])
            .to_pylist()}
    sc = read_table(build_dir / "scores.parquet", "scores").to_pylist()
    if only is not None:
        sc = [r for r in sc if only(r)]
    resp = read_table(build_dir / "responses.parquet", "responses")
    budget = ({r["request_key"]: r["rag_tokens"] for r in resp.select(["request_key", "rag_tokens"]).to_pylist()
               if r["rag_tokens"] is not None} if "rag_tokens" in resp.column_names else {})

    return score_rows(inst, sc, budget, effort_labels(resp)), inst


def score_rows(inst: dict[str, dict], scores: Iterable[dict], budget: dict[str, int],
               effort: dict[str, str] | None = None) -> list[dict]:
    """The rows of :func:`instance_scores` from loaded tables: ``inst`` (instance id -> its row, with the columns of
    :data:`INSTANCE_COLUMNS` it has), ``scores`` (rows of ``scores.parquet``), ``budget`` (request key -> the
    RAG retrieval budget in tokens, for RAG responses with one) and ``effort`` (request key -> reasoning effort,
    for responses of ``evaluate --reasoning-effort``: their ``model`` is the display label ``model@effort``,
    :func:`ctxbench.models.effort.display_model`, and ``reasoning_effort`` is set). Scores of instances not in
    ``inst`` are left out."""
    effort = effort or {}
    per: dict[tuple, list[float]] = defaultdict(list)
    cut: dict[tuple, int] = defaultdict(int)  # samples the output budget cut off (tag cut_off: scored 0)
    efforts: dict[str, str | None] = {}
    for r in scores:
        b = budget.get(r.get("request_key"))
        mode = r["mode"] if b is None else f"{r['mode']}@{b}"
        e = effort.get(r.get("request_key"))
        label = display_model(r["model"], e)
        efforts[label] = e
        per[(label, mode, r["matcher"], r["instance_id"])].append(r["score"])
        cut[(label, mode, r["matcher"], r["instance_id"])] += "cut_off" in _tags(r.get("tags"))
    out = []
    for (model, mode, matcher, iid), vals in sorted(per.items()):
        i = inst.get(iid)
        if i is None:
            continue
        out.append({"model": model, "reasoning_effort": efforts.get(model), "mode": mode, "matcher": matcher,
                    "instance_id": iid,
                    "benchmark": i.get("benchmark"), "question_id": i.get("question_id") or i["question"],
                    "target_tokens": i["target_tokens"], "position": i.get("position"), "setting": i.get("setting"),
                    "difficulty": i.get("difficulty"), "query_types": json.loads(i.get("query_types") or "[]"),
                    "score": sum(vals) / len(vals), "samples": len(vals), "sample_var": sample_variance(vals),
                    "cut_off": cut[(model, mode, matcher, iid)]})
    return out


def _tags(v) -> list:
    """A score row's ``tags`` (JSON text of a list, or a list) as a list; [] for none or unreadable text."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return []
    return list(v) if isinstance(v, (list, tuple)) else []


def sample_variance(v: list[float]) -> float:
    """Unbiased variance of a list of scores (0 for fewer than two)."""
    if len(v) < 2:
        return 0.0
    m = sum(v) / len(v)
    return sum((x - m) ** 2 for x in v) / (len(v) - 1)


def group_scores(rows: list[dict], key: Callable[[dict], Iterable[tuple]]) -> list[dict]:
    """Mean score and clustered 95% interval per key (``key(row)`` yields the keys a row counts under), sorted."""
    g: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        for k in key(r):
            g[k].append(r)
    out = []
    for k, rs in sorted(g.items(), key=lambda x: tuple(str(y) for y in x[0])):
        mean, lo, hi = clustered_mean_ci([r["score"] for r in rs], [r["question_id"] for r in rs])
        out.append({"key": k, "n": len(rs), "score": mean, "ci_low": lo, "ci_high": hi})
    return out


def results_table(build_dir: str | Path, primary_only: bool = False, shared: bool = False,
                  only: Callable[[dict], bool] | None = None) -> list[dict]:
    """Rows (model, mode, matcher, context length, n, score, ci, cut_off) — the table ``ctxbench run`` prints;
    ``cut_off``: replies in the row that the output budget ended before their answer (each scored 0, tag
    ``cut_off``, and counted in ``score``). ``primary_only``: only each instance's track's primary matcher (and
    judges). ``shared``: only the instances every model of the row's mode, matcher and length was scored on
    (:func:`shared_instance_rows`), the rows on which models can be compared side by side. ``only``: the score rows
    counted (:func:`instance_scores`; default every one)."""
    rows, _ = instance_scores(build_dir, only)
    if primary_only:
        rows = primary_rows(rows)
    return length_rows(shared_instance_rows(rows) if shared else rows)


def length_rows(rows: list[dict]) -> list[dict]:
    """The rows of :func:`results_table` from instance rows (:func:`instance_scores`)."""
    cut: dict[tuple, int] = defaultdict(int)
    for r in rows:
        cut[(r["model"], r["mode"], r["matcher"], r["target_tokens"])] += r.get("cut_off", 0)
    return [{"model": g["key"][0], "mode": g["key"][1], "matcher": g["key"][2], "context_length": g["key"][3],
             "n": g["n"], "score": g["score"], "ci_low": g["ci_low"], "ci_high": g["ci_high"],
             "cut_off": cut[g["key"]]}
            for g in group_scores(rows, lambda r: [(r["model"], r["mode"], r["matcher"], r["target_tokens"])])]


def instance_sets(rows: list[dict]) -> dict[tuple, dict[str, set[str]]]:
    """(mode, matcher, context length) -> model -> the ids of the instances it was scored on, from instance rows
    (:func:`instance_scores`)."""
    out: dict[tuple, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in rows:
        out[(r["mode"], r["matcher"], r["target_tokens"])][r["model"]].add(r["instance_id"])
    return {k: dict(v) for k, v in out.items()}


def shared_instance_rows(rows: list[dict]) -> list[dict]:
    """The instance rows of the instances that every model of their (mode, matcher, context length) was scored
    on: models compared on the same questions and contexts. Rows of a group with one model are kept whole."""
    sets = instance_sets(rows)
    both = {k: set.intersection(*v.values()) for k, v in sets.items()}
    return [r for r in rows if r["instance_id"] in both[(r["mode"], r["matcher"], r["target_tokens"])]]


def differing_samples(rows: list[dict]) -> list[dict]:
    """Where models side by side were scored on different instances: one dict per (mode, matcher, context
    length) with two or more models whose instance sets differ, ``{"mode", "matcher", "context_length",
    "per_model": {model: n}, "shared": n}`` (``shared``: instances every one of them has), sorted; [] when every
    table row of a length compares the same instances."""
    out = []
    for (mode, matcher, length), by_model in sorted(instance_sets(rows).items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len(by_model) > 1 and len({frozenset(v) for v in by_model.values()}) > 1:
            out.append({"mode": mode, "matcher": matcher, "context_length": length,
                        "per_model": {m: len(v) for m, v in sorted(by_model.items())},
                        "shared": len(set.intersection(*by_model.values()))})
    return out


def shared_comparison(build_dir: str | Path, only: Callable[[dict], bool] | None = None
                      ) -> tuple[list[dict], list[dict]]:
    """Whether a build's models side by side were scored on different instances, and their table on the shared
    ones: ``(differing, rows)``, ``differing`` as :func:`differing_samples` gives it over the primary matchers'
    rows (:func:`primary_rows`), ``rows`` the :func:`results_table` rows over only the instances every model of a
    (mode, matcher, context length) was scored on (:func:`shared_instance_rows`); ``([], [])`` when every row
    compares the same instances. What ``run``, ``score`` and ``report`` print beside the results table. ``only``: the
    score rows counted (:func:`instance_scores`; default every one)."""
    rows = primary_rows(instance_scores(build_dir, only)[0])
    diff = differing_samples(rows)
    return (diff, length_rows(shared_instance_rows(rows))) if diff else ([], [])


def primary_rows(rows: list[dict]) -> list[dict]:
    """The rows (of :func:`instance_scores`) of each instance's track's primary matcher and of the LLM judges."""
    return [r for r in rows if is_judge_matcher(r["matcher"]) or r["matcher"] == _primary(r["benchmark"])]


def _primary(benchmark: str | None) -> str | None:
    return matchers_for(benchmark)[0]


def length_average_rows(by_len: list[dict]) -> list[dict]:
    """Avg and the weighted averages over context lengths (``length_averages``) per model × mode × matcher."""
    out = []
    for (model, mode, matcher) in sorted({(r["model"], r["mode"], r["matcher"]) for r in by_len}):
        a = length_averages({r["context_length"]: r["score"] for r in by_len
                             if (r["model"], r["mode"], r["matcher"]) == (model, mode, matcher)})
        out.append({"model": model, "mode": mode, "matcher": matcher, **a})
    return out


BREAKDOWNS: dict[str, Callable[[dict], list]] = {
    "setting": lambda r: [(r["model"], r["mode"], r["setting"])],
    "position": lambda r: [(r["model"], r["mode"], r["position"])],
    "query_type": lambda r: [(r["model"], r["mode"], t) for t in r["query_types"]],
    "difficulty": lambda r: [(r["model"], r["mode"], r["difficulty"])],
}


def breakdowns(rows: list[dict]) -> dict[str, list[dict]]:
    """Score by setting, position, query type and difficulty per model × mode (:data:`BREAKDOWNS`)."""
    return {name: sorted(({"model": g["key"][0], "mode": g["key"][1], name: g["key"][2], "n": g["n"],
                           "score": g["score"], "ci_low": g["ci_low"], "ci_high": g["ci_high"]}
                          for g in group_scores(rows, key)),
                         key=lambda r, name=name: (str(r["model"]), str(r["mode"]), value_order(r[name])))
            for name, key in BREAKDOWNS.items()}


def call_counts(build_dir: str | Path) -> list[dict]:
    """Calls per model × mode: ok, over-length, failed (error rows), refused, cached, retries, and the replies
    that earn no score of their own: cut off by the output budget (``cut_off``, scored 0), truncated by the server
    (not scored), and empty replies (``empty_reply``: tokens generated, no text returned; not scored)."""
    resp = read_table(Path(build_dir) / "responses.parquet", "responses").to_pylist()
    counts: dict[tuple, dict] = defaultdict(lambda: {"calls": 0, "ok": 0, "over_length": 0, "failed": 0,
                                                      "refused": 0, "cached": 0, "retries": 0, "cut_off": 0,
                                                      "truncated": 0, "empty_reply": 0})
    for r in resp:
        c = counts[(display_model(r["model"], r.get("reasoning_effort")), r["mode"])]
        c["calls"] += 1
        cut = is_cut_off(r)  # the one rule every count uses (status cut_off, or a length finish reason)
        c["ok"] += r["status"] == "ok" and not cut
        c["over_length"] += r["status"] == "over_length"
        c["failed"] += r["status"] == "error"
        c["refused"] += r["status"] == "refused_by_provider"
        c["cut_off"] += cut
        c["truncated"] += r["status"] == "truncated"
        c["empty_reply"] += r["status"] == "empty_reply"  # tokens generated, no text returned (a server fault)
        c["cached"] += bool(r["cached"])
        c["retries"] += r["retries"] or 0
    return [{"model": m, "mode": md, **c} for (m, md), c in sorted(counts.items())]


def variance_rows(rows: list[dict]) -> list[dict]:
    """Mean run-to-run (sample) variance of the instance scores per model."""
    return [{"model": m, "mean_sample_variance": sum(r["sample_var"] for r in rows if r["model"] == m) /
             max(1, sum(1 for r in rows if r["model"] == m))} for m in sorted({r["model"] for r in rows})]
