"""The verbalized-database track (HoloBench, Maekawa et al., sections 3.2-3.3, appendix A.2-A.3).

For each question × tier × position: relevant rows (rows of the tables the SQL reads) are sampled without
replacement and verbalized until the relevant budget is filled (*amount*: a fixed number of tokens; *density*: a
fraction of the tier); distractor rows (the other tables' rows, then dummy documents) fill the rest; the packer
merges them by position into a context of at most the tier's tokens; the gold answer is the SQL over exactly the
relevant rows included. Contexts depend on the question only through its relevant tables, so questions over the
same tables share a context (and a provider's prompt cache).
"""

from __future__ import annotations

import warnings
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from ctxbench.tracks.holobench.config import MAX_TOKENS, HoloBenchConfig  # noqa: F401 (their home)
from ctxbench import __version__
from ctxbench.core.config import assets_dir, ordered_map
from ctxbench.features.difficulty import difficulty_columns
from ctxbench.features.language import language_columns, prefetch_languages
from ctxbench.contexts.packer import (ChainedUnits, CycledUnits, PackedContext,
                                SampledUnits, Unit, pack, take_until)
from ctxbench.core.errors import DataWarning, InputError
from ctxbench.gold import GoldEngines, compute_gold
from ctxbench.core.hashing import Encoded, canonical_json, seeded_rng, stable_hash
from ctxbench.sources import Database, load_database
from ctxbench.core.storage import to_table
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tokenizers.counts import counter_for, flush_all
from ctxbench.tracks.validate import validate_build
from ctxbench.tracks.common import BuildWriter
from ctxbench.core.manifest import BuildResult
from ctxbench.core.manifest import asset_hash as _asset_hash
from ctxbench.features.overlap import lexical_overlap
from ctxbench.tracks.holobench import precertify
from ctxbench.tracks.holobench.nearmiss import near_miss_share
from ctxbench.verbalize.templates import template_fields
from ctxbench.tracks.holobench.source import PreparedSource, load_database_header, prepare_source_cached
from ctxbench.tracks.holobench.nearmiss import MissCounter, NearMissPool, table_predicates

# the build's copy of the templates when they came from the query set's ``templates:`` section (verify reads it)
TEMPLATES_COPY = "templates.yaml"

# tables the preprocessing leaves out on purpose, whatever their data: no row-loss warning for them
DESIGNED_EXCLUSIONS = ("holds only identifiers and names", "excluded in assets/databases")
ROWS_LOST_WARN = 0.01  # a table whose rows are more than 1% left out of the verbalization is warned about


def _same_wording(src) -> list[tuple[tuple[str, int], tuple[str, int]]]:
    """Pairs ``((table, index), (table, index))`` of templates of two verbalized tables with the same literal
    text around their slots (``cats`` and ``dogs`` both "{name} is {age} years old."): a sentence of either
    parses as a row of both."""
    import string

    seen: dict[tuple, tuple[str, int]] = {}
    out = []
    for t, temps in src.templates.templates.items():
        if t not in src.db.tables:
            continue
        for i, tpl in enumerate(temps):
            key = tuple(lit for lit, _, _, _ in string.Formatter().parse(tpl))
            other = seen.setdefault(key, (t, i))
            if other[0] != t:
                out.append((other, (t, i)))
    return out


def _phrase_values(src) -> list[tuple[str, str, str, int]]:
    """``(table, column, phrase, rows)`` for each verbalized column holding, as text, the phrase its templates
    state for NULL (``"not recorded"`` in a notes column): such a sentence cannot say which it is."""
    import operator

    out = []
    for t, temps in src.templates.templates.items():
        table = src.db.tables.get(t)
        if table is None or not table.rows:
            continue
        used = {f for tpl in temps for f in template_fields(tpl)}
        for i, c in enumerate(table.columns):
            if c not in used:
                continue
            phrase = src.templates.missing_phrase(t, c)
            n = list(map(operator.itemgetter(i), table.rows)).count(phrase)
            if n:
                out.append((t, c, phrase, n))
    return out


