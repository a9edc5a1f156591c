"""Evaluation: instances of a build → model calls through the call runner (gateway, cache, claims, retries,
outage pause: :mod:`ctxbench.models.runner`) → ``responses.parquet``.

A rerun or resume adds no row for a request key already stored and makes no call whose answer is in the response
cache; a backfill (a new model on an existing build) calls only that model. Calls sharing a context are scheduled
together so providers' prompt caches (and llama.cpp's prefix cache) reuse the shared prefix.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field, field_validator

from ctxbench.analysis.filters import InstanceFilter, filter_instances, kept_ids
from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.core.hashing import canonical_json
from ctxbench.core.redact import redact
from ctxbench.models.cache import ResponseCache, endpoint_id, key_endpoint, request_key
from ctxbench.models.deployment import check_endpoint, is_deployment
from ctxbench.models.deployment import shown as shown_url
from ctxbench.models.gateway import NOT_ATTEMPTED, RetryPolicy
from ctxbench.models.runner import (CLAIM_LEASE_S, WINDOW_DEPENDENT, CallRunner, Outcome, Request, asked_again,
                            truncation_check_soon)
from ctxbench.models.registry import model_info
from ctxbench.models.prompts import messages_text, render_messages, shared_prefix
from ctxbench.core.storage import (TableAppender, build_hash_of_dir, consolidate, read_parquet, read_table,
                                   require_build)
from ctxbench.core import progress
from ctxbench.core.progress import emit
from ctxbench.core.track import track_of_build
from ctxbench.models.batch import BatchStore
from ctxbench.models.effort import apply_effort, budget_of, check_budget, parse_efforts, provider_of
from ctxbench.models.probe import forecast_seconds, probe_speed
from ctxbench.retrieval import RetrievalConfig, retrieve
from ctxbench.retrieval.dense import require_dense
from ctxbench.run.repl import ReplConfig, evaluate_repl, repl_request
from ctxbench.run.shard import restrict_plan
from ctxbench.run.spend import cap_prices, evaluate_in_waves
from ctxbench.tokenizers import get_tokenizer


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
    per_length: int | None = Field(None, ge=1, description="evaluate a sample of N instances per context length "
                                   "(per source tier where the build has one, e.g. LaRA's 32k/128k)")
    share_contexts: bool = Field(False, description="draw the per-length sample from as few contexts as possible "
                                 "(questions on one context share its prefix: a local server or a provider's prompt "
                                 "cache processes the context once); off, the sample spreads over contexts")
    mode: str = Field("lc", description="lc (full context), rag (retrieved chunks), repl (the context as a REPL "
                                        "variable, ctxbench.run.repl) or several, comma-separated (lc,rag,repl)")
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
    max_retry_after_s: float = Field(300.0, ge=0.0, description="longest Retry-After honoured; a server asking for "
                                                                "longer pauses the evaluation (resumable) with "
                                                                "its hint in the message")
    batch: bool = Field(False, description="send the calls through the provider's batch API (OpenAI, Anthropic, or "
                                           "an OpenAI-compatible --base-url with /v1/files and /v1/batches): "
                                           "batch prices, answers within a day; a rerun polls, never resends")
    batch_poll_s: float = Field(30.0, gt=0.0, description="seconds between polls of a running batch")
    batch_wait_s: float | None = Field(None, ge=0.0, description="stop waiting for running batches after this "
                                                                 "many seconds (status pending; rerun to collect); "
                                                                 "default: wait until they end")
    seed: int = 0
    # issue 24 (ctxbench.run.spend): a hard spend cap per invocation, prices for it, and sequential stopping
    max_cost: float | None = Field(None, gt=0.0, description="USD this invocation may spend at most (--max-cost)")
    price: tuple[float, float] | None = Field(None, description="(input, output) USD per million tokens (--price)")
    target_ci: float | None = Field(None, gt=0.0, le=0.5, description="stop once the 95% confidence-sequence "
                                                                       "half-width per context length is <= this")
    # issue 34 (ctxbench.run.adaptive): at most N calls, the most informative instances first
    adaptive_calls: int | None = Field(None, ge=1, description="ask at most N calls, each next instance the one of "
                                       "maximum information at the model's current ability (item response theory)")
    adaptive_runs: list[str] | None = Field(None, description="other builds whose stored answers also calibrate "
                                            "the items (--adaptive-calls)")
    # reasoning effort (issue 25, ctxbench.models.effort): one run per effort, part of the request key
    reasoning_effort: list[str] | None = Field(None, description="reasoning efforts, one run each: any of none, "
                                               "low, medium, high (comma-separated); mapped to each provider's field")
    thinking_budget: int | None = Field(None, ge=0, description="reasoning tokens allowed (Anthropic budget_tokens, "
                                        "Gemini thinkingBudget); default: each effort's")
    # issue 35 (ctxbench.run.repl): --mode repl's sub-model, steps, sandbox and budgets
    repl: ReplConfig = Field(default_factory=ReplConfig, description="settings of --mode repl")

    @field_validator("reasoning_effort", mode="before")
    @classmethod
    def _efforts(cls, v: Any) -> list[str] | None:
        return parse_efforts(v)

    @field_validator("base_url")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is not None and not is_deployment(v):  # several replicas: each checked as the deployment is read
            try:
                check_endpoint(v, "base_url", "write it like http://127.0.0.1:8000/v1")
            except InputError as e:  # raised past pydantic (not a ValueError): its error, also where a flow's
                raise CtxbenchError(str(e)) from None  # parameters hold the config, would show the URL unredacted
        return v

    @field_validator("mode")
    @classmethod
    def _modes(cls, v: str) -> str:
        ms = list(dict.fromkeys(m.strip().lower() for m in v.split(",") if m.strip()))
        bad = [m for m in ms if m not in ("lc", "rag", "repl")]
        if not ms or bad:
            raise ValueError(f"mode must be lc, rag, repl or several of them comma-separated, e.g. lc,rag "
                             f"(got {v!r})")
        return ",".join(ms)

    @property
    def modes(self) -> list[str]:
        """The modes to evaluate, e.g. ``["lc", "rag"]``."""
        return self.mode.split(",")

    def retrieval_configs(self) -> list:
        """One :class:`~ctxbench.retrieval.RetrievalConfig` per retrieval budget (or one for top_k)."""
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
    truncated: int = 0  # answers of a server that read fewer prompt tokens than were sent (stored, not scored)
    cut_off: int = 0    # replies the output budget ended (finish_reason length-like): stored, scored 0
    refused: int = 0    # refused_by_provider (a content filter): stored, not scored
    errors: int = 0  # calls stored as failed (a status the same command asks again: models.runner.asked_again)
    failed: list[str] = field(default_factory=list)  # those calls, ``instance_id: reason``, in the order they ended
    unrecognised: int = 0   # errors: 200 answers of a shape the gateway does not know (counted in errors too)
    empty_replies: int = 0  # errors: 200 answers with no reply after one more try (counted in errors too)
    empty_generated: int = 0  # empty_reply: tokens generated, no text returned, after one more try (issue 30)
    inband_errors: int = 0    # errors: a provider failure inside a 200 (finish_reason error) that persisted
    unfinished_finish: dict = field(default_factory=dict)  # errors: finish reason (as sent) -> replies not finished
    prefix_cache_hits: int = 0   # short prompt counts read as prompt-cache hits of a prefix sent in this run
    truncation_unclear: int = 0  # truncated rows where a prompt-cache hit could not be ruled out
    replaced_errors: int = 0  # stored error rows asked again by this run (their new rows replace them)
    max_tokens: int | None = None  # the output budget the requests asked for
    unfinished: int = 0
    retries: int = 0
    retry_delay_s: float = 0.0
    new_rows: int = 0
    # complete | incomplete (calls left unfinished: rerun) | paused (provider outage) | pending (--batch: batches
    # still running when --batch-wait ran out: rerun to collect) | config_error (the first calls were all refused
    # alike: the run stopped; notes[0] names the setting to change)
    status: str = "complete"
    taken_by_others: int = 0  # answers another worker sharing the cache called for (stored here as cached rows)
    others_rows: int = 0  # rows another process evaluating this build added to responses.parquet during this run
    notes: list[str] = field(default_factory=list)
    empty_reason: str | None = None  # selected == 0: which selection or filter left no instance (why_empty)
    batches: list[str] = field(default_factory=list)  # --batch: the provider's ids of the batches sent or polled
    not_asked: int = 0  # --max-cost / --target-ci: calls not sent (a rerun with a larger cap or smaller target asks)
    spent_usd: float | None = None  # --max-cost: USD spent by this invocation (ctxbench.run.spend.Ledger)


def select_instances(tbl: pa.Table, per_length: int | None, seed: int = 0, share_contexts: bool = False) -> pa.Table:
    """All instances, or ``per_length`` per context length chosen by SHA-256 of (seed, instance_id). The length
    of an instance is its ``source_tier`` where the build has one (an import whose files each have their own
    measured ``target_tokens``, e.g. LaRA's ``32k``/``128k``: the tier the report groups by, see
    :mod:`ctxbench.analysis.rag`), else its ``target_tokens``.

    ``share_contexts``: the sample of a length is drawn from as few contexts as possible: its contexts in
    descending order of their instance count (ties by the smallest instance hash among theirs), each
    context's instances by the hash above, until ``per_length`` are taken (the default run's embedded model then
    processes each context once: the calls of a context run together and share its prefix)."""
    if not per_length:
        return tbl
    ids = tbl.column("instance_id").to_pylist()
    lens = tbl.column("target_tokens").to_pylist()
    if "source_tier" in tbl.column_names:
        lens = [t if t else n for t, n in zip(tbl.column("source_tier").to_pylist(), lens)]
    ctxs = tbl.column("context").to_pylist() if share_contexts else [None] * len(ids)
    by_len: dict[object, dict[object, list[tuple[str, int]]]] = {}
    for i, (iid, L, c) in enumerate(zip(ids, lens, ctxs)):
        key = hashlib.sha256(c.encode()).digest() if c is not None else i
        by_len.setdefault(L, {}).setdefault(key, []).append((hashlib.sha256(f"{seed}|{iid}".encode()).hexdigest(), i))
    keep = []
    for groups in by_len.values():
        if share_contexts:
            order = sorted(groups.values(), key=lambda g: (-len(g), min(g)[0]))
            keep += [i for g in order for _, i in sorted(g)][:per_length]
        else:
            keep += [i for _, i in sorted(g[0] for g in groups.values())][:per_length]
    return tbl.take(sorted(keep))


def select_for_model(build_dir: Path, tbl: pa.Table, model: str) -> pa.Table:
    """The rows of ``tbl`` (instances of the build) that ``model`` answers, as the build's track selects them
    (:meth:`ctxbench.core.track.Track.select_for_model`; e.g. a sizing model answers its own haystacks only)."""
    keep = track_of_build(build_dir).select_for_model(build_dir, model)
    if keep is None:
        return tbl
    return tbl.filter(pa.array([i in keep for i in tbl.column("instance_id").to_pylist()], pa.bool_()))


def why_empty(build_dir: Path, n_build: int, n_model: int, model: str, f: InstanceFilter) -> str:
    """Why an evaluation selected no instance, naming the selection or filter that emptied it: the build has none,
    the track's selection for ``model`` leaves none, or each filter's count alone (``--language xx keeps 0 of
    16``, with the languages the build holds), or the filters together."""
    if n_build == 0:
        return f"the build {build_dir} has no instance: rebuild it (see its quarantine.parquet for what was left out)"
    if n_model == 0:
        return f"the build's track gives {model} none of its {n_build} instances to answer"
    path = build_dir / "instances.parquet"
    have = set(pq.read_schema(path).names)
    parts = []
    for flag, one in (("--language", InstanceFilter(language=f.language)),
                      ("--question-language", InstanceFilter(question_language=f.question_language)),
                      ("--min-context-tokens", InstanceFilter(min_context_tokens=f.min_context_tokens)),
                      ("--max-context-tokens", InstanceFilter(max_context_tokens=f.max_context_tokens)),
                      ("--exclude-closed-book", InstanceFilter(exclude_closed_book=f.exclude_closed_book))):
        if not one.active():
            continue
        value = {"--language": f.language, "--question-language": f.question_language,
                 "--min-context-tokens": f.min_context_tokens, "--max-context-tokens": f.max_context_tokens,
                 "--exclude-closed-book": ""}[flag]
        n = len(kept_ids(build_dir, one))
        what = f"{flag} {value}".strip() + f" keeps {n} of {n_build}"
        col = {"--language": "language", "--question-language": "question_language",
               "--min-context-tokens": "context_tokens", "--max-context-tokens": "context_tokens"}.get(flag)
        if n == 0 and col in have:
            vals = [v for v in pq.read_table(path, columns=[col]).column(col).to_pylist() if v is not None]
            if col == "context_tokens" and vals:
                what += f" (context lengths in the build: {min(vals):,} to {max(vals):,} tokens)"
            elif vals:
                counts = Counter(vals).most_common(8)
                what += " (in the build: " + ", ".join(f"{k} {c}" for k, c in counts) + ")"
        parts.append((n, what))
    if any(n == 0 for n, _ in parts):
        return "; ".join(w for n, w in parts if n == 0)
    return ("the filters together keep none: " + "; ".join(w for _, w in parts)) if parts else \
        f"no instance of {n_model} selected"


def instance_filter(cfg: EvalConfig) -> InstanceFilter:
    """The instance filter an evaluation's settings ask for."""
    return InstanceFilter(cfg.language, cfg.question_language, cfg.min_context_tokens, cfg.max_context_tokens,
                          cfg.exclude_closed_book)


