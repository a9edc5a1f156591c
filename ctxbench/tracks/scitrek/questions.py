"""Scientific-article questions: the metadata database of a collection (SciTrek appendix A, table 10), SQL templates
of the six skills (table 4, ``assets/scitrek/templates.yaml``) instantiated from a collection's own values with
safe quoting, gold answers by execution (the build track's two-engine and ambiguity checks), and the metadata
tables rendered as text (the D-* context format, section 4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

from ctxbench.core.config import assets_dir
from ctxbench.core.errors import InputError
from ctxbench.gold import GoldEngines, compute_gold
from ctxbench.gold.execute import GoldResult
from ctxbench.sources.articles import ArticleMeta
from ctxbench.sources.database import Database, Table, sql_type
from ctxbench.core.config import read_yaml

SKILLS = ("aggregating", "sorting", "filtering", "filtering_aggregating", "filtering_sorting", "relational_filtering")
TOPICS = ("author_count", "author_list", "reference_count", "title_list", "title_word_count", "author_relation",
          "citation_relation")
SCHEMA = {
    "articles": (["article_id", "article_title", "title_word_count", "author_count", "reference_count"],
                 ["TEXT", "TEXT", "INTEGER", "INTEGER", "INTEGER"]),
    "article_author": (["relation_id", "article_id", "author_name", "author_position"],
                       ["TEXT", "TEXT", "TEXT", "INTEGER"]),
    "citing_cited": (["relation_id", "article_id_citing", "article_id_cited"], ["TEXT", "TEXT", "TEXT"]),
}
_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
_KINDS = ("reference_count", "author_count", "title_word_count", "author_position", "author_name", "article_title",
          "title_word", "first_author")


def _kind(placeholder: str) -> str:
    """The value kind of a placeholder: ``<kind>``, ``<kind>_hi`` (a larger second value) or ``<kind>_2`` (another
    value, different from ``<kind>``'s)."""
    return placeholder.removesuffix("_hi").removesuffix("_2")


def templates_path() -> Path:
    return assets_dir() / "scitrek" / "templates.yaml"


@dataclass
class SqlTemplate:
    """One SQL template: id, skill, topic, SQL with ``{placeholders}``, and its deterministic question."""

    id: str
    skill: str
    topic: str
    sql: str
    question: str

    @property
    def placeholders(self) -> list[str]:
        return list(dict.fromkeys(_PLACEHOLDER.findall(self.sql)))


def load_templates(path: str | Path | None = None) -> list[SqlTemplate]:
    """Templates from YAML. Raises InputError naming the file and template for an unknown skill, topic or
    placeholder, or a template whose SQL does not parse once its placeholders are filled."""
    path = Path(path or templates_path())

    data = read_yaml(path, "SQL templates")  # a syntax error names its line and column
    try:
        raw = data["templates"]
    except (KeyError, TypeError) as e:
        raise InputError(f"SQL templates {path}: cannot read a `templates:` list ({e})") from None
    out, seen = [], set()
    for t in raw:
        tpl = SqlTemplate(str(t["id"]), str(t["skill"]), str(t["topic"]), str(t["sql"]).strip(),
                          str(t["question"]).strip())
        if tpl.id in seen:
            raise InputError(f"{path}: template id {tpl.id!r} appears twice")
        seen.add(tpl.id)
        if tpl.skill not in SKILLS:
            raise InputError(f"{path}: template {tpl.id}: unknown skill {tpl.skill!r} (use {', '.join(SKILLS)})")
        if tpl.topic not in TOPICS:
            raise InputError(f"{path}: template {tpl.id}: unknown topic {tpl.topic!r} (use {', '.join(TOPICS)})")
        for p in tpl.placeholders:
            if _kind(p) not in _KINDS:
                raise InputError(f"{path}: template {tpl.id}: unknown placeholder {{{p}}}")
        try:
            sqlglot.parse_one(_PLACEHOLDER.sub("1", tpl.sql), read="sqlite")
        except sqlglot.errors.SqlglotError as e:
            raise InputError(f"{path}: template {tpl.id}: SQL does not parse ({str(e).splitlines()[0]})") from None
        out.append(tpl)
    return out


def metadata_database(collection_id: str, articles: list[ArticleMeta], edges: list[tuple[str, str]]) -> Database:
    """The collection's metadata database (SciTrek table 10): ``articles`` (title word count by spaces),
    ``article_author`` (positions from 0) and ``citing_cited`` restricted to pairs inside the collection.
    Relation ids: ``<article>#<position>`` and ``<citing>><cited>``."""
    ids = {a.id for a in articles}
    arts = [(a.id, a.title, len(a.title.split()), len(a.authors), a.ref_count) for a in articles]
    auth = [(f"{a.id}#{i}", a.id, name, i) for a in articles for i, name in enumerate(a.authors)]
    cit = [(f"{s}>{t}", s, t) for s, t in edges if s in ids and t in ids]
    rows = {"articles": arts, "article_author": auth, "citing_cited": cit}
    return Database(collection_id, {n: Table(n, SCHEMA[n][0], rows[n], SCHEMA[n][1]) for n in SCHEMA},
                    provenance={"collection_id": collection_id})


def gold_tables(db: Database) -> dict[str, tuple[list[str], list[str], list[tuple]]]:
    """``db`` in the shape compute_gold takes (name -> (columns, types, rows))."""
    return {n: (t.columns, t.types or [sql_type([r[i] for r in t.rows]) for i in range(len(t.columns))], t.rows)
            for n, t in db.tables.items()}


def sql_literal(v) -> str:
    """A value as an SQL literal (sqlglot; strings single-quoted with apostrophes doubled: O'Brien → 'O''Brien')."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise InputError(f"cannot use {v!r} as an SQL literal")
    if isinstance(v, str):
        return exp.Literal.string(v).sql(dialect="sqlite")
    return exp.Literal.number(v).sql(dialect="sqlite")


def _candidates(kind: str, db: Database) -> list:
    arts = db.tables["articles"].rows
    aa = db.tables["article_author"].rows
    if kind == "reference_count":
        return sorted({r[4] for r in arts if r[4] is not None})
    if kind == "author_count":
        return sorted({r[3] for r in arts})
    if kind == "title_word_count":
        return sorted({r[2] for r in arts})
    if kind == "author_position":
        return sorted({r[3] for r in aa if r[3] <= 4})
    if kind == "author_name":
        return sorted({r[2] for r in aa})
    if kind == "first_author":
        return sorted({r[2] for r in aa if r[3] == 0})
    if kind == "article_title":
        return sorted({r[1] for r in arts})
    if kind == "title_word":
        return sorted({w.lower() for r in arts for w in re.findall(r"[A-Za-z]{5,}", r[1])})
    raise InputError(f"unknown placeholder kind {kind!r}")


@dataclass
class Instantiated:
    """A template with its placeholders filled: SQL (literals quoted), the deterministic question, the values."""

    template: SqlTemplate
    sql: str
    question: str
    values: dict


def instantiate(tpl: SqlTemplate, db: Database, rng) -> Instantiated | None:
    """Fill ``tpl``'s placeholders with values drawn (``rng``) from ``db``'s own data; ``<kind>_hi`` is a second
    value larger than ``<kind>``, ``<kind>_2`` a second value different from it (IN lists). None when the
    collection has no value to draw (e.g. one distinct count for a range)."""
    vals: dict = {}
    for p in tpl.placeholders:
        if p.endswith(("_hi", "_2")):
            continue
        cands = _candidates(p, db)
        if not cands:
            return None
        if f"{p}_hi" in tpl.placeholders:
            if len(cands) < 2:
                return None
            lo, hi = sorted(rng.sample(cands, 2))
            vals[p], vals[f"{p}_hi"] = lo, hi
        elif f"{p}_2" in tpl.placeholders:
            if len(cands) < 2:
                return None
            vals[p], vals[f"{p}_2"] = rng.sample(cands, 2)
        else:
            vals[p] = rng.choice(cands)
    return fill(tpl, vals)


def fill(tpl: SqlTemplate, vals: dict) -> Instantiated:
    """``tpl`` with the given placeholder values (quoted as SQL literals; ``title_word`` becomes ``'%word%'``).
    Raises InputError for a missing value."""
    missing = [p for p in tpl.placeholders if p not in vals]
    if missing:
        raise InputError(f"template {tpl.id}: no value for {', '.join(missing)}")
    sql_vals = {k: sql_literal(f"%{v}%" if k == "title_word" else v) for k, v in vals.items()}
    sql = _PLACEHOLDER.sub(lambda m: sql_vals[m.group(1)], tpl.sql)
    question = _PLACEHOLDER.sub(lambda m: str(vals[m.group(1)]), tpl.question)
    return Instantiated(tpl, sql, question, vals)


# SciTrek's released answers were computed by SQLite, whose integer division truncates (7 / 2 = 3): kept, so that the
# released question set is reproduced (recorded in the build manifest as gold.integer_division)
INTEGER_DIVISION = "sqlite"


def gold_answer(sql: str, db: Database, seed: int = 0, engines: GoldEngines | None = None) -> GoldResult:
    """The gold answer of ``sql`` on the collection database: DuckDB and SQLite must agree, the answer must not
    depend on row order, ties at LIMIT or NULL sort keys, rows with equal ORDER BY keys must not differ (answers
    are scored as ordered lists), and it must not be empty (:func:`ctxbench.gold.compute_gold`). ``engines``:
    the engines loaded with ``gold_tables(db)`` and ``seed``, shared by the questions on one collection."""
    if engines is not None:
        return compute_gold(sql, engines.tables, seed=seed, strict_order=True, engines=engines,
                            integer_division=INTEGER_DIVISION)
    return compute_gold(sql, gold_tables(db), seed=seed, strict_order=True, integer_division=INTEGER_DIVISION)


def render_tables(db: Database) -> str:
    """The metadata tables as text (the D-* context format): per table a header line, the column names and one
    line per row, values separated by `` | `` (NULL written as NULL)."""
    parts = []
    for name, t in db.tables.items():
        lines = [f"Table {name}", " | ".join(t.columns)]
        lines += [" | ".join("NULL" if v is None else str(v) for v in r) for r in t.rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def schema_text() -> str:
    """The three tables' schema as CREATE TABLE statements (for the SQL ↔ question prompts)."""
    return "\n".join(f"CREATE TABLE {n} ({', '.join(f'{c} {t}' for c, t in zip(cols, types))});"
                     for n, (cols, types) in SCHEMA.items())


def reads_column(sql: str, column: str) -> bool:
    """Whether ``sql`` reads ``column`` anywhere (sqlglot)."""
    return any(c.name.lower() == column for c in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Column))
