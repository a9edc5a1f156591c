"""lc, rag and repl side by side (issue 35): for each model, the modes a build was evaluated in on the same
instances, with what each costs, and the paired difference between every two modes.

``mode_rows`` gives one row per model × mode. It has the instances answered, the mean score (the primary matcher,
or a judge where one scored: :func:`ctxbench.analysis.rag.instance_scores`; mean over samples, then over
instances), the calls per instance (one per response in ``lc`` and ``rag``; in ``repl`` each root turn and each
``llm_query`` sub-call, from ``steps.parquet``), the prompt and completion tokens per instance, and the cost per
instance and per correct answer. The cost is summed over the responses that have a price. A correct answer counts
as its score, so a partial credit of 0.5 is half an answer.

``mode_pairs`` gives one row per model × pair of modes, over the instances both scored. It has the mean of the
per-instance differences (first mode − second) and its 95% interval clustered by context
(:func:`ctxbench.analysis.paired.paired_difference`, the intervals ``compare`` gives between models). Instances
that share a context are not independent.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import pyarrow.parquet as pq

from ctxbench.analysis.paired import paired_difference
from ctxbench.analysis.rag import instance_scores
from ctxbench.core.storage import read_table

MODE_ORDER = {"lc": 0, "rag": 1, "repl": 2}
NO_FINAL = ("max_steps", "over_budget", "step_timeout")  # --mode repl's own statuses (ctxbench.run.repl)


def _mode(r: dict) -> str:
    return r["mode"] if r.get("rag_tokens") is None else f"{r['mode']}@{r['rag_tokens']}"


def _order(mode: str) -> tuple:
    return (MODE_ORDER.get(mode.split("@")[0], 9), mode)


def mode_rows(instances: dict[str, dict], responses: list[dict], scores: list[dict],
              steps: list[dict]) -> list[dict]:
    """One row per model × mode (module docstring): ``model``, ``mode``, ``instances``, ``score``,
    ``calls_per_instance``, ``prompt_tokens_per_instance``, ``completion_tokens_per_instance``,
    ``cost_per_instance_usd`` and ``usd_per_correct`` (None where no response has a price, or nothing was
    right), and the answers that ended without ``FINAL``: ``max_steps``, ``over_budget``, ``step_timeout``."""
    calls_of: dict[str, int] = defaultdict(int)  # request key of a repl answer -> its calls
    for s in steps:
        calls_of[s["request_key"]] += 1 + len(json.loads(s.get("sub_calls") or "[]"))
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in responses:
        if r["instance_id"] in instances:
            by[(r["model"], _mode(r))].append(r)
    scored: dict[tuple, list[float]] = defaultdict(list)
    for s in instance_scores(instances, responses, scores):
        scored[(s["model"], _mode(s))].append(s["score"])
    out = []
    for (model, mode), rs in sorted(by.items(), key=lambda kv: (kv[0][0], _order(kv[0][1]))):
        n = len({r["instance_id"] for r in rs})
        calls = sum(calls_of.get(r["request_key"], 1) if r["mode"] == "repl" else 1 for r in rs)
        costs = [r["cost_usd"] for r in rs if r.get("cost_usd") is not None]
        sc = scored.get((model, mode), [])
        right = sum(sc)
        cost = sum(costs) if costs else None
        out.append({"model": model, "mode": mode, "instances": n, "scored": len(sc),
                    "score": right / len(sc) if sc else None, "calls_per_instance": calls / n,
                    "prompt_tokens_per_instance": sum(r.get("prompt_tokens") or 0 for r in rs) / n,
                    "completion_tokens_per_instance": sum(r.get("completion_tokens") or 0 for r in rs) / n,
                    "cost_per_instance_usd": cost / n if cost is not None else None,
                    "usd_per_correct": cost / right if cost is not None and right else None,
                    **{st: sum(r["status"] == st for r in rs) for st in NO_FINAL}})
    return out


def mode_pairs(instances: dict[str, dict], responses: list[dict], scores: list[dict],
               context_of: dict[str, str]) -> list[dict]:
    """One row per model × pair of modes (module docstring): ``model``, ``a``, ``b``, ``n`` (instances both
    scored), ``clusters`` (their contexts), ``diff`` (a − b), ``ci_low``, ``ci_high``, ``p_value``, ``reason``
    (why there is no interval). ``context_of``: instance id → its context's identity (the cluster)."""
    per: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for s in instance_scores(instances, responses, scores):
        per[s["model"]][_mode(s)][s["instance_id"]] = s["score"]
    out = []
    for model in sorted(per):
        modes = sorted(per[model], key=_order)
        for a, b in combinations(modes, 2):
            ids = sorted(set(per[model][a]) & set(per[model][b]))
            d = paired_difference([per[model][a][i] for i in ids], [per[model][b][i] for i in ids],
                                  [context_of.get(i, i) for i in ids])
            out.append({"model": model, "a": a, "b": b, **d})
    return out


def analyse_modes(build_dir: str | Path) -> dict[str, list[dict]]:
    """``{"modes": mode_rows, "mode_pairs": mode_pairs}`` for a build; empty lists for a build without a
    ``repl`` response (the lc/rag comparison has its own section: :mod:`ctxbench.analysis.rag`)."""
    build_dir = Path(build_dir)
    responses = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    if not any(r["mode"] == "repl" for r in responses):
        return {"modes": [], "mode_pairs": []}
    ipath = build_dir / "instances.parquet"
    want = ["instance_id", "benchmark", "question", "question_id", "context"]
    have = pq.read_schema(ipath).names
    inst = {r["instance_id"]: r for r in pq.read_table(ipath, columns=[c for c in want if c in have]).to_pylist()}
    context_of = {i: hashlib.sha256((r.get("context") or i).encode("utf-8")).hexdigest() for i, r in inst.items()}
    scores = read_table(build_dir / "scores.parquet", "scores").to_pylist()
    sp = build_dir / "steps.parquet"
    steps = read_table(sp, "steps", key="step_key").to_pylist() if sp.exists() else []
    return {"modes": mode_rows(inst, responses, scores, steps),
            "mode_pairs": mode_pairs(inst, responses, scores, context_of)}