@dataclass
class Plan:
    """Requests of an evaluation (:func:`plan_requests`): those not yet answered (no row, or an ``error`` row, which
    the new row replaces: ``_replaces_error``), split into cache hits (rows to append as they are) and ``pending``
    (calls to make, through the runner); ``verify``: stored over-length or
    truncated rows of a server at a base URL, asked again when the server's window has changed since (their rows
    are then replaced); ``endpoint``: the endpoint keyed in the request keys."""

    selected: int
    already_stored: int
    hits: list[dict]
    pending: list[dict]
    max_tokens: int
    todo: list[dict]  # every request not yet stored (hits and pending), with its messages
    verify: list[dict] = field(default_factory=list)
    endpoint: str | None = None
    empty_reason: str | None = None  # selected == 0: why (:func:`why_empty`)
    stored: list[dict] = field(default_factory=list)  # the requests already stored (``--target-ci`` counts them)
    error_keys: set = field(default_factory=set)  # request keys of stored error rows asked again (replaced)


def plan_requests(build_dir: str | Path, cfg: EvalConfig, cache: ResponseCache) -> Plan:
    """The requests ``cfg`` makes on the build (the same list for ``evaluate``, ``--dry-run``, the luigi task's
    completeness and resumes): one per selected instance × mode × retrieval budget × sample, keyed by
    :func:`ctxbench.models.cache.request_key` (model, endpoint of ``cfg.base_url``, messages, sampling, max tokens,
    sample). Raises InputError when the directory holds no finished build."""
    build_dir = Path(build_dir)
    ipath = require_build(build_dir) / "instances.parquet"
    if not (build_dir / "manifest.json").exists():
        raise InputError(f"{build_dir} holds an unfinished build (no manifest.json, which is written last): "
                         f"run the same `ctxbench build` again to complete it")
    bhash = build_hash_of_dir(build_dir)  # stored with every response: results of builds are never mixed
    info = model_info(cfg.model)
    K = cfg.samples or info.default_samples
    max_tokens = cfg.max_tokens or info.max_output_tokens
    temperature = info.fixed_temperature if info.fixed_temperature is not None else cfg.temperature
    try:
        endpoint = endpoint_id(cfg.model, cfg.base_url)
        keyed = key_endpoint(cfg.model, cfg.base_url)  # the embedded model's keys name its runtime
    except ValueError as e:
        raise InputError(str(e)) from None
    rag = "rag" in cfg.modes
    if rag and cfg.retriever != "bm25":  # said before any index is built or any call made, not as a traceback
        require_dense(cfg.embedding_model, f"--mode {cfg.mode} --retriever {cfg.retriever}")
    cols = ["instance_id", "context", "question", "target_tokens"] + (["tokenizer", "evidence_spans"] if rag else [])
    have = set(pq.read_schema(ipath).names)
    cols += [c for c in ("benchmark", "context_format") if c in have]  # prompt per benchmark/format
    if "repl" in cfg.modes:  # the root model is told the context's length in tokens
        cols += [c for c in ("tokenizer", "context_tokens") if c in have and c not in cols]
    every = read_parquet(ipath, columns=cols)
    tbl = select_for_model(build_dir, every, cfg.model)
    n_model = tbl.num_rows
    tbl = select_instances(filter_instances(build_dir, tbl, instance_filter(cfg)), cfg.per_length, cfg.seed,
                           cfg.share_contexts)
    empty = why_empty(build_dir, every.num_rows, n_model, cfg.model, instance_filter(cfg)) if not tbl.num_rows \
        else None
    stored_rows = read_table(build_dir / "responses.parquet", "responses")
    # an error row is never an answer: the same command asks it again and the new row replaces it
    st_all = stored_rows.column("status").to_pylist() if stored_rows.num_rows else []
    keys_all = stored_rows.column("request_key").to_pylist() if stored_rows.num_rows else []
    failed = {k for k, st in zip(keys_all, st_all) if asked_again(st)}
    stored = set(keys_all) - failed
    windowed = {}  # stored over-length / truncated rows of a server at a base URL: checked against its window
    if endpoint is not None and stored_rows.num_rows:
        st = stored_rows.column("status").to_pylist()
        sw = (stored_rows.column("server_window").to_pylist() if "server_window" in stored_rows.column_names
              else [None] * len(st))
        windowed = {k: (s, w) for k, s, w in zip(stored_rows.column("request_key").to_pylist(), st, sw)
                    if s in WINDOW_DEPENDENT}
    variants: list[tuple[str, Any]] = [(m, rc) for m in cfg.modes
                                       for rc in ([None] if m in ("lc", "repl") else cfg.retrieval_configs())]

    efforts: list[str | None] = list(cfg.reasoning_effort or [None])
    for eff in efforts:  # a budget the provider refuses stops the run before any call
        if budget_of(eff, cfg.thinking_budget) is None:
            continue  # no reasoning budget: nothing to refuse (and no provider lookup: litellm takes 5 s to load)
        try:
            check_budget(provider_of(cfg.model, cfg.base_url), eff, cfg.thinking_budget, max_tokens)
        except ValueError as e:
            raise InputError(str(e)) from None
    todo, check, already, seen, kept = [], [], 0, set(), []
    for row in tbl.to_pylist():
        iid, ctx, q = row["instance_id"], row["context"], row["question"]
        for mode, rc in variants:
            extra: dict = {}
            text = ctx
            if rc is not None:  # RAG: the retrieved chunks instead of the context (index built once per context)
                r = retrieve(ctx, q, row["tokenizer"], rc, json.loads(row["evidence_spans"] or "[]"))
                text = r.text
                extra = {"rag_tokens": rc.rag_tokens, "retrieved_tokens": r.retrieved_tokens,
                         "retrieval_recall": r.recall,
                         "retrieval": canonical_json({**r.record(), "config": rc.model_dump()})}
            if mode != "repl":
                msgs = render_messages(text, q, cfg.prompt_variant, cfg.model, rag=rc is not None,
                                       benchmark=row.get("benchmark"), context_format=row.get("context_format"))
            else:  # the context is the REPL's variable, not in the prompt (ctxbench.run.repl)
                msgs = []
            ctx_hash = hashlib.sha256(text.encode()).hexdigest()
            prefix = hashlib.sha256(shared_prefix(msgs, text).encode()).hexdigest()  # the provider-cacheable part
            for eff, k in ((e, k) for e in efforts for k in range(K)):
                # the effort's provider fields join the sampling parameters (so the request key): none, none added
                sampling = apply_effort({"temperature": temperature, "seed": k}, cfg.model, cfg.base_url, eff,
                                        cfg.thinking_budget)
                if mode == "repl":
                    msgs, key = repl_request(cfg.model, q, ctx, _context_tokens(row), sampling, max_tokens, k,
                                             keyed, cfg.repl)
                else:
                    key = request_key(cfg.model, msgs, sampling, max_tokens, k, keyed)
                if key in seen:  # e.g. two budgets that both retrieve the whole context: one request
                    continue
                seen.add(key)
                t = {"request_key": key, "instance_id": iid, "model": cfg.model, "mode": mode, "sample": k,
                     "build_hash": bhash, "prompt_variant": cfg.prompt_variant, **extra, "_messages": msgs,
                     "_sampling": sampling, "_ctx": ctx_hash, "_prefix": prefix, "_context": text}
                if eff is not None or cfg.thinking_budget is not None:
                    t.update(reasoning_effort=eff, thinking_budget=cfg.thinking_budget)
                if key in stored:
                    already += 1
                    kept.append(t)
                    if key in windowed:
                        check.append({**t, "_replaces": windowed[key]})
                    continue
                if key in failed:
                    t["_replaces_error"] = True
                todo.append(t)
    found = cache.get_many([t["request_key"] for t in todo + check])
    hits, pending = [], []
    for t in todo:
        hit = found.get(t["request_key"])
        if hit is None:
            pending.append(t)
        elif endpoint is not None and hit.get("status") in WINDOW_DEPENDENT:
            pending.append({**t, "_hit": True})  # replayed by the runner only while the server's window holds
        else:
            hits.append({**_public(t), **hit, "cached": True, "retries": 0})
    verify = [t for t in check if t["request_key"] in found]  # answered by the server (not a registry pre-check)
    return Plan(tbl.num_rows, already, hits, pending, max_tokens, todo, verify, endpoint, empty, kept,
                {t["request_key"] for t in todo if t.get("_replaces_error")})


