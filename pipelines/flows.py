"""Prefect flows: ``build_holobench``, ``evaluate``, ``score``, ``report`` and the parent ``nightly``.

They run without a server (Prefect starts a temporary local API) and against ``prefect server start``
(``PREFECT_API_URL``). Each flow calls library functions; one ``evaluate`` task makes many model calls
(a Prefect task costs tens of milliseconds, one task per call would not scale).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact

from ctxbench.evaluate import EvalConfig, evaluate_build
from ctxbench.models.local_server import EMBEDDED_MODEL, LocalServer
from ctxbench.report import build_report, results_table
from ctxbench.score import score_build
from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench


@task(name="build-holobench", retries=1, retry_delay_seconds=2)
def build_task(cfg: HoloBenchConfig, out: str) -> dict:
    """Verbalize, assemble contexts, compute and check gold answers, validate and write the build."""
    r = build_holobench(cfg, out)
    return {"out": str(r.out), "build_hash": r.build_hash, "instances": r.n_instances,
            "quarantined": r.n_quarantined, "skipped": r.skipped}


@flow(name="build_holobench")
def build_holobench_flow(cfg: HoloBenchConfig = HoloBenchConfig(), out: str = "runs/default") -> dict:
    """Build a verbalized-database benchmark into ``out`` (an unchanged build is detected by its hash and left
    as it is, before any preprocessing)."""
    return build_task(cfg, out)


@task(name="evaluate-calls", retries=2, retry_delay_seconds=5)
def evaluate_task(build: str, cfg: EvalConfig) -> dict:
    """All calls of one model on one build (many calls in one task). Starts the embedded model's server when
    ``cfg.model`` is the embedded default and no base URL is given."""
    local = cfg.model == EMBEDDED_MODEL and not cfg.base_url
    s = evaluate_build(build, cfg, server=LocalServer if local else None)
    return s.__dict__


@flow(name="evaluate")
def evaluate_flow(build: str, cfg: EvalConfig) -> dict:
    """Evaluate one model on an existing build (a backfill calls only this model)."""
    return evaluate_task(build, cfg)


@task(name="score")
def score_task(build: str) -> int:
    return score_build(build)


@flow(name="score")
def score_flow(build: str) -> int:
    return score_task(build)


@task(name="report")
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
            models: list[EvalConfig] = [EvalConfig(model=EMBEDDED_MODEL, per_length=8)]) -> dict:  # noqa: B006
    """build → evaluate (each model) → score → report."""
    b = build_holobench_flow(build, out)
    evals = {m.model: evaluate_flow(out, m) for m in models}
    n = score_flow(out)
    report = report_flow(out)
    return {"build": b, "evaluations": evals, "scores": n, "report": report, "out": str(Path(out))}