def build_hash_of(cfg: HoloBenchConfig, raw: Database, tok_sha: str) -> str:
    """Content hash of the inputs and configuration (paths excluded): source data, templates, queries, dummy
    documents, database spec, tokenizer file, configuration, ctxbench version."""
    db_id = raw.db_id
    cfgd = _config_dump(cfg)
    cfgd.pop("db")
    cfgd["queries"] = None
    inputs = {
        "source": {k: v for k, v in raw.provenance.items() if k != "file"},
        "templates": _asset_hash(assets_dir() / "templates" / f"{db_id}.yaml"),
        "queries": _asset_hash(cfg.queries or assets_dir() / "queries" / f"{db_id}.yaml"),
        "dummy": _asset_hash(assets_dir() / "dummy" / f"{db_id}.yaml"),
        "spec": _asset_hash(assets_dir() / "databases" / f"{db_id}.yaml"),
        "tokenizer": tok_sha or cfg.tokenizer,
    }
    return stable_hash("holobench", db_id, cfgd, inputs, __version__, length=20)


def _config_dump(cfg: HoloBenchConfig, **kw) -> dict:
    """``cfg.model_dump(**kw)`` without ``distractors`` at its default (``random``): a build made before the field
    existed keeps its build hash and instance ids."""
    d = cfg.model_dump(**kw)
    if d.get("distractors") == "random":
        d.pop("distractors")
    return d


class _Rows:
    """Rows of a set of tables addressed as one pool, verbalized lazily."""

    def __init__(self, src: PreparedSource, tables: list[str], relevant: bool, seed: int):
        self.src, self.tables, self.relevant, self.seed = src, tables, relevant, seed
        self.offsets, n = [], 0
        for t in tables:
            self.offsets.append(n)
            n += len(src.db.tables[t].rows)
        self.n = n

    def unit(self, k: int) -> Unit:
        """The ``k``-th row of the pool, verbalized."""
        ti = bisect_right(self.offsets, k) - 1
        t = self.tables[ti]
        idx = k - self.offsets[ti]
        table = self.src.db.tables[t]
        rowid = idx + 1
        text = self.src.templates.verbalize(t, table.columns, table.rows[idx], rowid, self.seed)
        return Unit(text, self.relevant, (t, rowid))

    def unit_list(self, ks: list[int]) -> list[Unit]:
        """``[self.unit(k) for k in ks]``, verbalized table by table in batches (the same units)."""
        offsets, tables, db, relevant = self.offsets, self.tables, self.src.db.tables, self.relevant
        where: dict[int, list[int]] = {}  # table index -> positions in ks
        for j, k in enumerate(ks):
            where.setdefault(bisect_right(offsets, k) - 1, []).append(j)
        out: list = [None] * len(ks)
        for ti, js in where.items():
            t, off = tables[ti], offsets[ti]
            table = db[t]
            rows = table.rows
            rowids = [ks[j] - off + 1 for j in js]
            texts = self.src.templates.verbalize_many(t, table.columns, [rows[r - 1] for r in rowids], rowids,
                                                      self.seed)
            for j, text, rowid in zip(js, texts, rowids):
                out[j] = Unit(text, relevant, (t, rowid))
        return out

    def units(self, rng, remap=None) -> SampledUnits:
        """The pool's rows in random order (sampled without replacement from ``rng``); ``remap`` (a
        :class:`~ctxbench.tracks.holobench.nearmiss.NearMissPool`) replaces the non-matching draws."""
        if remap is None:
            return SampledUnits(self.n, rng, self.unit, self.unit_list)
        return SampledUnits(self.n, rng, lambda k: self.unit(remap.remap([k])[0]),
                            lambda ks: self.unit_list(remap.remap(ks)))


def draw_relevant(src: PreparedSource, cfg: HoloBenchConfig, tables: list[str], target: int, position: str,
                  tok, near_miss: dict[str, tuple[int, ...]] | None = None) -> tuple[list[Unit], int, object]:
    """The relevant rows of the context for ``tables`` at ``target`` tokens, drawn first from the context's seeded
    RNG (returned too, for the distractors): (units, tokens used, rng). The question generator simulates contexts
    with it. ``near_miss``: per table, each row's miss count of the question's predicates (``--distractors
    near-miss``: the non-matching draws are filled with one-predicate misses first, :mod:`.nearmiss`). Raises
    InputError when, in the amount setting, the relevant amount exceeds the target length."""
    rng = seeded_rng(cfg.seed, src.raw.db_id, sorted(tables), target, cfg.setting, position,
                     cfg.amount_tokens, cfg.density)
    if cfg.setting == "amount":
        if cfg.amount_tokens > target:
            raise InputError(f"target length {target} is smaller than the relevant information amount "
                             f"{cfg.amount_tokens} tokens: raise --lengths or lower --amount-tokens")
        rel_budget = cfg.amount_tokens
    else:
        rel_budget = int(cfg.density * target)
    # unit counts kept across tiers, positions and builds (ctxbench.tokenizers.counts)
    counter = counter_for(tok, f"holobench/{src.raw.db_id}")
    pool = _Rows(src, tables, True, cfg.seed)
    remap = None
    if near_miss is not None:
        remap = NearMissPool(pool.offsets, tables, near_miss, (cfg.seed, src.raw.db_id, sorted(tables), target,
                                                               position), pool.n)
    relevant, used = take_until(pool.units(rng, remap), rel_budget, counter)
    return relevant, used, rng


