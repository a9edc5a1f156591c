"""``export``: a build's instances in other formats, written to a new directory (never into the immutable build).

Formats (``--format``):

* ``parquet``: ``instances.parquet`` and ``quarantine.parquet`` (all builds given, concatenated; each row keeps its
  ``build_hash``), the builds' manifests as ``manifests/<build_hash>.json``.
* ``hf``: a Hugging Face ``datasets`` directory (``datasets.load_from_disk(DIR)``): a ``DatasetDict`` with one
  ``test`` split, or ``train`` and ``test`` when a training split is asked for.
* ``inspect``: ``samples.jsonl`` (one sample per instance: the same chat messages ``ctxbench evaluate`` sends,
  the gold answer as target, the instance row as metadata) and ``ctxbench_task.py``, an inspect_ai task file
  (``inspect eval ctxbench_task.py --model ...``) whose scorer is ctxbench's own matcher registry, so inspect_ai
  runs and scores the same instances the same way.
* ``jsonl``: chat-format JSONL for fine-tuning (``{"messages": [system, user, assistant]}``, the assistant turn
  being the gold answer in the prompt's ``Answer: ...`` form); with a training split ``train.jsonl`` and
  ``test.jsonl``, else ``all.jsonl``.

Training splits (SciTrek, section 4.2, post-trains on generated instances): instances are grouped so that no
source (database, article collection, corpus segment: ``source_id``) and no template (``template_id``,
``question_id`` or ``needle_id``) is shared between train and test — the connected components of the graph
linking instances that share one of those — and whole components go to test, in an order seeded from ``seed``,
until ``test_fraction`` of the instances are there. The split is checked (no shared source or template) and the
check is written to ``split.json`` beside the export.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.core.errors import InputError
from ctxbench.core.hashing import stable_hash
from ctxbench.core.values import EXPORT_FORMATS
from ctxbench.models.prompts import render_messages
from ctxbench.core.storage import read_table, require_build, write_json, write_parquet
from ctxbench.core.extras import require
from ctxbench.core.outdir import check_out_dir, mark_out_dir
from ctxbench.core.track import find_track
from ctxbench.models.registry import model_info
from ctxbench.scoring.numbers import display_number

FORMATS = EXPORT_FORMATS  # ctxbench.core.values: `export --format` checks them while parsing
TEMPLATE_KEYS = ("template_id", "question_id")  # a track adds its own (Track.template_keys)


@dataclass
class ExportResult:
    """What an export wrote: the directory, the files (relative names), the instance count and, for a training
    split, the split report (the content of ``split.json``)."""

    out: Path
    format: str
    files: list[str]
    n_instances: int
    split: dict | None = None
    notes: list[str] = field(default_factory=list)


def _check_out(out: Path, builds: list[Path], force: bool) -> None:
    o = out.resolve()
    for b in builds:
        b = b.resolve()
        if o == b or b in o.parents or o in b.parents:
            raise InputError(f"--out {out} is inside (or contains) the build {b}: a build is immutable; export to a "
                             f"directory of its own")

    if check_out_dir(o, "export", force=force, what="export") or force:  # the rule of every --out (ctxbench.core.outdir)
        shutil.rmtree(o, ignore_errors=True)  # an earlier export (or --force): replaced as a whole
    mark_out_dir(o, "export")


def load_instances(builds: list[str | Path]) -> tuple[pa.Table, list[dict]]:
    """The instances of one or more builds (concatenated) and their manifests. Raises InputError for a directory
    that is not a complete build, and for the same build given twice."""
    tables, manifests, seen = [], [], set()
    for b in builds:
        b = require_build(b)
        mpath = b / "manifest.json"
        if not mpath.exists():
            raise InputError(f"{b} holds an unfinished build (no manifest.json): complete it before exporting")
        m = json.loads(mpath.read_text(encoding="utf-8"))
        if m.get("build_hash") in seen:
            raise InputError(f"build {m.get('build_hash')} ({b}) is given twice")
        seen.add(m.get("build_hash"))
        manifests.append(m)
        tables.append(pq.read_table(b / "instances.parquet"))
    if not tables:
        raise InputError("give at least one --build")
    tbl = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
    return tbl, manifests


# ------------------------------------------------------------------------------------------------ splits

def split_instances(rows: list[dict], test_fraction: float = 0.2, seed: int = 0) -> tuple[list[int], list[int], dict]:
    """Split instance rows into train and test indices with no shared ``source_id`` and no shared template
    (module docstring). Returns (train indices, test indices, report). Raises InputError when the instances form
    a single group (e.g. one database): name the fix (export several builds together)."""
    if not 0 < test_fraction < 1:
        raise InputError(f"--test-fraction must be between 0 and 1 (got {test_fraction})")
    parent = list(range(len(rows)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        for key in _group_keys(r):
            j = first.setdefault(key, i)
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    comps: dict[int, list[int]] = {}
    for i in range(len(rows)):
        comps.setdefault(find(i), []).append(i)
    groups = list(comps.values())
    if len(groups) < 2:
        sources = sorted({r["source_id"] for r in rows})
        raise InputError(f"these instances cannot be split without sharing a source or template: they form one group "
                         f"(sources {sources}); export several builds of different sources together "
                         f"(--build A --build B)")
    groups.sort(key=lambda g: stable_hash(seed, sorted(rows[i]["instance_id"] for i in g)))
    want = test_fraction * len(rows)
    test: list[int] = []
    for g in groups:
        if len(test) >= want:
            break
        if len(test) + len(g) > len(rows) - 1 and test:
            continue  # keep at least one group for train
        test.extend(g)
    if len(test) == len(rows):  # one group took everything: move it back, take the smallest other
        test = sorted(groups, key=len)[0]
    test_set = set(test)
    train = [i for i in range(len(rows)) if i not in test_set]
    test = sorted(test_set)
    report = split_report(rows, train, test)
    if report["shared_sources"] or report["shared_templates"]:  # the grouping above makes this impossible
        raise AssertionError(f"split shares {report['shared_sources']} / {report['shared_templates']}")
    report.update({"test_fraction_requested": test_fraction, "seed": seed, "groups": len(groups)})
    return train, test, report


def _template_keys(benchmark: str | None) -> tuple[str, ...]:
    """Columns naming an instance's template: its track's ``template_keys`` (the defaults for an unknown one)."""
    t = find_track(benchmark)
    return tuple(t.template_keys) if t is not None else TEMPLATE_KEYS


def _group_keys(r: dict) -> list[tuple]:
    keys = [("source", r["source_id"])]
    for k in _template_keys(r.get("benchmark")):
        if r.get(k) is not None:
            keys.append(("template", k, r[k]))
    return keys


def split_report(rows: list[dict], train: list[int], test: list[int]) -> dict:
    """Counts and overlap of a split: sources and templates on each side and those shared (must be empty)."""
    def keys(idx, kind):
        return {k[1:] for i in idx for k in _group_keys(rows[i]) if k[0] == kind}

    src_tr, src_te = keys(train, "source"), keys(test, "source")
    tpl_tr, tpl_te = keys(train, "template"), keys(test, "template")
    return {"train": len(train), "test": len(test),
            "train_sources": sorted(s[0] for s in src_tr), "test_sources": sorted(s[0] for s in src_te),
            "train_templates": len(tpl_tr), "test_templates": len(tpl_te),
            "shared_sources": sorted(s[0] for s in src_tr & src_te),
            "shared_templates": sorted(":".join(map(str, t)) for t in tpl_tr & tpl_te)}


# ------------------------------------------------------------------------------------------------ formats

def _fmt_value(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):  # no float noise: 1627.3, not 1627.3000000000009
        return display_number(v)
    return str(v)


def gold_text(gold: list[list]) -> str:
    """A gold answer (rows of values) as the answer line the prompts ask for: ``Answer: a, b; c, d``."""
    return "Answer: " + "; ".join(", ".join(_fmt_value(v) for v in row) for row in gold)


def chat_example(row: dict, variant: str = "direct") -> dict:
    """One fine-tuning example: the evaluation prompt's messages plus the gold answer as the assistant turn."""
    msgs = render_messages(row["context"], row["question"], variant, benchmark=row.get("benchmark"),
                           context_format=row.get("context_format"))
    return {"messages": [*msgs, {"role": "assistant", "content": gold_text(json.loads(row["gold"]))}]}