def _context_tokens(row: dict) -> int | None:
    """An instance's context length in tokens: its ``context_tokens``, else counted in its tokenizer (None when
    it names none)."""
    if row.get("context_tokens") is not None:
        return int(row["context_tokens"])
    return get_tokenizer(row["tokenizer"]).count(row["context"]) if row.get("tokenizer") else None


def unanswered_calls(build_dir: str | Path, cfg: EvalConfig, cache: ResponseCache | None = None) -> int:
    """Requests of ``cfg`` on the build whose answer is neither stored nor in the response cache (what a rerun
    would call): 0 when the evaluation is complete."""
    plan = plan_requests(Path(build_dir), cfg, cache if cache is not None else ResponseCache())
    return sum(1 for t in plan.pending if not t.get("_hit"))


def _public(t: dict) -> dict:
    return {k: v for k, v in t.items() if not k.startswith("_")}


def evaluate_build(build_dir: str | Path, cfg: EvalConfig, count_tokens: Callable[[str], int] | None = None,
                   cache: ResponseCache | None = None, progress: Callable[[int, int], None] | None = None,
                   flush_every: int = 8, server: Callable[[], Any] | None = None,
                   contexts: set[str] | None = None) -> EvalSummary:
    """Evaluate ``cfg.model`` on the build in ``build_dir``, appending to ``responses.parquet``.

    ``count_tokens`` counts prompt tokens in the model's tokenizer (for the over-length pre-check where the
    window is known, and the silent-truncation check). ``server`` makes a context manager for a local model server
    (with ``base_url``, ``count_tokens`` and optionally ``n_ctx``), entered only when some request is neither
    stored nor cached, so a fully cached rerun starts nothing and calls nothing. Every call goes through a
    :class:`ctxbench.models.runner.CallRunner`. ``contexts``: only the requests on these contexts (hashes, one
    worker's shard: :mod:`ctxbench.run.shard`). Raises InputError when the directory holds no build.
    """
    build_dir = Path(build_dir)
    cache = cache if cache is not None else ResponseCache()  # an empty cache is falsy (__len__)
    info = model_info(cfg.model)
    if progress is None:  # the run's listeners (ctxbench.core.progress): calls answered of the calls to make
        def progress(d: int, n: int) -> None:
            emit("calls", cfg.model, d, n)
    if count_tokens is None and info.tokenizer and info.tokenizer != "local-server":
        count_tokens = get_tokenizer(info.tokenizer).count
    rpath = build_dir / "responses.parquet"
    consolidate(rpath)  # rows a killed evaluation left in part files
    before = _stored_keys(rpath)
    if cfg.max_cost is not None:  # a model without a price is refused before the prompts are rendered and counted
        cap_prices(cfg.model, cfg.price, cfg.batch)
    plan = plan_requests(build_dir, cfg, cache)
    if contexts is not None:  # one worker's shard (ctxbench.run.workers)
        plan = restrict_plan(plan, contexts)
    s = EvalSummary(selected=plan.selected, already_stored=plan.already_stored, from_cache=len(plan.hits),
                    empty_reason=plan.empty_reason)
    s.max_tokens = plan.max_tokens
    s.cut_off += sum(1 for h in plan.hits if h.get("status") == "cut_off")
    s.replaced_errors = sum(1 for t in plan.todo if t.get("_replaces_error"))
    out = TableAppender(rpath, "responses")  # each flush one part file; merged into the table at the end
    try:
        s.new_rows += out.append(plan.hits, replace={h["request_key"] for h in plan.hits
                                                     if h["request_key"] in plan.error_keys})
        repl = [t for t in plan.pending if t["mode"] == "repl"]  # answers of --mode repl: ctxbench.run.repl
        plan.pending = [t for t in plan.pending if t["mode"] != "repl"]
        if repl and cfg.batch:  # refused before any call
            raise InputError("--batch: --mode repl makes its calls one turn at a time; run it without --batch")
        if repl and cfg.adaptive_calls is not None:  # the selector picks single calls; a repl answer is many
            raise InputError("--adaptive-calls: --mode repl answers with many calls each, which the adaptive "
                             "selector cannot count; run --mode repl without --adaptive-calls")
        if not plan.pending and not plan.verify and not repl:
            emit("calls", f"{cfg.model}: every answer stored or cached", 0, 0)
            return s
        if server is not None:
            if cfg.batch:
                raise InputError(f"--batch: the embedded model {cfg.model} has no batch API; run without --batch")
            with server() as srv:
                _call_pending(plan, cfg, info, srv.count_tokens, cache, out, s, progress, flush_every,
                              base_url=srv.base_url, concurrency=1, window=getattr(srv, "n_ctx", None))
                _run_repl(repl, cfg, plan, cache, out, s, progress, srv.base_url, 1)
        else:
            _call_pending(plan, cfg, info, count_tokens, cache, out, s, progress, flush_every)
            _run_repl(repl, cfg, plan, cache, out, s, progress, cfg.base_url, cfg.concurrency)
        return s
    finally:
        out.close()
        if s.calls or s.taken_by_others or s.new_rows:  # what other processes on this build added meanwhile
            try:
                s.others_rows = len(_stored_keys(rpath) - before - out.added)
            except (OSError, ValueError):  # never hides the error the run is ending with (a full disk, ...)
                pass


