"""Prefect flows: one ``build_<track>`` flow per registered track (``build_holobench``, ``build_scitrek``,
``build_needles``, ``build_lara``, and any plugin track's), ``evaluate``, ``score``, ``report``, ``backfill`` and the
parent ``nightly``.

They run without a server (Prefect starts a temporary local API) and against ``prefect server start``
(``PREFECT_API_URL``). Each flow calls library functions; a build flow runs its track's stages
(:class:`ctxbench.core.track.Stage`) in their declared order, one Prefect task per stage with the stage's retries.
One ``evaluate`` task makes many model calls (a Prefect task costs tens of milliseconds, one task per call would
not scale). Tasks pass large in-memory objects (databases, contexts), so Prefect's input-hashing cache is off
(NO_CACHE): whole steps are skipped by the build hash instead.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Union

# a flow run without a server starts an ephemeral API server; on a loaded 2-core machine that takes longer than
# Prefect's 20-second default, so allow 3 minutes (an explicit setting wins)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote
from prefect.artifacts import create_markdown_artifact
from prefect.settings import PREFECT_API_URL
from pydantic import BaseModel, Field, create_model

from ctxbench.run.backfill import BackfillConfig
from ctxbench.core.storage import find_builds
from ctxbench.models.cache import ResponseCache
from ctxbench.run.evaluate import EvalConfig, evaluate_build, plan_requests, unanswered_calls
from ctxbench.run.daskexit import PRELOAD
from ctxbench.run.workers import plan_shards
from ctxbench.run.incremental import report_if_changed, score_if_changed
from ctxbench.models.backends import server_for
from ctxbench.models.local_server import EMBEDDED_MODEL
from ctxbench.core.outdir import check_build_out, out_dir_lock
from ctxbench.core.progress import emit
from ctxbench.report import results_table
from ctxbench.core.track import Track, default_track, existing_build, get_track, initial_state, store_outputs
from ctxbench.core.track import tracks as registered_tracks


# ---------------------------------------------------------------------------------------------- build flows

@task(name="stage", cache_policy=NO_CACHE)
def stage_task(track: str, stage: str, args: tuple) -> Any:
    """One build stage of a track (its function called with the values its ``inputs`` name)."""
    st = next(s for s in get_track(track).stages if s.name == stage)
    emit("build", f"{track}: {stage}")
    return st.function()(*args)


def _result(r) -> dict:
    return {**r.__dict__, "out": str(r.out)}


def run_build(track: Track, cfg: BaseModel | dict, out: str, force: bool = False, versioned: bool = False,
              **inputs: Any) -> dict:
    """Run ``track``'s stages as Prefect tasks, in order (inside a flow); returns the BuildResult as a dict (``out``
    a string). An unchanged build is found by the stage that checks the build directory and left as it is."""
    state = initial_state(track, track.config(cfg), out, force, versioned, None, **inputs)
    result: Any = None
    # one build at a time per --out (ctxbench.core.outdir); a refused --out gets no lock file
    with out_dir_lock(out, check=lambda: check_build_out(out, force, versioned)):
        for st in track.stages:
            t = stage_task.with_options(name=f"{track.name}-{st.name}", retries=st.retries,
                                        retry_delay_seconds=st.retry_delay_s)
            # quote(): large in-memory objects are passed as they are, not walked by Prefect's parameter resolution
            result = t(track.name, st.name, quote(tuple(state[k] for k in st.inputs)))
            store_outputs(st, result, state)
            if (done := existing_build(result)) is not None:
                return _result(done)
    return _result(result)


def _build_flow(track: Track):
    """The ``build_<track>`` flow: its parameters are the track's Config (the UI form), ``out``, ``force``,
    ``versioned`` and the track's inputs."""

    def fn(cfg, out: str = f"runs/{track.name}", force: bool = False, versioned: bool = False, **inputs) -> dict:
        return run_build(track, cfg, out, force, versioned, **inputs)

    try:
        cfg_default: Any = track.Config()
    except Exception:  # a Config with required fields: the form asks for them
        cfg_default = inspect.Parameter.empty
    K = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("cfg", K, annotation=track.Config, default=cfg_default),
              inspect.Parameter("out", K, annotation=str, default=f"runs/{track.name}"),
              inspect.Parameter("force", K, annotation=bool, default=False),
              inspect.Parameter("versioned", K, annotation=bool, default=False),
              *(inspect.Parameter(k, K, annotation=tp, default=d) for k, (tp, d) in track.inputs.items())]
    fn.__signature__ = inspect.Signature(params, return_annotation=dict)  # type: ignore[attr-defined]
    fn.__annotations__ = {**{p.name: p.annotation for p in params}, "return": dict}
    fn.__name__ = fn.__qualname__ = f"build_{track.name}_flow"  # the flow's entrypoint in this module
    stages = " → ".join(s.name for s in track.stages)
    fn.__doc__ = (f"Build {track.title or track.name} into ``out``: {stages}. An unchanged build is detected by its "
                  f"hash and left as it is. ``versioned``: ``out`` is a run root, the build goes to "
                  f"``out/<build_hash>`` and ``out/latest`` points at it.")
    return flow(name=f"build_{track.name}")(fn)