def build_context(src: PreparedSource, cfg: HoloBenchConfig, tables: list[str], target: int, position: str,
                  tok, near_miss: dict[str, tuple[int, ...]] | None = None) -> PackedContext:
    """One context for the relevant ``tables`` at ``target`` tokens (module docstring); ``near_miss`` as in
    :func:`draw_relevant`.

    Raises InputError when, in the amount setting, the relevant amount exceeds the target length.
    """
    relevant, used, rng = draw_relevant(src, cfg, tables, target, position, tok, near_miss)
    counter = counter_for(tok, f"holobench/{src.raw.db_id}")
    others = [t for t in src.db.tables if t not in tables]
    dis_pool = _Rows(src, others, False, cfg.seed)
    dis_iter = ChainedUnits(dis_pool.units(rng), CycledUnits(src.dummy_documents))
    distractors, _ = take_until(dis_iter, target - used, counter)
    # every unit's count is the counter's, by tok: pack may sum them instead of encoding the whole context
    return pack(relevant, distractors, position, target, tok, counted=True)


@dataclass
class Loaded:
    """Stage ``load``: the raw database, the tokenizer and the build hash; ``existing`` when ``out`` already holds
    this build."""

    cfg: HoloBenchConfig
    out: Path
    raw: Database
    build_hash: str
    existing: BuildResult | None = None
    root: Path | None = None  # versioned layout: the run root whose ``latest`` points at this build
    writer: BuildWriter | None = None


@dataclass
class Assembled:
    """Stage ``assemble``: one context per (relevant tables, tier, position, predicates), and the (question, key)
    pairs; a key's predicates are None with ``--distractors random`` (questions over the same tables share a
    context), else the question's (:func:`.nearmiss.table_predicates`). ``predicates``/``miss_counts``: per
    question id, its predicates per table and each table's rows' miss counts (for ``near_miss_share``)."""

    src: PreparedSource
    contexts: dict[tuple, PackedContext]
    pairs: list[tuple]
    predicates: dict = field(default_factory=dict)
    miss_counts: dict = field(default_factory=dict)


def hash_inputs(cfg: HoloBenchConfig) -> tuple[Database, str]:
    """Load the database and the tokenizer and compute the build hash (the check a no-change nightly run does)."""
    raw = load_database_header(cfg.db)  # without its rows where its files were loaded before
    tok = get_tokenizer(cfg.tokenizer)
    return raw, build_hash_of(cfg, raw, tok.file_sha256)


def load_stage(cfg: HoloBenchConfig, out: str | Path, force: bool = False, versioned: bool = False) -> Loaded:
    """Load the database and hash the inputs. An existing build with the same hash is reported in ``existing``;
    a directory holding a different build is an error unless ``force`` (its files are then removed).

    ``versioned``: ``out`` is a run root and the build directory is ``out/<build_hash>`` (ctxbench.run.incremental);
    an existing complete build of that hash is reused and ``out/latest`` points at it."""
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise InputError(f"--out {root} is a file: pass a directory for the build")
    raw, bhash = hash_inputs(cfg)
    w = BuildWriter(root, bhash, force, versioned)
    return Loaded(cfg, w.dir, raw, bhash, w.existing, w.root, w)


def verbalize_stage(loaded: Loaded) -> PreparedSource:
    """Preprocess the database, check templates and queries (or read them from the prepared-input cache), and
    stage ``source.sqlite`` (moved into place by the writer)."""
    src = prepare_source_cached(loaded.raw, loaded.writer.staged("source.sqlite"), loaded.cfg.queries,
                                reload=lambda: load_database(loaded.cfg.db))
    if not (assets_dir() / "templates" / f"{src.raw.db_id}.yaml").exists():
        # templates read from the query set's ``templates:`` section (a generated query set): the build keeps a
        # copy, ``templates.yaml``, so that ``ctxbench verify`` inverts the very templates the contexts were made of
        import yaml

        data: dict = {t: list(v) for t, v in src.templates.templates.items()}
        if src.templates.missing:
            data["missing"] = {t: dict(c) for t, c in src.templates.missing.items()}
        loaded.writer.staged(TEMPLATES_COPY).write_text(
            yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10_000), encoding="utf-8")
    return src