def _run_repl(items: list[dict], cfg: EvalConfig, plan: Plan, cache: ResponseCache, out: TableAppender,
              s: EvalSummary, progress, base_url: str | None, concurrency: int) -> None:
    """The answers of ``--mode repl`` not yet stored (:func:`ctxbench.run.repl.evaluate_repl`), their rows
    appended to ``out`` as they end and counted in ``s``."""
    if not items:
        return
    policy = RetryPolicy(max_retries=cfg.max_retries, base_delay_s=cfg.retry_base_delay_s,
                         max_delay_s=cfg.retry_max_delay_s, timeout_s=cfg.timeout_s,
                         max_retry_after_s=cfg.max_retry_after_s)

    def store(row: dict, replaces_error: bool) -> None:
        s.new_rows += out.append([row], replace={row["request_key"]} if replaces_error else set())

    c = evaluate_repl(items, model=cfg.model, base_url=base_url, key_base_url=cfg.base_url,
                      api_key_env=cfg.api_key_env, rcfg=cfg.repl, cache=cache, policy=policy,
                      max_tokens=plan.max_tokens, concurrency=concurrency, build_dir=out.path.parent, store=store,
                      max_cost=cfg.max_cost, price=cfg.price, progress=progress)
    s.calls += c["calls"]
    s.from_cache += c["from_cache"]
    s.unfinished += c["unfinished"]
    s.not_asked += c["not_asked"]
    s.cut_off += c["statuses"].get("cut_off", 0)
    s.over_length += c["statuses"].get("over_length", 0)
    s.errors += sum(n for st, n in c["statuses"].items() if asked_again(st))
    s.notes.extend(c["notes"])
    if c.get("warning"):
        s.notes.insert(0, c["warning"])
    if "spent_usd" in c:
        s.spent_usd = (s.spent_usd or 0.0) + c["spent_usd"]
    if c["not_asked"]:
        s.status = "budget"
    elif c["unfinished"] and s.status == "complete":
        s.status = "incomplete"


