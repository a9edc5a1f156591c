"""Serve ctxbench's Prefect deployments from one process (``python infra/serve.py``).

One deployment per flow defined in ``pipelines/flows.py`` (a flow added there is served without touching this
file), named after the flow: ``nightly`` on a cron schedule (``CTXBENCH_NIGHTLY_CRON``, default "0 2 * * *", in the
time zone ``CTXBENCH_TZ``, default UTC), each build flow (``build_holobench``, ``build_scitrek``, ...),
``evaluate``, ``backfill``, ``score``, ``report``. Parameters are pydantic models, so the Prefect UI shows a form with defaults and validation.
Point PREFECT_API_URL at a server (``bash infra/start.sh`` starts one and this) or let Prefect start a temporary one.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
from pathlib import Path


def _interrupted_while_importing(*_) -> None:  # Prefect's imports take seconds: a Ctrl-C then is no traceback
    print("interrupted", file=sys.stderr, flush=True)
    os._exit(130)


if __name__ == "__main__":  # the script only: importing this module (tests) changes no signal handler
    signal.signal(signal.SIGINT, _interrupted_while_importing)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python infra/serve.py` from anywhere

from prefect import Flow, serve  # noqa: E402
from prefect.schedules import Cron  # noqa: E402


def flows() -> dict[str, Flow]:
    """Every flow object defined in ``pipelines.flows``, by flow name."""
    import pipelines.flows as mod

    return {f.name: f for _, f in inspect.getmembers(mod, lambda o: isinstance(o, Flow))}


def deployments() -> list:
    """The deployment objects (also used by tests): one per flow, ``nightly`` with its schedule."""
    cron = os.environ.get("CTXBENCH_NIGHTLY_CRON", "0 2 * * *")
    tz = os.environ.get("CTXBENCH_TZ", "UTC")
    out = []
    for name, f in sorted(flows().items()):
        doc = (inspect.getdoc(f.fn) or "").split("\n\n")[0].replace("\n", " ")
        kw = {"schedule": Cron(cron, timezone=tz)} if name == "nightly" else {}
        out.append(f.to_deployment(name=name, description=doc or None, **kw))
    return out


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    signal.signal(signal.SIGINT, signal.default_int_handler)  # from here a Ctrl-C is run_main's KeyboardInterrupt
    run_main(lambda: serve(*deployments()))  # Ctrl-C: exit 130, no traceback
