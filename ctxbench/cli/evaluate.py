"""The work of ``evaluate`` and ``backfill`` (their options and help: :mod:`ctxbench.cli.commands.evaluate`), the
evaluation summary both print (``run`` prints it too) and the unknown-model warning of all three."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Literal, Optional

import typer

from ctxbench.cli.common import console, out_console, progress_bar, say_concurrency, say_failed, say_retries
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.cli.options import parse_ints
from ctxbench.core.errors import EmptySelection, InputError
from ctxbench.core.storage import find_builds
from ctxbench.models.backends import server_for
from ctxbench.models.providers import is_embedded
from ctxbench.models.registry import unknown_model_warning
from ctxbench.run.backfill import BackfillConfig, builds_by_benchmark
from ctxbench.run.dryrun import estimate
from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.run.repl import ReplConfig, require_sandbox, sandbox_warning
from ctxbench.run.spend import cap_prices, parse_price
from ctxbench.run.workers import evaluate_workers


def _eval_cfg(model, base_url, concurrency, samples, per_length, prompt_variant, max_tokens, temperature,
              api_key_env=None, **opts):
    return EvalConfig(model=model, base_url=base_url, concurrency=concurrency, samples=samples,
                      per_length=per_length, prompt_variant=prompt_variant, max_tokens=max_tokens,
                      temperature=temperature, api_key_env=api_key_env, **opts)


def _rag_opts(mode, rag_tokens, chunk_tokens, chunk_overlap, top_k, retriever, embedding_model) -> dict:
    """EvalConfig fields of --mode and the retrieval options (RAG mode, ctxbench.retrieval)."""
    return {"mode": mode, "rag_tokens": parse_ints(rag_tokens, "--rag-tokens") if rag_tokens else None,
            "chunk_tokens": chunk_tokens, "chunk_overlap": chunk_overlap, "top_k": top_k, "retriever": retriever,
            "embedding_model": embedding_model}


def evaluate_cmd(*, build: Path, model: str, base_url: Optional[str], api_key_env: Optional[str], concurrency: int,
                 samples: Optional[int], per_length: Optional[int], prompt_variant: Literal['cot', 'direct'],
                 max_tokens: Optional[int], temperature: float, mode: str, rag_tokens: Optional[str],
                 chunk_tokens: int, chunk_overlap: int, top_k: int, retriever: Literal['hybrid', 'bm25', 'dense'],
                 embedding_model: Optional[str], dry_run: bool, language: Optional[str],
                 question_language: Optional[str], min_context_tokens: Optional[int],
                 max_context_tokens: Optional[int], exclude_closed_book: bool, max_retry_after: float, batch: bool,
                 batch_poll: float, batch_wait: Optional[float], max_cost: Optional[float], price: Optional[str],
                 target_ci: Optional[float], reasoning_effort: Optional[str], thinking_budget: Optional[int],
                 sub_model: Optional[str], max_steps: int, sandbox: Literal['bwrap', 'none'], step_timeout: float,
                 step_memory: int, repl_max_tokens: Optional[int], repl_max_cost: Optional[float],
                 adaptive_calls: Optional[int], runs: Optional[Path], workers: int,
                 concurrency_given: bool = False) -> None:
    """The work of :func:`ctxbench.cli.commands.evaluate.evaluate_cmd` (its options and help)."""
    try:
        cfg = _eval_cfg(model, base_url, concurrency, samples, per_length, prompt_variant, max_tokens, temperature,
                        api_key_env, language=language, question_language=question_language,
                        min_context_tokens=min_context_tokens, max_context_tokens=max_context_tokens,
                        exclude_closed_book=exclude_closed_book, max_retry_after_s=max_retry_after,
                        batch=batch, batch_poll_s=batch_poll, batch_wait_s=batch_wait, max_cost=max_cost,
                        price=_price(price, max_cost), target_ci=target_ci,
                        reasoning_effort=reasoning_effort, thinking_budget=thinking_budget,
                        repl=ReplConfig(sub_model=sub_model, max_steps=max_steps, sandbox=sandbox,
                                        step_timeout_s=step_timeout, step_memory_mb=step_memory,
                                        max_answer_tokens=repl_max_tokens, max_answer_cost=_positive(repl_max_cost, "--repl-max-cost")),
                        **_adaptive_opts(adaptive_calls, runs, build),
                        **_rag_opts(mode, rag_tokens, chunk_tokens, chunk_overlap, top_k, retriever, embedding_model))
        warn_unknown_model(model, base_url)
        if "repl" in cfg.modes:  # no bubblewrap: one line naming the package, before the progress bar
            require_sandbox(cfg.repl.sandbox)
            if sandbox_warning(cfg.repl):  # said on every run without a sandbox
                console.print(sandbox_warning(cfg.repl), markup=False)
        if dry_run:
            try:
                est = estimate(build, cfg)
            except EmptySelection as e:  # exit 1 as evaluate does for the same selection
                console.print(f"error: no instance selected: {e}", markup=False)
                raise typer.Exit(1) from None
            for k, v in est.items():
                out_console.print(f"{k}: {v}")
            return
        if max_cost is not None:  # a model without a price is refused before the progress bar (issue 32 item 9)
            cap_prices(model, cfg.price, batch)
        say_concurrency(model, base_url, concurrency, concurrency_given)  # the embedded model: one call at a time
        with progress_bar() as p, say_retries(p.console):
            t = p.add_task(f"calling {model}", total=None)
            if workers > 1 and server_for(model, base_url) is None:  # the embedded model: one server, one worker
                p.update(t, description=f"calling {model} ({workers} workers)")
                s = evaluate_workers(build, cfg, workers, progress=lambda d, n: p.update(t, completed=d, total=n))
            else:
                s = evaluate_build(build, cfg, progress=lambda d, n: p.update(t, completed=d, total=n),
                                   server=server_for(model, base_url))
    except USER_ERRORS as e:
        fail(e)
    rc = report_evaluation(s, build)
    say_stale(s, build)
    raise typer.Exit(rc)


def say_stale(s, build: Path, prefix: str = "") -> None:
    """After ``evaluate`` or ``backfill`` stored new replies (``s.new_rows`` of an
    :class:`ctxbench.run.evaluate.EvalSummary`): one line saying which of the build's derived files
    (``scores.parquet``, the report) no longer count every stored reply, or that the build is not scored yet,
    with the exact commands that bring them up to date
    (``ctxbench score``, then ``ctxbench report``: ``report`` does not rescore). Nothing when nothing was stored
    (every request was already stored)."""
    if not s.new_rows:
        return
    b = Path(build)
    stale = [str(p) for p in (b / "scores.parquet", b / "report" / "index.html") if p.exists()]
    q = shlex.quote(str(b))
    what = (f"out of date: {' and '.join(stale)} {'does' if len(stale) == 1 else 'do'} not count the {s.new_rows} "
            f"replies just stored" if stale
            else f"not scored yet: {s.new_rows} replies stored")
    out_console.print(f"{prefix}{what}; next: ctxbench score --build {q} && ctxbench report --build {q}",
                      markup=False)


def warn_unknown_model(model: str, base_url: str | None) -> None:
    """Print :func:`ctxbench.models.registry.unknown_model_warning` (a misspelt name such as ``gtp-4o``) on
    stderr; the command goes on."""
    if not is_embedded(model, base_url) and (w := unknown_model_warning(model, base_url)):
        console.print(w, markup=False)


def _adaptive_opts(calls: int | None, runs: Path | None, build: Path) -> dict:
    """EvalConfig fields of ``--adaptive-calls`` and ``--runs`` (every completed build under it but ``build``);
    InputError for ``--runs`` without ``--adaptive-calls``."""
    if runs is None:
        return {"adaptive_calls": calls}
    if calls is None:
        raise InputError("--runs names builds that calibrate --adaptive-calls: give --adaptive-calls N with it")
    others = [str(b) for b in find_builds(runs, []) if Path(b).resolve() != Path(build).resolve()]
    return {"adaptive_calls": calls, "adaptive_runs": others}


def _positive(value: float | None, name: str) -> float | None:
    """``value`` when it is None or above 0; InputError naming ``name`` for 0 (a budget of nothing)."""
    if value is not None and value <= 0:
        raise InputError(f"{name} {value:g}: give a budget above 0 USD, or leave it out for none")
    return value


def _price(value: str | None, max_cost: float | None) -> tuple[float, float] | None:
    """``--price IN,OUT`` parsed (:func:`ctxbench.run.spend.parse_price`); InputError when given without --max-cost."""
    p = parse_price(value)
    if p is not None and max_cost is None:
        raise InputError("--price is the price --max-cost counts at: give --max-cost USD with it")
    return p


def report_evaluation(s, build: Path, prefix: str = "") -> int:
    """Print an evaluation's summary (:class:`ctxbench.run.evaluate.EvalSummary`); returns the exit status: 1 when it
    selected no instance (saying which selection or filter emptied it), left calls unfinished or stored as failed
    (error rows, named: a rerun asks them again), or stopped because its first calls were all refused alike (a
    configuration error, naming the setting to change); 75 when paused by a provider outage or (``--batch``) when
    batches still run (both resumable); else 0, also when some replies are the model's own per-instance outcomes
    (over length, cut off by the output budget, truncated, refused), which the summary names."""
    if s.selected == 0:
        console.print(f"{prefix}error: no instance selected: {s.empty_reason}", markup=False)
        return 1
    out_console.print(f"{prefix}{s.selected} instances selected; {s.calls} calls made, {s.from_cache} from cache, "
                      + (f"{s.taken_by_others} called by another process (stored here from the cache), "
                         if s.taken_by_others else "")
                      + f"{s.already_stored} already stored"
                      + (f" ({s.replaced_errors} error rows asked again)" if s.replaced_errors else "")
                      + f"; {s.over_length} over length, {s.cut_off} cut off by the output budget (scored 0), "
                      f"{s.truncated} truncated by the server, {s.refused} refused by the provider (over length, "
                      f"truncated and refused: not scored), {s.errors} failed, "
                      f"{s.unfinished} unfinished (rerun to retry); {s.retries} retries "
                      f"({s.retry_delay_s:.1f} s waited); {s.new_rows} rows added to {build / 'responses.parquet'}")
    if s.others_rows:  # two evaluations of one build at once: each says what it did, and what the other added
        out_console.print(f"{prefix}another process evaluating this build added {s.others_rows} rows to "
                          f"{build / 'responses.parquet'} meanwhile (not counted above)")
    if s.cut_off:
        more = (s.max_tokens or 0) * 4 or 16384
        console.print(f"{prefix}cut off: {s.cut_off} replies ended at the output budget of {s.max_tokens} tokens "
                      f"before they finished (finish_reason length, max_tokens, MAX_TOKENS, ...): they are stored "
                      f"with status cut_off and scored 0 (tag cut_off), which the mean counts as wrong. Raise the budget with --max-tokens (e.g. --max-tokens "
                      f"{more}) or the model's max_output_tokens in assets/models.yaml, and rerun: the new budget is "
                      f"a new request, so only these calls' answers change", markup=False)
    unfinished_fr = getattr(s, "unfinished_finish", None) or {}
    empty_gen, inband = getattr(s, "empty_generated", 0), getattr(s, "inband_errors", 0)
    if s.unrecognised or s.empty_replies or unfinished_fr or empty_gen or inband:
        named = ", ".join(f"{k} ×{v}" for k, v in sorted(unfinished_fr.items()))
        console.print(f"{prefix}not answers: {s.unrecognised} replies of a shape ctxbench does not recognise, "
                      f"{s.empty_replies} empty 200 replies after one more try (the server dropped the prompt), "
                      f"{empty_gen} empty replies with tokens generated but no text returned (status empty_reply: "
                      f"a server fault, asked once more), {inband} provider errors inside a 200 answer "
                      f"(finish_reason error) that persisted after their retries, "
                      f"{sum(unfinished_fr.values())} replies whose finish reason does not mean a finished answer"
                      + (f" ({named})" if named else "")
                      + ": stored as error or empty_reply rows, not scored; the same command asks them again",
                      markup=False)
    if getattr(s, "prefix_cache_hits", 0) or getattr(s, "truncation_unclear", 0):
        console.print(f"{prefix}truncation check: the server reports neither its context window nor cached "
                      f"tokens; {s.prefix_cache_hits} replies whose prompt count fell by about the size of a prefix "
                      f"already sent in this run were read as prompt-cache hits (not truncated); "
                      f"{s.truncation_unclear} truncated replies could not be told apart from a cache hit of a "
                      f"prefix sent before this run (rerun against a freshly started server to tell)", markup=False)
    if s.batches:
        out_console.print(f"{prefix}batches: {', '.join(s.batches)} (recorded in {build / 'batches.json'})")
    if s.spent_usd is not None:
        out_console.print(f"{prefix}spent ${s.spent_usd:.4f} in this invocation (--max-cost)")
    for n in s.notes[:20]:
        console.print(f"  {n}", markup=False)
    if s.status == "budget":  # --max-cost: stopped before a call could pass the cap; a larger cap asks the rest
        console.print(f"{prefix}status: stopped at the spend cap ({s.not_asked} calls not sent)", markup=False)
        return 3
    if s.status == "config_error":  # every call would fail alike: stop, name the setting, exit non-zero
        console.print(f"{prefix}status: configuration error ({s.unfinished} calls not made); fix the setting "
                      f"named above and rerun the same command", markup=False)
        return 1
    if s.status == "pending":  # --batch-wait ran out while batches run: a rerun polls them
        console.print(f"{prefix}status: pending ({s.unfinished} requests in running batches); rerun the same "
                      f"command to collect them", markup=False)
        return 75
    if s.status == "paused":  # a provider outage: resumable, nothing marked wrong
        console.print(f"status: paused ({s.unfinished} calls left); rerun the same command to resume", markup=False)
        return 75
    if s.unfinished:
        console.print(f"{s.unfinished} call(s) did not finish (transient errors past the retry budget, or the server "
                      f"refused the credentials or the model): fix the cause and rerun; nothing stored is repeated",
                      markup=False)
        return 1
    if s.errors or s.empty_generated:  # error and empty_reply rows: failed calls the same command asks again
        return say_failed(s.errors + s.empty_generated, s.failed, build / "responses.parquet", prefix)
    return 0


def backfill_cmd(*, model: str, runs: Path, benchmarks: Optional[str], base_url: Optional[str],
                 api_key_env: Optional[str], concurrency: int, samples: Optional[int], per_length: Optional[int],
                 prompt_variant: Literal['cot', 'direct'], max_tokens: Optional[int], workers: int,
                 mode: str, concurrency_given: bool = False) -> None:
    """The work of :func:`ctxbench.cli.commands.evaluate.backfill_cmd` (its options and help)."""
    try:
        cfg = BackfillConfig(model=_eval_cfg(model, base_url, concurrency, samples, per_length, prompt_variant,
                                             max_tokens, 0.0, api_key_env, mode=mode),
                             runs_root=str(runs),
                             benchmarks=[x.strip() for x in (benchmarks or "").split(",") if x.strip()])
        warn_unknown_model(model, base_url)
        if "repl" in cfg.model.modes:  # no bubblewrap: one line naming the package, before any build is touched
            require_sandbox(cfg.model.repl.sandbox)
        builds = find_builds(cfg.runs_root, cfg.benchmarks)
        if not builds:
            what = ", ".join(f"{k} {n}" for k, n in builds_by_benchmark(cfg.runs_root).items()) or "none"
            fail(InputError(f"no completed build under --runs {runs}"
                             + (f" of --benchmarks {benchmarks}" if cfg.benchmarks else "")
                             + f" (builds found by benchmark: {what})"))
        say_concurrency(model, base_url, concurrency, concurrency_given)  # once, before the first build
        worst = 0
        for i, b in enumerate(builds, 1):
            with progress_bar() as p, say_retries(p.console):
                t = p.add_task(f"[{i}/{len(builds)}] {b}", total=None)
                if workers > 1 and server_for(model, base_url) is None:
                    s = evaluate_workers(b, cfg.model, workers,
                                         progress=lambda d, n: p.update(t, completed=d, total=n))
                else:
                    s = evaluate_build(b, cfg.model, progress=lambda d, n: p.update(t, completed=d, total=n),
                                       server=server_for(model, base_url))
            rc = report_evaluation(s, b, prefix=f"{b}: ")
            say_stale(s, b, prefix=f"{b}: ")
            worst = rc if rc == 75 or (rc and worst != 75) else worst
    except USER_ERRORS as e:
        fail(e)
    out_console.print(f"backfill of {model}: {len(builds)} build(s) under {runs}")
    raise typer.Exit(worst)
