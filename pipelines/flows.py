"""Prefect flows: ``build_holobench``, ``build_scitrek``, ``evaluate``, ``score``, ``report`` and the parent ``nightly``.

They run without a server (Prefect starts a temporary local API) and against ``prefect server start``
(``PREFECT_API_URL``). Each flow calls library functions; one ``evaluate`` task makes many model calls
(a Prefect task costs tens of milliseconds, one task per call would not scale). Tasks pass large in-memory
objects (databases, contexts), so Prefect's input-hashing cache is off (NO_CACHE): whole steps are skipped by
the build hash instead.
"""

from __future__ import annotations

import os
from pathlib import Path

# a flow run without a server starts an ephemeral API server; on a loaded 2-core machine that takes longer than
# Prefect's 20-second default, so allow 3 minutes (an explicit setting wins)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote
from prefect.artifacts import create_markdown_artifact

from ctxbench.backfill import BackfillConfig, find_builds
from ctxbench.evaluate import EvalConfig, evaluate_build, unanswered_calls
from ctxbench.incremental import report_if_changed, score_if_changed
from ctxbench.models.local_server import EMBEDDED_MODEL, LocalServer
from ctxbench.report import results_table
from ctxbench.tracks import holobench
from ctxbench.tracks import scitrek as sci
from ctxbench.tracks.holobench import HoloBenchConfig
from ctxbench.tracks.scitrek import S2Fetch, SciTrekConfig
from ctxbench.tracks import needles
from ctxbench.tracks.needles import NeedlesConfig


