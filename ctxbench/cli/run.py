"""The work of ``ctxbench run`` (its options and help: :mod:`ctxbench.cli.commands.run`): build, evaluate, score
and report in one engine run (Prefect or luigi)."""

from __future__ import annotations

import contextlib
import os
import shlex
from pathlib import Path
from typing import Literal, Optional

import typer

from ctxbench.cli.common import console, say_failed
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.cli.evaluate import report_evaluation, warn_unknown_model
from ctxbench.cli.logfilter import quiet_interrupt_crash
from ctxbench.cli.options import config_values, parse_ints, run_build_specs
from ctxbench.cli.progress import RunProgress
from ctxbench.cli.results import print_results
from ctxbench.core.errors import CtxbenchError
from ctxbench.core.extras import require
from ctxbench.core.outdir import claim_out_dir, is_run_root
from ctxbench.core.progress import listening
from ctxbench.core.storage import resolve_build
from ctxbench.core.track import default_track
from ctxbench.models.backends import preflight
from ctxbench.models.local_server import EMBEDDED_MODEL
from ctxbench.models.providers import is_embedded
from ctxbench.run.engine_log import engine_log, write_traceback
from ctxbench.run.evaluate import EvalConfig
from ctxbench.run.repl import require_sandbox
from ctxbench.run.outcome import (RunScope, build_counts, engine_summary, failed_calls, outside_scope, run_scope,
                                  stored_cut_off, why_no_instances)


