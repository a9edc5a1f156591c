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

from .errors import ValidationError
from .questions.sqlinfo import QUERY_TYPES
from .storage import SCHEMA_DIR


def _included_once(context: str, included: str | None, sentence_of: Callable[[str, int], str] | None) -> bool:
    if not included or sentence_of is None:
        return True
    lines = Counter(context.split("\n"))
    for table, rowids in json.loads(included).items():
        for rid in rowids:
            if lines.get(sentence_of(table, rid), 0) != 1:
                return False
    return True


def derive_checks(tbl: pa.Table, sentence_of: Callable[[str, int], str] | None = None) -> "pandas.DataFrame":  # noqa: F821
    """The instances table as a DataFrame with the derived boolean ``_`` columns added."""
    df = tbl.to_pandas()
    df["_query_types_valid"] = [all(t in QUERY_TYPES for t in json.loads(q)) for q in df["query_types"]]
    df["_spans_in_context"] = [all(0 <= s < e <= n for s, e in json.loads(sp))
                               for sp, n in zip(df["evidence_spans"], df["context_tokens"])]
    once: dict[tuple, bool] = {}  # instances sharing a context (and so its rows) are checked once
    for c, inc in zip(df["context"], df["included_rows"]):
        if (c, inc) not in once:
            once[(c, inc)] = _included_once(c, inc, sentence_of)
    df["_included_sentences_once"] = [once[(c, inc)] for c, inc in zip(df["context"], df["included_rows"])]
    return df


def _kwargs(kw: dict) -> dict:
    """An expectation's arguments with ``"$tracks"`` replaced by the registered track names."""
    from .tracks.base import track_names

    return {k: track_names() if v == "$tracks" else v for k, v in kw.items()}


def run_suite(df, suite: str = "instances") -> list[str]:
    """Validate ``df`` against ``schemas/<suite>.expectations.json``; returns the names of failed expectations."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import logging

    import great_expectations as gx


    spec = json.loads((SCHEMA_DIR / f"{suite}.expectations.json").read_text(encoding="utf-8"))
    logging.disable(logging.INFO)  # great-expectations' "temporary directory for ephemeral docs site" notice
    try:
        ctx = gx.get_context(mode="ephemeral")
    finally:
        logging.disable(logging.NOTSET)
    batch = (ctx.data_sources.add_pandas(f"ctxbench_{suite}").add_dataframe_asset(suite)
             .add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": df}))
    gx_suite = gx.ExpectationSuite(name=suite, expectations=[
        getattr(gx.expectations, e["expectation"])(**_kwargs(e["kwargs"])) for e in spec["expectations"]])
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


def validate_build(instances: pa.Table,
                   sentence_of: Callable[[str, int], str] | None = None) -> None:
    """Run the instances suite. Raises ValidationError naming every failed expectation. An empty table passes
    (a build whose every candidate was quarantined is reported by its quarantine table)."""
    if instances.num_rows == 0:
        return
    failed = run_suite(derive_checks(instances, sentence_of))
    if failed:
        raise ValidationError(f"data-quality check failed: {', '.join(failed)}")
