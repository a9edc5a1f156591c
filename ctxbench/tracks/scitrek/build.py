"""The scientific-article track (SciTrek, "Who Gets Cited Most?", sections 3.1-3.4, 4; appendix A, D, E).

Stages (each a Prefect task in ``pipelines/flows.py``): **fetch** (the metadata file and the PDFs it names; a
missing file or a SHA-256 that differs from the metadata is quarantined) → **convert** (PDF → markdown with
``ctxbench.convert.pdf``, cached by PDF hash; unreadable PDFs quarantined) → **database** (each fact of the metadata
checked against the markdown; articles whose title or authors cannot be found are quarantined with stage
``align`` unless ``misaligned="keep"``; an article whose reference count cannot be confirmed is kept with
``reference_count_verified = false``, and questions reading ``reference_count`` are not asked on collections that
hold it) → **collections** (random, BFS and DFS over the citation graph; exact token counts; one metadata database
per collection, ``collections/<collection_id>.sqlite``) → **questions** (templates of the six skills instantiated
from each collection's values, gold answers by execution in two engines with the ambiguity checks; the question
from an LLM validated by the SQL round trip, or the template's own phrasing) → **validate** (great-expectations)
→ **write** (``instances.parquet`` with one instance per question × context format — ``full_text`` (F-*) and
``tables`` (D-*) —, ``articles.parquet``, ``collections.parquet``, ``quarantine.parquet``, ``manifest.json``).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ctxbench.tracks.scitrek.config import FORMATS, MAX_TOKENS, S2Fetch, SciTrekConfig  # noqa: F401 (their home)
from ctxbench import __version__
from ctxbench.features.difficulty import difficulty_columns
from ctxbench.features.language import language_columns, prefetch_languages
from ctxbench.core.config import assets_dir
from ctxbench.contexts.collections import Collection, build_collections
from ctxbench.core.errors import InputError
from ctxbench.gold import GoldEngines
from ctxbench.core.hashing import Encoded, canonical_json, file_sha256, seeded_rng, stable_hash
from ctxbench.tracks.scitrek import questions as sq
from ctxbench.questions.sqlinfo import sql_info
from ctxbench.sources.articles import ArticleMeta, alignment_issues, citation_edges, load_metadata
from ctxbench.sources.fulltext import (SOURCE_ORDER, BibEntry, FullTextArticle, add_id, assign_ids,
                                 bibliography_entries, bibliography_section, deduplicate, entry_ids, ids_in_text,
                                 one_line, resolve_citations)
from ctxbench.sources.readers import readers
from ctxbench.sources.database import Database, write_sqlite
from ctxbench.core.storage import to_table
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tracks.validate import validate_build
from ctxbench.tracks.common import BuildWriter
from ctxbench.core.manifest import BuildResult, asset_hash
from ctxbench import sources
from ctxbench.core.errors import CtxbenchError, ValidationError
from ctxbench.questions.roundtrip import RoundTripItem, phrase_questions
from ctxbench.sources.s2 import FetchConfig, fetch_clusters

GOLD_TRIES = 3  # instantiations tried per template and collection before it is left out


def fetch_s2_stage(cfg: SciTrekConfig, s2: S2Fetch | None) -> tuple[int, list[dict]]:
    """Fetch clusters into ``cfg.pdfs`` (see S2Fetch); returns (papers kept, quarantine rows of stage ``fetch``);
    ``(0, [])`` without ``s2`` (no fetch asked). Raises InputError when ``cfg.metadata`` is not
    ``<pdfs>/metadata.json`` (where the fetch writes it)."""
    if s2 is None:
        return 0, []
    if cfg.pdfs is None or cfg.metadata is None:
        raise InputError("an S2 fetch writes PDFs into --pdfs: set pdfs (and metadata to <pdfs>/metadata.json)")
    if Path(cfg.metadata).resolve() != (Path(cfg.pdfs) / "metadata.json").resolve():
        raise InputError(f"with an S2 fetch the metadata is written to {Path(cfg.pdfs) / 'metadata.json'}: "
                         f"set metadata to that path (got {cfg.metadata})")
    kw = {k: v for k, v in s2.model_dump().items() if v is not None}
    rows, quarantine = fetch_clusters(cfg.pdfs, FetchConfig(**kw))
    return len(rows), quarantine


def _converter():
    """``convert_pdfs`` and the default converter's (name, version) (``ctxbench.convert.pdf``). Raises InputError
    when that module is missing from this installation."""
    try:
        from ctxbench.convert import pdf  # lazy: PDF conversion may be left out of a slim installation
    except ImportError as e:
        raise InputError(f"PDF conversion is not available in this installation ({e})") from None

    return pdf.convert_pdfs, pdf.default_converter()


def _convert_code_hash() -> str:
    """Hash of the PDF converter's code (``ctxbench.convert``, :func:`ctxbench.convert.pdf.converter_code_hash`,
    also part of the converter's version and so of the conversion cache key): part of the build hash of a build
    with PDFs. Raises InputError when the converter is missing from this installation."""
    try:
        from ctxbench.convert.pdf import converter_code_hash  # lazy: PDF conversion may be left out of a slim installation
    except ImportError as e:
        raise InputError(f"PDF conversion is not available in this installation ({e})") from None
    return converter_code_hash()


@dataclass
class Loaded:
    """Stage ``fetch``: metadata, the PDFs found (id → path), the articles of the full-text sources (in
    ``SOURCE_ORDER``), quarantine rows, build hash; ``existing`` when the directory already holds this build."""

    cfg: SciTrekConfig
    out: Path
    articles: list[ArticleMeta]
    paths: dict[str, Path]
    quarantine: list[dict]
    build_hash: str
    existing: BuildResult | None = None
    fulltext: list[FullTextArticle] = field(default_factory=list)
    source_counts: dict = field(default_factory=dict)
    writer: BuildWriter | None = None


@dataclass
class Converted:
    """Stage ``convert`` + ``database``: per kept article its markdown and conversion facts; article rows (every
    converted article, with its alignment); quarantine rows."""

    texts: dict[str, str]
    meta: dict[str, ArticleMeta]
    article_rows: list[dict]
    unverified_refs: set[str]
    quarantine: list[dict]
    duplicates: int = 0


@dataclass
class Collected:
    """Stage ``collections``: collections, their metadata databases, quarantine rows, overlap rejections."""

    collections: list[Collection]
    dbs: dict[str, Database]
    quarantine: list[dict]
    rejected_overlap: dict[str, int] = field(default_factory=dict)


def _cfg_for_hash(cfg: SciTrekConfig) -> dict:
    d = cfg.model_dump(exclude={"pdfs", "metadata", "unarxive", "markdown", "s2orc", "question_base_url",
                                "question_api_key_env", "convert_timeout_s"})
    return d


# the modules of ctxbench.sources that read full-text articles (their code is part of a full-text build's hash)
SOURCE_CODE = ("fulltext.py", "unarxive.py", "markdown_articles.py", "s2orc.py", "articles.py")


def _source_code_hash() -> str:
    """Hash of the full-text readers' code (:data:`SOURCE_CODE` in the ``ctxbench.sources`` package). Raises
    CtxbenchError when one of those modules is not there (a moved module must never drop out of the hash)."""
    d = Path(sources.__file__).resolve().parent
    missing = [n for n in SOURCE_CODE if not (d / n).is_file()]
    if missing:
        raise CtxbenchError(f"full-text reader modules {', '.join(missing)} are not in {d}: update SOURCE_CODE")
    return stable_hash(*[(n, file_sha256(d / n)) for n in SOURCE_CODE])


def fetch_stage(cfg: SciTrekConfig, out: str | Path, force: bool = False, versioned: bool = False) -> Loaded:
    """Read the sources: the metadata file and each article's PDF in ``cfg.pdfs`` (a PDF that is missing or whose
    SHA-256 differs from the metadata's ``sha256`` is quarantined, stage ``fetch``), then the full-text sources
    ``unarxive``, ``markdown``, ``s2orc`` (``ctxbench.sources.fulltext``; malformed records are quarantined, stage
    ``read``), and hash the inputs. Raises InputError for an unreadable metadata file, a missing PDF directory or
    a source path that does not exist."""
    out = Path(out)
    arts, paths, quarantine, shas = [], {}, [], {}
    if cfg.pdfs is not None:
        pdf_dir = Path(cfg.pdfs)
        if not pdf_dir.is_dir():
            raise InputError(f"--pdfs {pdf_dir} is not a directory: pass the directory holding the article PDFs")
        arts = load_metadata(cfg.metadata)
        for a in arts:
            p = pdf_dir / a.file
            if not p.is_file():
                quarantine.append({"input": a.file, "stage": "fetch", "reason": "PDF file not found", "detail":
                                   canonical_json({"article_id": a.id, "path": str(p)})})
                continue
            sha = file_sha256(p)
            if a.sha256 and a.sha256 != sha:
                quarantine.append({"input": a.file, "stage": "fetch", "reason": "SHA-256 differs from the metadata",
                                   "detail": canonical_json({"article_id": a.id, "metadata": a.sha256, "file": sha})})
                continue
            paths[a.id], shas[a.id] = p, sha
    fulltext: list[FullTextArticle] = []
    source_hashes, counts = {}, {}
    if cfg.pdfs is not None:
        counts["pdf"] = {"articles": len(arts), "pdfs_found": len(paths)}
    for name, fn in readers().items():
        path = getattr(cfg, name)
        if path is None:
            continue
        r = fn(path)
        fulltext += r.articles
        quarantine += r.quarantine
        source_hashes[name] = sorted(r.files.values())
        counts[name] = {"files": len(r.files), "articles": len(r.articles), "quarantined": len(r.quarantine)}
    fulltext.sort(key=lambda a: SOURCE_ORDER.index(a.source))  # stable: each source keeps its own order
    tok = get_tokenizer(cfg.tokenizer)
    inputs = {"metadata": file_sha256(cfg.metadata) if cfg.metadata else None, "pdfs": shas,
              "templates": asset_hash(sq.templates_path()),
              "question_prompts": asset_hash(assets_dir() / "prompts" / "scitrek_questions.yaml"),
              "tokenizer": tok.file_sha256 or cfg.tokenizer}
    if paths:
        inputs.update({"converter": list(_converter()[1]), "convert_code": _convert_code_hash()})
    if source_hashes:
        inputs.update({"sources": source_hashes, "source_code": _source_code_hash()})
    bhash = stable_hash("scitrek", _cfg_for_hash(cfg), inputs, __version__, length=20)
    w = BuildWriter(out, bhash, force, versioned)
    return Loaded(cfg, w.dir, arts, paths, quarantine, bhash, w.existing, fulltext, counts, w)


def convert_stage(loaded: Loaded) -> tuple[dict[str, object], list[dict]]:
    """Convert every found PDF (cached by PDF hash); returns (article id → Conversion, quarantine rows with stage
    ``convert`` whose ``input`` is the PDF's file name). Nothing to do without PDFs."""
    if not loaded.paths:
        return {}, []
    convert_pdfs, _ = _converter()
    ids = sorted(loaded.paths)
    convs, rows = convert_pdfs([loaded.paths[i] for i in ids], timeout_s=loaded.cfg.convert_timeout_s)
    file_of = {str(loaded.paths[i]): loaded.paths[i].name for i in ids}
    q = []
    for r in rows:
        r = dict(r)
        r["input"] = file_of.get(str(r.get("input")), Path(str(r.get("input"))).name)
        q.append(r)
    return {i: c for i, c in zip(ids, convs) if c is not None}, q


def _pdf_identifiers(a: ArticleMeta) -> dict[str, str]:
    """An article's own identifiers from its metadata entry: the ``ids`` text (``arXiv 1706.03762v5; DOI ...``,
    ``ArXiv ...; CorpusId ...`` as ``fetch s2`` writes it) and ``doi`` / ``arxiv_id`` / ``externalIds`` fields."""
    ids: dict[str, set] = {}
    raw = a.extra.get("ids")
    if isinstance(raw, str):
        for k, v in ids_in_text(raw).items():
            ids.setdefault(k, set()).update(v)
        m = re.search(r"(?i)\bcorpus\s*id\s*:?\s*(\d+)", raw)
        if m:
            add_id(ids, "s2", m.group(1))
    add_id(ids, "doi", a.extra.get("doi"))
    add_id(ids, "arxiv", a.extra.get("arxiv_id"))
    ext = a.extra.get("externalIds")
    if isinstance(ext, dict):
        add_id(ids, "doi", ext.get("DOI"))
        add_id(ids, "arxiv", ext.get("ArXiv"))
        add_id(ids, "s2", ext.get("CorpusId"))
    return {k: sorted(v)[0] for k, v in ids.items()}


def _record_row(aid: str, a: FullTextArticle, issues: list[str], ref_ok: bool, kept: bool) -> dict:
    return {"article_id": aid, "file": a.input, "title": a.title, "converter": a.converter,
            "converter_version": __version__, "chars": len(a.text), "pages": None, "pdf_sha256": None,
            "markdown": a.text, "aligned": not issues, "align_issues": canonical_json(issues),
            "reference_count_verified": ref_ok, "kept": kept, "source": a.source, "source_id": a.source_id,
            "duplicate_of": None}


def _align(text: str, meta: ArticleMeta, misaligned: str) -> tuple[list[str], list[str], bool, bool]:
    """(issues, hard issues: title/authors, reference count confirmed, kept) of one article's metadata against
    its text (``alignment_issues``; a reference-count issue alone never drops an article)."""
    issues = alignment_issues(text, meta)
    hard = [i for i in issues if not i.startswith("reference count")]
    ref_ok = meta.ref_count is not None and not any(i.startswith("reference count") for i in issues)
    return issues, hard, ref_ok, not hard or misaligned == "keep"


def database_stage(loaded: Loaded, conversions: dict[str, object]) -> Converted:
    """Check each article's metadata against its text (``alignment_issues``: PDFs against their converted
    markdown, full-text records against the text they are read as) and keep the aligned ones (module docstring);
    then deduplicate by normalised title, keeping the first record in ``SOURCE_ORDER`` (pdf, unarxive, markdown,
    s2orc; a dropped record is an ``articles.parquet`` row with ``duplicate_of``), and resolve the citations among
    the kept articles (:func:`ctxbench.sources.fulltext.resolve_citations`). Returns the article rows for
    ``articles.parquet`` (with ``source``) and the kept articles' texts and metadata."""
    cfg = loaded.cfg
    rows, unverified, q = [], set(), []
    candidates: list[tuple[str, FullTextArticle]] = []
    pdf_meta: dict[str, ArticleMeta] = {}
    for a in loaded.articles:
        c = conversions.get(a.id)
        if c is None:
            continue
        md = c.markdown.replace("\r\n", "\n").replace("\r", "\n").strip()
        issues, hard, ref_ok, kept = _align(md, a, cfg.misaligned)
        rows.append({"article_id": a.id, "file": a.file, "title": a.title, "converter": c.converter,
                     "converter_version": c.converter_version, "chars": c.chars, "pages": c.pages,
                     "pdf_sha256": c.pdf_sha256, "markdown": md, "aligned": not issues,
                     "align_issues": canonical_json(issues), "reference_count_verified": ref_ok, "kept": kept,
                     "source": "pdf", "source_id": a.id, "duplicate_of": None})
        if not kept:  # flagged articles that are kept are listed in articles.parquet (aligned = false)
            q.append({"input": a.file, "stage": "align", "reason": "metadata not found in the text: " + "; ".join(hard),
                      "detail": canonical_json({"article_id": a.id, "issues": issues})})
            continue
        if not ref_ok:
            unverified.add(a.id)
        sec = bibliography_section(md)
        bib = [BibEntry(one_line(e), entry_ids(e)) for e in bibliography_entries(sec[0])] if sec else []
        pdf_meta[a.id] = a
        candidates.append((a.id, FullTextArticle("pdf", a.id, a.file, a.title, list(a.authors), a.ref_count, md, bib,
                                                 _pdf_identifiers(a), [("pdf", x) for x in a.cites], None,
                                                 c.converter)))
    taken = {aid for aid, _ in candidates} | {a.id for a in loaded.articles}
    for aid, a in assign_ids(loaded.fulltext, taken):
        issues, hard, ref_ok, kept = _align(a.text, ArticleMeta(aid, a.input, a.title, a.authors, a.ref_count),
                                            cfg.misaligned)
        rows.append(_record_row(aid, a, issues, ref_ok, kept))
        if not kept:
            q.append({"input": a.input, "stage": "align", "reason": "metadata not found in the text: " + "; ".join(hard),
                      "detail": canonical_json({"article_id": aid, "source": a.source, "issues": issues})})
            continue
        if not ref_ok:
            unverified.add(aid)
        candidates.append((aid, a))
    merged = deduplicate(candidates)
    by_id = {r["article_id"]: r for r in rows}
    for aid, _, kept_id in merged.duplicates:
        by_id[aid]["kept"] = False
        by_id[aid]["duplicate_of"] = kept_id
        unverified.discard(aid)
    cites = resolve_citations(merged)
    texts, meta = {}, {}
    for aid, a in merged.kept:
        pm = pdf_meta.get(aid) if a.source == "pdf" else None
        meta[aid] = ArticleMeta(aid, a.input, a.title, list(a.authors), a.ref_count, cites[aid],
                                list(pm.cited_by) if pm else [], pm.sha256 if pm else a.sha256,
                                {"source": a.source, "source_id": a.source_id})
        texts[aid] = a.text.strip()
    return Converted(texts, meta, rows, unverified, q, len(merged.duplicates))


def collections_stage(loaded: Loaded, conv: Converted) -> Collected:
    """Collections at every tier and sampling and their metadata databases (staged under ``out``)."""
    cfg = loaded.cfg
    tok = get_tokenizer(cfg.tokenizer)
    kept = list(conv.meta.values())
    edges = citation_edges(kept)
    res = build_collections(conv.texts, edges, cfg.lengths, cfg.samplings, cfg.collections_per_tier, tok,
                            seed=cfg.seed, min_articles=cfg.min_articles, min_fill=cfg.min_fill)
    stage = loaded.writer.staged("collections")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    dbs = {}
    for c in res.collections:
        db = sq.metadata_database(c.collection_id, [conv.meta[i] for i in c.article_ids], edges)
        write_sqlite(db, stage / f"{c.collection_id}.sqlite")
        dbs[c.collection_id] = db
    return Collected(res.collections, dbs, res.quarantine, res.rejected_overlap)


@dataclass
class Question:
    """A validated question on one collection."""

    collection: Collection
    template: sq.SqlTemplate
    sql: str
    question: str
    gold: list[list]
    source: str


def _collection_questions(cfg: SciTrekConfig, c: Collection, db, engines: GoldEngines, templates, conv: Converted,
                          q: list[dict], cands: list, counts: dict) -> None:
    """The questions of one collection (appended to ``cands``, rejections to ``q``, tallies in ``counts``)."""
    rng = seeded_rng(cfg.seed, "templates", c.collection_id)
    chosen = list(templates)
    want = cfg.templates_per_collection or len(chosen)
    if want < len(chosen):  # a seeded draw; a template that yields no question gives its place to the next
        chosen = rng.sample(chosen, len(chosen))
    unverified = sorted(set(c.article_ids) & conv.unverified_refs)
    made = 0
    for tpl in chosen:
        if made >= want:
            break
        if unverified and sq.reads_column(tpl.sql.replace("{", "").replace("}", ""), "reference_count"):
            counts["unverified_reference_count"] += 1
            q.append({"input": f"{c.collection_id}/{tpl.id}", "stage": "align",
                      "reason": "reads reference_count, which the text does not confirm for "
                                + ", ".join(unverified), "detail": None})
            continue
        last = None
        for k in range(GOLD_TRIES):
            inst = sq.instantiate(tpl, db, seeded_rng(cfg.seed, "values", c.collection_id, tpl.id, k))
            if inst is None:
                counts["not_instantiable"] += 1
                q.append({"input": f"{c.collection_id}/{tpl.id}", "stage": "instantiate",
                          "reason": "the collection has no value (or no two distinct values) for a placeholder",
                          "detail": canonical_json({"placeholders": tpl.placeholders})})
                last = None
                break
            g = sq.gold_answer(inst.sql, db, seed=cfg.seed, engines=engines)
            if g.ok:
                cands.append((c, inst, g.rows))
                counts["gold_ok"] += 1
                made += 1
                last = None
                break
            last = (inst, g)
            if not tpl.placeholders:
                break
        if last is not None:
            counts["gold_rejected"] += 1
            inst, g = last
            q.append({"input": f"{c.collection_id}/{tpl.id}", "stage": "gold", "reason": g.reason,
                      "detail": canonical_json({"sql": inst.sql, **g.detail})})


def questions_stage(loaded: Loaded, conv: Converted, col: Collected) -> tuple[list[Question], list[dict], dict]:
    """Questions with gold answers for every collection (module docstring). Returns (questions, quarantine rows,
    counts: instantiated, gold rejections, dropped by the round trip)."""
    cfg = loaded.cfg
    templates = sq.load_templates()
    q: list[dict] = []
    cands: list[tuple[Collection, sq.Instantiated, list[list]]] = []
    counts = {"gold_ok": 0, "gold_rejected": 0, "not_instantiable": 0, "unverified_reference_count": 0,
              "roundtrip_dropped": 0}
    for c in col.collections:
        db = col.dbs[c.collection_id]
        engines = GoldEngines(sq.gold_tables(db), cfg.seed)  # loaded once for every question on the collection
        try:
            _collection_questions(cfg, c, db, engines, templates, conv, q, cands, counts)
        finally:
            engines.close()
    out: list[Question] = []
    if cfg.question_model:
        stage = loaded.writer.staged("collections")
        items = [RoundTripItem(inst.sql, gold, str(stage / f"{c.collection_id}.sqlite")) for c, inst, gold in cands]
        outcomes = phrase_questions(items, cfg.question_model, sq.schema_text(), cfg.question_base_url,
                                    cfg.question_api_key_env, cfg.max_attempts)
        for (c, inst, gold), o in zip(cands, outcomes):
            if o.question is None:
                counts["roundtrip_dropped"] += 1
                q.append({"input": f"{c.collection_id}/{inst.template.id}", "stage": "question",
                          "reason": f"no question passed the SQL round trip in {o.attempts} attempts",
                          "detail": canonical_json({"sql": inst.sql, "attempts": o.trace[-3:]})})
                continue
            out.append(Question(c, inst.template, inst.sql, o.question, gold, f"llm:{cfg.question_model}"))
    else:
        out = [Question(c, inst.template, inst.sql, inst.question, gold, "template") for c, inst, gold in cands]
    return out, q, counts


def instances_stage(loaded: Loaded, col: Collected, questions: list[Question]) -> list[dict]:
    """One instance per question × context format; the tables context is counted once per collection."""
    cfg = loaded.cfg
    tok = get_tokenizer(cfg.tokenizer)
    tables_ctx: dict[str, tuple[str, int]] = {}
    cfg_for_id = _cfg_for_hash(cfg)
    rows = []
    encoded: dict[tuple, Encoded] = {}  # each context's JSON made once for the instance ids of its questions
    for qu in questions:
        c = qu.collection
        info = sql_info(qu.sql)
        for fmt in cfg.formats:
            if fmt == "full_text":
                ctx, n = c.context, c.context_tokens
            else:
                if c.collection_id not in tables_ctx:
                    t = sq.render_tables(col.dbs[c.collection_id])
                    tables_ctx[c.collection_id] = (t, tok.count(t))
                ctx, n = tables_ctx[c.collection_id]
            if n > c.tier:
                continue  # a tables context longer than its tier (never at SciTrek's sizes): not an instance
            if (c.collection_id, fmt) not in encoded:
                encoded[(c.collection_id, fmt)] = Encoded(ctx)
            rows.append({
                "instance_id": stable_hash(cfg_for_id, c.collection_id, fmt, qu.question, qu.sql,
                                           encoded[(c.collection_id, fmt)], length=24),
                "benchmark": "scitrek", "source_id": c.collection_id, "question": qu.question,
                "question_id": f"{c.collection_id}/{qu.template.id}", "sql": qu.sql,
                "gold": canonical_json(qu.gold), "accepted_answers": None, "context": ctx,
                "tokenizer": cfg.tokenizer, "target_tokens": c.tier, "context_tokens": n,
                "context_format": fmt, "query_types": canonical_json(info["query_types"]),
                "difficulty": info["difficulty"], "skill": qu.template.skill, "evidence_spans": "[]",
                "build_hash": loaded.build_hash, "question_source": qu.source,
                "sampling": c.sampling, "topic": qu.template.topic, "n_articles": len(c.article_ids),
                "lexical_overlap": 0.0,  # no evidence sentence is known (evidence_spans empty)
            })
            rows[-1].update(difficulty_columns(rows[-1]))  # scope/dispersion null (spans unknown), depth from SQL
            prefetch_languages([ctx, qu.question])  # detected beside this process while the loop goes on
    for r in rows:
        r.update(language_columns(r))
    return rows


def validate_stage(loaded: Loaded, col: Collected, instances: list[dict]) -> None:
    """The instances suite (great-expectations); every collection within its tier with enough articles, and each
    full-text instance as long as its collection's recount. Raises ValidationError naming what failed."""
    validate_build(to_table("instances", instances))
    for c in col.collections:
        if c.context_tokens > c.tier or len(c.article_ids) < loaded.cfg.min_articles:
            raise ValidationError(f"collection {c.collection_id}: {c.context_tokens} tokens for a tier of {c.tier} "
                                  f"with {len(c.article_ids)} articles")
    for r in instances:
        if r["context_format"] == "full_text" and r["context_tokens"] != next(
                c.context_tokens for c in col.collections if c.collection_id == r["source_id"]):
            raise ValidationError(f"instance {r['instance_id']}: context length differs from its collection's")


def write_stage(loaded: Loaded, conv: Converted, col: Collected, instances: list[dict], convert_quarantine: list[dict],
                question_quarantine: list[dict], counts: dict) -> BuildResult:
    """Write collections/, articles.parquet, collections.parquet, quarantine (every stage's rows: fetch, convert,
    align, collections, questions) and instances (atomically) and, last, the manifest that marks the build
    complete."""
    import pyarrow as pa

    quarantine = loaded.quarantine + convert_quarantine + conv.quarantine + col.quarantine + question_quarantine
    cfg = loaded.cfg
    collections = pa.Table.from_pylist([
        {"collection_id": c.collection_id, "tier": c.tier, "sampling": c.sampling, "start": c.start,
         "article_ids": canonical_json(c.article_ids), "n_articles": len(c.article_ids),
         "context_tokens": c.context_tokens, "shortfall_tokens": c.shortfall_tokens}
        for c in col.collections], schema=pa.schema([
            ("collection_id", pa.string()), ("tier", pa.int64()), ("sampling", pa.string()), ("start", pa.string()),
            ("article_ids", pa.string()), ("n_articles", pa.int64()), ("context_tokens", pa.int64()),
            ("shortfall_tokens", pa.int64())]))
    return loaded.writer.write(
        "scitrek", cfg.model_dump(exclude={"pdfs", "metadata", "unarxive", "markdown", "s2orc",
                                           "question_api_key_env"}),
        instances, quarantine, seed=cfg.seed, tokenizer=get_tokenizer(cfg.tokenizer),
        counts={"collections": len(col.collections)},
        tables={"articles": conv.article_rows, "collections": collections},
        details={
            "source": {"metadata_sha256": file_sha256(cfg.metadata) if cfg.metadata else None,
                       "articles": len(loaded.articles), "pdfs_found": len(loaded.paths),
                       "sources": loaded.source_counts},
            "assets": {"templates": asset_hash(sq.templates_path())},
            "gold": {"integer_division": sq.INTEGER_DIVISION},
            "collections": {"built": len(col.collections), "rejected_overlap": col.rejected_overlap,
                            "shortfall_tokens": {c.collection_id: c.shortfall_tokens for c in col.collections}},
            "articles": {"converted": len(conv.article_rows), "kept": len(conv.texts), "duplicates": conv.duplicates,
                         "kept_by_source": {src: sum(1 for m in conv.meta.values() if m.extra.get("source") == src)
                                            for src in SOURCE_ORDER},
                         "reference_count_unverified": sorted(conv.unverified_refs)},
            "questions": counts})


def build_scitrek(cfg: SciTrekConfig, out: str | Path, force: bool = False, versioned: bool = False) -> BuildResult:
    """Build a scientific-article benchmark into ``out`` (SCHEMA.md layout): fetch → convert → database →
    collections → questions → validate → write (module docstring; the Prefect flow runs each as a task).

    An existing complete build with the same build hash is left as it is (``skipped``); a directory holding a
    different build is an error unless ``force``. Raises InputError for bad input (metadata, PDF directory,
    templates) and ValidationError when a data-quality expectation fails.
    """
    loaded = fetch_stage(cfg, out, force, versioned)
    if loaded.existing is not None:
        return loaded.existing
    conversions, conv_q = convert_stage(loaded)
    conv = database_stage(loaded, conversions)
    col = collections_stage(loaded, conv)
    questions, q_q, counts = questions_stage(loaded, conv, col)
    instances = instances_stage(loaded, col, questions)
    validate_stage(loaded, col, instances)
    return write_stage(loaded, conv, col, instances, conv_q, q_q, counts)