def run_cmd(*, out: Path, per_length: int, mode: str, rag_tokens: Optional[str], engine: Literal['prefect', 'luigi'],
            model: Optional[str], base_url: Optional[str], force: bool, max_tokens: Optional[int], workers: int,
            api_key_env: Optional[str] = None, retriever: Literal['hybrid', 'bm25', 'dense'] = "hybrid",
            **build_options) -> None:
    """The work of :func:`ctxbench.cli.commands.run.run_cmd` (its options and help)."""
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # the temporary Prefect API server may take more than its default 20 s to start on busy cores
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

    track = default_track()
    specs = run_build_specs(track)
    names = {s.field: s.flag for s in specs}
    try:  # a bad build option: the line and exit status `ctxbench build` gives, before any engine starts
        cfg = track.Config(**config_values(specs, build_options))
    except USER_ERRORS as e:
        fail(e, names)
    if engine not in ("prefect", "luigi"):
        fail(CtxbenchError(f"--engine {engine}: use prefect or luigi"))
    if workers > 1 and engine != "prefect":
        fail(CtxbenchError(f"--workers {workers} runs on the Prefect flow's Dask task runner: use --engine prefect"))
    if workers > 1 and not os.environ.get("CTXBENCH_DASK_ADDRESS"):
        os.environ.setdefault("CTXBENCH_DASK_WORKERS", str(workers))  # read as pipelines.flows is imported

    model = model or EMBEDDED_MODEL
    embedded = is_embedded(model, base_url)
    try:  # a missing runtime or GGUF, then the rule of every --out (ctxbench.core.outdir): said before anything
        preflight(model, base_url)  # starts or is written (the embedded model's runtime and GGUF)
        claim_out_dir(out, "run", force=force, own={"latest"}, is_own=is_run_root(out), what="run root")
    except USER_ERRORS as e:
        fail(e)
    ls = list(getattr(cfg, "lengths", []) or [])
    warn_unknown_model(model, base_url)
    where = "the embedded model (served locally by llama.cpp)" if embedded else model
    # on 2 CPU cores the embedded model processes a 4,096-token context in about a minute: the sample shares one
    # context per length, whose prefix the server keeps (each further question costs its own tokens only). The
    # sample is the same for every model (it depends on the build and --per-length only), so models run one
    # after another on the same build are compared on the same instances.
    what = str(getattr(cfg, "db", None) or track.name) + (f" (query set {cfg.queries})" if getattr(cfg, "queries", None)
                                                           else "")
    how = [str(getattr(cfg, "tokenizer", "") or "")]
    if getattr(cfg, "setting", None) == "density":
        how.append(f"{cfg.density:.0%} density")
    elif getattr(cfg, "setting", None) == "amount":
        how.append(f"{cfg.amount_tokens:,} relevant tokens")
    how.append(",".join(map(str, getattr(cfg, "positions", None) or [])))
    console.print(f"ctxbench run ({engine}): building {what} at {', '.join(map(str, ls))} tokens "
                  f"({', '.join(h for h in how if h)}), then evaluating "
                  f"a sample of {per_length} questions per length on as few contexts as possible with {where}.",
                  markup=False)
    if embedded:
        console.print(f"{EMBEDDED_MODEL} is a 135M-parameter model: expect scores near zero. It is here to show the "
                      f"pipeline, not to rank models (a real model: ctxbench run --model NAME [--base-url URL]).",
                      markup=False)

    log = out / "run.log"
    res: dict = {}
    try:
        models = [EvalConfig(model=model, base_url=base_url, api_key_env=api_key_env, per_length=per_length,
                             mode=mode, share_contexts=True, max_tokens=max_tokens, retriever=retriever,
                             rag_tokens=parse_ints(rag_tokens, "--rag-tokens") if rag_tokens else None)]
        if "repl" in models[0].modes:  # no bubblewrap: one line naming the package, before the engine starts
            require_sandbox("bwrap")
        with RunProgress() as shown, listening(shown):
            if engine == "luigi":
                require("luigi", "run --engine luigi")
                from pipelines.luigi_tasks import run_luigi  # lazy: the luigi engine, an optional extra

                with engine_log(log):
                    res = run_luigi(cfg, out, models, track=track.name)
            else:
                console.print("[0:00] engine starting Prefect's temporary API server", markup=False)
                from pipelines.flows import nightly  # lazy: the Prefect engine (start-up time)
                from pipelines.temp_server import temporary_server  # lazy: the Prefect engine (start-up time)

                quiet_interrupt_crash()

                with engine_log(log), temporary_server():  # in a session of its own: a Ctrl-C reaches ctxbench only
                    # an outage: no pause (nobody resumes a temporary server's flow run): paused, exit 75
                    res = nightly(build=cfg, out=str(out), models=models, workers=workers, pause_timeout_s=0)
        build = resolve_build(out)
    except USER_ERRORS as e:
        fail(e, names)
    except Exception as e:  # noqa: BLE001 - an engine's failure: one line here, its traceback in the log
        write_traceback(log, e)
        console.print(f"error: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''} "
                      f"(the engine's log and this traceback: {log})", markup=False)
        raise typer.Exit(1) from None
    n_instances, n_quarantined = build_counts(build)
    if n_instances == 0:
        console.print("error: " + why_no_instances(build, n_quarantined), markup=False)
        raise typer.Exit(1)
    try:  # the table counts what this run selected (not other replies of the model, e.g. from `evaluate`)
        scope = run_scope(build, models[0])
    except USER_ERRORS:  # the build cannot be planned on: every stored reply, as `score` counts them
        scope = None
    print_results(build, scope=scope, note=outside_note(build, scope) if scope is not None else None)
    s = engine_summary(res, model)
    rc = report_evaluation(s, build) if s else 0

    stored = stored_cut_off(build, model, scope)
    if stored and not (s.cut_off if s else 0):  # a rerun: the cut-off replies were stored by an earlier run
        console.print(f"cut off: {stored} stored replies of {model} ended at the output budget before they finished "
                      f"(asked by an earlier run; scored 0, counted in the table): raise the budget with --max-tokens "
                      f"and rerun to ask them again", markup=False)
    if rc:
        raise typer.Exit(rc)

    failed = failed_calls(build, model)
    if failed:  # failed calls left by this run or an earlier one: exit 1 as evaluate does, a rerun asks them again
        raise typer.Exit(say_failed(len(failed), failed, build / "responses.parquet"))


def outside_note(build: Path, scope: RunScope) -> str | None:
    """The line under ``run``'s table when the build holds scored replies the run did not select (other instances,
    samples or settings, e.g. stored by ``ctxbench evaluate``): how many, of which models, and the command that
    counts them (:func:`ctxbench.run.outcome.outside_scope`); None when there are none or the scores cannot be
    read."""
    with contextlib.suppress(*USER_ERRORS):
        out = outside_scope(build, scope)
        if out:
            return ("this table counts the replies this run selected; the build holds "
                    + ", ".join(f"{n} more of {m}" for m, n in out.items())
                    + f" (other instances, samples or settings, e.g. from `ctxbench evaluate`), counted by "
                    f"`ctxbench score --build {shlex.quote(str(build))}` and the report")
    return None
