"""Query sets: ``assets/queries/<db_id>.yaml`` holds questions with their SQL; types and difficulty are derived."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ctxbench.core.config import assets_dir, check_keys, read_yaml
from ctxbench.core.errors import InputError
from ctxbench.verbalize.templates import TemplateSet
from ctxbench.questions.sqlinfo import sql_info


@dataclass
class Question:
    """One natural-language question and its SQL; ``info`` is :func:`sql_info` of the SQL."""

    id: str
    question: str
    sql: str
    info: dict = field(default_factory=dict)


QUERYSET_KEYS = ("db_id", "questions", "templates", "generator", "report", "source")  # top-level keys of a query set


def read_queryset_file(p: Path) -> dict:
    """The top-level mapping of the query set file ``p``. Raises InputError naming the file, with the line and
    column of a YAML syntax error, and an unknown top-level key with the one it probably meant
    (:data:`QUERYSET_KEYS`; ``question:`` for ``questions:``)."""
    data = read_yaml(p, "query set") or {}
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a 'questions' list under the top-level mapping (questions: [{{id, "
                         f"question, sql}}]), found a {type(data).__name__}")
    check_keys(data, QUERYSET_KEYS, p)
    return data


def load_queryset(db_id: str, path: str | Path | None = None) -> list[Question]:
    """Load ``assets/queries/<db_id>.yaml`` (or ``path``): ``questions: [{id, question, sql}, ...]``.

    Raises InputError when the file is absent or not valid YAML (naming line and column), a top-level key is
    unknown, a question lacks a field, ids repeat, or an SQL does not parse.
    """
    p = Path(path) if path else assets_dir() / "queries" / f"{db_id}.yaml"
    if not p.exists():
        raise InputError(f"no query set for database {db_id!r}: write {p} (questions: [{{id, question, sql}}]) "
                         f"or pass --queries")
    data = read_queryset_file(p)
    items = data.get("questions")
    if not items:
        raise InputError(f"{p}: expected a 'questions' list")
    out, seen, texts = [], set(), {}
    for i, q in enumerate(items):
        if not isinstance(q, dict) or not all(isinstance(q.get(k), str) and q[k].strip() for k in ("question", "sql")):
            raise InputError(f"{p}: question {i + 1} needs 'question' and 'sql' as text")
        qid = str(q.get("id") or f"q{i + 1:02d}")
        if qid in seen:
            raise InputError(f"{p}: question id {qid!r} is used twice")
        seen.add(qid)
        text = " ".join(str(q["question"]).split())
        if text in texts:
            raise InputError(f"{p}: questions {texts[text]!r} and {qid!r} have the same text; each question must be "
                             f"distinct (identical prompts would share one model answer)")
        texts[text] = qid
        try:
            info = sql_info(q["sql"])
        except InputError as e:
            raise InputError(f"{p}: question {qid!r}: {e}") from None
        out.append(Question(qid, str(q["question"]).strip(), " ".join(str(q["sql"]).split()), info))
    return out


def check_question(q: Question, tables: dict[str, list[str]], templates: TemplateSet) -> None:
    """Check that a question's SQL reads only tables of the preprocessed database and only columns that *every*
    template of their table states (otherwise the gold answer could depend on facts absent from the text).

    ``tables`` maps preprocessed table names to their columns. Raises InputError naming question, table and column.
    """
    low_tables = {t.lower(): t for t in tables}
    schema = {t: cols for t, cols in tables.items()}
    info = sql_info(q.sql, schema)
    q.info = info
    if not info["tables"]:
        raise InputError(f"question {q.id!r}: its SQL reads no table ({q.sql}); a question must read the database")
    for t in info["tables"]:
        if t not in low_tables:
            raise InputError(f"question {q.id!r}: SQL reads table {t!r}, which is not in the preprocessed database "
                             f"(tables: {', '.join(tables)})")
    for c in info["columns"]:
        if "." not in c:
            owners = [t for t in info["tables"] if c in {x.lower() for x in tables[low_tables[t]]}]
            if not owners:
                raise InputError(f"question {q.id!r}: column {c!r} is in none of its tables {info['tables']}")
            continue
        t, col = c.split(".", 1)
        if t not in low_tables:
            raise InputError(f"question {q.id!r}: column {c!r} names unknown table {t!r}")
        real = low_tables[t]
        if col not in {x.lower() for x in tables[real]}:
            raise InputError(f"question {q.id!r}: table {real!r} has no column {col!r} "
                             f"(columns: {', '.join(tables[real])})")
        common = {x.lower() for x in templates.common_columns(real)}
        if col not in common:
            exact = next(x for x in tables[real] if x.lower() == col)
            raise InputError(f"question {q.id!r}: column {real}.{exact} is not stated by every template of {real!r}; "
                             f"add {{{exact}}} to each template in {templates.path}")


def check_runs(q: Question, con: sqlite3.Connection) -> None:
    """Compile the SQL against the full preprocessed database (SQLite's ``EXPLAIN``: every table, column and
    function name is resolved, nothing is executed, so a query over 336,776 flights costs no scan). Raises
    InputError with SQLite's message. An error SQLite raises only while running (an integer overflow) is met when
    the gold is computed on a context's rows, where it quarantines that instance."""
    try:
        con.execute("EXPLAIN " + q.sql).fetchall()
    except sqlite3.Error as e:
        raise InputError(f"question {q.id!r}: SQL fails on the preprocessed database: {e} ({q.sql})") from None
