"""Closed-book screen (LURCH inclusion criteria: "We provide each question to [a model] without its accompanying
context and discard instances answered correctly under the task's evaluation criterion").

``screen_build`` asks every distinct question of a build without its context (prompt
``assets/prompts/closed_book.yaml``), through the same call runner as ``evaluate`` and the judge
(:func:`ctxbench.models.runner.complete_all`; a rerun makes no call), scores each answer against every instance of that question with the instance's benchmark's primary matcher
(:mod:`ctxbench.scoring.registry`), and flags the instance when the score is 1 (fully correct). Results go to
``BUILD/closed_book.parquet``, one row per instance × screened model (a new screen of a model replaces that
model's rows and keeps the others'); ``evaluate --exclude-closed-book`` leaves flagged instances out.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.core.config import assets_dir
from ctxbench.models.cache import ResponseCache, key_endpoint, request_key
from ctxbench.models.runner import complete_all
from ctxbench.core.storage import require_build, write_parquet
from ctxbench.core.config import read_yaml
from ctxbench.core.errors import InputError
from ctxbench.scoring.pipeline import score_reply
from ctxbench.scoring.registry import matchers_for

FILE = "closed_book.parquet"
SCHEMA = pa.schema([("instance_id", pa.string()), ("model", pa.string()), ("question", pa.string()),
                    ("request_key", pa.string()), ("status", pa.string()), ("response", pa.string()),
                    ("matcher", pa.string()), ("score", pa.float64()), ("flagged", pa.bool_())])


@lru_cache(maxsize=1)
def _prompt() -> dict:
    return read_yaml(assets_dir() / "prompts" / "closed_book.yaml", "prompt file")


def closed_book_messages(question: str) -> list[dict]:
    """Chat messages asking ``question`` with no context."""
    p = _prompt()
    return [{"role": "system", "content": p["system"].strip()},
            {"role": "user", "content": p["user"].format(question=question)}]


@dataclass
class ScreenSummary:
    """Counts of one screen: distinct questions asked, instances scored, flagged and failed calls."""

    model: str
    questions: int = 0
    instances: int = 0
    flagged: int = 0
    failed: int = 0
    from_cache: int = 0
    notes: list[str] = field(default_factory=list)


def screen_build(build_dir: str | Path, model: str, base_url: str | None = None, api_key_env: str | None = None,
                 concurrency: int = 8, max_tokens: int = 256, cache: ResponseCache | None = None,
                 server: Callable[[], Any] | None = None) -> ScreenSummary:
    """Closed-book screen of every instance of the build with ``model`` (module docstring); writes
    ``BUILD/closed_book.parquet``. ``server`` makes a local model server (as in ``evaluate``), started only when
    some answer is not cached. Raises InputError without a build."""
    build_dir = require_build(build_dir)
    ipath = build_dir / "instances.parquet"
    cols = [c for c in pq.read_schema(ipath).names if c != "context"]
    inst = pq.read_table(ipath, columns=cols).to_pylist()
    questions = sorted({r["question"] for r in inst})
    sampling = {"temperature": 0.0, "seed": 0}
    reqs = [(closed_book_messages(q), sampling, max_tokens) for q in questions]
    cache = cache or ResponseCache()
    keys = [request_key(model, m, s, mt, 0, key_endpoint(model, base_url)) for m, s, mt in reqs]
    msgs = [m for m, _, _ in reqs]
    if server is not None and len(cache.get_many(keys)) < len(set(keys)):
        with server() as srv:  # keys name --base-url (None: the embedded model), calls go to the started server
            outs = complete_all(msgs, model, base_url, 1, cache, api_key_env, sampling, max_tokens,
                                call_base_url=srv.base_url)
    else:
        outs = complete_all(msgs, model, base_url, concurrency, cache, api_key_env, sampling, max_tokens)
    answers = [(c.text if c.status == "ok" else None, c.cached) for c in outs]
    by_q = {q: (text, cached, key) for q, (text, cached), key in zip(questions, answers, keys)}
    s = ScreenSummary(model, questions=len(questions), instances=len(inst),
                      from_cache=sum(1 for _, cached in answers if cached))
    s.failed = sum(1 for text, _ in answers if text is None)
    s.notes = [f"{q[:60]}: the call failed (rerun to retry)" for q, (t, _, _) in by_q.items() if t is None][:20]
    rows = []
    for r in sorted(inst, key=lambda r: r["instance_id"]):
        text, _, key = by_q[r["question"]]
        name = matchers_for(r.get("benchmark"))[0]
        score = flagged = None
        if text is not None:
            row = dict(r, gold=json.loads(r["gold"]))
            if row.get("accepted_answers") is not None:
                row["accepted_answers"] = json.loads(row["accepted_answers"])
            score = float(score_reply(text, row, names=[name])[0].result.score)
            flagged = score >= 1.0
        rows.append({"instance_id": r["instance_id"], "model": model, "question": r["question"],
                     "request_key": key, "status": "ok" if text is not None else "error", "response": text,
                     "matcher": name, "score": score, "flagged": flagged})
    s.flagged = sum(1 for r in rows if r["flagged"])
    path = build_dir / FILE
    old = [r for r in pq.read_table(path).to_pylist() if r["model"] != model] if path.exists() else []
    write_parquet(pa.Table.from_pylist(old + rows, schema=SCHEMA), path)
    return s


def flagged_ids(build_dir: str | Path) -> set[str]:
    """Instances flagged by any screened model. Raises InputError when no screen was run on the build."""
    path = Path(build_dir) / FILE
    if not path.exists():
        raise InputError(f"{build_dir} has no {FILE}: run `ctxbench screen --build {build_dir} --model M` first")
    t = pq.read_table(path, columns=["instance_id", "flagged"]).to_pylist()
    return {r["instance_id"] for r in t if r["flagged"]}


def screen_summary(build_dir: str | Path) -> list[dict]:
    """Per screened model: instances screened, flagged, failed and the flagged share (for the report); [] when no
    screen was run."""
    path = Path(build_dir) / FILE
    if not path.exists():
        return []
    rows = pq.read_table(path).to_pylist()
    n, fl, failed = Counter(), Counter(), Counter()
    for r in rows:
        n[r["model"]] += 1
        fl[r["model"]] += bool(r["flagged"])
        failed[r["model"]] += r["status"] != "ok"
    return [{"model": m, "instances": n[m], "flagged": fl[m], "failed": failed[m],
             "flagged_share": fl[m] / (n[m] - failed[m]) if n[m] > failed[m] else None} for m in sorted(n)]