def _write_jsonl(path: Path, objs) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for o in objs:
            f.write(json.dumps(o, ensure_ascii=False) + "\n")
    tmp.replace(path)


INSPECT_TASK = '''"""inspect_ai task for a ctxbench export (written by `ctxbench export --format inspect`).

Runs the exported instances (samples.jsonl beside this file: the same chat messages `ctxbench evaluate` sends)
and scores them with ctxbench's matcher registry (the benchmark's primary matcher), so the numbers compare with
`ctxbench score`. Usage: inspect eval ctxbench_task.py --model <provider/model>
"""

import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.scorer import Score, mean, scorer, stderr
from inspect_ai.solver import generate

HERE = Path(__file__).resolve().parent
SETTINGS = {settings}
_ROLES = {{"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}}


def _sample(d: dict) -> Sample:
    msgs = [_ROLES[m["role"]](content=m["content"]) for m in d["input"]]
    return Sample(id=d["id"], input=msgs, target=d["target"], metadata=d["metadata"])


def load_samples() -> MemoryDataset:
    with open(HERE / "samples.jsonl", encoding="utf-8") as f:
        return MemoryDataset([_sample(json.loads(line)) for line in f if line.strip()], name="ctxbench")


@scorer(metrics=[mean(), stderr()])
def ctxbench_matcher():
    """The instance's benchmark's primary ctxbench matcher (e.g. row_match) on the model's completion."""
    from ctxbench.scoring.pipeline import score_reply

    async def score(state, target):
        inst = dict(state.metadata)
        inst["gold"] = json.loads(inst["gold"])
        if inst.get("accepted_answers") is not None:
            inst["accepted_answers"] = json.loads(inst["accepted_answers"])
        # the benchmark's answer pipeline (reasoning and chat tokens removed), then its primary matcher; a reply
        # the output budget ended (inspect's stop_reason "max_tokens") earns no credit for what it quoted
        sc = score_reply(state.output.completion, inst,
                         finish_reason=getattr(state.output, "stop_reason", None))[0]
        return Score(value=float(sc.result.score), answer=sc.answer,
                     metadata={{"matcher": sc.matcher, "tags": sc.result.tags}})

    return score


@task
def ctxbench_instances() -> Task:
    return Task(dataset=load_samples(), solver=generate(), scorer=ctxbench_matcher(),
                config=GenerateConfig(temperature=SETTINGS["temperature"], max_tokens=SETTINGS["max_tokens"]))
'''


