"""``ctxbench evaluate --workers N``: one evaluation as N worker processes on a Dask cluster, sharded by context
(:mod:`ctxbench.run.shard`: every question of a context on one worker, contexts balanced by prompt tokens), each
with ``--concurrency`` calls in flight.

The cluster is the Dask scheduler at ``CTXBENCH_DASK_ADDRESS`` (e.g. ``tcp://scheduler:8786``: workers on other
machines, which then need the build directory at the same path and one shared cache, ``CTXBENCH_CACHE_URL``), else a
local cluster of N worker processes started for the run and closed at its end. The workers share the response cache
and claim each request key before calling (:meth:`ctxbench.models.cache.ResponseCache.claim`), so no call is made
twice, even when a worker is killed (its claims lapse and a rerun makes only the missing calls). Workers talk to no
Prefect API. The parent plans the calls once, so a fully answered evaluation starts no cluster. With a local cluster
the parent process is the first worker: it starts calling at once (as one process would) while the other N-1
start.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from ctxbench.core.errors import InputError
from ctxbench.core.extras import require
from ctxbench.core.storage import consolidate, read_table
from ctxbench.models.cache import ResponseCache
from ctxbench.run.daskexit import PRELOAD
from ctxbench.run.evaluate import EvalConfig, EvalSummary, evaluate_build, plan_requests
from ctxbench.run.shard import assign_contexts, context_tokens

DASK_ADDRESS_ENV = "CTXBENCH_DASK_ADDRESS"
STATUS_ORDER = ("config_error", "paused", "pending", "budget", "incomplete", "complete")  # the worst one wins


def plan_shards(plan: Any, workers: int) -> list[list[str]]:
    """The context hashes each worker evaluates for ``plan`` (:func:`ctxbench.run.evaluate.plan_requests`; non-empty
    lists only, at most ``workers``): every context with a request not yet stored, balanced by the prompt tokens of
    its calls still to make (:func:`ctxbench.run.shard.assign_contexts`); contexts whose answers are all in the
    cache weigh nothing."""
    tokens = context_tokens(plan.pending + plan.verify)
    for t in plan.todo:
        tokens.setdefault(t["_ctx"], 0)
    return [s for s in assign_contexts(tokens, workers) if s]


def evaluate_shard(build: str, cfg: dict, contexts: list[str]) -> dict:
    """One worker's part (runs in the Dask worker): :func:`ctxbench.run.evaluate.evaluate_build` on ``contexts``;
    returns the summary's fields."""
    s = evaluate_build(build, EvalConfig(**cfg), contexts=set(contexts), progress=lambda d, n: None)
    return dict(s.__dict__)


def stored_keys(build: Path) -> set[str]:
    """The request keys ``build``'s ``responses.parquet`` holds (with pending part files); empty when it has none."""
    return set(read_table(build / "responses.parquet", "responses", columns=["request_key"])
               .column("request_key").to_pylist())


def others_rows(new_keys: set[str], own_keys: set[str], own_rows: int) -> int:
    """Rows another process (not one of this evaluation's workers) added to ``responses.parquet`` while the workers
    ran. ``new_keys``: request keys stored at the end and not at the start; ``own_keys``: the keys this evaluation
    could add (its plan's requests); ``own_rows``: the rows its workers added (their ``new_rows``, summed). New keys
    outside ``own_keys`` are another process's; of those inside, whatever the workers did not add. (A worker's row
    replacing a stored error row adds no new key: another process evaluating the same requests at the same time
    may then be under-counted by those rows, never over-counted.)"""
    inside = len(new_keys & own_keys)
    return len(new_keys - own_keys) + max(0, inside - own_rows)


