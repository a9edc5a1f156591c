"""Preparing a database for the HoloBench track: load, check templates and queries, preprocess."""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ...config import assets_dir
from ...errors import InputError
from ...questions.queryset import Question, check_question, check_runs, load_queryset
from ...questions.sqlinfo import sql_info
from ...sources import Database, load_database
from ...sources.database import write_sqlite
from ...sources.preprocess import DatabaseSpec, Preprocessed, preprocess
from ...verbalize.templates import TemplateSet, load_templates, templates_from_mapping


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


def load_dummy_documents(db_id: str) -> list[str]:
    """``assets/dummy/<db_id>.yaml``: a list of dummy distractor documents (HoloBench appendix A.2.3)."""
    p = assets_dir() / "dummy" / f"{db_id}.yaml"
    if not p.exists():
        p = assets_dir() / "dummy" / "generic.yaml"
    docs = yaml.safe_load(p.read_text(encoding="utf-8")) or []
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
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError):
        data = None  # the query set's own loader names the problem
    section = data.get("templates") if isinstance(data, dict) else None
    if section is None:
        return load_templates(db_id)  # raises, naming both ways to add templates
    return templates_from_mapping(section, db_id, f"{p} (templates:)")


def prepare_source(db: str | Path | Database | None, queries: str | Path | None = None,
                   templates: str | Path | None = None) -> PreparedSource:
    """Load a database, its templates (:func:`source_templates`) and query set (``assets/queries/<db_id>.yaml``
    or ``queries``), preprocess it and check every question against it.

    Raises InputError for a missing/empty database, missing templates or queries, a template naming a missing
    column, a query that does not parse, reads a missing table/column, or fails on the preprocessed database.
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
        path = Path(d) / "source.sqlite"
        write_sqlite(pre.db, path)
        con = sqlite3.connect(path)
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
