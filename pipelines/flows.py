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

from ctxbench.evaluate import EvalConfig, evaluate_build
from ctxbench.models.local_server import EMBEDDED_MODEL, LocalServer
from ctxbench.report import build_report, results_table
from ctxbench.score import score_build
from ctxbench.tracks import holobench
from ctxbench.tracks import scitrek as sci
from ctxbench.tracks.holobench import HoloBenchConfig
from ctxbench.tracks.scitrek import SciTrekConfig


@task(name="load", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def load_task(cfg: HoloBenchConfig, out: str, force: bool = False):
    return holobench.load_stage(cfg, out, force)


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
def write_task(loaded, src, instances, quarantine, n_contexts) -> dict:
    return holobench.write_stage(loaded, src, instances, quarantine, n_contexts).__dict__


@flow(name="build_holobench")
def build_holobench_flow(cfg: HoloBenchConfig = HoloBenchConfig(), out: str = "runs/default",
                         force: bool = False) -> dict:
    """Build a verbalized-database benchmark into ``out``: load → verbalize → assemble → gold → validate → write.
    An unchanged build is detected by its hash in ``load`` and left as it is."""
    loaded = load_task(cfg, out, force)
    if loaded.existing is not None:
        return loaded.existing.__dict__
    # quote(): large in-memory objects are passed as they are, not walked by Prefect's parameter resolution
    src = verbalize_task(quote(loaded))
    asm = assemble_task(quote(loaded), quote(src))
    instances, quarantine = gold_task(quote(loaded), quote(asm))
    validate_task(quote(loaded), quote(src), quote(instances))
    return write_task(quote(loaded), quote(src), quote(instances), quote(quarantine), len(asm.contexts))


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
def sci_write_task(loaded, conv, col, instances, quarantine, counts) -> dict:
    return sci.write_stage(loaded, conv, col, instances, quarantine, counts).__dict__


@flow(name="build_scitrek")
def build_scitrek_flow(cfg: SciTrekConfig, out: str = "runs/scitrek", force: bool = False) -> dict:
    """Build a scientific-article benchmark into ``out``: fetch → convert → database → collections → questions →
    validate → write. An unchanged build is detected by its hash in ``fetch`` and left as it is."""
    loaded = sci_fetch_task(cfg, out, force)
    if loaded.existing is not None:
        return loaded.existing.__dict__
    conversions, conv_q = sci_convert_task(quote(loaded))
    conv = sci_database_task(quote(loaded), quote(conversions))
    col = sci_collections_task(quote(loaded), quote(conv))
    instances, q_q, counts = sci_questions_task(quote(loaded), quote(conv), quote(col))
    sci_validate_task(quote(loaded), quote(col), quote(instances))
    quarantine = loaded.quarantine + conv_q + conv.quarantine + col.quarantine + q_q
    return sci_write_task(quote(loaded), quote(conv), quote(col), quote(instances), quote(quarantine), counts)


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


@flow(name="evaluate")
def evaluate_flow(build: str, cfg: EvalConfig, secrets: dict[str, str] | None = None) -> dict:
    """Evaluate one model on an existing build (a backfill calls only this model). ``secrets``: environment
    variable -> Prefect Secret block name, for API keys."""
    return evaluate_task(build, cfg, secrets)


@task(name="score", cache_policy=NO_CACHE)
def score_task(build: str) -> int:
    return score_build(build).rows


@flow(name="score")
def score_flow(build: str) -> int:
    return score_task(build)


@task(name="report", cache_policy=NO_CACHE)
def report_task(build: str) -> str:
    p = build_report(build)
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
            scitrek: SciTrekConfig | None = None, scitrek_out: str = "runs/scitrek") -> dict:
    """build → evaluate (each model) → score → report; with ``scitrek`` the scientific-article benchmark is built
    (new PDFs converted only) and evaluated, scored and reported in ``scitrek_out`` the same way."""
    b = build_holobench_flow(build, out)
    evals = {m.model: evaluate_flow(out, m) for m in models}
    n = score_flow(out)
    report = report_flow(out)
    res = {"build": b, "evaluations": evals, "scores": n, "report": report, "out": str(Path(out))}
    if scitrek is not None:
        sb = build_scitrek_flow(scitrek, scitrek_out)
        res["scitrek"] = {"build": sb, "evaluations": {m.model: evaluate_flow(scitrek_out, m) for m in models},
                          "scores": score_flow(scitrek_out), "report": report_flow(scitrek_out),
                          "out": str(Path(scitrek_out))}
    return res