for _t in registered_tracks():  # build_holobench_flow, build_scitrek_flow, ... (and every plugin track's)
    globals()[f"build_{_t.name}_flow"] = _build_flow(_t)


@task(name="evaluate-calls", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)
def evaluate_task(build: str, cfg: EvalConfig, secrets: dict[str, str] | None = None,
                  contexts: list[str] | None = None) -> dict:
    """All calls of one model on one build (many calls in one task), or, with ``contexts``, those on these
    contexts (one worker's shard, :mod:`ctxbench.run.shard`). Starts the embedded model's server when
    ``cfg.model`` is the embedded default and no base URL is given. ``secrets`` maps an environment variable
    (e.g. ``OPENAI_API_KEY``) to the name of a Prefect Secret block holding the key; the key is put in this
    process's environment only, never in a parameter, result, artifact or log."""
    if secrets:
        import os

        from prefect.blocks.system import Secret

        for env, block in secrets.items():
            os.environ[env] = Secret.load(block).get()
    s = evaluate_build(build, cfg, server=server_for(cfg.model, cfg.base_url),
                       contexts=set(contexts) if contexts is not None else None)
    return s.__dict__


def share_prefect_api() -> str | None:
    """Export the API this flow run talks to as ``PREFECT_API_URL`` (the temporary server's, when the flow runs
    without one) before a task runner starts worker processes from this process (a local Dask cluster), so the
    workers report to it instead of each starting a temporary server of its own (tens of seconds each, and
    workers that do not shut down). Workers of a remote cluster (``CTXBENCH_DASK_ADDRESS``) need it in their own
    environment. Returns the URL, or None where none is known."""
    url = os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()
    if not url:
        # lazy: the server module is heavy (FastAPI, SQLAlchemy); only a flow that fans out over workers needs it
        from prefect.server.api.server import SubprocessASGIServer

        srv = SubprocessASGIServer()  # the temporary server's singleton (running when this flow started it)
        url = srv.api_url if srv.running else None
    if url:
        os.environ["PREFECT_API_URL"] = url
    return url


def task_runner():
    """The task runner of flows that fan out (``evaluate`` with several workers): Prefect's Dask task runner on the
    scheduler at ``CTXBENCH_DASK_ADDRESS`` (e.g. ``tcp://scheduler:8786``, a real cluster), or on a local Dask
    cluster of ``CTXBENCH_DASK_WORKERS`` worker processes; else Prefect's default thread pool."""
    addr, n = os.environ.get("CTXBENCH_DASK_ADDRESS"), os.environ.get("CTXBENCH_DASK_WORKERS")
    if addr or n:
        from ctxbench.core.extras import require

        DaskTaskRunner = require("prefect_dask", "the Dask task runner (CTXBENCH_DASK_ADDRESS, "
                                 "CTXBENCH_DASK_WORKERS)").DaskTaskRunner

        if addr:
            return DaskTaskRunner(address=addr)
        # each worker process ends within the nanny's close timeout instead of being killed (ctxbench.run.daskexit)
        return DaskTaskRunner(cluster_kwargs={"n_workers": int(n), "threads_per_worker": 1, "processes": True,
                                              "preload": [PRELOAD]})
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner()


def _summary_md(build: str, model: str, parts: list[dict]) -> str:
    keys = ("status", "selected", "calls", "from_cache", "taken_by_others", "already_stored", "new_rows",
            "over_length", "errors", "unfinished", "retries", "retry_delay_s")
    rows = "\n".join(f"| {i} | " + " | ".join(f"{p[k]:.1f}" if k == "retry_delay_s" else str(p[k]) for k in keys)
                     + " |" for i, p in enumerate(parts))
    notes = [n for p in parts for n in p["notes"]][:50]
    return (f"### {model} on `{build}`\n\n| worker | " + " | ".join(keys) + " |\n|"
            + "---|" * (len(keys) + 1) + "\n" + rows + "\n\n" + "".join(f"- {n}\n" for n in notes))


