"""Whole Prefect flows, run without a server (Prefect starts a temporary local API), and the deployments."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest


@pytest.mark.slow
def test_build_flow_then_rerun_is_skipped(tmp_path, spider_db, monkeypatch):
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    from pipelines.flows import build_holobench_flow, report_flow, score_flow

    from ctxbench.tracks.holobench import HoloBenchConfig

    cfg = HoloBenchConfig(db=str(spider_db("wine_1")), lengths=[2048])
    out = str(tmp_path / "b")
    r = build_holobench_flow(cfg, out)
    n = pq.read_table(os.path.join(out, "instances.parquet")).num_rows
    assert r["n_instances"] == n > 0 and r["skipped"] is False
    assert build_holobench_flow(cfg, out)["skipped"] is True
    assert score_flow(out) == 0  # no responses yet: nothing to score, nothing invented
    assert os.path.exists(report_flow(out))


def test_deployments_have_a_nightly_schedule_and_typed_parameters(monkeypatch):
    monkeypatch.setenv("CTXBENCH_NIGHTLY_CRON", "30 3 * * *")
    monkeypatch.setenv("CTXBENCH_TZ", "Europe/Berlin")
    from infra.serve import deployments

    ds = {d.name: d for d in deployments()}
    # one deployment per flow in pipelines/flows.py (build flows other tracks add appear by themselves)
    import pipelines.flows as mod
    from prefect import Flow

    assert set(ds) == {f.name for f in vars(mod).values() if isinstance(f, Flow)}
    assert {"nightly", "build_holobench", "build_scitrek", "build_needles", "evaluate", "backfill", "score", "report"} <= set(ds)
    assert not any(ds[n].schedules for n in ds if n != "nightly")
    sched = ds["nightly"].schedules[0].schedule
    assert (sched.cron, sched.timezone) == ("30 3 * * *", "Europe/Berlin")
    # the UI form comes from the flow's typed (pydantic) parameters
    from prefect.utilities.callables import parameter_schema

    from pipelines.flows import nightly

    schema = parameter_schema(nightly.fn)
    assert {"build", "out", "models"} <= set(schema.properties)
    assert "HoloBenchConfig" in str(schema.definitions) and "EvalConfig" in str(schema.definitions)
    from pipelines.flows import backfill_flow

    bf = parameter_schema(backfill_flow.fn)
    assert "BackfillConfig" in str(bf.definitions) and "EvalConfig" in str(bf.definitions)
    assert bf.definitions["BackfillConfig"]["properties"]["runs_root"]["default"] == "runs"
    assert bf.definitions["EvalConfig"]["properties"]["concurrency"]["minimum"] == 1  # the form validates
