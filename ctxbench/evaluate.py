"""Evaluation: instances of a build → model calls through the gateway and cache → ``responses.parquet``.

A rerun or resume adds no row for a request key already stored and makes no call whose answer is in the response
cache; a backfill (a new model on an existing build) calls only that model. Calls sharing a context are scheduled
together so providers' prompt caches (and llama.cpp's prefix cache) reuse the shared prefix.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field, field_validator

from .analysis.filters import InstanceFilter, filter_instances
from .errors import InputError
from .hashing import canonical_json
from .incremental import build_hash_of_dir
from .models.cache import ResponseCache, claim_owner, request_key
from .models.gateway import Gateway, RetryPolicy, cost_usd
from .models.registry import model_info
from .prompts import messages_text, render_messages
from .storage import read_table, require_build, to_table, write_parquet


class EvalConfig(BaseModel):
    """Evaluation settings (validated the same way from the CLI and the Prefect form)."""

    model: str = Field(..., min_length=1)
    base_url: str | None = None
    api_key_env: str | None = Field(None, description="environment variable holding the key for --base-url")
    concurrency: int = Field(8, ge=1)
    samples: int | None = Field(None, ge=1, description="responses per instance (default: the registry's)")
    prompt_variant: Literal["cot", "direct"] = "cot"
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1)
    per_length: int | None = Field(None, ge=1, description="evaluate a sample of N instances per context length")
    mode: str = Field("lc", description="lc (full context), rag (retrieved chunks) or lc,rag (both)")
    # RAG mode (ctxbench.retrieval): token counts in each instance's own tokenizer
    rag_tokens: list[int] | None = Field(None, description="retrieval budgets in tokens, one RAG run each "
                                                            "(default: top_k chunks)")
    chunk_tokens: int = Field(600, ge=1)
    chunk_overlap: int = Field(100, ge=0)
    top_k: int = Field(5, ge=1)
    retriever: Literal["hybrid", "bm25", "dense"] = "hybrid"
    embedding_model: str | None = None
    # instance filters (LURCH inclusion criteria; ctxbench.analysis.filters), applied before the per-length sample
    language: str | None = Field(None, description="keep contexts in this langdetect language (e.g. en, zh)")
    question_language: str | None = Field(None, description="keep questions in this langdetect language")
    min_context_tokens: int | None = Field(None, ge=0, description="keep contexts of at least N tokens")
    max_context_tokens: int | None = Field(None, ge=1, description="keep contexts of at most N tokens")
    exclude_closed_book: bool = Field(False, description="leave out instances flagged by `ctxbench screen`")
    max_retries: int = Field(6, ge=0, description="retries of a call after transient errors (429, 5xx, resets, "
                                                   "timeouts): its retry budget")
    retry_base_delay_s: float = Field(0.5, ge=0.0, description="first backoff delay; doubles per retry (full jitter)")
    retry_max_delay_s: float = Field(30.0, ge=0.0, description="longest backoff delay (Retry-After may ask more)")
    timeout_s: float = Field(600.0, gt=0.0, description="seconds one attempt may take")
    pause_after: int = Field(3, ge=1, description="consecutive calls past their retry budget that mean a provider "
                                                  "outage: the evaluation pauses, resumable, instead of going on")
    seed: int = 0

    @field_validator("mode")
    @classmethod
    def _modes(cls, v: str) -> str:
        ms = list(dict.fromkeys(m.strip().lower() for m in v.split(",") if m.strip()))
        bad = [m for m in ms if m not in ("lc", "rag")]
        if not ms or bad:
            raise ValueError(f"mode must be lc, rag or lc,rag (got {v!r})")
        return ",".join(ms)

    @property
    def modes(self) -> list[str]:
        """The modes to evaluate, e.g. ``["lc", "rag"]``."""
        return self.mode.split(",")

    def retrieval_configs(self) -> list:
        """One :class:`~ctxbench.retrieval.RetrievalConfig` per retrieval budget (or one for top_k)."""
        from .retrieval import RetrievalConfig

        return [RetrievalConfig(chunk_tokens=self.chunk_tokens, chunk_overlap=self.chunk_overlap, top_k=self.top_k,
                                rag_tokens=b, retriever=self.retriever, embedding_model=self.embedding_model)
                for b in (self.rag_tokens or [None])]


@dataclass
class EvalSummary:
    """Counts of one evaluation run."""

    selected: int = 0
    already_stored: int = 0
    from_cache: int = 0
    calls: int = 0
    over_length: int = 0
    errors: int = 0
    unfinished: int = 0
    retries: int = 0
    retry_delay_s: float = 0.0
    new_rows: int = 0
    status: str = "complete"  # complete | incomplete (calls left unfinished: rerun) | paused (provider outage)
    taken_by_others: int = 0  # answers another worker sharing the cache called for (stored here as cached rows)
    notes: list[str] = field(default_factory=list)


def select_instances(tbl: pa.Table, per_length: int | None, seed: int = 0) -> pa.Table:
    """All instances, or ``per_length`` per context length chosen by SHA-256 of (seed, instance_id)."""
    if not per_length:
        return tbl
    ids = tbl.column("instance_id").to_pylist()
    lens = tbl.column("target_tokens").to_pylist()
    by_len: dict[int, list[tuple[str, int]]] = {}
    for i, (iid, L) in enumerate(zip(ids, lens)):
        by_len.setdefault(L, []).append((hashlib.sha256(f"{seed}|{iid}".encode()).hexdigest(), i))
    keep = sorted(i for L in by_len for _, i in sorted(by_len[L])[:per_length])
    return tbl.take(keep)


def select_for_model(build_dir: Path, tbl: pa.Table, model: str) -> pa.Table:
    """The rows of ``tbl`` (instances of the build) that ``model`` answers, as the build's track selects them
    (:meth:`ctxbench.tracks.base.Track.select_for_model`; e.g. a sizing model answers its own haystacks only)."""
    from .tracks.base import track_of_build

    keep = track_of_build(build_dir).select_for_model(build_dir, model)
    if keep is None:
        return tbl
    return tbl.filter(pa.array([i in keep for i in tbl.column("instance_id").to_pylist()], pa.bool_()))


def instance_filter(cfg: EvalConfig) -> InstanceFilter:
    """The instance filter an evaluation's settings ask for."""
    return InstanceFilter(cfg.language, cfg.question_language, cfg.min_context_tokens, cfg.max_context_tokens,
                          cfg.exclude_closed_book)


