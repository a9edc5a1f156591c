"""Incremental runs: versioned build directories and steps skipped when their inputs did not change.

Layout of a *run root* (what ``ctxbench run --out`` and the ``nightly`` flow write)::

    ROOT/<build_hash>/      one build directory per build hash (SCHEMA.md layout), immutable once complete
    ROOT/latest             symlink to the newest build of this root (replaced atomically)

A nightly run hashes its inputs (source data, templates, queries, tokenizer file, configuration: the build hash);
an unchanged hash finds its complete build and builds nothing, a changed one builds into a new directory and moves
``latest``, leaving the old builds readable. Responses and scores live inside their build directory and carry its
``build_hash``, so results of different builds are never mixed in one table (``check_build_tables``).

``score`` and ``report`` are recomputed only when what they read changed: the content hash of their inputs
(instances, responses, scores, matcher registry, judge) is stored with their output (Parquet schema metadata of
``scores.parquet``; ``report/inputs.json``) and compared first. ``score``'s inputs include the code that makes the
scores: each matcher's, the failure tagger's, each answer filter's and the judge prompt's version and code hash
(:func:`ctxbench.scoring.versions.scoring_fingerprint`, stored readable as ``ctxbench_scoring_code`` in the same
metadata), so a fixed matcher or filter rescores the builds it scores. Model calls are never repeated anyway
(response cache and stored request keys).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.core.errors import InputError
from ctxbench.core.hashing import file_sha256, stable_hash
from ctxbench.core.storage import check_build_tables, write_json
# the run-root pointer lives in ctxbench.core.storage; still importable from here for one release
from ctxbench.core.storage import LATEST, builds_of, latest_build, resolve_build, set_latest  # noqa: F401
from ctxbench.core.progress import emit
from ctxbench.core.storage import pending_parts, write_parquet
from ctxbench.report import build_report
from ctxbench.run.score import SCORE_ERRORS, score_build
from ctxbench.scoring.registry import registry_fingerprint
from ctxbench.scoring.versions import scoring_fingerprint

INPUTS_KEY = b"ctxbench_inputs_sha256"
SCORING_CODE_KEY = b"ctxbench_scoring_code"


# one build per table: storage.build_hash_of_dir and storage.check_build_tables (imported above)

# ------------------------------------------------------------------------------------------ skip unchanged steps

def _file_hash(p: Path) -> str | None:
    h = file_sha256(p) if p.exists() else None
    parts = pending_parts(p)  # rows an evaluation has not merged into the table yet (ctxbench.core.storage)
    return stable_hash(h, [(q.name, file_sha256(q)) for q in parts], length=64) if parts else h


def scoring_code(build_dir: str | Path, judge: str | None = None,
                 judge_prompts: list[str] | tuple[str, ...] | None = None) -> dict:
    """The version and code hash of everything that scores this build's benchmarks (matchers, tagger, answer
    filters; the judge prompts with a judge): :func:`ctxbench.scoring.versions.scoring_fingerprint` over the
    benchmarks of ``instances.parquet``. A benchmark no track registers is recorded as an error (``score`` then
    reports it)."""
    p = Path(build_dir) / "instances.parquet"
    benches: list[str] = []
    if p.exists() and "benchmark" in pq.read_schema(p).names:
        benches = sorted({str(b) for b in pq.read_table(p, columns=["benchmark"]).column("benchmark").to_pylist()})
    try:
        return scoring_fingerprint(benches, judge, judge_prompts)
    except InputError as e:
        return {"error": str(e)}


def score_inputs_hash(build_dir: str | Path, judge: str | None = None,
                      judge_prompts: list[str] | tuple[str, ...] | None = None) -> str:
    """Content hash of what ``score`` reads and runs: instances, responses, the matcher registry, the judge and its
    prompts, and the version and code of the scoring code (:func:`scoring_code`)."""
    d = Path(build_dir)
    return stable_hash("score", _file_hash(d / "instances.parquet"), _file_hash(d / "responses.parquet"),
                       registry_fingerprint(), scoring_code(d, judge, judge_prompts), judge, length=64)


def report_inputs_hash(build_dir: str | Path) -> str:
    """Content hash of what ``report`` reads: instances, responses and scores."""
    d = Path(build_dir)
    return stable_hash("report", *(_file_hash(d / f"{t}.parquet") for t in ("instances", "responses", "scores")),
                       length=64)


def scores_are_current(build_dir: str | Path, judge: str | None = None,
                       judge_prompts: list[str] | tuple[str, ...] | None = None) -> bool:
    """True when ``scores.parquet`` was computed from the build's current instances and responses."""
    p = Path(build_dir) / "scores.parquet"
    if not p.exists():
        return False
    try:
        meta = pq.read_schema(p).metadata or {}
    except (pa.ArrowException, OSError):  # damaged: not current, rebuilt (a derived table)
        return False
    return meta.get(INPUTS_KEY, b"").decode() == score_inputs_hash(build_dir, judge, judge_prompts)


