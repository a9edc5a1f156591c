"""Certificates of LaRA imports (LaRA, Li et al., ICML 2025, section 3): the reference answer's supporting passage,
where LaRA provides one (the ``context`` field of a query record, e.g. its 32k novel location queries), must be
present in the instance's context (whitespace-normalised); where LaRA provides none the instance is
``uncertifiable``: its answer is free text written from a segment, which nothing in the text can re-derive.
Every certificate made with the query files compares the stored gold with LaRA's answer of the query record
(``[[answer]]``): an edited gold makes the instance ``failed``, with or without a supporting passage.

The LaRA data directory is not part of a build (paths are never hashed or stored): give it as ``ctxbench verify
--source-data DIR`` or ``CTXBENCH_LARA_DATA``; without it every instance is ``uncertifiable`` saying so.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ctxbench.verify import SOURCE_DATA_ENV, Certificate

METHOD = "LaRA supporting passage searched in the context"
ENV = "CTXBENCH_LARA_DATA"
_WS = re.compile(r"\s+")


def _norm(s: str) -> str:
    return _WS.sub(" ", s).strip()


def _gold_mismatch(gold_json: str | None, rec: dict) -> str | None:
    """Why the stored gold (the instance's ``gold`` column) is not LaRA's reference answer of its query record
    (``[[answer]]``, as the import stores it: :mod:`ctxbench.tracks.lara.build`); None when it is."""
    try:
        gold = json.loads(gold_json)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "stored gold is not JSON"
    want = [[rec.get("answer")]]
    if gold != want:
        return f"stored gold {json.dumps(gold, ensure_ascii=False)[:100]} differs from LaRA's answer " \
               f"{json.dumps(want, ensure_ascii=False)[:100]}"
    return None


def certify(build_dir: Path, instances: list[dict], manifest: Any) -> tuple[list[Certificate], list[str]]:
    """Certificates of a LaRA import's instances (module docstring)."""
    data = os.environ.get(ENV) or os.environ.get(SOURCE_DATA_ENV)
    if not data or not (Path(data) / "queries").is_dir():
        why = (f"LaRA data directory not given ({ENV} or ctxbench verify --source-data DIR): the supporting passages "
               f"are in LaRA's query files")
        return [Certificate(r["instance_id"], "uncertifiable", why, METHOD) for r in instances], []
    files: dict[str, list[str]] = {}
    certs = []
    for r in instances:
        qfile, _, ln = str(r.get("question_id") or "").rpartition(":")
        if qfile not in files:
            p = Path(data) / "queries" / qfile
            files[qfile] = p.read_text(encoding="utf-8").splitlines() if p.is_file() else []
        lines = files[qfile]
        try:
            rec = json.loads(lines[int(ln) - 1])
        except (ValueError, IndexError):
            certs.append(Certificate(r["instance_id"], "uncertifiable", f"query {r.get('question_id')!r} not found "
                                     f"in {data}/queries", METHOD))
            continue
        why = _gold_mismatch(r.get("gold"), rec)
        passage = rec.get("context")
        if why:
            certs.append(Certificate(r["instance_id"], "failed", why, METHOD))
        elif not isinstance(passage, str) or not passage.strip():
            certs.append(Certificate(r["instance_id"], "uncertifiable", "LaRA provides no supporting passage for "
                                     "this query (free-text answer written from a segment)", METHOD))
        elif _norm(passage) in _norm(r.get("context") or ""):
            certs.append(Certificate(r["instance_id"], "certified", "", METHOD))
        else:
            certs.append(Certificate(r["instance_id"], "failed", f"LaRA's supporting passage is not in the context: "
                                     f"{_norm(passage)[:100]!r}", METHOD))
    return certs, []
