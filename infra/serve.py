"""Serve ctxbench's Prefect deployments from one process (``python infra/serve.py``).

Deployments: ``nightly`` (cron, time zone configurable: CTXBENCH_NIGHTLY_CRON, default "0 2 * * *";
CTXBENCH_TZ, default UTC), ``build_holobench``, ``build_scitrek``, ``evaluate``, ``score``, ``report``. Parameters are pydantic
models, so the Prefect UI shows a form with defaults and validation. Point PREFECT_API_URL at a server
(`bash infra/start.sh` starts one) or let Prefect start a temporary one.
"""

from __future__ import annotations

import os

from prefect import serve
from prefect.schedules import Cron

from pipelines.flows import build_holobench_flow, build_scitrek_flow, evaluate_flow, nightly, report_flow, score_flow


def deployments() -> list:
    """The deployment objects (also used by tests)."""
    cron = os.environ.get("CTXBENCH_NIGHTLY_CRON", "0 2 * * *")
    tz = os.environ.get("CTXBENCH_TZ", "UTC")
    return [
        nightly.to_deployment(name="nightly", schedule=Cron(cron, timezone=tz),
                              description="build → evaluate → score → report on the configured benchmarks"),
        build_holobench_flow.to_deployment(name="build_holobench"),
        build_scitrek_flow.to_deployment(name="build_scitrek"),
        evaluate_flow.to_deployment(name="evaluate", description="evaluate (or backfill) one model on a build"),
        score_flow.to_deployment(name="score"),
        report_flow.to_deployment(name="report"),
    ]


if __name__ == "__main__":
    serve(*deployments())