def export_build(builds: list[str | Path] | str | Path, fmt: str, out: str | Path, *, test_fraction: float | None = None,
                 seed: int = 0, prompt_variant: str = "cot", model: str = "", force: bool = False) -> ExportResult:
    """Export the instances of ``builds`` (one build directory or several) as ``fmt`` into ``out`` (module
    docstring). ``test_fraction``: make a train/test split (hf and jsonl; required for neither). ``prompt_variant``
    and ``model`` choose the messages of the inspect samples (the ones ``ctxbench evaluate --model`` would send; the
    output budget is the model registry's). Raises InputError for an unknown format, an ``out`` inside a build or
    holding anything but an earlier export (unless ``force``: its content is replaced; ctxbench.core.outdir), an
    incomplete build, or instances that cannot be split."""
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}: use {', '.join(FORMATS)}")
    builds = [Path(b) for b in ([builds] if isinstance(builds, (str, Path)) else builds)]
    out = Path(out)
    if fmt == "hf":  # before anything is read or written
        require("datasets", "export --format hf")
    tbl, manifests = load_instances(builds)
    _check_out(out, builds, force)
    rows = tbl.to_pylist()
    split = None
    parts: dict[str, list[int]] = {"all": list(range(len(rows)))}
    if test_fraction is not None:
        if fmt not in ("hf", "jsonl"):
            raise InputError(f"--test-fraction applies to --format hf and jsonl, not {fmt}")
        train, test, split = split_instances(rows, test_fraction, seed)
        parts = {"train": train, "test": test}
    out.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    if fmt == "parquet":
        write_parquet(tbl, out / "instances.parquet")
        q = [read_table(b / "quarantine.parquet", "quarantine") for b in builds]
        write_parquet(pa.concat_tables(q, promote_options="default"), out / "quarantine.parquet")
        (out / "manifests").mkdir(exist_ok=True)
        for m in manifests:
            write_json(m, out / "manifests" / f"{m['build_hash']}.json")
        files = ["instances.parquet", "quarantine.parquet", *(f"manifests/{m['build_hash']}.json" for m in manifests)]
    elif fmt == "hf":
        datasets = require("datasets", "export --format hf")
        datasets.disable_progress_bars()
        dd = datasets.DatasetDict({("test" if k == "all" else k): datasets.Dataset(tbl.take(idx))
                                   for k, idx in parts.items()})
        dd.save_to_disk(str(out))
        files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    elif fmt == "inspect":
        info = model_info(model) if model else None
        settings = {"prompt_variant": prompt_variant, "model": model or None, "temperature": 0.0,
                    "max_tokens": info.max_output_tokens if info else None}
        _write_jsonl(out / "samples.jsonl", (
            {"id": r["instance_id"], "input": render_messages(r["context"], r["question"], prompt_variant, model,
                                                              benchmark=r.get("benchmark"),
                                                              context_format=r.get("context_format")),
             "target": gold_text(json.loads(r["gold"])),
             "metadata": {k: v for k, v in r.items() if k != "context"}} for r in rows))
        (out / "ctxbench_task.py").write_text(INSPECT_TASK.format(settings=repr(settings)), encoding="utf-8")
        files = ["samples.jsonl", "ctxbench_task.py"]
    else:  # jsonl
        for k, idx in parts.items():
            _write_jsonl(out / f"{k}.jsonl", (chat_example(rows[i]) for i in idx))
            _write_jsonl(out / f"{k}.ids.jsonl", ({"instance_id": rows[i]["instance_id"],
                                                   "build_hash": rows[i].get("build_hash"),
                                                   "source_id": rows[i]["source_id"]} for i in idx))
            files += [f"{k}.jsonl", f"{k}.ids.jsonl"]
    if split is not None:
        write_json(split, out / "split.json")
        files.append("split.json")
    write_json({"format": fmt, "builds": [m["build_hash"] for m in manifests], "instances": len(rows),
                "split": split is not None, "files": files}, out / "export.json")
    return ExportResult(out, fmt, files + ["export.json"], len(rows), split)