def report_is_current(build_dir: str | Path) -> bool:
    """True when ``report/index.html`` was written from the build's current tables."""
    d = Path(build_dir)
    f = d / "report" / "inputs.json"
    if not (d / "report" / "index.html").exists() or not f.exists():
        return False
    try:
        return json.loads(f.read_text(encoding="utf-8")).get("inputs_sha256") == report_inputs_hash(d)
    except ValueError:
        return False


def score_if_changed(build_dir: str | Path, judge: str | None = None, judge_base_url: str | None = None,
                     judge_api_key_env: str | None = None,
                     judge_prompts: list[str] | tuple[str, ...] | None = None) -> tuple[int, bool]:
    """``score_build`` unless the scores are current; returns (score rows, recomputed). The inputs hash is stored
    in ``scores.parquet``'s schema metadata (rewritten atomically)."""
    emit("score", str(build_dir))

    d = Path(build_dir)
    check_build_tables(d)
    if scores_are_current(d, judge, judge_prompts):
        return pq.ParquetFile(d / "scores.parquet").metadata.num_rows, False
    fp = score_inputs_hash(d, judge, judge_prompts)
    code = json.dumps(scoring_code(d, judge, judge_prompts), sort_keys=True, ensure_ascii=False)
    s = score_build(d, judge, judge_base_url, judge_api_key_env, judge_prompts)
    if s.matcher_errors:  # the rest is scored; these responses are set aside and listed beside the scores
        import logging


        logging.getLogger(__name__).warning(
            "%d response(s) not scored by a matcher that raised, listed in %s; first: %s",
            len(s.matcher_errors), d / SCORE_ERRORS, s.matcher_errors[0]["error"])
    tbl = pq.read_table(d / "scores.parquet")
    write_parquet(tbl.replace_schema_metadata({**(tbl.schema.metadata or {}), INPUTS_KEY: fp.encode(),
                                               SCORING_CODE_KEY: code.encode()}), d / "scores.parquet")
    return s.rows, True


def rescore_if_unreadable(build_dir: str | Path) -> bool:
    """A derived table is rebuilt when unreadable (issue 31): a ``scores.parquet`` that cannot be read is scored
    again from the responses by the matchers (a judge's scores need ``ctxbench score --judge`` again), with a
    warning naming it. Returns whether it was."""
    import logging

    p = Path(build_dir) / "scores.parquet"
    if not p.exists():
        return False
    try:
        pq.read_metadata(p)
        return False
    except (pa.ArrowException, OSError) as e:
        logging.getLogger(__name__).warning("%s cannot be read (%s): scored again from the responses", p, e)

    score_build(build_dir)
    return True


def report_if_changed(build_dir: str | Path, on_write: Callable[[Path], None] | None = None) -> tuple[Path, bool]:
    """``build_report`` unless the report is current; returns (index.html path, rewritten)."""
    emit("report", str(build_dir))

    d = Path(build_dir)
    rescore_if_unreadable(d)
    if report_is_current(d):
        return d / "report" / "index.html", False
    fp = report_inputs_hash(d)
    p = build_report(d)
    write_json({"inputs_sha256": fp}, d / "report" / "inputs.json")
    if on_write:
        on_write(p)
    return p, True
