"""``ctxbench import lara``: LaRA's query files and corpora → instances (LaRA, Li et al., ICML 2025, section 3).

Input layout (``../shared/data/lara``, as LaRA's repository ships it): ``queries/{tier}_{type}_{task}.jsonl``
(tier ``32k``/``128k``; context type ``book``/``financial``/``paper``; task ``location``, ``reasoning``, ``comp``,
``hallu``), one JSON object per line with ``file`` (the corpus file), ``question``, ``answer`` and, for location,
reasoning and hallucination, ``context_order`` (the segment the question was written from) or, for comparison,
``comp_parts``; corpora in ``corpora/{tier}/{type}/{file}``.

Each query becomes one instance: ``benchmark = "lara"``, ``skill`` = its task (``location``, ``reasoning``,
``comparison``, ``hallucination``: unanswerable questions whose correct answer is a refusal), the whole corpus file
as the context, ``gold = [[answer]]``, ``source_tier`` the file's tier (e.g. ``32k``) and ``target_tokens`` =
``context_tokens`` measured in ``--tokenizer``. Evidence spans are unknown (``[]``). For position analysis
(LaRA appendix D), location and reasoning questions on novels and financial statements carry ``answer_segment``
(their ``context_order``) and ``n_segments`` (location 5 at 32k and 10 at 128k; reasoning 3 and 6); papers are
split per paper rather than into equal segments, and ``"full"`` questions span the whole context, so theirs are
null. Queries whose corpus file is absent (LaRA novels that may be under copyright are not shipped), unreadable
lines and unknown files go to ``quarantine.parquet`` with the reason; the rest of the import goes on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ctxbench.tracks.lara.config import LaraConfig
from ctxbench.features.difficulty import difficulty_columns
from ctxbench.features.language import language_columns, prefetch_languages
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import canonical_json, file_sha256, stable_hash
from ctxbench.core.storage import to_table
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tracks.common import BuildWriter
from ctxbench.core.manifest import BuildResult, TokenizerRecord
from ctxbench.tracks.validate import validate_build

TASKS = {"location": "location", "reasoning": "reasoning", "comp": "comparison", "comparison": "comparison",
         "hallu": "hallucination", "hallucination": "hallucination"}
# LaRA appendix D: answer positions are uniform over this many segments of the context
SEGMENTS = {("32k", "location"): 5, ("128k", "location"): 10, ("32k", "reasoning"): 3, ("128k", "reasoning"): 6}
QUERY_FILE_RE = re.compile(r"^(?P<tier>\d+k)_(?P<ctype>[a-z]+)_(?P<task>[a-z]+)\.jsonl?$")


def _quarantine(inp: str, stage: str, reason: str, **detail) -> dict:
    return {"input": inp, "stage": stage, "reason": reason, "detail": canonical_json(detail) if detail else None}


@dataclass
class Loaded:
    """Stage ``load``: the parsed queries, the corpora found (relative path → (text, tokens) or None), the inputs'
    hashes, quarantine rows so far and the build hash; ``existing`` when ``out`` already holds this build."""

    cfg: LaraConfig
    out: Path
    queries: list[tuple[str, int, dict, dict]]  # (query file, line, parsed file name, record)
    corpora: dict[str, tuple[str, int] | None]
    inputs: dict[str, str]
    quarantine: list[dict]
    tokenizer_sha256: str
    build_hash: str
    existing: BuildResult | None = None
    writer: BuildWriter | None = None


def load_stage(cfg: LaraConfig, out: str | Path, force: bool = False, versioned: bool = False) -> Loaded:
    """Read the query files (unreadable lines and unknown file names quarantined), read and count every corpus
    file they name, and hash the inputs. Raises InputError when ``cfg.data`` has no ``queries`` directory of LaRA
    files, or ``out`` holds a different build (unless ``force``)."""
    data, out = Path(cfg.data), Path(out)
    qdir = data / "queries"
    qfiles = sorted(p for p in qdir.glob("*.json*")) if qdir.is_dir() else []
    if not qfiles:
        raise InputError(f"{data} holds no LaRA query files (expected {qdir}/<tier>_<type>_<task>.jsonl): pass "
                         f"--data pointing at LaRA's dataset directory")
    tok = get_tokenizer(cfg.tokenizer)
    inputs = {str(p.relative_to(data)): file_sha256(p) for p in qfiles}
    quarantine: list[dict] = []
    queries: list[tuple[str, int, dict, dict]] = []
    for p in qfiles:
        m = QUERY_FILE_RE.match(p.name)
        if not m or m.group("task") not in TASKS:
            quarantine.append(_quarantine(p.name, "parse", "not a LaRA query file name "
                                                           "(<tier>_<type>_<task>.jsonl with a known task)"))
            continue
        for ln, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            inp = f"{p.name}:{ln}"
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ValueError(f"a query line must be a JSON object, not {type(rec).__name__}")
                if not all(isinstance(rec.get(k), str) and rec[k].strip() for k in ("file", "question", "answer")):
                    raise ValueError("needs non-empty string fields file, question and answer")
            except ValueError as e:
                quarantine.append(_quarantine(inp, "parse", "unreadable query line", error=str(e)[:200]))
                continue
            queries.append((p.name, ln, m.groupdict(), rec))
    corpora: dict[str, tuple[str, int] | None] = {}
    for _, _, name, rec in queries:
        rel = f"{name['tier']}/{name['ctype']}/{rec['file']}"
        if rel not in corpora:
            path = data / "corpora" / rel
            corpora[rel] = None
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                if text.strip():
                    corpora[rel] = (text, tok.count(text))
                    inputs[f"corpora/{rel}"] = file_sha256(path)
    build_hash = stable_hash("lara", 2, cfg.tokenizer, tok.file_sha256, inputs)
    w = BuildWriter(out, build_hash, force, versioned)
    return Loaded(cfg, w.dir, queries, corpora, inputs, quarantine, tok.file_sha256, build_hash, w.existing, w)


def instances_stage(loaded: Loaded) -> tuple[list[dict], list[dict]]:
    """One instance per query whose corpus file is present (module docstring); returns (instances, quarantine
    rows: absent corpus files and duplicate queries, after the load stage's)."""
    tokenizer, build_hash = loaded.cfg.tokenizer, loaded.build_hash
    quarantine = list(loaded.quarantine)
    instances, seen = [], set()
    for qfile, ln, name, rec in loaded.queries:
        inp = f"{qfile}:{ln}"
        rel = f"{name['tier']}/{name['ctype']}/{rec['file']}"
        if loaded.corpora[rel] is None:
            quarantine.append(_quarantine(inp, "fetch", "corpus file absent (LaRA corpus not shipped or empty)",
                                          file=f"corpora/{rel}"))
            continue
        text, n = loaded.corpora[rel]
        task = TASKS[name["task"]]
        iid = stable_hash("lara", tokenizer, rel, rec["question"], rec["answer"], stable_hash(text))
        if iid in seen:
            quarantine.append(_quarantine(inp, "validate", "duplicate query (same corpus, question and answer)"))
            continue
        seen.add(iid)
        order = rec.get("context_order")
        nseg = SEGMENTS.get((name["tier"], task)) if name["ctype"] != "paper" else None
        seg = order if nseg is not None and isinstance(order, int) and 0 <= order < nseg else None
        instances.append({
            "instance_id": iid, "benchmark": "lara", "source_id": rel, "question": rec["question"],
            "question_id": inp, "sql": None, "gold": canonical_json([[rec["answer"]]]), "accepted_answers": None,
            "context": text, "tokenizer": tokenizer, "target_tokens": n, "source_tier": name["tier"],
            "context_tokens": n, "context_format": "full_text", "query_types": "[]", "skill": task,
            "evidence_spans": "[]", "answer_segment": seg, "n_segments": nseg if seg is not None else None,
            "context_type": name["ctype"], "build_hash": build_hash,
            "lexical_overlap": 0.0})  # no evidence sentence is known (evidence_spans empty)
        instances[-1].update(difficulty_columns(instances[-1]))  # scope/dispersion null: spans unknown
        prefetch_languages([text, rec["question"]])  # detected beside this process while the loop goes on
    for row in instances:
        row.update(language_columns(row))
    return instances, quarantine


def validate_stage(instances: list[dict]) -> None:
    """The instances data-quality suite (raises ValidationError naming failed expectations)."""
    validate_build(to_table("instances", instances))


def write_stage(loaded: Loaded, instances: list[dict], quarantine: list[dict]) -> BuildResult:
    """Write quarantine, instances (atomically) and, last, the manifest that marks the build complete."""
    return loaded.writer.write(
        "lara", loaded.cfg.model_dump(exclude={"data"}), instances, quarantine, inputs=loaded.inputs,
        tokenizer=TokenizerRecord(name=loaded.cfg.tokenizer, file_sha256=loaded.tokenizer_sha256 or ""),
        counts={"contexts": len({i["source_id"] for i in instances})})


def import_lara(data: str | Path, out: str | Path, tokenizer: str = "cl100k_base", force: bool = False,
                versioned: bool = False) -> BuildResult:
    """Import LaRA from ``data`` (the layout in the module docstring) into the build directory ``out``
    (instances.parquet, quarantine.parquet, manifest.json): the stages load → instances → validate → write. The
    same inputs and tokenizer give the same ``build_hash`` and bytes; an existing build with that hash is left as
    it is (``skipped``), a different one is an error unless ``force``. Raises InputError when ``data`` has no
    ``queries`` directory of LaRA files."""
    loaded = load_stage(LaraConfig(data=str(data), tokenizer=tokenizer), out, force, versioned)
    if loaded.existing is not None:
        return loaded.existing
    instances, quarantine = instances_stage(loaded)
    validate_stage(instances)
    return write_stage(loaded, instances, quarantine)
