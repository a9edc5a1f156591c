"""Judge validation (LaRA appendix C): agreement of any judge — an LLM judge (``judge:<model>``, or
``judge-<prompt>:<model>`` for another judging prompt) or a deterministic matcher, fallbacks included — with human
labels, as Cohen's κ with a 95% confidence interval.

κ = (P_o − P_e) / (1 − P_e) over the binary verdict *correct* / *incorrect* (LaRA equations 1-3); the interval
is κ ± 1.96·ASE with the large-sample standard error of Fleiss, Cohen & Everitt (1969), as statsmodels'
``cohens_kappa`` computes it. A judge's score and a human verdict count as *correct* when at least ``threshold``
(default 1: a fully correct answer; human verdicts ``correct`` = 1, ``partial`` = 0.5, ``incorrect`` = 0).

**Labels file** (JSON Lines, one object per labelled answer): ``instance_id``; ``request_key`` (the response's,
as ``ctxbench label`` writes it) or ``answer`` (the response text, matched against the build's responses of that
instance); ``verdict`` (``correct``, ``partial``, ``incorrect``, or a number in [0, 1], or true/false). Other keys
(``model``, ``labeller``, ``question``) are kept but not needed.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ctxbench.core.errors import InputError
from ctxbench.core.storage import read_table, require_build, write_parquet
from ctxbench.scoring.judge import is_judge_matcher
from ctxbench.scoring.registry import is_fallback

VERDICTS = {"correct": 1.0, "partial": 0.5, "incorrect": 0.0}
Z95 = 1.959963984540054


@dataclass
class Kappa:
    """Cohen's κ of two binary raters: counts (tp: both correct, tn: both incorrect, fp: only the judge says
    correct, fn: only the human), P_o, P_e, κ, its asymptotic SE and 95% interval (None where κ is undefined:
    P_e = 1, both raters giving one and the same verdict throughout)."""

    n: int
    tp: int
    tn: int
    fp: int
    fn: int
    po: float
    pe: float
    kappa: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None


def cohens_kappa(human: list[bool], judge: list[bool]) -> Kappa:
    """κ of paired binary verdicts (LaRA appendix C). Raises InputError for unequal lengths or no pairs."""
    import numpy as np
    from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

    if len(human) != len(judge):
        raise InputError(f"{len(human)} human verdicts but {len(judge)} judge verdicts")
    n = len(human)
    if n == 0:
        raise InputError("no labelled answer matches a scored response: nothing to compare")
    tp = sum(1 for h, j in zip(human, judge) if h and j)
    tn = sum(1 for h, j in zip(human, judge) if not h and not j)
    fp = sum(1 for h, j in zip(human, judge) if j and not h)
    fn = n - tp - tn - fp
    po = (tp + tn) / n
    pe = ((tp + fn) * (tp + fp) + (tn + fn) * (tn + fp)) / n ** 2
    if pe >= 1.0:
        return Kappa(n, tp, tn, fp, fn, po, pe, None, None, None, None)
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant rater makes the test statistic 0/0
        r = sm_kappa(np.array([[tp, fn], [fp, tn]], dtype=float))  # rows: human correct/incorrect; cols: judge
    k, var = float(r.kappa), float(r.var_kappa)
    se = math.sqrt(max(0.0, var)) if math.isfinite(var) else None  # rounding can leave -1e-17 for var 0
    return Kappa(n, tp, tn, fp, fn, po, pe, k, se, None if se is None else k - Z95 * se,
                 None if se is None else k + Z95 * se)


def verdict_value(v, where: str) -> float:
    """A label's verdict as a number in [0, 1]. Raises InputError naming the line for anything else."""
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)) and 0 <= v <= 1:
        return float(v)
    if isinstance(v, str) and v.strip().lower() in VERDICTS:
        return VERDICTS[v.strip().lower()]
    raise InputError(f"{where}: verdict must be correct, partial, incorrect, a number in [0, 1] or true/false "
                     f"(got {v!r})")


