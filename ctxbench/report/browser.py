"""The instance browser of the report: every instance of a build with its question, gold answer, each model's reply
(reasoning apart), the extracted answer, the score of every matcher and the failure tags, and the context with the
evidence highlighted — a static page, ``report/instances.html``, that needs no server (opened as a file or served
over HTTP), in the manner of inspect_ai's log viewer and HELM's instance pages.

Data are written beside the page from the stored Parquet tables (``instances``, ``responses``, ``scores``), never
read from the build by the page: ``report/browser/data.js`` (one ``<script src>``: a ``file://`` page cannot
``fetch()``) holds instances and answers; each distinct context is its own ``report/browser/contexts/<key>.js``,
loaded only when its instance's context is opened (a 1M-token context is megabytes); likewise an answer with a text
over :data:`PREVIEW_CHARS` characters keeps its first characters in ``data.js`` and its whole texts in
``report/browser/replies/<key>.js``, loaded when the reader asks to see it all (:func:`lazy_long_texts`). Every text reaches the page as
JSON inside JavaScript with ``<``, ``>``, ``&`` and the line separators escaped, and is put into the page as text
(never as HTML), so replies holding HTML, ``<think>`` blocks or chat special tokens show as written.

``evidence_spans`` are ``[start, end)`` TOKEN offsets in the instance's tokenizer (SCHEMA.md); the page needs
CHARACTER offsets: :func:`char_spans` re-encodes the context with the tokenizer registry
(:meth:`ctxbench.tokenizers.registry.Tokenizer.encode_with_starts`) and maps each token interval to the characters
from its first token's start to the next token's start (the end of the text for the last token). The conversion is
cached in ``report/browser/spans-cache.json`` by context, tokenizer and spans.

Filters (model, mode, context length, score by any matcher, and every facet column) are data-driven: a facet is any
instance column, outside identifiers and free text, whose values repeat (2 to 40 distinct values, on average at
least two instances each; a JSON-list column such as ``query_types`` counts each element), so a track's own columns
(skill, position, depth, variant, ...) become filters without the browser naming any track. One facet is derived:
``answer position``, the segment of the context holding the answer (:func:`ctxbench.analysis.rag.answer_position`,
as the report's position table counts it). The page reads and
writes its filters in the URL's hash (``instances.html#model=gpt-4o&length=4096&score=wrong``):
:func:`instances_link` makes such links, and every aggregate cell of the report uses one.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow.parquet as pq

from ctxbench.core.storage import read_table
from ctxbench.analysis.order import value_order
from ctxbench.analysis.rag import answer_position
from ctxbench.core.errors import InputError
from ctxbench.models.effort import display_model, is_cut_off
from ctxbench.models.prompts import messages_text, render_messages
from ctxbench.report.browser_page import page_html
from ctxbench.scoring.numbers import display_number
from ctxbench.scoring.filters import AnswerContext
from ctxbench.scoring.pipeline import get_filter  # the chain's module: importing it registers every filter
from ctxbench.scoring.registry import matchers_for
from ctxbench.tokenizers import get_tokenizer

PAGE = "instances.html"
DATA_DIR = "browser"
# instance columns never offered as filters: identifiers, free text, token offsets, measured continuous values
NOT_FACETS = frozenset({
    "instance_id", "question", "question_id", "sql", "gold", "accepted_answers", "context", "tokenizer",
    "target_tokens", "context_tokens", "evidence_spans", "included_rows", "build_hash", "scope", "dispersion",
    "achieved_density", "relevant_tokens", "achieved_depth", "achieved_depth_tokens", "achieved_depth_paragraphs",
    "depth_tolerance", "needle_depths_tokens", "needle_depths_achieved", "needle_depths_paragraphs",
    "haystack_budget_tokens", "haystack_paragraphs", "n_articles"})
MAX_FACET_VALUES = 40
MAX_QUESTIONS = 1000  # a build with more distinct questions gets no question list (the text search remains)
# above this many characters in reply × visible text, reasoning is not aligned character by character
_ALIGN_LIMIT = 40_000_000
# characters of each text of an answer (reply, visible reply, each reasoning block, reasoning field) kept in
# data.js; an answer with a longer text gets its whole texts in browser/replies/<key>.js, loaded on "show all"
PREVIEW_CHARS = 2_000
_LONG_TEXTS = ("reply", "visible", "reasoning", "reasoning_field")


def instances_link(filters: Mapping[str, Any] | None = None, page: str = PAGE) -> str:
    """The browser's address showing the instances that match ``filters`` (``{"model": "gpt-4o", "length": 4096,
    "score": "scored", "query_types": "Max/Min"}``; None values left out), relative to the report directory.
    Keys: ``model``, ``mode``, ``matcher``, ``length`` (context length in tokens), ``score`` (``scored``,
    ``correct``, ``partial``, ``wrong``, ``unscored``), ``question`` (its exact text), ``q`` (text search),
    ``sort``, and any facet column."""
    parts = [f"{quote(str(k), safe='')}={quote(_url_value(v), safe='')}" for k, v in (filters or {}).items()
             if v is not None and v != ""]
    return page + ("#" + "&".join(parts) if parts else "")


def _url_value(v: Any) -> str:
    """A filter value as the page prints it (JavaScript's ``String``): ``true``, ``1`` for 1.0."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def char_spans(text: str, token_spans: Sequence[Sequence[int]], tokenizer: str) -> list[list[int]]:
    """Character intervals ``[start, end)`` of ``token_spans`` (``[start, end)`` token offsets of ``text`` in the
    registry tokenizer ``tokenizer``): a token interval covers the characters from its first token's start to the
    start of the token after it (the end of ``text`` after the last token), sorted and merged where they overlap
    or touch. Empty spans are dropped; a span beyond the text's tokens is clipped to it. Raises TokenizerError
    for an unknown or unloadable tokenizer."""
    spans = [(int(s), int(e)) for s, e in token_spans if int(e) > int(s)]
    if not spans:
        return []
    _, starts = get_tokenizer(tokenizer).encode_with_starts(text)
    n = len(starts)

    def at(t: int) -> int:
        return len(text) if t >= n else int(starts[max(t, 0)])

    out: list[list[int]] = []
    for cs, ce in sorted((at(s), at(e)) for s, e in spans):
        if ce <= cs:
            continue
        if out and cs <= out[-1][1]:
            out[-1][1] = max(out[-1][1], ce)
        else:
            out.append([cs, ce])
    return out


def split_reasoning(reply: str | None, reasoning_field: str | None = None) -> tuple[list[str], str]:
    """``(reasoning blocks, visible reply)`` of a stored reply: the visible reply is what the answer pipeline's
    first two filters leave (``drop_reasoning_field``, ``strip_reasoning`` of :mod:`ctxbench.scoring.strip`:
    the provider's reasoning field repeated in the reply and inline reasoning blocks such as ``<think>…</think>``
    removed); the blocks are the stretches of the reply those filters removed, in order (delimiters included).
    The provider's separate reasoning field itself is not among the blocks (the page shows it apart)."""
    ctx = AnswerContext(reasoning_field)
    text = get_filter("drop_reasoning_field").fn(reply, ctx) if reply else ""  # shown apart as the field itself
    visible = get_filter("strip_reasoning").fn(text, ctx) if text else ""
    whole = text.strip()
    if visible == whole:
        return [], visible
    if not visible:
        return ([whole] if whole else []), ""
    if whole.endswith(visible):
        return [whole[:-len(visible)].strip()], visible
    if whole.startswith(visible):
        return [whole[len(visible):].strip()], visible
    if len(whole) * len(visible) > _ALIGN_LIMIT:
        return [], visible
    blocks, pos = [], 0
    for a, _, size in SequenceMatcher(None, whole, visible, autojunk=False).get_matching_blocks():
        gap = whole[pos:a].strip()
        if gap:
            blocks.append(gap)
        pos = a + size
    return blocks, visible


def _scalar(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _list_values(v: Any) -> list | None:
    """The elements of a JSON-list text cell (scalars only), else None."""
    if not isinstance(v, str) or not v.startswith("["):
        return None
    try:
        x = json.loads(v)
    except ValueError:
        return None
    if isinstance(x, list) and all(isinstance(e, (str, int, float, bool)) or e is None for e in x):
        return [e for e in x if e is not None]
    return None


def facet_columns(rows: Sequence[Mapping[str, Any]], columns: Iterable[str]) -> list[dict]:
    """The instance columns the browser filters on (module docstring's rule), in ``columns`` order: ``[{"key",
    "label", "multi", "values"}]`` (``multi``: a JSON-list column, an instance matching any of its elements). A
    column with one value is kept (links may name it; the page shows no filter for it)."""
    out = []
    n = len(rows)
    for c in columns:
        if c in NOT_FACETS:
            continue
        vals = [r.get(c) for r in rows]
        lists = [_list_values(v) for v in vals if v is not None]
        multi = bool(lists) and all(x is not None for x in lists)
        if multi:
            distinct = {e for x in lists for e in x}
        else:
            if any(isinstance(v, (list, dict, bytes)) for v in vals):
                continue
            distinct = {_scalar(v) for v in vals} - {None}
        if not 1 <= len(distinct) <= MAX_FACET_VALUES or len(distinct) > max(n / 2, 4):
            continue
        out.append({"key": c, "label": c.replace("_", " "), "multi": multi,
                    "values": sorted(distinct, key=value_order)})  # numbers, then easy/medium/hard...
    return out


def _primary(benchmark: str | None, have: list[str]) -> str | None:
    try:
        first = matchers_for(benchmark)[0]
    except InputError:
        first = None
    return first if first in have or not have else have[0]


def _js(obj: Any) -> str:
    """JSON safe inside JavaScript and HTML: ``<``, ``>``, ``&`` and U+2028/2029 as escapes."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _gold_text(v: Any) -> str:
    """A gold answer for reading: rows on lines, a row's values joined by `` | ``."""
    if isinstance(v, list):
        return "\n".join(" | ".join(map(_cell, x)) if isinstance(x, list) else _cell(x) for x in v)
    return _cell(v)


def _cell(v: Any) -> str:
    if isinstance(v, float):  # no float noise: 1627.3, not 1627.3000000000009
        return display_number(v)
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _parsed(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def answer_position_label(segment: int, n_segments: int) -> str:
    """The browser's value of the answer-position facet: ``"2 of 5"`` for segment 1 (0-based) of 5."""
    return f"{segment + 1} of {n_segments}"


def mode_label(mode: str, rag_tokens: int | None) -> str:
    """A response's mode as the report's tables name it: ``rag@2048`` for a RAG run with a retrieval budget
    (:func:`ctxbench.analysis.core.instance_scores`), else the mode."""
    return mode if rag_tokens is None else f"{mode}@{rag_tokens}"


@dataclass
class BrowserData:
    """What :func:`write_browser` wrote: the page, counts, and instances whose evidence could not be located."""

    page: Path
    models: list[str] = field(default_factory=list)
    instances: int = 0
    answers: int = 0
    contexts: int = 0
    span_errors: list[str] = field(default_factory=list)


def _context_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def _load_cache(p: Path) -> dict:
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_text(p: Path, text: str) -> None:
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)


def lazy_long_texts(answer: dict, out: Path, written: set[str]) -> None:
    """Keep ``data.js`` small whatever the replies hold (issue 31: three hostile 2 MB replies made it 18 MB): when
    a text of ``answer`` (its reply, visible reply, reasoning blocks or reasoning field) is longer than
    :data:`PREVIEW_CHARS` characters, write the whole texts to ``out/browser/replies/<key>.js``
    (``ctxbenchReply(key, {...})``, loaded by the page only on "show all") and keep the first
    ``PREVIEW_CHARS`` characters of each in ``answer``, with ``full = {"key", "chars": {text: length}}``.
    ``key``: SHA-256 of the answer's request key (20 hex digits); added to ``written``."""
    texts = {k: answer.get(k) for k in _LONG_TEXTS}
    longest = max([len(v) for v in texts.values() if isinstance(v, str)]
                  + [len(b) for b in texts["reasoning"] or []] + [0])
    if longest <= PREVIEW_CHARS:
        return
    key = hashlib.sha256(str(answer.pop("_key")).encode("utf-8")).hexdigest()[:20]
    rdir = out / DATA_DIR / "replies"
    rdir.mkdir(parents=True, exist_ok=True)
    _write_text(rdir / f"{key}.js", f"ctxbenchReply({_js(key)},{_js(texts)});\n")
    written.add(key)
    chars = {k: len(v) for k, v in texts.items() if isinstance(v, str)}
    chars["reasoning"] = sum(len(b) for b in texts["reasoning"] or [])
    for k in ("reply", "visible", "reasoning_field"):
        if isinstance(texts[k], str):
            answer[k] = texts[k][:PREVIEW_CHARS]
    answer["reasoning"] = [b[:PREVIEW_CHARS] for b in texts["reasoning"] or []]
    answer["full"] = {"key": key, "chars": chars}


def write_contexts(build_dir: Path, out: Path, evidence: dict[str, list]) -> tuple[dict[str, dict], list[str]]:
    """Write one ``contexts/<key>.js`` per distinct context (read from ``instances.parquet`` in batches) and
    return, per instance id, ``{"context": key, "chars": n, "spans": char spans or None}``, and the instances
    whose spans could not be converted (with why). ``evidence``: instance id → token spans."""
    cdir = out / DATA_DIR / "contexts"
    cdir.mkdir(parents=True, exist_ok=True)
    cache_path = out / DATA_DIR / "spans-cache.json"
    cache, new_cache = _load_cache(cache_path), {}
    info: dict[str, dict] = {}
    errors: list[str] = []
    written: set[str] = set()
    f = pq.ParquetFile(build_dir / "instances.parquet")
    for batch in f.iter_batches(batch_size=64, columns=["instance_id", "context", "tokenizer"]):
        for r in batch.to_pylist():
            text = r["context"] or ""
            key = _context_key(text)
            if key not in written:
                p = cdir / f"{key}.js"
                if not p.exists():
                    _write_text(p, f"ctxbenchContext({_js(key)},{_js(text)});\n")
                written.add(key)
            spans = evidence.get(r["instance_id"]) or []
            ck = hashlib.sha256(f"{key}|{r['tokenizer']}|{_js(spans)}".encode()).hexdigest()[:24]
            cs: list | None = None
            if not spans:
                cs = []
            elif ck in cache:
                cs = cache[ck]
            else:
                try:
                    cs = char_spans(text, spans, r["tokenizer"])
                except Exception as e:  # a tokenizer that is not installed here: the page says so
                    errors.append(f"{r['instance_id']}: evidence spans not located ({type(e).__name__}: {e})")
            if cs is not None and spans:
                new_cache[ck] = cs
            info[r["instance_id"]] = {"context": key, "chars": len(text), "spans": cs}
    for p in cdir.glob("*.js"):
        if p.stem not in written:
            p.unlink()
    _write_text(cache_path, json.dumps(new_cache, separators=(",", ":")))
    return info, errors


# where the context stands in the messages the browser shows (the context itself is in the context pane)
CONTEXT_MARK = "\u0000CTXBENCH-CONTEXT\u0000"


def output_limit_ended(response: Mapping[str, Any]) -> bool:
    """Whether the output budget ended a stored reply: status ``cut_off``, or a finish reason that says so
    (``length``, ``max_tokens``, ``MAX_TOKENS``…: :func:`ctxbench.scoring.filters.finish_kind`). False for builds
    written before responses stored ``finish_reason``."""
    return is_cut_off(response)


def prompt_parts(instance: Mapping[str, Any], variant: str, rag: bool, model: str = "") -> dict:
    """The messages ``evaluate`` sent for an instance (:func:`ctxbench.models.prompts.render_messages`, the same
    template files and track prompts), with the context left out: ``{"system": text, "before": the user text
    before the context (the intro and the opening tag), "after": the user text after it (the closing tag, the
    question and the answer instructions), "context": "lc" or "rag", "variant": "cot" or "direct"}``."""
    msgs = render_messages(CONTEXT_MARK, instance.get("question") or "", variant, model, rag=rag,
                           benchmark=instance.get("benchmark"), context_format=instance.get("context_format"))
    system = "\n".join(messages_text([m]) for m in msgs if m["role"] == "system")
    user = "\n".join(messages_text([m]) for m in msgs if m["role"] != "system")
    before, _, after = user.partition(CONTEXT_MARK)
    return {"system": system, "before": before, "after": after, "context": "rag" if rag else "lc", "variant": variant}


def _prompt_key(instance: Mapping[str, Any], response: Mapping[str, Any], prompts: dict[str, dict]) -> str | None:
    """The key in ``prompts`` of the messages sent for one response (rendered once per instance, variant and
    mode); None when they cannot be rendered (an unknown variant in an old build)."""
    variant = response.get("prompt_variant") or "cot"
    rag = str(response.get("mode") or "lc").startswith("rag")
    key = f"{instance['instance_id']}|{variant}|{'rag' if rag else 'lc'}"
    if key not in prompts:
        try:
            prompts[key] = prompt_parts(instance, variant, rag, str(response.get("model") or ""))
        except Exception:  # noqa: BLE001 - a prompt that no longer renders: the browser shows the rest
            return None
    return key


def repl_steps(build_dir: Path) -> dict[str, list[dict]]:
    """The steps of each ``--mode repl`` answer (``steps.parquet``, :mod:`ctxbench.run.repl`) by request key, in
    order: ``step``, ``status``, ``code``, ``output`` (as stored: cut to the stated limit), ``sub_calls`` (how many
    llm_query prompts); empty for a build without REPL answers."""
    p = build_dir / "steps.parquet"
    if not p.exists():
        return {}
    out: dict[str, list[dict]] = defaultdict(list)
    cols = ["request_key", "step", "status", "code", "output", "sub_calls"]
    for r in sorted(read_table(p, "steps", columns=cols, key="step_key").to_pylist(),
                    key=lambda r: (r["request_key"], r["step"])):
        out[r["request_key"]].append({"step": r["step"], "status": r["status"], "code": r["code"],
                                      "output": r["output"], "sub_calls": len(_parsed(r["sub_calls"]) or [])})
    return out


def browser_data(build_dir: str | Path, out: str | Path) -> tuple[dict, list[str]]:
    """The browser's data for a build (and the span conversion errors): instances with their facets, answers with
    their scores, the filters; writes the context files under ``out/browser/contexts``."""
    build_dir, out = Path(build_dir), Path(out)
    ip = build_dir / "instances.parquet"
    names = [c for c in pq.read_schema(ip).names if c != "context"]
    inst = pq.read_table(ip, columns=names).to_pylist()

    for r in inst:
        p = answer_position(r) if r.get("evidence_spans") or r.get("answer_segment") is not None else None
        r["answer_position"] = None if p is None else answer_position_label(*p)
    facets = facet_columns(inst, [*names, "answer_position"])
    evidence = {r["instance_id"]: _parsed(r.get("evidence_spans")) or [] for r in inst}
    ctx_info, errors = write_contexts(build_dir, out, {k: v if isinstance(v, list) else [] for k, v in evidence.items()})
    resp = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    scores = read_table(build_dir / "scores.parquet", "scores").to_pylist()
    steps = repl_steps(build_dir)
    by_key: dict[Any, list[dict]] = defaultdict(list)
    for s in scores:
        by_key[s.get("request_key") or (s["instance_id"], s["model"], s["mode"], s["sample"])].append(s)
    matchers_of: dict[str, list[str]] = defaultdict(list)
    for s in scores:
        b = s["instance_id"]
        if s["matcher"] not in matchers_of[b]:
            matchers_of[b].append(s["matcher"])
    index = {r["instance_id"]: i for i, r in enumerate(inst)}
    instances = []
    for r in inst:
        c = ctx_info.get(r["instance_id"], {})
        fv = {}
        for fc in facets:
            v = r.get(fc["key"])
            fv[fc["key"]] = (_list_values(v) or []) if fc["multi"] else _scalar(v)
        instances.append({
            "id": r["instance_id"], "benchmark": r.get("benchmark"), "question": r.get("question") or "",
            "question_id": r.get("question_id"), "gold": _gold_text(_parsed(r.get("gold"))),
            "accepted": [_gold_text(a) for a in (_parsed(r.get("accepted_answers")) or [])]
            if isinstance(_parsed(r.get("accepted_answers")), list) else [],
            "sql": r.get("sql"), "length": r.get("target_tokens"), "context_tokens": r.get("context_tokens"),
            "tokenizer": r.get("tokenizer"), "facets": fv, "context": c.get("context"), "chars": c.get("chars"),
            "spans": c.get("spans"), "primary": _primary(r.get("benchmark"), matchers_of.get(r["instance_id"], []))})

    answers = []
    long_written: set[str] = set()  # answers whose whole texts are in browser/replies/ (lazy_long_texts)
    prompts: dict[str, dict] = {}  # the model filter names a run with a reasoning effort model@effort
    for r in sorted(resp, key=lambda r: (index.get(r["instance_id"], -1), r["model"], r["mode"], r["sample"],
                                         r["request_key"])):
        if r["instance_id"] not in index:
            continue
        sc = sorted(by_key.get(r["request_key"]) or by_key.get((r["instance_id"], r["model"], r["mode"],
                                                                r["sample"])) or [], key=lambda s: s["matcher"])
        blocks, visible = split_reasoning(r.get("response"), r.get("reasoning"))
        extracted = {s["matcher"]: s.get("extracted_answer") for s in sc}
        pkey = _prompt_key(inst[index[r["instance_id"]]], r, prompts) if r["mode"] != "repl" else None
        answers.append({
            "i": index[r["instance_id"]], "model": display_model(r["model"], r.get("reasoning_effort")), "mode": mode_label(r["mode"], r.get("rag_tokens")),
            "sample": r["sample"], "status": r["status"], "error": r.get("error"), "reply": r.get("response"),
            "visible": visible, "reasoning": blocks, "reasoning_field": r.get("reasoning"),
            "extracted": extracted, "scores": {s["matcher"]: _scalar(s["score"]) for s in sc},
            "tags": {s["matcher"]: _parsed(s.get("tags")) or [] for s in sc},
            "details": {s["matcher"]: _parsed(s.get("details")) for s in sc if s.get("details") is not None},
            "finish_reason": r.get("finish_reason"), "cut_off": output_limit_ended(r), "prompt": pkey,
            "prompt_tokens": r.get("prompt_tokens"), "completion_tokens": r.get("completion_tokens"),
            "cached": bool(r.get("cached")), "_key": r["request_key"]})   # latency left out: same build, same bytes
        if r["request_key"] in steps:  # --mode repl: its steps, shown folded
            answers[-1]["steps"] = steps[r["request_key"]]
        lazy_long_texts(answers[-1], out, long_written)
        answers[-1].pop("_key", None)
    rdir = out / DATA_DIR / "replies"
    for p in rdir.glob("*.js") if rdir.is_dir() else []:  # replies no longer in the build (or now short)
        if p.stem not in long_written:
            p.unlink()
    matchers = sorted({s["matcher"] for s in scores})
    questions = sorted({i["question"] for i in instances})
    return {**asked_summary(instances, answers), "instances": instances, "questions": questions if len(questions) <= MAX_QUESTIONS else [], "answers": answers,
            "prompts": prompts, "facets": facets, "matchers": matchers,
            "models": sorted({a["model"] for a in answers}), "modes": sorted({a["mode"] for a in answers}),
            "lengths": sorted({i["length"] for i in instances if i["length"] is not None})}, errors


def asked_summary(instances: list[dict], answers: list[dict]) -> dict:
    """How many of the browser's instances hold an answer, and how it opens: ``answered`` (instances with at least
    one stored answer), ``open_answered`` (True when fewer than half are answered but some are: the page then
    opens on the answered ones) and ``unasked_note``, the sentence the page shows above the cards saying how many
    are not asked and why: every length's answered count is the same N below its instance count, "a sample of N
    per length" (``--per-length N``), else each length's count; "" when every instance is answered."""
    done = {a["i"] for a in answers}
    total, asked = Counter(i["length"] for i in instances), Counter(instances[k]["length"] for k in done)
    n, k = len(instances), len(done)
    if k == n:
        return {"answered": k, "open_answered": False, "unasked_note": ""}
    counts = {asked.get(L, 0) for L in total}
    if len(counts) == 1 and 0 < (per := counts.pop()) < min(total.values()):
        why = (f"the evaluation asked a sample of {per} per context length (`ctxbench run --per-length` / `evaluate "
               f"--per-length`), not every instance of the build")
    elif k == 0:
        why = "no model has been evaluated on this build yet (`ctxbench evaluate`)"
    else:
        why = ("the evaluation asked only some instances per context length: "
               + "; ".join(f"{L:,} tokens {asked.get(L, 0)} of {total[L]}" for L in sorted(total, key=lambda x: (x is None, x or 0))
                           if L is not None))
    opens = 2 * k < n and k > 0
    note = (f"{n - k} of {n} instances are not asked: {why}."
            + (f" This page opens on the {k} answered; choose 'all' under 'asked' to see every instance." if opens
               else ""))
    return {"answered": k, "open_answered": opens, "unasked_note": note}


def write_browser(build_dir: str | Path, out: str | Path, title: str = "") -> BrowserData:
    """Write the instance browser of a build into the report directory ``out``: ``instances.html``,
    ``browser/data.js`` and ``browser/contexts/*.js``; returns what was written. ``title``: shown in the page's
    header (e.g. the build hash). Raises what reading the build's tables raises."""
    out = Path(out)
    (out / DATA_DIR).mkdir(parents=True, exist_ok=True)
    data, errors = browser_data(build_dir, out)
    data["title"] = title
    data["span_errors"] = errors[:50]
    data["preview_chars"] = PREVIEW_CHARS
    _write_text(out / DATA_DIR / "data.js", f"window.CTXBENCH_BROWSER={_js(data)};\n")
    page = out / PAGE
    _write_text(page, page_html(title))
    return BrowserData(page, data["models"], len(data["instances"]), len(data["answers"]),
                       len({i["context"] for i in data["instances"] if i["context"]}), errors)


__all__ = ["CONTEXT_MARK", "BrowserData", "answer_position_label", "asked_summary", "output_limit_ended",
           "prompt_parts", "browser_data", "char_spans", "facet_columns", "instances_link", "mode_label",
           "lazy_long_texts", "split_reasoning", "write_browser", "write_contexts"]