def _stored_keys(path: Path) -> set:
    """The request keys ``responses.parquet`` holds (with pending parts)."""
    return set(read_table(path, "responses", columns=["request_key"]).column("request_key").to_pylist())


def _call_pending(plan: Plan, cfg: EvalConfig, info, count_tokens, cache, out: TableAppender, s: EvalSummary,
                  progress, flush_every, base_url: str | None = None, concurrency: int | None = None,
                  window: int | None = None) -> None:
    rows, calls = [], []
    pre_replace: set[str] = set()
    counted: dict[int, int] = {}
    for t in plan.pending + plan.verify:
        n = None
        if count_tokens is not None:  # samples of an instance share their messages: counted once
            n = counted.get(id(t["_messages"]))
            if n is None:
                n = counted[id(t["_messages"])] = count_tokens(messages_text(t["_messages"]))
        t["_prompt_tokens"] = n
        if info.window and n is not None and not t.get("_replaces"):
            limit = int(info.window * (1 - info.safety_margin)) - plan.max_tokens
            if n > limit:
                s.over_length += 1
                if t.get("_replaces_error"):
                    pre_replace.add(t["request_key"])
                rows.append({**_public(t), "status": "over_length", "cached": False, "retries": 0,
                             "prompt_tokens": n,
                             "error": f"prompt of {n} tokens + {plan.max_tokens} output tokens exceeds the window "
                                      f"of {info.window} tokens of {cfg.model}"})
                continue
        calls.append(t)
    s.new_rows += out.append(rows, replace=pre_replace)
    calls.sort(key=lambda t: (t["_ctx"], t["sample"]))  # calls sharing a context run together
    if calls and base_url is not None:  # a local server: forecast the calls' time from a measured probe
        _forecast(calls, cfg, plan, base_url)
    if calls:
        _run_calls(calls, cfg, plan, cache, out, s, progress, flush_every, base_url or cfg.base_url,
                   concurrency or cfg.concurrency, window, count_tokens)


