"""The second engine: build → evaluate → score → report as luigi tasks, for teams without a Prefect server
(``ctxbench run --engine luigi``; luigi's local scheduler, no daemon). ``BuildTask`` builds any registered track
by running its declared stages (the stages hand in-memory objects to each other, which luigi tasks could only pass
through files, so one luigi task runs them all).

Thin wrappers over the same library calls as the Prefect flows in ``pipelines/flows.py`` (one stage function per
task, no benchmark logic here), so both engines write identical artifacts for the same configuration. Parameters
are the same pydantic models, passed as JSON. A task is *complete* when its library-level check says so: the build
by its build hash, an evaluation when every request key is stored, score and report when their inputs hash is
current (ctxbench.run.incremental) — so a rerun with unchanged inputs does nothing but those checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import luigi

from ctxbench.run.evaluate import EvalConfig, evaluate_build
from ctxbench.run.incremental import report_if_changed, report_is_current, score_if_changed, scores_are_current
from ctxbench.core.storage import latest_build, pending_parts
from ctxbench.models.cache import ResponseCache
from ctxbench.models.backends import server_for
from ctxbench.core.track import check_build_dir, default_track, get_track, run_stages, track_for_config


class _KeepsFailure:
    """A task that keeps the exception its ``run`` raised (``failure``): :func:`run_luigi` raises it again, so a bad
    input ends the run with its own error (an InputError naming the input, as in ``ctxbench build``), not a luigi
    summary."""

    failure: BaseException | None = None

    def on_failure(self, exception):
        self.failure = exception
        return super().on_failure(exception)


class BuildTask(_KeepsFailure, luigi.Task):
    """A build of any registered track into ``out`` (``versioned``: a run root, ``out/<build_hash>``,
    ``out/latest``): runs the track's stages in their declared order (ctxbench.core.track.run_stages); complete
    when the track's build-directory check finds this build."""

    track = luigi.Parameter(default="", description="registered track name (default: the default track)")
    cfg = luigi.Parameter(description="the track's Config as JSON")
    out = luigi.Parameter()
    versioned = luigi.BoolParameter(default=True)

    def _track(self):
        return get_track(self.track) if self.track else default_track()

    def _check(self):
        t = self._track()
        return check_build_dir(t, t.Config.model_validate_json(self.cfg), self.out, versioned=self.versioned)

    def build_dir(self) -> Path:
        return Path(self._check()[0].out)

    def complete(self) -> bool:
        return self._check()[1] is not None

    def run(self) -> None:
        t = self._track()
        run_stages(t, t.Config.model_validate_json(self.cfg), self.out, versioned=self.versioned)


class EvaluateTask(_KeepsFailure, luigi.Task):
    """One model on the build: complete when every request of this configuration is stored, or when this run
    stopped by its own rule with requests left unasked: ``--max-cost`` reached (status ``budget``) or the
    ``--target-ci`` half-width reached (a downstream task must not fail as "unfulfilled dependency"; luigi keeps one
    instance per parameter set, so the score and report tasks see it)."""

    stopped_by_rule = False
    summary: dict | None = None  # the EvalSummary of this process's run of the task (as a dict), if it ran

    track = luigi.Parameter(default="")
    cfg = luigi.Parameter()
    out = luigi.Parameter()
    versioned = luigi.BoolParameter(default=True)
    eval_cfg = luigi.Parameter(description="EvalConfig as JSON")

    def requires(self):
        return BuildTask(track=self.track, cfg=self.cfg, out=self.out, versioned=self.versioned)

    def complete(self) -> bool:
        from ctxbench.run.evaluate import plan_requests

        if self.stopped_by_rule:
            return True
        if not self.requires().complete():
            return False
        if pending_parts(self.requires().build_dir() / "responses.parquet"):
            return False  # a killed run's rows not yet merged: run() merges them (evaluate_build), asking nothing again
        plan = plan_requests(self.requires().build_dir(), EvalConfig.model_validate_json(self.eval_cfg), ResponseCache())
        return not plan.todo

    def run(self) -> None:
        ec = EvalConfig.model_validate_json(self.eval_cfg)
        s = evaluate_build(self.requires().build_dir(), ec, server=server_for(ec.model, ec.base_url))
        self.summary = dict(s.__dict__)
        if s.unfinished:
            raise RuntimeError(f"{s.unfinished} call(s) of {ec.model} did not finish: {s.notes[:3]}; rerun to retry")
        # the spend cap or the target half-width ended it with calls not asked: done, as `ctxbench evaluate` says
        self.stopped_by_rule = s.status == "budget" or (ec.target_ci is not None and s.not_asked > 0)


class ScoreTask(_KeepsFailure, luigi.Task):
    track = luigi.Parameter(default="")
    cfg = luigi.Parameter()
    out = luigi.Parameter()
    versioned = luigi.BoolParameter(default=True)
    models = luigi.Parameter(description="JSON list of EvalConfig")

    def requires(self):
        return [EvaluateTask(track=self.track, cfg=self.cfg, out=self.out, versioned=self.versioned,
                             eval_cfg=json.dumps(m)) for m in json.loads(self.models)]

    def _dir(self) -> Path:
        return BuildTask(track=self.track, cfg=self.cfg, out=self.out, versioned=self.versioned).build_dir()

    def complete(self) -> bool:
        return all(r.complete() for r in self.requires()) and scores_are_current(self._dir())

    def run(self) -> None:
        score_if_changed(self._dir())


class ReportTask(ScoreTask):
    def requires(self):
        return ScoreTask(track=self.track, cfg=self.cfg, out=self.out, versioned=self.versioned, models=self.models)

    def complete(self) -> bool:
        return self.requires().complete() and report_is_current(self._dir())

    def run(self) -> None:
        report_if_changed(self._dir())


def run_luigi(build, out: str | Path, models: list[EvalConfig], versioned: bool = True,
              track: str | None = None) -> dict:
    """build → evaluate (each model) → score → report with luigi's local scheduler, one worker. ``build`` is a
    track's Config (the track is the one whose Config it is, or ``track``). Returns the build directory and luigi's
    run summary and ``evaluations`` (model -> the EvalSummary dict of each evaluation that ran in this call). A
    task that failed raises its own exception again (the first in build → evaluate → score → report order; an
    InputError for a bad input); else RuntimeError naming the failed tasks."""
    name = track or track_for_config(build).name
    root = ReportTask(track=name, cfg=build.model_dump_json(), out=str(out), versioned=versioned,
                      models=json.dumps([m.model_dump(mode="json") for m in models]))
    ev = root.requires().requires()
    chain = [ev[0].requires(), *ev, root.requires(), root] if ev else [root.requires(), root]
    for t in chain:  # luigi keeps one instance per parameter set: nothing from an earlier call in this process
        t.failure = None
    for t in ev:
        t.summary = None
    res = luigi.build([root], local_scheduler=True, workers=1, detailed_summary=True, log_level="WARNING")
    if not res.scheduling_succeeded or res.status.name not in ("SUCCESS", "SUCCESS_WITH_RETRY"):
        failed = next((t.failure for t in chain if t.failure is not None), None)
        if failed is not None:
            raise failed
        for t in chain:  # a complete() that raised (luigi then schedules nothing): its error, raised here again
            t.complete()
        raise RuntimeError(f"luigi run failed ({res.status.name}):\n{res.summary_text}")
    bdir = root._dir()
    return {"build_dir": str(bdir), "latest": str(latest_build(out)) if versioned else str(bdir),
            "status": res.status.name, "summary": res.summary_text,
            "evaluations": {json.loads(t.eval_cfg)["model"]: t.summary for t in ev if t.summary is not None}}
