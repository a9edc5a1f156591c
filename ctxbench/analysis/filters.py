"""Instance filters of LURCH's inclusion criteria ("Beyond Context Length", inclusion criteria: English-language
instances; inputs within a token range; questions not answerable without their context), applied by ``evaluate``
before its per-length sample.

* language: the context's ``language`` (and, optionally, the question's ``question_language``) matches a
  langdetect code, ``zh`` matching ``zh-cn`` and ``zh-tw`` (:func:`ctxbench.features.language.language_matches`);
* token range: ``min_context_tokens <= context_tokens <= max_context_tokens``, counted in tokens of the build's
  tokenizer (the ``tokenizer`` column), both bounds inclusive;
* closed-book screen: instances flagged in ``closed_book.parquet`` by any screened model are left out
  (:mod:`ctxbench.analysis.closed_book`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.core.errors import InputError
from ctxbench.features.language import language_matches
from ctxbench.analysis.closed_book import flagged_ids


@dataclass
class InstanceFilter:
    """Which instances to keep (None: no constraint)."""

    language: str | None = None
    question_language: str | None = None
    min_context_tokens: int | None = None
    max_context_tokens: int | None = None
    exclude_closed_book: bool = False

    def active(self) -> bool:
        return any(v not in (None, False) for v in vars(self).values())


def kept_ids(build_dir: str | Path, f: InstanceFilter) -> set[str]:
    """Instance ids of the build that pass the filter. Raises InputError when the build lacks a column a filter
    needs (a build written before languages were stored), or when the closed-book screen has not been run."""
    build_dir = Path(build_dir)
    path = build_dir / "instances.parquet"
    have = set(pq.read_schema(path).names)
    need = {"instance_id", "context_tokens"}
    if f.language:
        need.add("language")
    if f.question_language:
        need.add("question_language")
    missing = need - have
    if missing:
        raise InputError(f"{path} has no column {', '.join(sorted(missing))}: rebuild it with this version of "
                         f"ctxbench to filter by language")
    rows = pq.read_table(path, columns=sorted(need)).to_pylist()
    lo = f.min_context_tokens if f.min_context_tokens is not None else -1
    hi = f.max_context_tokens if f.max_context_tokens is not None else float("inf")
    if lo > hi:
        raise InputError(f"--min-context-tokens {lo} is above --max-context-tokens {hi}")
    keep = {r["instance_id"] for r in rows
            if lo <= r["context_tokens"] <= hi
            and (not f.language or language_matches(r["language"], f.language))
            and (not f.question_language or language_matches(r["question_language"], f.question_language))}
    if f.exclude_closed_book:
        keep -= flagged_ids(build_dir)
    return keep


def filter_instances(build_dir: str | Path, tbl: pa.Table, f: InstanceFilter) -> pa.Table:
    """Rows of ``tbl`` (with an ``instance_id`` column) whose instance passes the filter; ``tbl`` itself when no
    filter is set."""
    if not f.active():
        return tbl
    keep = kept_ids(build_dir, f)
    return tbl.filter(pa.array([i in keep for i in tbl.column("instance_id").to_pylist()], type=pa.bool_()))
