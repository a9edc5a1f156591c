"""The second engine: build → evaluate → score → report as luigi tasks, for teams without a Prefect server
(``ctxbench run --engine luigi``; luigi's local scheduler, no daemon).

Thin wrappers over the same library calls as the Prefect flows in ``pipelines/flows.py`` (one stage function per
task, no benchmark logic here), so both engines write identical artifacts for the same configuration. Parameters
are the same pydantic models, passed as JSON. A task is *complete* when its library-level check says so: the build
by its build hash, an evaluation when every request key is stored, score and report when their inputs hash is
current (ctxbench.incremental) — so a rerun with unchanged inputs does nothing but those checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import luigi

from ctxbench.evaluate import EvalConfig, evaluate_build
from ctxbench.incremental import latest_build, report_if_changed, report_is_current, score_if_changed, scores_are_current
from ctxbench.models.cache import ResponseCache
from ctxbench.models.local_server import EMBEDDED_MODEL, LocalServer
from ctxbench.tracks import holobench
from ctxbench.tracks.holobench import HoloBenchConfig


class BuildTask(luigi.Task):
    """A verbalized-database build into the run root ``out`` (``versioned``: ``out/<build_hash>``, ``out/latest``)."""

    cfg = luigi.Parameter(description="HoloBenchConfig as JSON")
    out = luigi.Parameter()
    versioned = luigi.BoolParameter(default=True)

    def build_dir(self) -> Path:
        if self.versioned:
            _, bhash = holobench.hash_inputs(HoloBenchConfig.model_validate_json(self.cfg))
            return Path(self.out) / bhash
        return Path(self.out)

    def complete(self) -> bool:
        loaded = holobench.load_stage(HoloBenchConfig.model_validate_json(self.cfg), self.out,
                                      versioned=self.versioned)
        return loaded.existing is not None

    def run(self) -> None:
        cfg = HoloBenchConfig.model_validate_json(self.cfg)
        loaded = holobench.load_stage(cfg, self.out, versioned=self.versioned)
        if loaded.existing is not None:
            return
        src = holobench.verbalize_stage(loaded)
        asm = holobench.assemble_stage(loaded, src)
        instances, quarantine = holobench.gold_stage(loaded, asm)
        holobench.validate_stage(loaded, src, instances)
        holobench.write_stage(loaded, src, instances, quarantine, asm)


class EvaluateTask(luigi.Task):
    """One model on the build: complete when every request of this configuration is stored."""

    cfg = luigi.Parameter()
    out = luigi.Parameter()
    versioned = luigi.BoolParameter(default=True)
    eval_cfg = luigi.Parameter(description="EvalConfig as JSON")

    def requires(self):
        return BuildTask(cfg=self.cfg, out=self.out, versioned=self.versioned)

    def complete(self) -> bool:
        from ctxbench.evaluate import _plan

        if not self.requires().complete():
            return False
        plan = _plan(self.requires().build_dir(), EvalConfig.model_validate_json(self.eval_cfg), ResponseCache())
        return not plan.todo

    def run(self) -> None:
        ec = EvalConfig.model_validate_json(self.eval_cfg)
        local = ec.model == EMBEDDED_MODEL and not ec.base_url
        s = evaluate_build(self.requires().build_dir(), ec, server=LocalServer if local else None)
        if s.unfinished:
            raise RuntimeError(f"{s.unfinished} call(s) of {ec.model} did not finish: {s.notes[:3]}; rerun to retry")


class ScoreTask(luigi.Task):
    cfg = luigi.Parameter()
    out = luigi.Parameter()
    versioned = luigi.BoolParameter(default=True)
    models = luigi.Parameter(description="JSON list of EvalConfig")

    def requires(self):
        return [EvaluateTask(cfg=self.cfg, out=self.out, versioned=self.versioned, eval_cfg=json.dumps(m))
                for m in json.loads(self.models)]

    def _dir(self) -> Path:
        return BuildTask(cfg=self.cfg, out=self.out, versioned=self.versioned).build_dir()

    def complete(self) -> bool:
        return all(r.complete() for r in self.requires()) and scores_are_current(self._dir())

    def run(self) -> None:
        score_if_changed(self._dir())


class ReportTask(ScoreTask):
    def requires(self):
        return ScoreTask(cfg=self.cfg, out=self.out, versioned=self.versioned, models=self.models)

    def complete(self) -> bool:
        return self.requires().complete() and report_is_current(self._dir())

    def run(self) -> None:
        report_if_changed(self._dir())


def run_luigi(build: HoloBenchConfig, out: str | Path, models: list[EvalConfig], versioned: bool = True) -> dict:
    """build → evaluate (each model) → score → report with luigi's local scheduler, one worker. Returns the build
    directory and luigi's run summary; raises RuntimeError naming the failed tasks."""
    root = ReportTask(cfg=build.model_dump_json(), out=str(out), versioned=versioned,
                      models=json.dumps([m.model_dump(mode="json") for m in models]))
    res = luigi.build([root], local_scheduler=True, workers=1, detailed_summary=True, log_level="WARNING")
    if not res.scheduling_succeeded or res.status.name not in ("SUCCESS", "SUCCESS_WITH_RETRY"):
        raise RuntimeError(f"luigi run failed ({res.status.name}):\n{res.summary_text}")
    bdir = root._dir()
    return {"build_dir": str(bdir), "latest": str(latest_build(out)) if versioned else str(bdir),
            "status": res.status.name, "summary": res.summary_text}
