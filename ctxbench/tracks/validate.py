"""Data-quality checks with great-expectations on stored tables; a failed expectation fails the build with its name.

The suites live in ``schemas/<table>.expectations.json``. Row-level facts that no built-in expectation can see
(every included row's sentence appears exactly once in the context, evidence spans lie inside the context, query
types are from the fixed list) are derived here as boolean columns ``_name`` and then expected to be true.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections import Counter
from typing import Callable

import pyarrow as pa

from ctxbench.core.errors import ValidationError
from ctxbench.questions.sqlinfo import QUERY_TYPES
from ctxbench.core.storage import SCHEMA_DIR
from ctxbench.core import sidecar
from ctxbench.core.track import track_names


def _included_once(context: str, included: str | None, sentence_of: Callable[[str, int], str] | None) -> bool:
    if not included or sentence_of is None:
        return True
    lines = Counter(context.split("\n"))
    for table, rowids in json.loads(included).items():
        for rid in rowids:
            if lines.get(sentence_of(table, rid), 0) != 1:
                return False
    return True


DERIVED = ("_query_types_valid", "_spans_in_context", "_included_sentences_once")


def suite_expectations(suite: str = "instances") -> list[tuple[str, dict]]:
    """The expectations of ``schemas/<suite>.expectations.json`` as (great-expectations class name, arguments),
    with ``"$tracks"`` replaced by the registered track names (resolved here, in the process that registered
    them)."""
    spec = json.loads((SCHEMA_DIR / f"{suite}.expectations.json").read_text(encoding="utf-8"))
    return [(e["expectation"], _kwargs(e["kwargs"])) for e in spec["expectations"]]


def suite_columns(expectations: list[tuple[str, dict]]) -> list[str]:
    """The columns the expectations read (``column``, ``column_A``, ``column_B``), in order of first use."""
    cols: dict[str, None] = {}
    for _, kw in expectations:
        for k in ("column", "column_A", "column_B"):
            if isinstance(kw.get(k), str):
                cols[kw[k]] = None
    return list(cols)


def derive_checks(tbl: pa.Table, sentence_of: Callable[[str, int], str] | None = None,
                  columns: list[str] | None = None) -> pa.Table:
    """The instances table's ``columns`` (default: those the instances suite reads; every column the table has
    among them) with the derived boolean ``_`` columns (module docstring) added. A context is read once per
    distinct (context, included rows) pair, and only where included rows are checked."""
    import pyarrow.compute as pc

    if columns is None:
        columns = suite_columns(suite_expectations("instances"))
    keep = [c for c in columns if c in tbl.column_names and c not in DERIVED]
    types_ok = [all(t in QUERY_TYPES for t in json.loads(q)) for q in tbl.column("query_types").to_pylist()]
    in_context: dict[tuple, bool] = {}  # instances sharing a context share its spans: checked once
    spans_ok = []
    for sp, n in zip(tbl.column("evidence_spans").to_pylist(), tbl.column("context_tokens").to_pylist()):
        if (sp, n) not in in_context:
            in_context[(sp, n)] = all(0 <= s < e <= n for s, e in json.loads(sp))
        spans_ok.append(in_context[(sp, n)])
    included = tbl.column("included_rows").to_pylist()
    once = [True] * tbl.num_rows
    todo = [i for i, inc in enumerate(included) if inc] if sentence_of is not None else []
    if todo:
        # instances sharing a context (and so its rows) are checked once; equal contexts found by Arrow's hashing
        enc = pc.dictionary_encode(tbl.column("context").combine_chunks())
        ids = enc.indices.to_pylist()
        memo: dict[tuple, bool] = {}
        for i in todo:
            key = (ids[i], included[i])
            if key not in memo:
                memo[key] = _included_once(enc.dictionary[ids[i]].as_py(), included[i], sentence_of)
            once[i] = memo[key]
    out = tbl.select(keep)
    for name, vals in zip(DERIVED, (types_ok, spans_ok, once)):
        out = out.append_column(name, pa.array(vals, type=pa.bool_()))
    return out


def _kwargs(kw: dict) -> dict:
    """An expectation's arguments with ``"$tracks"`` replaced by the registered track names."""
    return {k: track_names() if v == "$tracks" else v for k, v in kw.items()}


def import_library() -> bool:
    """Import great-expectations (what a helper process does while a build assembles; ctxbench.core.sidecar)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations  # noqa: F401

    return True


def run_expectations(df, suite: str, expectations: list[tuple[str, dict]]) -> list[str]:
    """Validate ``df`` (a pandas DataFrame, or an Arrow table converted here) with great-expectations against
    ``expectations`` (:func:`suite_expectations`); returns the names of failed expectations
    (``ClassName(column)``). Runs in whichever process calls it."""
    import_library()
    if isinstance(df, pa.Table):
        df = df.to_pandas()
    import logging

    import great_expectations as gx

    logging.disable(logging.INFO)  # great-expectations' "temporary directory for ephemeral docs site" notice
    try:
        ctx = gx.get_context(mode="ephemeral")
    finally:
        logging.disable(logging.NOTSET)
    batch = (ctx.data_sources.add_pandas(f"ctxbench_{suite}").add_dataframe_asset(suite)
             .add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": df}))
    gx_suite = gx.ExpectationSuite(name=suite, expectations=[
        getattr(gx.expectations, name)(**kw) for name, kw in expectations])
    with contextlib.redirect_stderr(io.StringIO()):  # its per-metric progress bars
        res = batch.validate(gx_suite)
    failed = []
    for r in res.results:
        if not r.success:
            cfg = r.expectation_config
            kw = cfg.kwargs
            col = kw.get("column") or f"{kw.get('column_A')},{kw.get('column_B')}"
            name = "".join(w.capitalize() for w in str(cfg.type).split("_"))  # the suite file's class name
            failed.append(f"{name}({col})")
    return failed


def warm_up() -> None:
    """Start the build's helper process (ctxbench.core.sidecar) and have it import great-expectations, so that the
    suite runs there later without the import on the build's path. Builds call this at their first stage."""
    if sidecar.start("validate") is not None:
        sidecar.submit("ctxbench.tracks.validate:import_library", helper="validate")


def run_suite(df, suite: str = "instances") -> list[str]:
    """Validate ``df`` (a pandas DataFrame or an Arrow table) against ``schemas/<suite>.expectations.json``;
    returns the names of failed expectations. The suite runs in the build's helper process when one was started
    (:func:`warm_up`; only the columns the suite reads are sent), else here; the result is the same."""
    expectations = suite_expectations(suite)
    if sidecar.current("validate") is not None:
        names = df.column_names if isinstance(df, pa.Table) else list(df.columns)
        cols = [c for c in suite_columns(expectations) if c in names]
        df = df.select(cols) if isinstance(df, pa.Table) else df[cols]
        try:
            return sidecar.submit("ctxbench.tracks.validate:run_expectations", df, suite, expectations,
                                  helper="validate").result()
        except sidecar.SidecarError:
            pass  # the helper could not: validate here
    return run_expectations(df, suite, expectations)


def validate_build(instances: pa.Table,
                   sentence_of: Callable[[str, int], str] | None = None) -> None:
    """Run the instances suite. Raises ValidationError naming every failed expectation. An empty table passes
    (a build whose every candidate was quarantined is reported by its quarantine table)."""
    if instances.num_rows == 0:
        return
    failed = run_suite(derive_checks(instances, sentence_of))
    if failed:
        raise ValidationError(f"data-quality check failed: {', '.join(failed)}")