@task(name="load", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def load_task(cfg: HoloBenchConfig, out: str, force: bool = False, versioned: bool = False):
    return holobench.load_stage(cfg, out, force, versioned)


@task(name="verbalize", cache_policy=NO_CACHE)
def verbalize_task(loaded):
    return holobench.verbalize_stage(loaded)


@task(name="assemble", cache_policy=NO_CACHE)
def assemble_task(loaded, src):
    return holobench.assemble_stage(loaded, src)


@task(name="gold", cache_policy=NO_CACHE)
def gold_task(loaded, asm):
    return holobench.gold_stage(loaded, asm)


@task(name="validate", cache_policy=NO_CACHE)
def validate_task(loaded, src, instances):
    holobench.validate_stage(loaded, src, instances)


@task(name="write", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def write_task(loaded, src, instances, quarantine, asm) -> dict:
    return holobench.write_stage(loaded, src, instances, quarantine, asm).__dict__


@flow(name="build_holobench")
def build_holobench_flow(cfg: HoloBenchConfig = HoloBenchConfig(), out: str = "runs/default",
                         force: bool = False, versioned: bool = False) -> dict:
    """Build a verbalized-database benchmark into ``out``: load → verbalize → assemble → gold → validate → write.
    An unchanged build is detected by its hash in ``load`` and left as it is. ``versioned``: ``out`` is a run root,
    the build goes to ``out/<build_hash>`` and ``out/latest`` points at it (ctxbench.incremental)."""
    loaded = load_task(cfg, out, force, versioned)
    if loaded.existing is not None:
        return loaded.existing.__dict__
    # quote(): large in-memory objects are passed as they are, not walked by Prefect's parameter resolution
    src = verbalize_task(quote(loaded))
    asm = assemble_task(quote(loaded), quote(src))
    instances, quarantine = gold_task(quote(loaded), quote(asm))
    validate_task(quote(loaded), quote(src), quote(instances))
    return write_task(quote(loaded), quote(src), quote(instances), quote(quarantine), quote(asm))


@task(name="fetch-s2", retries=3, retry_delay_seconds=30, cache_policy=NO_CACHE)
def sci_fetch_s2_task(cfg: SciTrekConfig, s2: S2Fetch):
    return sci.fetch_s2_stage(cfg, s2)  # PDFs already downloaded are kept: a retry fetches only what is missing


@task(name="fetch", retries=3, retry_delay_seconds=10, cache_policy=NO_CACHE)
def sci_fetch_task(cfg: SciTrekConfig, out: str, force: bool = False):
    return sci.fetch_stage(cfg, out, force)


@task(name="convert", retries=2, retry_delay_seconds=10, cache_policy=NO_CACHE)
def sci_convert_task(loaded):
    return sci.convert_stage(loaded)  # cached by PDF hash: a retry or a nightly rerun converts only new PDFs


@task(name="database", cache_policy=NO_CACHE)
def sci_database_task(loaded, conversions):
    return sci.database_stage(loaded, conversions)


@task(name="collections", cache_policy=NO_CACHE)
def sci_collections_task(loaded, conv):
    return sci.collections_stage(loaded, conv)


@task(name="questions", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE)
def sci_questions_task(loaded, conv, col):
    questions, q, counts = sci.questions_stage(loaded, conv, col)
    return sci.instances_stage(loaded, col, questions), q, counts


@task(name="validate", cache_policy=NO_CACHE)
def sci_validate_task(loaded, col, instances):
    sci.validate_stage(loaded, col, instances)


@task(name="write", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def sci_write_task(loaded, conv, col, instances, conv_q, q_q, counts) -> dict:
    return sci.write_stage(loaded, conv, col, instances, conv_q, q_q, counts).__dict__


@flow(name="build_scitrek")
def build_scitrek_flow(cfg: SciTrekConfig, out: str = "runs/scitrek", force: bool = False,
                       s2: S2Fetch | None = None) -> dict:
    """Build a scientific-article benchmark into ``out``: fetch → convert → database → collections → questions →
    validate → write. With ``s2``, clusters are first fetched from Semantic Scholar into ``cfg.pdfs`` (new papers
    only). An unchanged build is detected by its hash in ``fetch`` and left as it is."""
    if s2 is not None:
        sci_fetch_s2_task(cfg, s2)
    loaded = sci_fetch_task(cfg, out, force)
    if loaded.existing is not None:
        return loaded.existing.__dict__
    conversions, conv_q = sci_convert_task(quote(loaded))
    conv = sci_database_task(quote(loaded), quote(conversions))
    col = sci_collections_task(quote(loaded), quote(conv))
    instances, q_q, counts = sci_questions_task(quote(loaded), quote(conv), quote(col))
    sci_validate_task(quote(loaded), quote(col), quote(instances))
    return sci_write_task(quote(loaded), quote(conv), quote(col), quote(instances), quote(conv_q), quote(q_q), counts)


@task(name="needles-load", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def needles_load_task(cfg: NeedlesConfig, out: str, force: bool = False):
    return needles.load_stage(cfg, out, force)


@task(name="needles-verify", cache_policy=NO_CACHE)
def needles_verify_task(loaded) -> dict:
    return needles.verify_stage(loaded)


@task(name="needles-count", cache_policy=NO_CACHE)
def needles_count_task(loaded):
    return needles.count_stage(loaded)


@task(name="needles-assemble", cache_policy=NO_CACHE)
def needles_assemble_task(loaded, counts):
    return needles.assemble_stage(loaded, counts)


@task(name="needles-validate", cache_policy=NO_CACHE)
def needles_validate_task(asm):
    needles.validate_stage(asm)


@task(name="needles-write", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def needles_write_task(loaded, asm, checked) -> dict:
    r = needles.write_stage(loaded, asm, checked)
    return {**r.__dict__, "out": str(r.out)}


@flow(name="build_needles")
def build_needles_flow(cfg: NeedlesConfig, out: str = "out/needles", force: bool = False) -> dict:
    """Build a planted-fact benchmark into ``out``: load → verify (planted facts and names absent) → count
    (each paragraph once per tokenizer) → assemble (per-model haystacks, needles, chains) → validate → write."""
    loaded = needles_load_task(cfg, out, force)
    if loaded.existing is not None:
        return {**loaded.existing.__dict__, "out": str(loaded.existing.out)}
    checked = needles_verify_task(quote(loaded))
    counts = needles_count_task(quote(loaded))
    asm = needles_assemble_task(quote(loaded), quote(counts))
    needles_validate_task(quote(asm))
    return needles_write_task(quote(loaded), quote(asm), checked)


@task(name="evaluate-calls", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)
def evaluate_task(build: str, cfg: EvalConfig, secrets: dict[str, str] | None = None) -> dict:
    """All calls of one model on one build (many calls in one task). Starts the embedded model's server when
    ``cfg.model`` is the embedded default and no base URL is given. ``secrets`` maps an environment variable
    (e.g. ``OPENAI_API_KEY``) to the name of a Prefect Secret block holding the key; the key is put in this
    process's environment only, never in a parameter, result, artifact or log."""
    if secrets:
        import os

        from prefect.blocks.system import Secret

        for env, block in secrets.items():
            os.environ[env] = Secret.load(block).get()
    local = cfg.model == EMBEDDED_MODEL and not cfg.base_url
    s = evaluate_build(build, cfg, server=LocalServer if local else None)
    return s.__dict__


def task_runner():
    """The task runner of flows that fan out (``evaluate`` with several workers): Prefect's Dask task runner on the
    scheduler at ``CTXBENCH_DASK_ADDRESS`` (e.g. ``tcp://scheduler:8786``, a real cluster), or on a local Dask
    cluster of ``CTXBENCH_DASK_WORKERS`` worker processes; else Prefect's default thread pool."""
    addr, n = os.environ.get("CTXBENCH_DASK_ADDRESS"), os.environ.get("CTXBENCH_DASK_WORKERS")
    if addr or n:
        from prefect_dask import DaskTaskRunner

        if addr:
            return DaskTaskRunner(address=addr)
        return DaskTaskRunner(cluster_kwargs={"n_workers": int(n), "threads_per_worker": 1, "processes": True})
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
    configured), sharing the response cache: each call is claimed by one of them, none is made twice. A provider
    outage longer than the retry budget pauses this flow run (resume it from the UI: only the missing calls are
    made); nothing is marked wrong. Returns the summary (totals over workers; ``workers``: each one's)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if cfg.model == EMBEDDED_MODEL and not cfg.base_url:
        workers = 1  # one embedded server on this machine
    from prefect.flow_runs import pause_flow_run

    for attempt in range(1000):
        if workers == 1:
            parts = [evaluate_task(build, cfg, secrets)]
        else:
            futures = [evaluate_task.with_options(task_run_name=f"evaluate-calls-{i}").submit(build, cfg, secrets)
                       for i in range(workers)]
            parts = [f.result() for f in futures]
        create_markdown_artifact(_summary_md(build, cfg.model, parts), key="ctxbench-evaluation",
                                 description=f"evaluation of {cfg.model}: calls, retries and waits")
        out = {k: sum(p[k] for p in parts) for k in ("calls", "from_cache", "taken_by_others", "new_rows",
                                                     "over_length", "errors", "retries", "retry_delay_s")}
        statuses = {p["status"] for p in parts}
        left = parts[0]["unfinished"] if workers == 1 else unanswered_calls(build, cfg)
        out.update(selected=parts[0]["selected"], already_stored=min(p["already_stored"] for p in parts),
                   unfinished=left, status="paused" if "paused" in statuses else "incomplete" if left
                   else "complete", notes=[n for p in parts for n in p["notes"]], workers=parts,
                   resumes=attempt)
        if out["status"] != "paused":
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
    rows = results_table(build)
    md = "| model | context length | n | score |\n|---|---|---|---|\n" + "\n".join(
        f"| {r['model']} | {r['context_length']} | {r['n']} | {r['score']:.3f} |" for r in rows)
    create_markdown_artifact(md, key="ctxbench-results", description=f"ctxbench results for {build}")
    return str(p)


@flow(name="report")
def report_flow(build: str) -> str:
    return report_task(build)


@flow(name="nightly")
def nightly(build: HoloBenchConfig = HoloBenchConfig(lengths=[2048, 4096]), out: str = "runs/default",
            models: list[EvalConfig] = [EvalConfig(model=EMBEDDED_MODEL, per_length=8)],  # noqa: B006
            scitrek: SciTrekConfig | None = None, scitrek_out: str = "runs/scitrek",
            scitrek_s2: S2Fetch | None = None, versioned: bool = True) -> dict:
    """build → evaluate (each model) → score → report; with ``scitrek`` the scientific-article benchmark is built
    (``scitrek_s2``: after fetching new clusters from Semantic Scholar; new PDFs converted only) and evaluated,
    scored and reported in ``scitrek_out`` the same way.

    Incremental (ctxbench.incremental): with ``versioned`` the build goes to ``out/<build_hash>`` (``out/latest``
    points at it, older builds stay); unchanged inputs build nothing, stored calls are not repeated, and score and
    report run only when their inputs changed."""
    b = build_holobench_flow(build, out, versioned=versioned)
    bdir = str(b["out"])
    evals = {m.model: evaluate_flow(bdir, m) for m in models}
    n = score_flow(bdir)
    report = report_flow(bdir)
    res = {"build": b, "evaluations": evals, "scores": n, "report": report, "out": str(Path(out)), "build_dir": bdir}
    if scitrek is not None:
        sb = build_scitrek_flow(scitrek, scitrek_out, s2=scitrek_s2)
        res["scitrek"] = {"build": sb, "evaluations": {m.model: evaluate_flow(scitrek_out, m) for m in models},
                          "scores": score_flow(scitrek_out), "report": report_flow(scitrek_out),
                          "out": str(Path(scitrek_out))}
    return res