def assemble_stage(loaded: Loaded, src: PreparedSource, progress: Callable[[int, int], None] | None = None) -> Assembled:
    """Build the contexts: one per (relevant tables, tier, position), shared by the questions over those tables."""
    cfg = loaded.cfg
    tok = get_tokenizer(cfg.tokenizer)
    qs = src.questions
    if cfg.question_ids:
        missing = set(cfg.question_ids) - {q.id for q in qs}
        if missing:
            raise InputError(f"unknown question id(s) {sorted(missing)} for {src.raw.db_id}")
        qs = [q for q in qs if q.id in set(cfg.question_ids)]
    low = {n.lower(): n for n in src.db.tables}
    pairs = []

    types = src.column_types()
    counts: dict[tuple, tuple[int, ...]] = {}  # (table, predicates) -> miss count of each row
    preds_of: dict[str, dict] = {}
    mc = MissCounter()
    for q in qs:
        tables = tuple(sorted(low[t] for t in q.info["tables"]))
        preds = table_predicates(q.sql, {t: list(src.db.tables[t].columns) for t in tables})
        preds_of[q.id] = preds
        for t, ps in preds.items():
            if (t, ps) not in counts:
                tb = src.db.tables[t]
                counts[(t, ps)] = mc.counts(t, list(tb.columns), types[t], tb.rows, ps)
        sig = tuple(sorted(preds.items())) if cfg.distractors == "near-miss" and preds else None
        for target in cfg.lengths:
            for position in cfg.positions:
                pairs.append((q, (tables, target, position, sig)))
    mc.close()
    keys = list(dict.fromkeys(key for _, key in pairs))
    # the certify stage's parse of each context starts in a helper process as soon as the context is built
    copy = loaded.writer.staged(TEMPLATES_COPY) if loaded.writer is not None else None
    ahead = None if loaded.writer is None else precertify.start(
        loaded.out, src.raw.db_id, loaded.writer.staged("source.sqlite"), copy if copy and copy.is_file() else None,
        max(cfg.lengths, default=0))
    # contexts are independent (each draws from its own seeded RNG) and their tokenizing releases the GIL: built on
    # several threads, kept in the order of their first question
    contexts: dict[tuple, PackedContext] = {}
    first = {}
    for i, (_, key) in enumerate(pairs):
        first.setdefault(key, i)
    built = ordered_map(lambda key: build_context(
        src, cfg, list(key[0]), key[1], key[2], tok,
        None if key[3] is None else {t: counts[(t, ps)] for t, ps in key[3]}), keys)
    for k, (key, ctx) in enumerate(zip(keys, built)):
        contexts[key] = ctx
        if ahead is not None:
            ahead.add(ctx.text)
        if progress:  # the pairs up to the next context's first question have their contexts
            progress(first[keys[k + 1]] if k + 1 < len(keys) else len(pairs), len(pairs))
    flush_all()  # the unit counts made here, for the next build
    miss = {qid: {t: counts[(t, ps)] for t, ps in preds.items()} for qid, preds in preds_of.items()}
    return Assembled(src, contexts, pairs, preds_of, miss)


