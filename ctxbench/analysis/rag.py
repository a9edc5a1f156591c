"""RAG versus long context (LaRA, Li et al. 2025, section 4 and appendix D; HoloBench appendix A.5.5).

From a build's instances, responses and scores (plain dicts in, lists of row dicts out):

* :func:`gap_table`: per model × length × task the accuracy with the full context (LC) and with retrieval (RAG, the
  default top-k configuration), over the same questions (instances scored in both modes), and the gap LC − RAG
  (LaRA table 2), plus an ``(all models)`` row per length × task averaging the models' accuracies first
  (LaRA's "Avg GAP"). LC calls over the model's window are not scored; they are counted (``lc_over_length``).
* :func:`sweep_table`: accuracy by retrieval budget in tokens (``evaluate --rag-tokens``; HoloBench tables 9-10)
  with the full context as the last point, the mean retrieved tokens and the exact retrieval recall.
* :func:`routing`: per model and length, LC or RAG with its evidence: the paired difference RAG − LC of the best
  RAG configuration with a 95% interval clustered by question; ``rag`` or ``lc`` when the interval excludes 0,
  otherwise ``either`` (no significant difference; the cheaper one, by mean prompt tokens, is named); ``rag`` when
  LC does not fit the window at all.
* :func:`position_table`: accuracy by answer-position segment (LaRA appendix D, "lost in the middle"): the
  segment index a LaRA query carries (``answer_segment`` of ``n_segments``), else the segment (of 5) holding the
  token-weighted centre of the instance's evidence spans; instances with neither are left out.

Length is the instance's ``source_tier`` (imports) or ``target_tokens``; task is ``skill``, else each of the
instance's query types, else ``all``. The score of a response is its LLM-judge score where one exists, else the
benchmark's primary deterministic matcher (a fallback matcher is flagged ``fallback``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from statistics import mean

from ctxbench.scoring.judge import is_judge_matcher
from ctxbench.scoring.metrics import clustered_mean_ci
from ctxbench.scoring.registry import is_fallback, matchers_for
from ctxbench.features.difficulty import merge_spans
from ctxbench.core.storage import read_table

N_EVIDENCE_SEGMENTS = 5


def _length(i: dict):
    return i.get("source_tier") or i["target_tokens"]


def _length_key(v) -> tuple:
    s = str(v)
    return (0, int(s[:-1]) * 1024) if s[:-1].isdigit() and s[-1] == "k" else (0, int(s)) if s.isdigit() else (1, s)


def _tasks(i: dict) -> list[str]:
    if i.get("skill"):
        return [i["skill"]]
    qt = json.loads(i.get("query_types") or "[]")
    return qt or ["all"]


def instance_scores(instances: dict[str, dict], responses: list[dict], scores: list[dict]) -> list[dict]:
    """One row per (model, mode, rag_tokens, instance): the mean score over samples with the chosen matcher
    (judge first, else the benchmark's primary), plus the response facts the analysis needs."""
    resp = {r["request_key"]: r for r in responses}
    judged = {(s["instance_id"], s["model"], s["mode"]) for s in scores if is_judge_matcher(s["matcher"])}
    per: dict[tuple, list] = defaultdict(list)
    for s in scores:
        i = instances.get(s["instance_id"])
        r = resp.get(s.get("request_key"))
        if i is None or r is None:
            continue
        if (s["instance_id"], s["model"], s["mode"]) in judged:
            if not is_judge_matcher(s["matcher"]):
                continue
        elif s["matcher"] != matchers_for(i.get("benchmark"))[0]:
            continue
        per[(s["model"], s["mode"], r.get("rag_tokens"), s["instance_id"], s["matcher"])].append((s["score"], r))
    out = []
    for (model, mode, budget, iid, matcher), vals in per.items():
        rs = [r for _, r in vals]
        out.append({"model": model, "mode": mode, "rag_tokens": budget, "instance_id": iid, "matcher": matcher,
                    "score": mean(v for v, _ in vals),
                    "prompt_tokens": mean([r["prompt_tokens"] for r in rs if r.get("prompt_tokens")] or [0]),
                    "retrieved_tokens": rs[0].get("retrieved_tokens"), "recall": rs[0].get("retrieval_recall")})
    return out


def _over_length(instances: dict, responses: list[dict]) -> dict[tuple, int]:
    c: dict[tuple, int] = defaultdict(int)
    for r in responses:
        if r["mode"] == "lc" and r["status"] == "over_length" and r["instance_id"] in instances:
            c[(r["model"], _length(instances[r["instance_id"]]))] += 1
    return c


def _qid(i: dict) -> str:
    return i.get("question_id") or i["question"]


def gap_table(instances: dict[str, dict], rows: list[dict], responses: list[dict]) -> list[dict]:
    """LaRA table 2 rows (module docstring): model, length, task, n (paired instances), lc, rag, gap."""
    lc = {(r["model"], r["instance_id"]): r for r in rows if r["mode"] == "lc"}
    rag = {(r["model"], r["instance_id"]): r for r in rows if r["mode"] == "rag" and r["rag_tokens"] is None}
    over = _over_length(instances, responses)
    groups: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    fallback: dict[tuple, bool] = {}
    for key in lc.keys() & rag.keys():
        i = instances[key[1]]
        for t in [*_tasks(i), "overall"]:
            g = (key[0], _length(i), t)
            groups[g].append((lc[key]["score"], rag[key]["score"]))
            fallback[g] = fallback.get(g, False) or is_fallback(lc[key]["matcher"], i.get("benchmark"))
    out = []
    for (model, length, task), pairs in groups.items():
        a, b = mean(p[0] for p in pairs), mean(p[1] for p in pairs)
        out.append({"model": model, "length": str(length), "task": task, "n": len(pairs), "lc": a, "rag": b,
                    "gap": a - b, "lc_over_length": over.get((model, length), 0),
                    "fallback": fallback[(model, length, task)]})
    by_lt: dict[tuple, list[dict]] = defaultdict(list)
    for r in out:
        by_lt[(r["length"], r["task"])].append(r)
    for (length, task), rs in by_lt.items():
        if len({r["model"] for r in rs}) > 1:
            a, b = mean(r["lc"] for r in rs), mean(r["rag"] for r in rs)
            out.append({"model": "(all models)", "length": length, "task": task, "n": sum(r["n"] for r in rs),
                        "lc": a, "rag": b, "gap": a - b, "lc_over_length": sum(r["lc_over_length"] for r in rs),
                        "fallback": any(r["fallback"] for r in rs)})
    return sorted(out, key=lambda r: (r["model"] == "(all models)", r["model"], _length_key(r["length"]),
                                      r["task"] == "overall", r["task"]))


def sweep_table(instances: dict[str, dict], rows: list[dict]) -> list[dict]:
    """Accuracy by retrieval budget (HoloBench tables 9-10): model, length, rag_tokens ("top-k" for the default
    configuration, "full" for LC), n, score, retrieved_tokens (mean), recall (mean exact evidence recall, null where
    spans are unknown)."""
    g: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        b = "full" if r["mode"] == "lc" else ("top-k" if r["rag_tokens"] is None else r["rag_tokens"])
        g[(r["model"], _length(instances[r["instance_id"]]), b)].append(r)
    out = []
    for (model, length, b), rs in g.items():
        rec = [r["recall"] for r in rs if r["recall"] is not None]
        ret = [r["retrieved_tokens"] for r in rs if r["retrieved_tokens"] is not None]
        out.append({"model": model, "length": str(length), "rag_tokens": str(b), "n": len(rs),
                    "score": mean(r["score"] for r in rs), "retrieved_tokens": mean(ret) if ret else None,
                    "recall": mean(rec) if rec else None})
    order = {"top-k": 1e12, "full": 1e13}
    return sorted(out, key=lambda r: (r["model"], _length_key(r["length"]),
                                      order.get(r["rag_tokens"], float(r["rag_tokens"]) if r["rag_tokens"].isdigit()
                                                else 1e11)))


def routing(instances: dict[str, dict], rows: list[dict], responses: list[dict]) -> list[dict]:
    """Per model and length: ``recommendation`` (``lc``, ``rag`` or ``either``) and its evidence (module docstring)."""
    over = _over_length(instances, responses)
    by: dict[tuple, dict[str, dict]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        cfg = "lc" if r["mode"] == "lc" else ("rag" if r["rag_tokens"] is None else f"rag@{r['rag_tokens']}")
        by[(r["model"], _length(instances[r["instance_id"]]))][cfg][r["instance_id"]] = r
    lc_total: dict[tuple, int] = defaultdict(int)
    for r in responses:
        if r["mode"] == "lc" and r["instance_id"] in instances:
            lc_total[(r["model"], _length(instances[r["instance_id"]]))] += 1
    out = []
    for key in sorted(set(by) | set(over), key=lambda k: (k[0], _length_key(k[1]))):
        model, length = key
        cfgs = by.get(key, {})
        lc = cfgs.get("lc", {})
        rags = {c: v for c, v in cfgs.items() if c != "lc"}
        row = {"model": model, "length": str(length), "lc_over_length": over.get(key, 0), "lc_n": len(lc),
               "lc_score": mean(r["score"] for r in lc.values()) if lc else None}
        if not rags:
            out.append({**row, "recommendation": "lc" if lc else "none", "evidence": "no RAG responses"})
            continue
        if not lc:
            best = max(rags, key=lambda c: mean(r["score"] for r in rags[c].values()))
            s = mean(r["score"] for r in rags[best].values())
            ev = (f"LC does not fit the window ({over.get(key, 0)} of {lc_total.get(key, 0)} LC calls over length); "
                  f"{best} scores {s:.3f} on {len(rags[best])}") if over.get(key) else "no scored LC responses"
            out.append({**row, "best_rag": best, "rag_score": s, "recommendation": "rag" if over.get(key) else "none",
                        "evidence": ev})
            continue
        paired = {c: sorted(v.keys() & lc.keys()) for c, v in rags.items()}
        best = max(paired, key=lambda c: (mean(rags[c][i]["score"] - lc[i]["score"] for i in paired[c])
                                          if paired[c] else float("-inf")))
        ids = paired[best]
        if not ids:
            out.append({**row, "recommendation": "none", "evidence": "no question answered in both modes"})
            continue
        d = [rags[best][i]["score"] - lc[i]["score"] for i in ids]
        m, lo, hi = clustered_mean_ci(d, [_qid(instances[i]) for i in ids], clip=None)
        tok_lc = mean(lc[i]["prompt_tokens"] for i in ids)
        tok_rag = mean(rags[best][i]["prompt_tokens"] for i in ids)
        if lo > 0:
            rec = "rag"
        elif hi < 0:
            rec = "lc"
        else:
            rec = "either (rag is cheaper)" if tok_rag < tok_lc else "either (lc is cheaper)"
        ev = (f"{best} − LC = {m:+.3f} (95% CI {lo:+.3f} to {hi:+.3f}, clustered by question) on {len(ids)} paired "
              f"instances; mean prompt tokens LC {tok_lc:,.0f}, {best} {tok_rag:,.0f}")
        if over.get(key):
            ev += f"; {over[key]} LC calls over the window (not scored)"
        if len(rags) > 1:
            ev += f"; best of {len(rags)} RAG configurations (chosen on the same data)"
        out.append({**row, "best_rag": best, "rag_score": mean(rags[best][i]["score"] for i in ids),
                    "diff": m, "ci_low": lo, "ci_high": hi, "recommendation": rec, "evidence": ev})
    return out


def answer_position(i: dict) -> tuple[int, int] | None:
    """``(segment, n_segments)`` of the instance's answer: LaRA's segment index, else the segment (of 5) holding the
    token-weighted centre of the merged evidence spans; None when neither is known."""
    if i.get("answer_segment") is not None and i.get("n_segments"):
        return int(i["answer_segment"]), int(i["n_segments"])
    spans = merge_spans(json.loads(i.get("evidence_spans") or "[]"))
    n = i.get("context_tokens") or 0
    if not spans or n <= 0:
        return None
    w = sum(e - s for s, e in spans)
    centre = sum((s + e) / 2 * (e - s) for s, e in spans) / w
    return min(int(centre / n * N_EVIDENCE_SEGMENTS), N_EVIDENCE_SEGMENTS - 1), N_EVIDENCE_SEGMENTS


def position_table(instances: dict[str, dict], rows: list[dict]) -> list[dict]:
    """Accuracy by answer position: model, mode (``rag@B`` for budgets), n_segments, segment (0-based),
    position (segment centre as a fraction of the context), n, score, ci_low, ci_high."""
    g: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        p = answer_position(instances[r["instance_id"]])
        if p is None:
            continue
        mode = r["mode"] if r["rag_tokens"] is None else f"rag@{r['rag_tokens']}"
        g[(r["model"], mode, p[1], p[0])].append(r)
    out = []
    for (model, mode, nseg, seg), rs in sorted(g.items()):
        m, lo, hi = clustered_mean_ci([r["score"] for r in rs], [_qid(instances[r["instance_id"]]) for r in rs])
        out.append({"model": model, "mode": mode, "n_segments": nseg, "segment": seg,
                    "position": (seg + 0.5) / nseg, "n": len(rs), "score": m, "ci_low": lo, "ci_high": hi})
    return out


def analyse(build_dir) -> dict[str, list[dict]]:
    """All four tables for a build directory (empty lists where the build has no scores or no RAG responses)."""
    from pathlib import Path

    import pyarrow.parquet as pq


    build_dir = Path(build_dir)
    ipath = build_dir / "instances.parquet"
    want = ["instance_id", "benchmark", "question", "question_id", "target_tokens", "source_tier", "skill",
            "query_types", "evidence_spans", "context_tokens", "answer_segment", "n_segments"]
    have = pq.read_schema(ipath).names
    inst = {r["instance_id"]: r for r in pq.read_table(ipath, columns=[c for c in want if c in have]).to_pylist()}
    responses = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    scores = read_table(build_dir / "scores.parquet", "scores").to_pylist()
    rows = instance_scores(inst, responses, scores)
    lc_rag = [r for r in rows if r["mode"] in ("lc", "rag")]  # the LC/RAG tables leave --mode repl out
    return {"rag_gap": gap_table(inst, lc_rag, responses), "rag_sweep": sweep_table(inst, lc_rag),
            "rag_routing": routing(inst, lc_rag, responses), "position": position_table(inst, rows),
            "_has_rag": [{"yes": any(r["mode"] == "rag" for r in responses)}],
            "_fallback": [{"matcher": m} for m in sorted({r["matcher"] for r in rows
                                                          if is_fallback(r["matcher"], inst[r["instance_id"]].get("benchmark"))})]}