@flow(name="evaluate", task_runner=task_runner())
def evaluate_flow(build: str, cfg: EvalConfig, secrets: dict[str, str] | None = None, workers: int = 1,
                  pause_timeout_s: int = 86400) -> dict:
    """Evaluate one model on an existing build. ``secrets``: environment variable -> Prefect Secret block name,
    for API keys. ``workers`` > 1 runs that many evaluation tasks at once on the task runner (Dask workers when
    configured), sharded by context (every question of a context in one task, contexts balanced by prompt tokens:
    :mod:`ctxbench.run.shard`), all reporting to this flow's Prefect API (:func:`share_prefect_api`) and sharing the
    response cache: each call is claimed by one of them, none is made twice. A provider
    outage longer than the retry budget pauses this flow run for up to ``pause_timeout_s`` (resume it from the UI:
    only the missing calls are made); nothing is marked wrong. ``pause_timeout_s`` 0: no pause, the summary comes
    back with status ``paused`` (``ctxbench run``: exit 75, rerun to resume; a temporary API server has no UI to
    resume from). Returns the summary (totals over workers; ``workers``: each one's)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if server_for(cfg.model, cfg.base_url) is not None:
        workers = 1  # one server of ctxbench's own (the embedded model's) on this machine
    from prefect.flow_runs import pause_flow_run

    for attempt in range(1000):
        # every question of a context to one worker, contexts balanced by prompt tokens (ctxbench.run.shard)
        shards = plan_shards(plan_requests(build, cfg, ResponseCache()), workers) if workers > 1 else []
        if len(shards) <= 1:
            parts = [evaluate_task(build, cfg, secrets)]
        else:
            share_prefect_api()
            futures = [evaluate_task.with_options(task_run_name=f"evaluate-calls-{i}").submit(
                build, cfg, secrets, sh) for i, sh in enumerate(shards)]
            parts = [f.result() for f in futures]
        create_markdown_artifact(_summary_md(build, cfg.model, parts), key="ctxbench-evaluation",
                                 description=f"evaluation of {cfg.model}: calls, retries and waits")
        out = {k: sum(p[k] for p in parts) for k in ("calls", "from_cache", "taken_by_others", "new_rows",
                                                     "over_length", "errors", "retries", "retry_delay_s")}
        statuses = {p["status"] for p in parts}
        left = parts[0]["unfinished"] if len(parts) == 1 else unanswered_calls(build, cfg)
        out.update(selected=parts[0]["selected"], already_stored=min(p["already_stored"] for p in parts),
                   unfinished=left, status="paused" if "paused" in statuses else "pending" if "pending" in statuses
                   else "incomplete" if left
                   else "complete", notes=[n for p in parts for n in p["notes"]], workers=parts,
                   resumes=attempt)
        if out["status"] != "paused" or pause_timeout_s <= 0:
            return out
        # a provider outage: wait (resumable from the UI or `prefect flow-run resume`) and make the missing calls
        pause_flow_run(timeout=pause_timeout_s, poll_interval=2, key=f"outage-{attempt}")
    return out


@flow(name="backfill")
def backfill_flow(cfg: BackfillConfig) -> dict:
    """Add one model to every existing build of the chosen benchmarks under ``cfg.runs_root``: calls only that
    model (the response cache answers what another build already asked), appends its rows, never rewrites other
    models' rows, rebuilds nothing."""
    return {str(b): evaluate_flow(str(b), cfg.model) for b in find_builds(cfg.runs_root, cfg.benchmarks)}


@task(name="score", cache_policy=NO_CACHE)
def score_task(build: str) -> int:
    """Scores of every stored response; skipped when instances and responses are unchanged since the last score."""
    return score_if_changed(build)[0]


@flow(name="score")
def score_flow(build: str) -> int:
    return score_task(build)


@task(name="report", cache_policy=NO_CACHE)
def report_task(build: str) -> str:
    """The HTML report (rewritten only when the tables changed) and the results table as a Prefect artifact."""
    p, _ = report_if_changed(build)
    rows = results_table(build, primary_only=True)
    md = "| model | mode | matcher | context length | n | score |\n|---|---|---|---|---|---|\n" + "\n".join(
        f"| {r['model']} | {r['mode']} | {r['matcher']} | {r['context_length']} | {r['n']} | {r['score']:.3f} |"
        for r in rows)
    from ctxbench.analysis.core import differing_samples, instance_scores, primary_rows

    diff = differing_samples(primary_rows(instance_scores(build)[0]))
    if diff:  # models side by side on different instances: say so (the report adds the shared-instance table)
        md += "\n\n**The models were scored on different instances** (only the shared ones compare like with like): " \
            + "; ".join(f"{d['context_length']} tokens ({d['mode']}): " + ", ".join(f"{m} {n}" for m, n in
                        d["per_model"].items()) + f", {d['shared']} shared" for d in diff)
    create_markdown_artifact(md, key="ctxbench-results", description=f"ctxbench results for {build}")
    return str(p)