def gold_stage(loaded: Loaded, asm: Assembled) -> tuple[list[dict], list[dict]]:
    """Gold answers over exactly the included relevant rows (two engines, ambiguity checks); returns instance rows
    and quarantine rows (rejected gold answers, incomplete rows, left-out tables)."""
    cfg, src, bhash = loaded.cfg, asm.src, loaded.build_hash
    db_id = src.raw.db_id
    types = src.column_types()
    cfg_for_id = _config_dump(cfg, exclude={"db", "queries", "question_ids"})
    instances, quarantine = [], []
    # languages detected beside this process (ctxbench.core.sidecar) while the gold answers are computed here
    prefetch_languages([asm.contexts[key].text for _, key in asm.pairs] + [q.question for q, _ in asm.pairs])
    last_use = {key: i for i, (_, key) in enumerate(asm.pairs)}
    shared: dict[tuple, tuple] = {}  # per context: included rows, their tables and the engines loaded with them
    ahead = precertify.current(loaded.out)  # the certify stage's work started in a helper process (assemble_stage)
    sqls: dict[tuple, list[str]] = {}  # per context: its questions' SQL, for the helper
    for q, key in asm.pairs if ahead is not None else ():
        sqls.setdefault(key, []).append(q.sql)
    for i, (q, key) in enumerate(asm.pairs):
        tables, target, position = key[:3]
        ctx = asm.contexts[key]
        if key not in shared:
            included: dict[str, list[int]] = {}
            for u in ctx.units:
                if u.ref is not None:
                    included.setdefault(u.ref[0], []).append(u.ref[1])
            gold_tables = {}
            for t in tables:
                tb = src.db.tables[t]
                gold_tables[t] = (tb.columns, types[t], [tb.rows[r - 1] for r in sorted(included.get(t, []))])
            shared[key] = (included, gold_tables, GoldEngines(gold_tables, cfg.seed),
                           canonical_json(ctx.evidence_spans),
                           canonical_json({t: sorted(v) for t, v in sorted(included.items())}), Encoded(ctx.text))
            if ahead is not None:  # the helper checks the context's rows and answers its SQL meanwhile
                ahead.add_instances(ctx.text, shared[key][4], cfg.seed, sqls[key])
        included, gold_tables, engines, spans_json, included_json, text_json = shared[key]
        iid = stable_hash(cfg_for_id, db_id, q.question, q.sql, text_json, length=24)
        try:
            g = compute_gold(q.sql, gold_tables, seed=cfg.seed, engines=engines, null_columns=src.pre.made_null,
                             integer_division=cfg.integer_division)
        finally:
            if last_use[key] == i:  # the last question over this context: its engines are closed
                engines.close()
        if not g.ok:
            quarantine.append({"input": iid, "stage": "gold", "reason": g.reason, "detail": canonical_json(
                {"question_id": q.id, "target_tokens": target, "position": position, **g.detail})})
            continue
        instances.append({
            "instance_id": iid, "benchmark": "holobench", "source_id": db_id, "question": q.question,
            "question_id": q.id, "sql": q.sql, "gold": canonical_json(g.rows), "accepted_answers": None,
            "context": ctx.text, "tokenizer": cfg.tokenizer, "target_tokens": target,
            "context_tokens": ctx.context_tokens, "setting": cfg.setting,
            "achieved_density": round(ctx.relevant_tokens / ctx.context_tokens, 6) if ctx.context_tokens else None,
            "context_format": "full_text", "position": position,
            "query_types": canonical_json(q.info["query_types"]), "difficulty": q.info["difficulty"],
            "evidence_spans": spans_json, "included_rows": included_json,
            "relevant_tokens": ctx.relevant_tokens, "build_hash": bhash, "distractors": cfg.distractors,
            "near_miss_share": near_miss_share(included, asm.predicates.get(q.id, {}), asm.miss_counts.get(q.id, {})),
            "lexical_overlap": lexical_overlap(q.question, evidence_sentences(ctx)),
        })
        instances[-1].update(difficulty_columns(instances[-1]))
        instances[-1].update(language_columns(instances[-1]))
    for t, rep in src.pre.rows_report.items():
        if t in src.pre.excluded_tables and src.pre.excluded_tables[t] in DESIGNED_EXCLUSIONS:
            continue  # left out by design (identifiers only, excluded in assets/databases): in quarantine, no warning
        lost = rep["rows"] - rep["verbalized"]
        if rep["rows"] and lost / rep["rows"] > ROWS_LOST_WARN:
            why = "; ".join(f"{n} {r}" for r, n in rep["left_out"].items())
            warnings.warn(DataWarning(f"table {db_id}.{t}: {lost} of {rep['rows']} rows ({lost / rep['rows']:.1%}) "
                                      f"are not verbalized ({why})"), stacklevel=2)
    pairs: dict[tuple[str, str], list[str]] = {}  # one warning per pair of tables, naming each pair of templates
    for (t1, i1), (t2, i2) in _same_wording(src):
        pairs.setdefault((t1, t2), []).append(f"{t1} template {i1 + 1}, {t2} template {i2 + 1}")
    for (t1, t2), which in pairs.items():
        warnings.warn(DataWarning(
            f"tables {db_id}.{t1} and {db_id}.{t2} have templates with the same wording ({'; '.join(which)}): "
            f"their sentences cannot say which table a row belongs to, so instances stating them fail "
            f"verification; reword one of them"), stacklevel=2)
    for t, c, phrase, n in _phrase_values(src):
        warnings.warn(DataWarning(
            f"table {db_id}.{t}: column {c} holds the text {phrase!r} in {n} row(s), which is also its missing-value "
            f"phrase: a sentence stating it reads as NULL, so questions reading {c} over those rows fail "
            f"verification; give the column another phrase in the templates (missing: {{{t}: {{{c}: ...}}}})"),
            stacklevel=2)
    for qid, why in src.skipped_questions:
        quarantine.append({"input": qid, "stage": "question", "reason": why, "detail": None})
    for t, n in (src.raw.provenance.get("non_utf8_text") or {}).items():
        quarantine.append({"input": f"{db_id}.{t}", "stage": "load", "detail": None,
                           "reason": f"{n} text value(s) were not valid UTF-8: decoded as Windows-1252 and kept "
                                     f"(re-encode the source as UTF-8 to silence this)"})
    for t, why in src.pre.excluded_tables.items():
        quarantine.append({"input": f"{db_id}.{t}", "stage": "verbalize", "reason": f"table left out: {why}",
                           "detail": None})
    return instances, quarantine


