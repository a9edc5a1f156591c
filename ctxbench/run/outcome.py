"""What a finished build, evaluation or ``ctxbench run`` left behind, read back for the closing summary: the
evaluation summary inside an engine's result, the stored calls that failed, the stored replies cut off by the output
budget, and why a build holds no instance. The CLI prints these (``ctxbench.cli.run``, ``ctxbench.cli.build``); the
numbers come from here so that the commands hold no logic of their own."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ctxbench.analysis.core import results_table
from ctxbench.core.storage import read_table
from ctxbench.models.cache import ResponseCache
from ctxbench.models.runner import asked_again
from ctxbench.run.evaluate import EvalConfig, EvalSummary, plan_requests


def engine_summary(res: dict | None, model: str) -> EvalSummary | None:
    """The evaluation summary of ``model`` in an engine's result: the Prefect ``nightly`` flow's
    (``evaluations[model]["workers"][0]``, one worker) or :func:`pipelines.luigi_tasks.run_luigi`'s
    (``evaluations[model]``, when the evaluation ran in this call), as an :class:`EvalSummary` (keys that are no
    field of it are left out); None when there is none (e.g. the luigi task was already complete)."""
    ev = (res or {}).get("evaluations", {}).get(model)
    if isinstance(ev, dict) and ev.get("workers"):
        s = ev["workers"][0]
    elif isinstance(ev, dict) and "selected" in ev:
        s = ev
    else:
        return None
    return EvalSummary(**{k: v for k, v in s.items() if k in EvalSummary.__dataclass_fields__})


def failed_calls(build: str | Path, model: str) -> list[str]:
    """The stored calls of ``model`` in ``build``'s ``responses.parquet`` that failed (a status the same command asks
    again, :func:`ctxbench.models.runner.asked_again`: ``error``, ``empty_reply``, ...), left by this run or an earlier
    one, each as ``instance_id: error`` (the status where the row holds no error text); [] when none."""
    rows = read_table(Path(build) / "responses.parquet", "responses").select(
        ["instance_id", "model", "status", "error"]).to_pylist()
    return [f"{r['instance_id']}: {r['error'] or r['status']}" for r in rows
            if r["model"] == model and asked_again(r["status"])]


def stored_cut_off(build: str | Path, model: str, scope: RunScope | None = None) -> int:
    """How many scored replies of ``model`` in ``build`` the output budget ended before they finished (the
    ``cut_off`` column of :func:`ctxbench.analysis.core.results_table`, primary matchers, summed over lengths and
    modes; with ``scope``, only the replies it keeps, as ``run``'s table counts them); each is scored 0."""
    return sum(r.get("cut_off", 0) for r in results_table(build, primary_only=True, only=scope)
               if r["model"] == model)


@dataclass(frozen=True)
class RunScope:
    """What one ``ctxbench run`` selected on its build, as a predicate on rows of ``scores.parquet`` (the rows its
    results table counts): the replies of ``model`` whose request key is one of ``keys`` (the run's sample ×
    modes × samples at its settings, stored or not), and the replies of every other model on the run's
    ``instances`` (the sample is the same for every model: models run one after another compare on it). Replies
    of ``model`` asked otherwise (e.g. by ``ctxbench evaluate`` on more instances or samples) are left out."""

    model: str
    keys: frozenset[str]
    instances: frozenset[str]

    def __call__(self, row: dict) -> bool:
        if row["model"] == self.model:
            return row.get("request_key") in self.keys
        return row["instance_id"] in self.instances


def run_scope(build: str | Path, cfg: EvalConfig) -> RunScope:
    """The :class:`RunScope` of an evaluation ``cfg`` on ``build``: its requests as
    :func:`ctxbench.run.evaluate.plan_requests` lists them (the same list the evaluation asked or found stored).
    Raises InputError where the build cannot be read (as ``plan_requests``)."""
    plan = plan_requests(Path(build), cfg, ResponseCache())
    asked = plan.stored + plan.todo
    return RunScope(cfg.model, frozenset(t["request_key"] for t in asked), frozenset(t["instance_id"] for t in asked))


def outside_scope(build: str | Path, scope: RunScope) -> dict[str, int]:
    """Model -> how many scored replies (distinct request keys of ``scores.parquet``) of ``build`` ``scope``
    leaves out, for the models with any: what ``run``'s table does not count and ``ctxbench score`` and the
    report do. {} when the build holds no score."""
    rows = read_table(Path(build) / "scores.parquet", "scores").select(
        ["model", "instance_id", "sample", "request_key"]).to_pylist()
    replies = {(r["model"], r["request_key"] or f"{r['instance_id']}|{r['sample']}") for r in rows if not scope(r)}
    return dict(sorted(Counter(m for m, _ in replies).items()))


def build_counts(build: str | Path) -> tuple[int, int]:
    """(instances, quarantined rows) of a build, from the Parquet footers (no table is read); a build without a
    quarantine file has 0 quarantined rows."""
    build = Path(build)
    q = build / "quarantine.parquet"
    return (pq.read_metadata(build / "instances.parquet").num_rows,
            pq.read_metadata(q).num_rows if q.exists() else 0)


def why_no_instances(build: str | Path, n_quarantined: int) -> str:
    """Why a build holds no instance, one line: the most frequent quarantine reasons (their class, the text before
    the first colon, with counts; five at most), or that the inputs gave no candidate at all."""
    build = Path(build)
    if not n_quarantined:
        return (f"the build {build} has 0 instances and quarantined nothing: its inputs gave no question x context "
                f"to build (check the query set, the lengths and the source)")
    try:
        reasons = pq.read_table(build / "quarantine.parquet", columns=["reason"]).column("reason").to_pylist()
    except (OSError, KeyError, ValueError):
        reasons = []
    classes: dict[str, int] = {}
    for r in reasons:
        k = str(r or "no reason").split(":", 1)[0].strip()
        classes[k] = classes.get(k, 0) + 1
    top = sorted(classes.items(), key=lambda kv: -kv[1])[:5]
    return (f"the build {build} has 0 instances: no question x context passed its checks; quarantine.parquet "
            f"holds {n_quarantined} row(s): " + "; ".join(f"{k} ({n})" for k, n in top)
            + f" (every reason in {build / 'quarantine.parquet'})")
