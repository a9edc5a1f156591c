"""Questions generated from a database's schema (issue 14 part 2): a query set for a database with no hand-written
one, in the format ``ctxbench build holobench --queries`` reads.

Method. HoloBench (section 3.3, appendix A.3) writes six questions per difficulty by hand to cover the five query
types; here the SQL is drawn from the schema instead, and each query is kept only when its gold answer can be
trusted, as SciTrek (section 3.3) draws SQL from templates and keeps what validates:

1. **Schema.** The database is preprocessed as the build does it (identifiers resolved to names along foreign
   keys), with the templates of ``assets/templates/<db_id>.yaml`` or, where there are none, templates generated
   from the schema (:mod:`ctxbench.verbalize.generate`); every column is profiled (kind, role, values).
2. **Candidates.** Query *families* (``FAMILIES``): lookups, numeric comparisons against literals taken from the
   column's value distribution (quantiles rounded to two significant digits), aggregates, MIN/MAX, joins along
   foreign keys, GROUP BY, HAVING, nested subqueries and ranking with a tie-breaker (the label), each with its
   question from a template over the columns' words and values. Query types and difficulty come from
   :func:`ctxbench.questions.sqlinfo.sql_info`, the rules ``ctxbench sql-info`` uses (appendix A.3.1-A.3.2).
3. **Checks.** A candidate is kept when the gold engine (:func:`ctxbench.gold.compute_gold`: two engines agree, no
   dependence on row order, no tie at LIMIT, no NULL sort key, not empty, not NULL) accepts its answer on the full
   database *and* on context samples drawn exactly as the build draws the relevant rows
   (:func:`ctxbench.tracks.holobench.build.draw_relevant` at the ``sim_lengths`` tiers, density setting, for each
   ``sim_seeds`` seed: the default build's own contexts are among them); a COUNT that is 0 in most samples, or
   an answer of more than ``MAX_ANSWER_ROWS`` rows in a sample, is left out too. Every reason is counted.
4. **Selection.** First one question for each (difficulty, query type) pair the schema allows, then the rest per
   difficulty in turn over the families; at most one question per family and column set. Candidates are drawn in
   an order seeded from the configuration (SHA-256, :func:`ctxbench.core.hashing.seeded_rng`).
5. **Phrasing** (``question_model``): each selected SQL is phrased by an LLM and kept only when the model's
   translation of the question back into SQL gives the same answer on the full database (SciTrek's round trip,
   :func:`ctxbench.questions.roundtrip.phrase_questions`, through the gateway and the response cache); a dropped
   query is replaced from the remaining candidates.

Where the parts live: this module holds the configuration, the selection (step 4), the phrasing (step 5) and the
written file; :mod:`ctxbench.tracks.holobench.sqlparts` the SQL pieces and the table view the families use,
:mod:`ctxbench.tracks.holobench.candidates` the query families (step 2) and
:mod:`ctxbench.tracks.holobench.checker` the checks (step 3).

The written file records the seed, the generator's version, what was left out and why, and (for generated
templates) a ``templates:`` section that the build uses when ``assets/templates/<db_id>.yaml`` does not exist.
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import BaseModel, Field

from ctxbench import __version__
from ctxbench.core.config import assets_dir
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import seeded_rng
from ctxbench.sources import Database, load_database
from ctxbench.sources.database import sql_type, write_sqlite
from ctxbench.sources.preprocess import DatabaseSpec, preprocess
from ctxbench.verbalize.generate import generate_templates, profile_database
from ctxbench.verbalize.templates import TemplateSet, load_templates
from ctxbench.questions.sqlinfo import QUERY_TYPES
from ctxbench.core.outdir import check_out_file
from ctxbench.models.cache import ResponseCache
from ctxbench.questions.roundtrip import RoundTripItem, phrase_questions
from ctxbench.tracks.holobench.candidates import Candidate, draw_candidates
from ctxbench.tracks.holobench.checker import Checker
from ctxbench.tracks.holobench.source import PreparedSource, load_dummy_documents
from ctxbench.tracks.holobench.sqlparts import Table, ident

__all__ = ["DIFFICULTIES", "GENERATED_MARK", "GENERATOR_VERSION", "MAX_PHRASING_ROUNDS", "Candidate", "Checker",
           "GenerateConfig", "GenerateResult", "Table", "check_generated_out", "draw_candidates",
           "generate_questions", "ident", "prepare", "render", "schema_text", "select", "write_generated"]

GENERATOR_VERSION = 1
DIFFICULTIES = ("easy", "medium", "hard")
MAX_PHRASING_ROUNDS = 10  # rounds of replacing queries the round trip dropped


class GenerateConfig(BaseModel):
    """What a generated query set depends on (recorded in the file; seeds every random choice)."""

    db: str = Field(..., description="SQLite path (Spider layout gets Spider's keys) or 'nycflights13'")
    n: int = Field(30, ge=1, le=500, description="questions to generate")
    seed: int = 0
    question_model: str | None = Field(None, description="LLM that phrases questions (round-trip validated)")
    question_base_url: str | None = None
    question_api_key_env: str | None = None
    max_attempts: int = Field(4, ge=1, description="round-trip attempts per query before it is dropped")
    tokenizer: str = "cl100k_base"
    sim_lengths: list[int] = Field(default_factory=lambda: [4096, 8192, 16384],
                                   description="tiers (tokens) at which context samples are simulated")
    sim_seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], description="build seeds simulated per tier")
    density: float = Field(0.5, gt=0, le=1, description="relevant fraction of the simulated contexts")


@dataclass
class GenerateResult:
    """The generated query set: question entries, templates (None when the database has its own), the report
    (counts of candidates, checks, kept and left out by reason) and the YAML text written."""

    db_id: str
    questions: list[dict]
    templates: dict[str, list[str]] | None
    report: dict
    text: str
    seconds: float = 0.0


# ------------------------------------------------------------------------------------------------ selection
def _quotas(n: int) -> dict[str, int]:
    base, extra = divmod(n, len(DIFFICULTIES))
    return {d: base + (1 if i < extra else 0) for i, d in enumerate(DIFFICULTIES)}


def select(pool: list[Candidate], n: int, accept: Callable[[Candidate], bool], pinned: list[Candidate] = (),
           excluded: set[str] = frozenset()) -> list[Candidate]:
    """Up to ``n`` accepted candidates (module docstring, step 4), after the ``pinned`` ones, skipping the SQL in
    ``excluded``. ``accept`` checks a candidate (called at most once per candidate, in the order drawn)."""
    chosen = list(pinned)
    sigs = {c.signature for c in chosen}
    texts = {c.question for c in chosen}
    sqls = {c.sql for c in chosen}
    tried: set[int] = set()

    def take(c: Candidate) -> bool:
        if id(c) in tried or c.signature in sigs or c.question in texts or c.sql in sqls or c.sql in excluded:
            return False
        tried.add(id(c))
        if not accept(c):
            return False
        chosen.append(c)
        sigs.add(c.signature)
        texts.add(c.question)
        sqls.add(c.sql)
        return True

    # 1. one question per (difficulty, query type) the schema allows
    for d, qt in product(DIFFICULTIES, QUERY_TYPES):
        if len(chosen) >= n or any(c.difficulty == d and qt in c.types for c in chosen):
            continue
        for c in pool:
            if c.difficulty == d and qt in c.types and take(c):
                break
    # 2. the rest per difficulty, families in turn
    quotas = _quotas(n)
    by_diff: dict[str, dict[str, list[Candidate]]] = {d: defaultdict(list) for d in DIFFICULTIES}
    for c in pool:
        by_diff[c.difficulty][c.family].append(c)
    for d in DIFFICULTIES:
        _round_robin(by_diff[d], lambda: sum(c.difficulty == d for c in chosen) >= quotas[d] or len(chosen) >= n,
                     take)
    # 3. a difficulty short of candidates leaves room for the others
    for d in DIFFICULTIES:
        _round_robin(by_diff[d], lambda: len(chosen) >= n, take)
    return chosen


def _round_robin(families: dict[str, list[Candidate]], full: Callable[[], bool], take) -> None:
    iters = {f: iter(cs) for f, cs in families.items()}
    while iters and not full():
        for f in list(iters):
            if full():
                return
            for c in iters[f]:
                if take(c):
                    break
            else:
                del iters[f]


# ------------------------------------------------------------------------------------------------ the generator
def _usable_columns(ts: TemplateSet, pre_tables: dict) -> dict[str, list[str]]:
    out = {}
    for n in pre_tables:
        if n in ts.templates:
            common = {c.lower() for c in ts.common_columns(n)}
            out[n] = [c for c in pre_tables[n].columns if c.lower() in common]
    return out


def schema_text(src) -> str:
    """The preprocessed tables as CREATE TABLE statements (for the SQL ↔ question prompts)."""
    lines = []
    for n, t in src.db.tables.items():
        types = [sql_type([r[i] for r in t.rows]) for i in range(len(t.columns))]
        lines.append(f"CREATE TABLE {ident(n)} ({', '.join(f'{ident(c)} {ty}' for c, ty in zip(t.columns, types))});")
    return "\n".join(lines)


def prepare(cfg: GenerateConfig) -> tuple[Database, Any, dict[str, list[str]] | None]:
    """The database prepared as the build prepares it: (raw database, PreparedSource without questions, generated
    templates or None when ``assets/templates/<db_id>.yaml`` exists)."""
    raw = load_database(cfg.db)
    spec = DatabaseSpec.load(raw.db_id)
    shipped = assets_dir() / "templates" / f"{raw.db_id}.yaml"
    generated = None
    if shipped.exists():
        ts = load_templates(raw.db_id)
    else:
        gen = generate_templates(raw, spec)
        if not gen.templates:
            raise InputError(f"database {raw.db_id!r}: no table has a column to state besides its identifiers and "
                             f"names, so there is nothing to ask about")
        generated = gen.templates
        ts = TemplateSet(raw.db_id, generated, path="the generated templates")
    pre = preprocess(raw, {t: ts.columns(t) for t in ts.templates if t in raw.tables}, spec)
    ts.check({n: t.columns for n, t in pre.db.tables.items()})
    return raw, PreparedSource(raw, pre, ts, [], load_dummy_documents(raw.db_id)), generated


def generate_questions(cfg: GenerateConfig, cache=None, progress: Callable[[str], None] | None = None
                       ) -> GenerateResult:
    """Generate a query set for ``cfg.db`` (module docstring). Deterministic: the same configuration and database
    give the same questions (with ``question_model``, the same cached model replies). ``cache``: the response
    cache of the round trip (default: the user's); ``progress`` receives one line per stage.

    Raises InputError for a database that cannot be loaded or has nothing to ask about, and when fewer than one
    question passes the checks.
    """
    t0 = time.perf_counter()
    say = progress or (lambda s: None)
    raw, src, generated = prepare(cfg)
    db_id = raw.db_id
    profiles, edges = profile_database(raw, src.pre)
    usable = _usable_columns(src.templates, src.db.tables)
    tables = {n: Table(profiles[n], usable[n], t.rows, t.columns) for n, t in src.db.tables.items() if n in usable}
    edges = [e for e in edges if e.table in tables and e.ref_table in tables
             and e.column in tables[e.table].usable and e.ref_column in tables[e.ref_table].usable]
    rng = seeded_rng("questions.generate", GENERATOR_VERSION, db_id, cfg.seed)
    pool = draw_candidates(tables, edges, rng)
    say(f"{len(pool)} candidate queries over {len(tables)} tables and {len(edges)} join(s)")
    checker = Checker(src, cfg)
    try:
        chosen = select(pool, cfg.n, lambda c: checker.check(c) is None)
        phrased: dict[str, str] = {}
        dropped_roundtrip = 0
        if cfg.question_model and chosen:
            chosen, phrased, dropped_roundtrip = _phrase(cfg, pool, chosen, checker, src, say, cache)
        answers = {c.sql: checker.answer(c.sql) for c in chosen}
    finally:
        checker.close()
    if not chosen:
        raise InputError(f"database {db_id!r}: none of {len(pool)} candidate queries passed the checks "
                         f"({dict(checker.reasons.most_common(3))}); the tables may be too small or too uniform")
    chosen.sort(key=lambda c: DIFFICULTIES.index(c.difficulty))
    questions = [{"id": f"{db_id}-g{i + 1:02d}", "question": phrased.get(c.sql, c.question), "sql": c.sql,
                  "query_types": c.types, "difficulty": c.difficulty, "family": c.family,
                  "answer_rows": len(answers[c.sql])}
                 for i, c in enumerate(chosen)]
    report = {"candidates": len(pool), "checked": len(checker.verdicts),
              "passed": sum(v is None for v in checker.verdicts.values()), "kept": len(questions),
              "left_out": dict(sorted(checker.reasons.items(), key=lambda kv: (-kv[1], kv[0])))}
    if cfg.question_model:
        report["roundtrip_dropped"] = dropped_roundtrip
    report["coverage"] = {"difficulty": {d: sum(q["difficulty"] == d for q in questions) for d in DIFFICULTIES},
                          "query_types": {t: sum(t in q["query_types"] for q in questions) for t in QUERY_TYPES}}
    text = render(cfg, raw, questions, generated, report)
    return GenerateResult(db_id, questions, generated, report, text, time.perf_counter() - t0)


def _phrase(cfg: GenerateConfig, pool, chosen, checker, src, say, cache=None
            ) -> tuple[list[Candidate], dict[str, str], int]:
    """Phrase the chosen queries with the LLM (round trip); replace dropped ones from the pool, a few rounds."""
    cache = cache or ResponseCache()
    schema = schema_text(src)
    phrased: dict[str, str] = {}
    failed: set[str] = set()
    kept: list[Candidate] = []
    todo = list(chosen)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "source.sqlite"
        write_sqlite(src.db, path)
        for _ in range(MAX_PHRASING_ROUNDS):
            if not todo:
                break
            items = [RoundTripItem(c.sql, checker.answer(c.sql), str(path)) for c in todo]
            say(f"phrasing {len(items)} question(s) with {cfg.question_model}")
            outs = phrase_questions(items, cfg.question_model, schema, cfg.question_base_url,
                                    cfg.question_api_key_env, cfg.max_attempts, cache=cache,
                                    prompts="holobench_questions")
            texts = {phrased[c.sql] for c in kept}
            for c, o in zip(todo, outs):
                q = " ".join(o.question.split()) if o.question else None
                if q is None or q in texts:
                    failed.add(c.sql)
                    continue
                phrased[c.sql] = q
                texts.add(q)
                kept.append(c)
            if len(kept) >= cfg.n:
                break
            more = select(pool, cfg.n, lambda c: checker.check(c) is None, pinned=kept, excluded=failed)
            todo = more[len(kept):]
    return kept, phrased, len(failed)


def render(cfg: GenerateConfig, raw: Database, questions: list[dict], templates: dict | None, report: dict) -> str:
    """The query-set YAML: header comment, ``db_id``, ``generator`` (seed, version, configuration), ``report``,
    ``questions`` and, for generated templates, ``templates``. No time stamps: the same inputs give the same bytes."""
    head = (f"# Query set for {raw.db_id}, generated by `ctxbench questions generate` (generator version "
            f"{GENERATOR_VERSION}).\n# SQL drawn from the schema; every question's gold answer passed the gold "
            f"checks on the full database\n# and on simulated context samples. Review the questions"
            + (" and the templates" if templates else "") + " before publishing results.\n"
            f"# The SQL reads the PREPROCESSED view of {raw.db_id}, not the database file as stored: each foreign key "
            f"is replaced\n# by the referenced row's name (e.g. flights.DestAirport -> DestAirport_airportname), "
            f"values follow the value rule\n# (text stripped, '' and 'NULL' text are NULL). Run it with `ctxbench "
            f"build holobench --queries`; see where a column\n# comes from with `ctxbench sql-info --db "
            f"{raw.db_id}.sqlite \"SQL\"` (resolved: database or preprocessed view).\n")
    gen = {"name": "ctxbench questions generate", "version": GENERATOR_VERSION, "ctxbench": __version__,
           "seed": cfg.seed, "n": cfg.n, "question_model": cfg.question_model,
           "source": {k: v for k, v in raw.provenance.items() if k != "file"},
           "templates": "generated (templates: below)" if templates else f"assets/templates/{raw.db_id}.yaml",
           "simulated_contexts": {"tokenizer": cfg.tokenizer, "lengths": cfg.sim_lengths, "seeds": cfg.sim_seeds,
                                  "setting": "density", "density": cfg.density, "position": "uniform"}}
    doc: dict[str, Any] = {"db_id": raw.db_id, "generator": gen, "report": report, "questions": questions}
    if templates:
        doc["templates"] = templates
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)


GENERATED_MARK = "generated by `ctxbench questions generate`"


def check_generated_out(out: str | Path, force: bool = False) -> None:
    """``--out`` of ``questions generate`` (:func:`ctxbench.core.outdir.check_out_file`): a new file or an earlier
    generated query set (its header names the generator), else only with ``force``. Raises InputError."""
    p = Path(out)
    try:
        own = p.is_file() and GENERATED_MARK in p.read_text(encoding="utf-8", errors="replace")[:2000]
    except OSError:
        own = False
    check_out_file(p, "questions generate", force=force, is_own=own)


def write_generated(result: GenerateResult, out: str | Path) -> Path:
    """Write the query set to ``out`` (atomically). Raises InputError when ``out`` is a directory or its parent
    does not exist."""
    p = Path(out)
    if p.is_dir():
        raise InputError(f"--out {p} is a directory: give a file name, e.g. {p / (result.db_id + '.yaml')}")
    if not p.parent.is_dir():
        raise InputError(f"--out {p}: its directory {p.parent} does not exist")
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(result.text, encoding="utf-8")
    tmp.replace(p)
    return p

# the names that moved to the modules beside this one, still importable from here for one release (CHANGELOG.md)
from ctxbench.tracks.holobench.sqlparts import MIN_VALUE_SHARE, SQLITE_KEYWORDS, literal, nice_number  # noqa: E402,F401
from ctxbench.tracks.holobench.candidates import (  # noqa: E402,F401
    FAMILIES, MAX_GROUPS_LISTED, f_above_average, f_aggregate_value, f_average, f_between, f_count_compare,
    f_count_distinct, f_count_distinct_compare, f_count_value, f_count_value_compare, f_either, f_extreme,
    f_group_average_top, f_group_count, f_group_count_compare, f_group_extreme, f_group_stats, f_group_top,
    f_group_top_above_average, f_group_top_extreme, f_group_top_where, f_having, f_join_count,
    f_join_count_compare, f_join_count_nested, f_join_count_value, f_join_extreme, f_join_extreme_value,
    f_join_group, f_join_group_top, f_join_list_compare, f_join_top, f_join_top_compare, f_list_compare,
    f_max_where, f_top, f_top_compare, f_top_details, f_top_nested, f_top_where,
)
from ctxbench.tracks.holobench.checker import MAX_ANSWER_ROWS  # noqa: E402,F401