def read_labels(path: str | Path) -> list[dict]:
    """Labels of a JSON Lines file (module docstring), each with ``value`` (the verdict as a number) added.
    Raises InputError naming the file and line of a bad label."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"labels file {path} does not exist (write one with `ctxbench label`)")
    out = []
    for ln, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{ln}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise InputError(f"{where}: not JSON ({e})") from None
        if not isinstance(obj, dict) or "instance_id" not in obj or "verdict" not in obj \
                or not (obj.get("request_key") or obj.get("answer") is not None):
            raise InputError(f"{where}: a label needs instance_id, verdict and request_key or answer")
        out.append({**obj, "value": verdict_value(obj["verdict"], where)})
    return out


def judge_agreement(build_dir: str | Path, labels_path: str | Path, threshold: float = 1.0) -> tuple[list[dict], dict]:
    """κ of every judge in ``BUILD/scores.parquet`` (each matcher, e.g. ``row_match``, ``judge:gpt-4o``,
    ``judge-lara:gpt-4o``, ``lara_fallback``) against the human labels: ``(rows, counts)``, one row per matcher with
    its kind (:func:`matcher_kind`), n, tp, tn, fp, fn, po, pe, kappa, se, ci_low, ci_high; ``counts`` has ``labels`` and ``unmatched`` (labels whose answer is not among the build's responses).
    A matcher that did not score a labelled answer (e.g. an unparseable judge verdict) leaves that pair out."""
    build_dir = require_build(build_dir)
    labels = read_labels(labels_path)
    resp = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    by_answer = {(r["instance_id"], (r["response"] or "").strip()): r["request_key"] for r in resp}
    known = {r["request_key"] for r in resp}
    keyed: dict[str, float] = {}
    unmatched = 0
    for lab in labels:
        key = lab.get("request_key") or by_answer.get((lab["instance_id"], str(lab["answer"]).strip()))
        if key is None or key not in known:
            unmatched += 1
            continue
        keyed[key] = lab["value"]
    by_matcher: dict[str, dict[str, float]] = {}
    for s in read_table(build_dir / "scores.parquet", "scores").to_pylist():
        if s.get("request_key") in keyed and s["score"] is not None:
            by_matcher.setdefault(s["matcher"], {})[s["request_key"]] = s["score"]
    rows = []
    for m in sorted(by_matcher):
        keys = sorted(by_matcher[m])
        k = cohens_kappa([keyed[x] >= threshold for x in keys], [by_matcher[m][x] >= threshold for x in keys])
        rows.append({"matcher": m, "kind": matcher_kind(m), "threshold": threshold, **vars(k)})
    return rows, {"labels": len(labels), "unmatched": unmatched}


def matcher_kind(name: str) -> str:
    """``judge`` for an LLM judge's matcher (``judge:<model>``, ``judge-<prompt>:<model>``), ``fallback`` for a
    matcher some track declares a fallback (it only approximates the benchmark's own scoring), else ``matcher``."""
    return "judge" if is_judge_matcher(name) else "fallback" if is_fallback(name) else "matcher"


def label_sample(build_dir: str | Path, n: int, seed: int = 0, model: str | None = None,
                 exclude: set[str] | None = None) -> list[dict]:
    """Up to ``n`` ok responses to label, chosen by SHA-256 of (seed, request_key) — the same sample for the same
    seed — skipping the request keys in ``exclude`` (already labelled). Each item has request_key, instance_id,
    model, mode, question, gold (parsed) and response."""
    import pyarrow.parquet as pq


    build_dir = require_build(build_dir)
    inst = {r["instance_id"]: r for r in pq.read_table(build_dir / "instances.parquet",
                                                       columns=["instance_id", "question", "gold"]).to_pylist()}
    resp = [r for r in read_table(build_dir / "responses.parquet", "responses").to_pylist()
            if r["status"] == "ok" and r["instance_id"] in inst and (model is None or r["model"] == model)
            and r["request_key"] not in (exclude or set())]
    resp.sort(key=lambda r: hashlib.sha256(f"{seed}|{r['request_key']}".encode()).hexdigest())
    return [{"request_key": r["request_key"], "instance_id": r["instance_id"], "model": r["model"],
             "mode": r["mode"], "question": inst[r["instance_id"]]["question"],
             "gold": json.loads(inst[r["instance_id"]]["gold"]), "response": r["response"]} for r in resp[:n]]


def labelled_keys(path: str | Path) -> set:
    """The request keys already labelled in the labels file ``path`` (:func:`read_labels`); empty when the file
    does not exist yet (``ctxbench label`` resumes from these). Raises InputError for a bad label."""
    return {x.get("request_key") for x in read_labels(path)} if Path(path).exists() else set()


def append_label(path: str | Path, item: dict, verdict: str) -> None:
    """Append one human label to the JSON Lines file ``path``: the item of :func:`label_sample` (its
    ``instance_id``, ``request_key``, ``model`` and ``response`` as ``answer``) and ``verdict``, one of
    :data:`VERDICTS` (``correct``, ``partial``, ``incorrect``). Raises InputError for another verdict."""
    if verdict not in VERDICTS:
        raise InputError(f"verdict {verdict!r}: use one of {', '.join(VERDICTS)}")
    rec = {"instance_id": item["instance_id"], "request_key": item["request_key"], "model": item["model"],
           "answer": item["response"], "verdict": verdict}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def write_kappa(build_dir: str | Path, rows: list[dict], labels_path: str | Path) -> Path:
    """Write the rows of :func:`judge_agreement` with the labels file they came from (column ``labels_file``) to
    ``BUILD/kappa.parquet`` for the report; returns its path."""
    out = Path(build_dir) / "kappa.parquet"
    write_parquet(pa.Table.from_pylist([{**r, "labels_file": str(labels_path)} for r in rows]), out)
    return out