def _forecast(calls: list[dict], cfg: EvalConfig, plan: Plan, base_url: str) -> None:
    """Emit (progress stage ``estimate``) how long ``calls`` should take on the local server at ``base_url``,
    from :func:`ctxbench.models.probe.probe_speed` on the first call's own prompt and the calls' prompt tokens;
    only where someone listens (``ctxbench run``), and silent when the probe gets no figure."""
    if not progress.has_listeners():
        return
    first = messages_text(calls[0]["_messages"])
    speed = probe_speed(base_url, cfg.model, first)
    if speed is None:
        return
    spans = _prompt_spans(calls)
    lo, hi = forecast_seconds(speed, spans, plan.max_tokens)
    longest = max(b for _, b in spans)
    slower = ""
    if speed.prefill_slope or speed.decode_slope:  # the speeds where the longest prompt ends
        p_at = (longest - 1) / max(speed.prefill_seconds(1, longest), 1e-9)
        d_at = 1 / max(speed.decode_seconds(longest, 1), 1e-9)
        slower = f"; at {longest:,} tokens of context {p_at:.0f} and {d_at:.0f}"
    progress.emit("estimate", progress.forecast_line(len(calls), sum(b - a for a, b in spans), plan.max_tokens,
                                                     lo, hi, speed.prefill, speed.decode, slower=slower))