def _append_responses(path: Path, rows: list[dict]) -> None:
    """Append rows to ``responses.parquet`` under an exclusive file lock (several evaluations of one build may
    run at once), skipping request keys another writer stored meanwhile."""
    if not rows:
        return
    import fcntl

    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            new = to_table("responses", rows)
            if path.exists():
                old = pq.read_table(path)
                have = set(old.column("request_key").to_pylist())
                new = new.filter(pa.array([k not in have for k in new.column("request_key").to_pylist()]))
                new = pa.concat_tables([old, new.select(old.column_names)
                                        if set(old.column_names) == set(new.column_names) else new],
                                       promote_options="default")
            write_parquet(new, path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass
class _Plan:
    """Requests of an evaluation: those not yet stored, split into cache hits and those needing a call."""

    selected: int
    already_stored: int
    hits: list[dict]
    pending: list[dict]
    max_tokens: int
    todo: list[dict]  # every request not yet stored (hits and pending), with its messages


def _plan(build_dir: Path, cfg: EvalConfig, cache: ResponseCache) -> _Plan:
    ipath = require_build(build_dir) / "instances.parquet"
    if not (build_dir / "manifest.json").exists():
        raise InputError(f"{build_dir} holds an unfinished build (no manifest.json, which is written last): "
                         f"run the same `ctxbench build` again to complete it")
    bhash = build_hash_of_dir(build_dir)  # stored with every response: results of builds are never mixed
    info = model_info(cfg.model)
    K = cfg.samples or info.default_samples
    max_tokens = cfg.max_tokens or info.max_output_tokens
    temperature = info.fixed_temperature if info.fixed_temperature is not None else cfg.temperature
    rag = "rag" in cfg.modes
    cols = ["instance_id", "context", "question", "target_tokens"] + (["tokenizer", "evidence_spans"] if rag else [])
    have = set(pq.read_schema(ipath).names)
    cols += [c for c in ("benchmark", "context_format") if c in have]  # prompt per benchmark/format
    tbl = select_for_model(build_dir, pq.read_table(ipath, columns=cols), cfg.model)
    tbl = select_instances(filter_instances(build_dir, tbl, instance_filter(cfg)), cfg.per_length, cfg.seed)
    stored = set(read_table(build_dir / "responses.parquet", "responses").column("request_key").to_pylist())
    variants: list[tuple[str, Any]] = [(m, rc) for m in cfg.modes
                                       for rc in ([None] if m == "lc" else cfg.retrieval_configs())]
    todo, already, seen = [], 0, set()
    for row in tbl.to_pylist():
        iid, ctx, q = row["instance_id"], row["context"], row["question"]
        for mode, rc in variants:
            extra: dict = {}
            text = ctx
            if rc is not None:  # RAG: the retrieved chunks instead of the context (index built once per context)
                from .retrieval import retrieve

                r = retrieve(ctx, q, row["tokenizer"], rc, json.loads(row["evidence_spans"] or "[]"))
                text = r.text
                extra = {"rag_tokens": rc.rag_tokens, "retrieved_tokens": r.retrieved_tokens,
                         "retrieval_recall": r.recall,
                         "retrieval": canonical_json({**r.record(), "config": rc.model_dump()})}
            msgs = render_messages(text, q, cfg.prompt_variant, cfg.model, rag=rc is not None,
                                   benchmark=row.get("benchmark"), context_format=row.get("context_format"))
            for k in range(K):
                sampling = {"temperature": temperature, "seed": k}
                key = request_key(cfg.model, msgs, sampling, max_tokens, k)
                if key in stored:
                    already += 1
                    continue
                if key in seen:  # e.g. two budgets that both retrieve the whole context: one request
                    continue
                seen.add(key)
                todo.append({"request_key": key, "instance_id": iid, "model": cfg.model, "mode": mode, "sample": k,
                             "build_hash": bhash,
                             "prompt_variant": cfg.prompt_variant, **extra, "_messages": msgs, "_sampling": sampling,
                             "_ctx": hashlib.sha256(text.encode()).hexdigest(), "_context": text})
    found = cache.get_many([t["request_key"] for t in todo])
    hits = [{**_public(t), **found[t["request_key"]], "cached": True, "retries": 0}
            for t in todo if t["request_key"] in found]
    pending = [t for t in todo if t["request_key"] not in found]
    return _Plan(tbl.num_rows, already, hits, pending, max_tokens, todo)


def unanswered_calls(build_dir: str | Path, cfg: EvalConfig, cache: ResponseCache | None = None) -> int:
    """Requests of ``cfg`` on the build whose answer is neither stored nor in the response cache (what a rerun
    would call): 0 when the evaluation is complete."""
    return len(_plan(Path(build_dir), cfg, cache if cache is not None else ResponseCache()).pending)


def _public(t: dict) -> dict:
    return {k: v for k, v in t.items() if not k.startswith("_")}


def evaluate_build(build_dir: str | Path, cfg: EvalConfig, count_tokens: Callable[[str], int] | None = None,
                   cache: ResponseCache | None = None, progress: Callable[[int, int], None] | None = None,
                   flush_every: int = 8, server: Callable[[], Any] | None = None) -> EvalSummary:
    """Evaluate ``cfg.model`` on the build in ``build_dir``, appending to ``responses.parquet``.

    ``count_tokens`` counts prompt tokens in the model's tokenizer (for the over-length pre-check where the
    window is known). ``server`` makes a context manager for a local model server (with ``base_url`` and
    ``count_tokens``), entered only when some request is neither stored nor cached, so a fully cached rerun
    starts nothing and calls nothing. Raises InputError when the directory holds no build.
    """
    build_dir = Path(build_dir)
    cache = cache if cache is not None else ResponseCache()  # an empty cache is falsy (__len__)
    info = model_info(cfg.model)
    if count_tokens is None and info.tokenizer and info.tokenizer != "local-server":
        from .tokenizers import get_tokenizer

        count_tokens = get_tokenizer(info.tokenizer).count
    plan = _plan(build_dir, cfg, cache)
    s = EvalSummary(selected=plan.selected, already_stored=plan.already_stored, from_cache=len(plan.hits))
    rpath = build_dir / "responses.parquet"
    _append_responses(rpath, plan.hits)
    s.new_rows += len(plan.hits)
    if not plan.pending:
        return s
    if server is not None:
        with server() as srv:
            cfg = cfg.model_copy(update={"base_url": srv.base_url, "concurrency": 1})
            _call_pending(plan, cfg, info, srv.count_tokens, cache, rpath, s, progress, flush_every)
    else:
        _call_pending(plan, cfg, info, count_tokens, cache, rpath, s, progress, flush_every)
    return s


def _call_pending(plan: _Plan, cfg: EvalConfig, info, count_tokens, cache, rpath, s, progress, flush_every) -> None:
    rows, calls = [], []
    for t in plan.pending:
        if info.window and count_tokens is not None:
            n = count_tokens(messages_text(t["_messages"]))
            limit = int(info.window * (1 - info.safety_margin)) - plan.max_tokens
            if n > limit:
                s.over_length += 1
                rows.append({**_public(t), "status": "over_length", "cached": False, "retries": 0,
                             "prompt_tokens": n,
                             "error": f"prompt of {n} tokens + {plan.max_tokens} output tokens exceeds the window "
                                      f"of {info.window} tokens of {cfg.model}"})
                continue
        calls.append(t)
    _append_responses(rpath, rows)
    s.new_rows += len(rows)
    if calls:
        calls.sort(key=lambda t: (t["_ctx"], t["sample"]))  # calls sharing a context run together
        _run_calls(calls, cfg, plan.max_tokens, cache, rpath, s, progress, flush_every)


CLAIM_LEASE_S = 60.0  # a worker's claim on a request key lapses this long after its last heartbeat


def _run_calls(calls: list[dict], cfg: EvalConfig, max_tokens: int, cache: ResponseCache, rpath: Path,
               s: EvalSummary, progress, flush_every: int, lease_s: float = CLAIM_LEASE_S) -> None:
    """Make the calls, ``cfg.concurrency`` at a time. Each call first claims its request key in the shared response
    cache, so several workers evaluating at once (processes, Dask workers) never make the same call twice: a key
    claimed by another worker is waited for (its answer is then stored here as a cached row) or taken over when
    that worker's lease lapses. After ``cfg.pause_after`` consecutive calls past their retry budget (a provider
    outage), no new call starts: the unfinished calls stay unstored and ``s.status`` is ``paused``."""
    cost_usd(cfg.model, 0, 0)  # loads litellm's price table now, not inside the event loop at the first answer
    owner = claim_owner()
    buf: list[dict] = []
    done = 0
    exhausted_in_a_row = 0

    async def main() -> None:
        nonlocal done
        stop = asyncio.Event()
        slots = asyncio.Semaphore(cfg.concurrency)
        gw = Gateway(cfg.model, cfg.base_url, cfg.concurrency,
                     RetryPolicy(max_retries=cfg.max_retries, base_delay_s=cfg.retry_base_delay_s,
                                 max_delay_s=cfg.retry_max_delay_s, timeout_s=cfg.timeout_s),
                     api_key_env=cfg.api_key_env, stop=stop)

        def finish(row: dict | None) -> None:
            nonlocal done
            if row is not None:
                buf.append(row)
            done += 1
            if progress:
                progress(done, len(calls))
            if len(buf) >= flush_every:
                rows = buf[:]
                buf.clear()
                _append_responses(rpath, rows)
                s.new_rows += len(rows)

        deferred: list[dict] = []

        async def one(t: dict, wait: bool = False) -> None:
            nonlocal exhausted_in_a_row
            key, base = t["request_key"], _public(t)
            while True:
                if stop.is_set():
                    s.unfinished += 1
                    return finish(None)
                async with slots:
                    state = cache.claim(key, owner, lease_s)
                    if state == "claimed":
                        res = await gw.complete(t["_messages"], max_tokens, t["_sampling"],
                                                random.Random(t["request_key"]))
                        break
                if state == "cached":  # another worker answered it
                    s.taken_by_others += 1
                    hit = cache.get(key)
                    return finish({**base, **hit, "cached": True, "retries": 0})
                if not wait:  # taken by another worker: do the free calls first, come back at the end
                    deferred.append(t)
                    return
                await asyncio.sleep(min(0.25, lease_s / 4))  # wait for its answer or for its lease to lapse
            s.retries += res.retries
            s.retry_delay_s += res.retry_delay_s
            if res.transient_failure or res.status == "config_error":
                cache.release(key, owner)  # not stored: a rerun (or another worker) retries it
                s.unfinished += 1
                if res.transient_failure and not stop.is_set():
                    s.calls += 1
                    exhausted_in_a_row += 1
                    if exhausted_in_a_row >= cfg.pause_after:
                        stop.set()
                        s.status = "paused"
                        s.notes.insert(0, f"paused: {exhausted_in_a_row} calls in a row failed past their retry "
                                          f"budget ({cfg.max_retries} retries), the provider looks down; nothing "
                                          f"was marked wrong, rerun the same evaluation to resume (only the "
                                          f"missing calls are made). Last error: {res.error}")
                elif res.status == "config_error":
                    s.calls += 1
                if res.retries or res.status == "config_error" or not stop.is_set():
                    s.notes.append(f"{t['instance_id']} (sample {t['sample']}): {res.error}")
                return finish(None)
            s.calls += 1
            exhausted_in_a_row = 0
            if res.status in ("ok", "over_length", "refused_by_provider"):
                cache.put(key, cfg.model, res.payload())
            else:
                cache.release(key, owner)
            if res.status == "over_length":
                s.over_length += 1
            elif res.status == "error":
                s.errors += 1
                s.notes.append(f"{t['instance_id']} (sample {t['sample']}): {res.error}")
            finish({**base, **res.payload(), "cached": False, "retries": res.retries})

        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(lease_s / 3)
                cache.renew(owner, lease_s)

        hb = asyncio.create_task(heartbeat())
        try:
            await asyncio.gather(*(one(t) for t in calls))
            while deferred:
                waiting = deferred[:]
                deferred.clear()
                await asyncio.gather(*(one(t, wait=True) for t in waiting))
        finally:
            hb.cancel()
            await gw.aclose()

    try:
        asyncio.run(main())
    finally:
        _append_responses(rpath, buf)
        s.new_rows += len(buf)
        if s.status != "paused" and s.unfinished:
            s.status = "incomplete"