def combine(parts: list[dict], selected: int, already_stored: int, others: int = 0) -> EvalSummary:
    """One summary of the workers' summaries: counts and waits added, notes and failures joined, the worst status
    (:data:`STATUS_ORDER`); ``selected`` and ``already_stored`` are the whole evaluation's, ``others`` the rows
    another process added meanwhile (:func:`others_rows`: a worker's own count names the other workers' rows too,
    so it is never summed)."""
    s = EvalSummary(selected=selected, already_stored=already_stored, others_rows=others)
    for f in fields(EvalSummary):
        if f.name in ("selected", "already_stored", "status", "empty_reason", "max_tokens", "spent_usd",
                      "others_rows"):
            continue
        for p in parts:
            v = p.get(f.name)
            cur = getattr(s, f.name)
            if isinstance(cur, dict):
                for k, n in (v or {}).items():
                    cur[k] = cur.get(k, 0) + n
            elif isinstance(cur, list):
                cur.extend(v or [])
            elif isinstance(v, (int, float)):
                setattr(s, f.name, cur + v)
    s.status = min((p.get("status", "complete") for p in parts), key=STATUS_ORDER.index, default="complete")
    s.max_tokens = next((p["max_tokens"] for p in parts if p.get("max_tokens")), None)
    return s


def _client(workers: int, address: str | None) -> Any:
    """A Dask client: of the scheduler at ``address``, else of a new local cluster of ``workers`` processes (one
    thread each, no dashboard; each ends within the nanny's close timeout: :mod:`ctxbench.run.daskexit`)."""
    distributed = require("distributed", "evaluate --workers (Dask)")
    if address:
        return distributed.Client(address)
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.ERROR,
                                       preload=[PRELOAD])
    return distributed.Client(cluster)


def evaluate_workers(build: str | Path, cfg: EvalConfig, workers: int, address: str | None = None,
                     progress: Callable[[int, int], None] | None = None) -> EvalSummary:
    """Evaluate ``cfg`` on ``build`` with ``workers`` Dask workers sharded by context (module docstring);
    ``address``: a Dask scheduler (default ``CTXBENCH_DASK_ADDRESS``, else a local cluster). ``progress(done,
    total)`` counts workers finished. Returns the combined summary. Raises InputError for options that need one
    view of all calls (``--batch``, ``--max-cost``, ``--target-ci``, ``--adaptive-calls``) and CtxbenchError when Dask is missing."""
    if workers < 1:
        raise InputError(f"--workers {workers}: give at least 1")
    for flag, on in (("--batch", cfg.batch), ("--max-cost", cfg.max_cost is not None),
                     ("--target-ci", cfg.target_ci is not None),
                     ("--adaptive-calls", cfg.adaptive_calls is not None)):
        if on and workers > 1:
            raise InputError(f"{flag} decides over all calls at once: run it without --workers")
    build = Path(build)
    cache = ResponseCache()
    consolidate(build / "responses.parquet")  # rows a killed evaluation left in part files
    plan = plan_requests(build, cfg, cache)
    shards = plan_shards(plan, workers)
    if workers == 1 or len(shards) <= 1 or not (plan.pending or plan.verify):
        return evaluate_build(build, cfg, cache=cache, progress=progress)  # nothing to share out
    require("distributed", "evaluate --workers (Dask)")  # said before any call
    address = address if address is not None else os.environ.get(DASK_ADDRESS_ENV)
    # a local cluster: this process is the first worker (warm: it calls at once, as one process would) while the
    # cluster of the other N-1 starts; a remote scheduler gets every shard
    own, remote = (shards[0], shards[1:]) if not address else (None, shards)
    cfg_d, where = cfg.model_dump(), str(build.resolve())
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(done[0], len(shards))

    def on_cluster() -> list[dict]:
        distributed = require("distributed", "evaluate --workers (Dask)")  # checked above: no import cost here
        client = _client(len(remote), address)
        try:
            futs = [client.submit(evaluate_shard, where, cfg_d, sh, pure=False,
                                  key=f"ctxbench-shard-{i}-{os.getpid()}") for i, sh in enumerate(remote)]
            out = []
            for f in distributed.as_completed(futs):
                out.append(f.result())
                tick()
            return out
        finally:
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()

    if progress:
        progress(0, len(shards))
    before = stored_keys(build)
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(on_cluster)
        parts = []
        if own is not None:
            parts.append(evaluate_shard(where, cfg_d, own))
            tick()
        parts += fut.result()
    own_keys = {t["request_key"] for t in plan.todo + plan.verify}
    others = others_rows(stored_keys(build) - before, own_keys, sum(p.get("new_rows", 0) for p in parts))
    return combine(parts, plan.selected, plan.already_stored, others)