@flow(name="report")
def report_flow(build: str) -> str:
    return report_task(build)


def _track_build_model(t: Track) -> type[BaseModel]:
    """``{"track": NAME, "config": {...}, "out": ..., "versioned": ..., <inputs>}``: one build of the nightly
    flow (a typed form per track in the Prefect UI)."""
    try:
        cfg_field: Any = (t.Config, Field(default_factory=t.Config))
        t.Config()
    except Exception:
        cfg_field = (t.Config, ...)
    return create_model(f"{t.Config.__name__}Build", track=(Literal[t.name], t.name), config=cfg_field,
                        out=(str, f"runs/{t.name}"), versioned=(bool, True),
                        **{k: (tp, d) for k, (tp, d) in t.inputs.items()})


class AnyTrackBuild(BaseModel):
    """A build of a track registered after this module was imported (e.g. a plugin): its config as a dict,
    validated by the track's Config when the flow runs."""

    track: str
    config: dict[str, Any] = Field(default_factory=dict)
    out: str | None = None
    versioned: bool = True
    inputs: dict[str, Any] = Field(default_factory=dict)


# a typed form per registered track in the UI (tried in order), any other registered track's build last
TrackBuild = Annotated[Union[tuple([*(_track_build_model(t) for t in registered_tracks()), AnyTrackBuild])],
                       Field(union_mode="left_to_right")]
DefaultConfig = default_track().Config


def _nightly_one(t: Track, cfg: BaseModel, out: str, versioned: bool, models: list[EvalConfig], workers: int = 1,
                 pause_timeout_s: int = 86400, **inputs) -> dict:
    b = get_build_flow(t)(cfg, out, versioned=versioned, **inputs)
    bdir = str(b["out"])
    return {"build": b, "evaluations": {m.model: evaluate_flow(bdir, m, workers=workers,
                                                               pause_timeout_s=pause_timeout_s) for m in models},
            "scores": score_flow(bdir),
            "report": report_flow(bdir), "out": str(Path(out)), "build_dir": bdir}


def get_build_flow(track: Track | str):
    """The ``build_<track>`` flow of a registered track."""
    t = get_track(track) if isinstance(track, str) else track
    f = globals().get(f"build_{t.name}_flow")
    if f is None:  # registered after this module was imported
        f = globals()[f"build_{t.name}_flow"] = _build_flow(t)
    return f


@flow(name="nightly")
def nightly(build: DefaultConfig | None = DefaultConfig(lengths=[2048, 4096]),  # type: ignore[valid-type]
            out: str = "runs/default",
            models: list[EvalConfig] = [EvalConfig(model=EMBEDDED_MODEL, per_length=8)],  # noqa: B006
            tracks: list[TrackBuild] = [],  # type: ignore[valid-type]  # noqa: B006
            versioned: bool = True, workers: int = 1, pause_timeout_s: int = 86400) -> dict:
    """build → evaluate (each model) → score → report for the default track's ``build`` into ``out`` (None: skip
    it) and for every entry of ``tracks`` (``{"track": NAME, "config": {...}, "out": DIR, "versioned": bool}`` plus
    the track's inputs, e.g. ``s2`` to fetch new Semantic Scholar clusters before an article build).

    Incremental (ctxbench.run.incremental): with ``versioned`` the build goes to ``out/<build_hash>`` (``out/latest``
    points at it, older builds stay); unchanged inputs build nothing, stored calls are not repeated, and score and
    report run only when their inputs changed. ``workers``: evaluation tasks per model (``evaluate``'s
    ``workers``: sharded by context). ``pause_timeout_s``: how long a provider outage pauses an evaluation
    (``evaluate``'s; 0: not at all, its summary says ``paused``)."""
    res: dict = {}
    if build is not None:
        res = _nightly_one(default_track(), build, out, versioned, models, workers, pause_timeout_s)
    for tb in tracks:
        t = get_track(tb.track)
        if isinstance(tb, AnyTrackBuild):
            cfg, tout, inputs = t.config(tb.config), tb.out or f"runs/{t.name}", tb.inputs
        else:
            cfg, tout, inputs = tb.config, tb.out, {k: getattr(tb, k) for k in t.inputs}
        res.setdefault("tracks", []).append({"track": t.name, **_nightly_one(t, cfg, tout, tb.versioned, models,
                                                                             workers, pause_timeout_s, **inputs)})
    return res