def _prompt_spans(calls: list[dict]) -> list[tuple[int, int]]:
    """The prompt positions a server with a prompt cache reads for each of ``calls`` in their order, as (start,
    end) in tokens: the whole prompt (0, n) of the first call on a context; only the part after the shared prefix
    (:func:`~ctxbench.models.prompts.shared_prefix`, counted in proportion to its characters) of each later call on the
    same prefix."""
    seen: set[str] = set()
    spans = []
    for t in calls:
        text = messages_text(t["_messages"])
        n = t["_prompt_tokens"] or len(text) // 4
        start = 0
        if t["_prefix"] in seen and text:
            start = n - round(n * (len(text) - len(shared_prefix(t["_messages"], t["_context"]))) / len(text))
        seen.add(t["_prefix"])
        spans.append((start, n))
    return spans


def _prefix_tokens(t: dict) -> int | None:
    """Tokens of the shared prefix of one call's prompt (:func:`~ctxbench.models.prompts.shared_prefix`), in proportion to
    its characters of the prompt's count (``_prompt_tokens``, else characters / 4), as :func:`_prompt_spans` counts
    it; None for an empty prompt."""
    text = messages_text(t["_messages"])
    if not text:
        return None
    n = t.get("_prompt_tokens") or len(text) // 4
    return round(n * len(shared_prefix(t["_messages"], t["_context"])) / len(text))