def evidence_sentences(ctx: PackedContext) -> list[str]:
    """The evidence sentences of a context: the verbalized relevant rows (one sentence each)."""
    return [u.text for u in ctx.units if u.relevant]


def validate_stage(loaded: Loaded, src: PreparedSource, instances: list[dict]) -> None:
    """great-expectations suite over the instances (raises ValidationError naming failed expectations)."""
    cfg = loaded.cfg

    @lru_cache(maxsize=None)  # a row included in several instances' contexts is verbalized once
    def sentence_of(t: str, rid: int) -> str:
        return src.templates.verbalize(t, src.db.tables[t].columns, src.db.tables[t].rows[rid - 1], rid, cfg.seed)

    validate_build(to_table("instances", instances), sentence_of=sentence_of)


def write_stage(loaded: Loaded, src: PreparedSource, instances: list[dict], quarantine: list[dict],
                asm: Assembled) -> BuildResult:
    """Write quarantine, instances (atomically) and, last, the manifest that marks the build complete."""
    n_contexts = len(asm.contexts)
    cfg, db_id = loaded.cfg, src.raw.db_id
    return loaded.writer.write(
        "holobench", cfg.model_dump(exclude={"db", "queries"}), instances, quarantine, seed=cfg.seed,
        tokenizer=get_tokenizer(cfg.tokenizer), counts={"contexts": n_contexts},
        details={"db_id": db_id, "source": src.raw.provenance,
                 "preprocessing": {"replaced": src.pre.replaced, "dropped_incomplete": src.pre.dropped_incomplete,
                                   "rows_verbalized": src.pre.rows_report, "made_null": src.pre.made_null,
                                   "integer_division": cfg.integer_division,
                                   "excluded_tables": src.pre.excluded_tables,
                                   "numbers_from_text": src.numbers_from_text,
                                   "numeric_text_kept": src.numeric_text_kept,
                                   "rows": {n: len(t.rows) for n, t in src.db.tables.items()}},
                 "assets": {"templates": _asset_hash(src.templates.path),
                            "queries": _asset_hash(cfg.queries or assets_dir() / "queries" / f"{db_id}.yaml")}})


def build_holobench(cfg: HoloBenchConfig, out: str | Path, progress: Callable[[int, int], None] | None = None,
                    force: bool = False, versioned: bool = False) -> BuildResult:
    """Build a verbalized-database benchmark into the build directory ``out`` (SCHEMA.md layout): the stages
    load → verbalize → assemble → gold → validate → write (the Prefect flow runs each as a task).

    An existing complete build with the same build hash is left as it is (``skipped``); a directory holding a
    different build is an error unless ``force``. ``versioned``: ``out`` is a run root, the build goes to
    ``out/<build_hash>`` and ``out/latest`` points at it (ctxbench.run.incremental). Raises InputError for bad input (see prepare_source) and
    ValidationError when a data-quality expectation fails.
    """
    loaded = load_stage(cfg, out, force, versioned)
    if loaded.existing is not None:
        return loaded.existing
    src = verbalize_stage(loaded)
    asm = assemble_stage(loaded, src, progress)
    instances, quarantine = gold_stage(loaded, asm)
    validate_stage(loaded, src, instances)
    try:
        return write_stage(loaded, src, instances, quarantine, asm)
    finally:
        if (ahead := precertify.take(loaded.out)) is not None:  # no certify stage here to use the helper's work
            ahead.discard()
