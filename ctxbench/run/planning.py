"""``ctxbench plan``: how many instances a decision between two models needs, what they cost, how many tiers.

Sample sizes come from :mod:`ctxbench.analysis.power`: without a pilot the two-sided test of two independent
proportions (the conservative bound); with ``--pilot BUILD --models A,B`` the paired design, from the pilot's
discordance and the design effect of its contexts (:func:`ctxbench.analysis.power.pilot_estimates`, on the
instances both models scored with the track's primary matcher). The variance of the differences is taken from the
pilot (``ψ − d̄²``) and the discordance planned at the difference D is that variance plus D² (the pilot's own
difference need not be D).

Costs, with a build (``--build``, else the pilot) and models: per model and tier, the instances' prompts rendered
as ``evaluate`` renders them and counted in the model's tokenizer (cl100k_base where it has none, marked
estimated; at most :data:`COUNT_SAMPLE` instances per tier, seeded), the model's samples per instance and its
whole output budget, priced as ``evaluate --dry-run`` prices them (:mod:`ctxbench.run.dryrun`: without and with
prompt caching, directly and through the batch API). The decision is made per context length, so each tier needs
the planned instances; ``tiers_pooled`` is the number of the build's tiers whose instances add up to the plan when
lengths are pooled.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from pathlib import Path

from ctxbench.analysis.power import independent_n, paired_n, pilot_estimates
from ctxbench.core.errors import InputError
from ctxbench.analysis.core import instance_scores, primary_rows
from ctxbench.core.storage import require_build
from ctxbench.models.pricing import cache_min_tokens, model_prices
from ctxbench.models.prompts import messages_text, render_messages, shared_prefix, takes_cache_hint
from ctxbench.models.registry import model_info
from ctxbench.run.dryrun import CallTokens, cached_costs
from ctxbench.tokenizers import get_tokenizer

COUNT_SAMPLE = 64


def _tiers(build: Path) -> dict[int, list[dict]]:
    import pyarrow.parquet as pq


    ip = require_build(build) / "instances.parquet"
    have = set(pq.read_schema(ip).names)
    cols = [c for c in ("instance_id", "context", "question", "target_tokens", "benchmark", "context_format")
            if c in have]
    out: dict[int, list[dict]] = defaultdict(list)
    for r in pq.read_table(ip, columns=cols).to_pylist():
        out[int(r["target_tokens"])].append(r)
    return dict(sorted(out.items()))


def pilot_scores(build: Path, a: str, b: str) -> tuple[list[float], list[float], list[str]]:
    """Aligned per-instance primary-matcher scores of models ``a`` and ``b`` on the instances both scored in the
    pilot build (mean over samples, mode ``lc`` first where present), with each instance's context identity.
    Raises InputError when the build has no scores or a model none."""
    try:
        rows, inst = instance_scores(build)
    except FileNotFoundError:
        raise InputError(f"--pilot {build}: no scores.parquet: run `ctxbench score --build {build}` first") from None
    rows = primary_rows(rows)
    by: dict[str, dict[str, float]] = {a: {}, b: {}}
    modes = sorted({r["mode"] for r in rows}, key=lambda m: (m != "lc", m))
    for m in (a, b):
        mine = [r for r in rows if r["model"] == m]
        if not mine:
            have = sorted({r["model"] for r in rows})
            raise InputError(f"--models: {m} has no score in the pilot {build} (scored models: "
                             f"{', '.join(have) or 'none'})")
        mode = next(md for md in modes if any(r["mode"] == md for r in mine))
        by[m] = {r["instance_id"]: r["score"] for r in mine if r["mode"] == mode}
    shared = sorted(set(by[a]) & set(by[b]))
    ctx = _context_ids(build, shared)
    return [by[a][i] for i in shared], [by[b][i] for i in shared], [ctx.get(i, i) for i in shared]


def _context_ids(build: Path, ids: list[str]) -> dict[str, str]:
    import pyarrow.parquet as pq

    t = pq.read_table(build / "instances.parquet", columns=["instance_id", "context"]).to_pylist()
    want = set(ids)
    return {r["instance_id"]: hashlib.sha256(r["context"].encode()).hexdigest() for r in t if r["instance_id"] in want}


def tier_costs(build: Path, model: str, n: int, tiers: dict[int, list[dict]] | None = None) -> dict:
    """What ``n`` instances at each tier of ``build`` cost for ``model`` (module docstring): per tier ``cost``,
    ``cost_cached``, ``cost_batch``, ``cost_batch_cached`` (USD, None where the price is unknown) and
    ``input_tokens_per_instance``; and the totals over the tiers."""
    info = model_info(model)
    tokname = info.tokenizer if info.tokenizer and info.tokenizer != "local-server" else "cl100k_base"
    tok = get_tokenizer(tokname)
    K = info.default_samples or 1
    out_tokens = info.max_output_tokens
    tiers = tiers if tiers is not None else _tiers(build)
    hinted, min_prefix = takes_cache_hint(model), cache_min_tokens(model)
    prices = {False: model_prices(model), True: model_prices(model, batch=True)}
    per_tier, totals = [], defaultdict(float)
    for L, rows in tiers.items():
        sample = sorted(rows, key=lambda r: hashlib.sha256(f"plan|{r['instance_id']}".encode()).hexdigest())
        sample = sample[:COUNT_SAMPLE]
        calls = []
        for r in sample:
            msgs = render_messages(r["context"], r["question"], "cot", model, benchmark=r.get("benchmark"),
                                   context_format=r.get("context_format"))
            p, pre = tok.count(messages_text(msgs)), tok.count(shared_prefix(msgs, r["context"]))
            pid = hashlib.sha256(r["context"].encode()).hexdigest()
            calls += [CallTokens(p, pre, pid, out_tokens) for _ in range(K)]
        scale = n / len(sample)
        row = {"context_length": L, "instances_in_build": len(rows), "instances_needed": n,
               "short_by": max(0, n - len(rows)),
               "input_tokens_per_instance": round(sum(c.prompt for c in calls) / len(calls)) if calls else 0}
        for batch, label in ((False, "cost"), (True, "cost_batch")):
            pr = prices[batch]
            if pr is None:
                row[label] = row[f"{label}_cached"] = None
                continue
            plain, cached = cached_costs(calls, pr, min_prefix, hinted)
            row[label], row[f"{label}_cached"] = plain * scale, cached * scale
            totals[label] += plain * scale
            totals[f"{label}_cached"] += cached * scale
        per_tier.append(row)
    total = {k: (None if prices[k.startswith("cost_batch")] is None else round(totals[k], 6))
             for k in ("cost", "cost_cached", "cost_batch", "cost_batch_cached")}
    return {"model": model, "tokenizer": tokname + ("" if tokname == info.tokenizer else " (estimated)"),
            "samples": K, "output_budget": out_tokens, "tiers": per_tier, "total": total}


def make_plan(accuracy: float | None, mde: float, power: float = 0.8, alpha: float = 0.05,
              pilot: Path | None = None, models: list[str] | None = None, build: Path | None = None) -> dict:
    """The plan ``ctxbench plan`` prints (module docstring): ``instances`` (per model, per context length),
    ``design`` (independent or paired), the inputs, ``independent_instances`` (the conservative bound, where
    ``accuracy`` is given), the pilot's estimates, and with a build ``tiers`` (per tier: instances in the build,
    short by) and ``tiers_pooled``; with models as well ``costs`` per model. Raises InputError for bad inputs: no
    ``accuracy`` without a pilot, a pilot without two models."""
    out: dict = {"accuracy": accuracy, "mde": mde, "power": power, "alpha": alpha}
    if pilot is None and accuracy is None:
        raise InputError("give --accuracy P (the expected accuracy of the better model), or --pilot BUILD --models "
                         "A,B to plan from a pilot")
    if accuracy is not None:
        out["independent_instances"] = independent_n(accuracy, mde, power, alpha)
    if pilot is not None:
        if not models or len(models) != 2:
            raise InputError("--pilot needs --models A,B: the two models to compare, both scored on the pilot build")
        a, b, contexts = pilot_scores(Path(pilot), models[0], models[1])
        est = pilot_estimates(a, b, contexts)
        # the spread of the differences is the pilot's; at a difference D the discordance is that spread + D²
        at_d = max(0.0, est["discordance"] - est["diff"] ** 2) + mde ** 2
        out["pilot"] = {"build": str(pilot), "models": models, **est, "discordance_at_mde": at_d}
        out["instances"] = paired_n(at_d, mde, power, alpha, est["deff"])
        out["design"] = "paired"
    else:
        out["instances"] = out["independent_instances"]
        out["design"] = "independent"
    where = Path(build) if build is not None else (Path(pilot) if pilot is not None else None)
    if where is not None:
        tiers = _tiers(where)
        n = out["instances"]
        out["build"] = str(where)
        out["tiers"] = [{"context_length": L, "instances_in_build": len(r), "short_by": max(0, n - len(r))}
                        for L, r in tiers.items()]
        per = sum(len(r) for r in tiers.values()) / max(1, len(tiers))
        out["tiers_pooled"] = int(math.ceil(n / per)) if per else None
        if models:
            out["costs"] = {m: tier_costs(where, m, n, tiers) for m in models}
    return out