def _run_calls(calls: list[dict], cfg: EvalConfig, plan: Plan, cache: ResponseCache, out: TableAppender,
               s: EvalSummary, progress, flush_every: int, base_url: str | None, concurrency: int,
               window: int | None, count_tokens, lease_s: float = CLAIM_LEASE_S) -> None:
    """Make the calls through a :class:`~ctxbench.models.runner.CallRunner` (claims shared with other workers,
    retries, the truncation check, the outage pause) and append their rows as they end, ``flush_every`` at a time
    (each flush a part file written by one thread, in order, while the calls go on; all written when this returns).
    After ``cfg.pause_after`` consecutive calls past their retry budget (a provider outage), or a Retry-After
    over ``cfg.max_retry_after_s``, no new call starts: the unfinished calls stay unstored and ``s.status`` is
    ``paused``."""
    policy = RetryPolicy(max_retries=cfg.max_retries, base_delay_s=cfg.retry_base_delay_s,
                         max_delay_s=cfg.retry_max_delay_s, timeout_s=cfg.timeout_s,
                         max_retry_after_s=cfg.max_retry_after_s)
    runner = CallRunner(cfg.model, base_url, key_base_url=cfg.base_url, cache=cache, concurrency=concurrency,
                        policy=policy, api_key_env=cfg.api_key_env, pause_after=cfg.pause_after, lease_s=lease_s,
                        # its tokenizer loads as the first call goes out (in the round trip, not before it)
                        truncation=functools.partial(truncation_check_soon, cfg.model, count_tokens), window=window)
    buf: list[dict] = []
    replace: set[str] = set()
    done = 0
    # the part files are written by one thread, in order, while the calls go on (a flush is a Parquet write under
    # the table's file lock: milliseconds in which the event loop would answer nothing); every row is an answer
    # the response cache holds already, so a crash before its flush ends costs a rerun no call
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxbench-flush")
    written: list[Future] = []

    def count_written(wait: bool) -> None:
        """Add the rows of the flushes that ended (of every flush with ``wait``) to ``s.new_rows``; raises the
        error of a flush that failed (e.g. ctxbench.core.storage.DiskFull)."""
        while written and (wait or written[0].done()):
            s.new_rows += written.pop(0).result()

    def flush() -> None:
        rows, keys = buf[:], set(replace)
        buf.clear()
        replace.clear()
        count_written(False)
        if rows:
            written.append(writer.submit(out.append, rows, keys))

    def on_outcome(o: Outcome) -> None:
        nonlocal done
        t = o.request.item
        base = _public(t)
        res = o.result
        done += 1
        if progress:
            progress(done, len(calls))
        row = None
        if o.source == "not_attempted":
            s.unfinished += 1
        elif o.source == "cache":
            if t.get("_replaces") == (res.status, res.server_window):
                pass  # the stored row still holds: the server's window is the one it was recorded under
            else:
                if t.get("_hit"):
                    s.from_cache += 1
                elif not t.get("_replaces"):
                    s.taken_by_others += 1  # another worker answered it
                row = {**base, **res.payload(), "cached": True, "retries": 0}
                if res.status == "cut_off":
                    s.cut_off += 1
        else:
            s.retries += res.retries
            s.retry_delay_s += res.retry_delay_s
            if res.transient_failure or res.status == "config_error":
                s.unfinished += 1  # not stored: a rerun (or another worker) retries it
                if res.retries or not (res.error or "").startswith(NOT_ATTEMPTED):  # the pause came first: no call
                    s.calls += 1
                    s.notes.append(f"{t['instance_id']} (sample {t['sample']}): {res.error}")
            else:
                s.calls += 1
                if res.status == "over_length":
                    s.over_length += 1
                elif res.status == "truncated":
                    s.truncated += 1
                    s.truncation_unclear += res.truncation_unclear
                    s.notes.append(f"{t['instance_id']} (sample {t['sample']}): {res.error}")
                elif res.status == "empty_reply":
                    s.empty_generated += 1
                    s.notes.append(f"{t['instance_id']} (sample {t['sample']}): {res.error}")
                    s.failed.append(f"{t['instance_id']}: empty_reply: {(res.error or '')[:186]}")
                elif res.status == "cut_off":
                    s.cut_off += 1
                elif res.status == "refused_by_provider":
                    s.refused += 1
                elif res.status != "ok" and asked_again(res.status):  # stored as a failed call: a rerun asks it
                    s.errors += 1
                    err = res.error or ""
                    s.unrecognised += err.startswith("unrecognised reply shape")
                    s.empty_replies += err.startswith("empty reply")
                    s.inband_errors += res.inband_error
                    if err.startswith("not a finished answer"):
                        f = res.finish_reason if res.finish_reason is not None else "none sent"
                        s.unfinished_finish[f] = s.unfinished_finish.get(f, 0) + 1
                    s.notes.append(f"{t['instance_id']} (sample {t['sample']}): {res.error}")
                    s.failed.append(f"{t['instance_id']}: {(err or res.status)[:200]}")
                s.prefix_cache_hits += res.prefix_cache_hit
                row = {**base, **res.payload(), "cached": False, "retries": res.retries}
        if row is not None:
            buf.append(row)
            if t.get("_replaces") or t.get("_replaces_error"):
                replace.add(t["request_key"])
        if len(buf) >= flush_every:
            flush()

    reqs = [Request(t["request_key"], t["_messages"], t["_sampling"], plan.max_tokens, t.get("_prompt_tokens"), t,
                    prefix=t["_prefix"], prefix_tokens=_prefix_tokens(t)) for t in calls]
    if progress:
        progress(0, len(calls))
    try:
        if cfg.max_cost is not None or cfg.target_ci is not None or cfg.adaptive_calls is not None:  # waves
            evaluate_in_waves(cfg, plan, out.path.parent, reqs, runner, on_outcome, s, count_tokens, concurrency)
        elif cfg.batch:  # the same runner, outcomes and rows; the calls go through the provider's batch API
            runner.run_batch(reqs, BatchStore(out.path.parent / "batches.json"), on_outcome, cfg.batch_poll_s,
                             cfg.batch_wait_s)
        else:
            runner.run(reqs, on_outcome)
    finally:
        try:
            flush()
            count_written(True)
        finally:
            writer.shutdown(wait=True)
        s.batches = runner.batches_resumed + runner.batches_submitted
        s.notes += [f"replica {shown_url(r)} taken out of service, its contexts moved to the others: "
                    f"{redact(why)}"
                    for r, why in runner.replicas_down.items()]
        if runner.status == "config_error":
            s.status = "config_error"
            s.notes.insert(0, runner.pause_reason or "stopped: configuration error")
        elif runner.paused:
            s.status = "paused"
            s.notes.insert(0, runner.pause_reason or "paused")
        elif runner.status == "waiting":
            s.status = "pending"
            s.notes.insert(0, runner.pause_reason or "batches still running")
        elif s.unfinished:
            s.status = "incomplete"
