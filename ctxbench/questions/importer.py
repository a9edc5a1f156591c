"""Import text-to-SQL question sets (Spider, BIRD) as query sets for the verbalized-database track (issue 14,
part 1).

Input: a JSON list of objects with ``db_id``, ``question`` and the SQL under ``query`` (Spider, Yu et al. 2018) or
``SQL`` (BIRD, Li et al. 2023), and BIRD's ``evidence`` (external knowledge: appended to the question asked,
``"<question> (External knowledge: <evidence>)"``, and kept in the report); JSON Lines (one object a line) too,
with or without a UTF-8 byte-order mark. A blank question or SQL, a non-text field, a line that is not JSON and a
question reading one of the database's views (the import reads tables only) or a column of binary data (BLOBs
that are not text: NULL by the value rule) are report lines with their reason;
the databases under ``DIR/<db_id>/<db_id>.sqlite`` (Spider's layout; its
``tables.json`` two levels above ``DIR/<db_id>`` gives the keys when present).

Each question's SQL is read as SQLite SQL and answered by the gold engine (:func:`ctxbench.gold.compute_gold`) on
the *full* database after the source's value rule (whitespace stripped, ``'NULL'`` text is NULL, numbers stored as
text become numbers: :func:`ctxbench.sources.preprocess.normalize_database`). A question is accepted when that
answer is unambiguous by the gold rules: the engines agree under the SQL's own dialect, no tie at a LIMIT or in an
ordered answer, no dependence on NULL order or on an unordered row choice, not empty, not NULL, deterministic.

Output (``OUT``):

* ``<db_id>.yaml``: the accepted questions as a query set that ``ctxbench build holobench --queries`` reads
  (``id``, ``question``, ``sql`` exactly as given, ``query_types`` and ``difficulty`` derived by
  :func:`ctxbench.questions.sqlinfo.sql_info`). A question whose text repeats an earlier accepted one of the same
  database is written once (a query set's questions are distinct). For a database without
  ``assets/templates/<db_id>.yaml`` the file carries a ``templates:`` section (as ``ctxbench questions generate``
  writes one): the generated templates (:func:`ctxbench.verbalize.generate.generate_templates`), each table's also
  stating every column of the prepared database that the questions read (a foreign key the build resolves to the
  referenced row's name is no longer there: the question is then not buildable). Only questions the build can ask are written: each is checked as the build checks it (tables and
  columns of the database as the build prepares it: identifiers resolved to names, columns renamed, incomplete
  rows dropped; every column it reads stated by every template of its table) and answered again by the gold
  engine on that database; one that fails stays ``accepted`` (its answer on the full database is unambiguous)
  but gets ``id`` null and a ``note`` starting ``not buildable:`` with the reason.
* ``import_report.jsonl``: one JSON line per input, in input order: ``db_id``, ``question``, ``sql`` (the input
  SQL exactly as given), ``accepted``, ``reason`` (null, or why it was rejected), ``answer`` (rows of values in
  SELECT order; null when rejected), plus ``index`` (position in the input), ``id`` (its id in the query set; null
  when not written) and ``reason_kind`` (the rejection's class: ``tie``, ``null_order``, ``empty``, ...).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ctxbench.core.errors import InputError
from ctxbench.gold import GoldEngines, compute_gold
from ctxbench.gold.checks import INTEGER_DIVISION
from ctxbench.gold.compare import equal_in_tie_groups, sort_key
from ctxbench.sources import load_database
from ctxbench.sources.database import Database, looks_numeric, sql_type, write_sqlite
from ctxbench.sources.preprocess import DatabaseSpec, normalize_database, normalize_value, preprocess
from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.questions.queryset import Question, check_question, check_runs
from ctxbench.questions.sqlinfo import sql_info
from ctxbench.core.config import assets_dir
from ctxbench.core.outdir import claim_out_dir
from ctxbench.gold.dialect import parse_sqlite
from ctxbench.verbalize.generate import generate_templates, table_templates
from ctxbench.verbalize.templates import TemplateSet, load_templates

REPORT = "import_report.jsonl"

# rejection classes, by how the gold engine's reason starts (ctxbench.gold.execute, ctxbench.gold.checks)
REASON_KINDS = [
    ("non-deterministic SQL", "nondeterministic"),
    ("numbers stored as text", "numbers_as_text"),
    ("tie", "tie"),
    ("answer depends on NULL ordering", "null_order"),
    ("bare column", "bare_column"),
    ("answer depends on the order of rows", "row_order"),
    ("empty gold answer", "empty"),
    ("gold answer is NULL", "null_answer"),
    ("NULL comparison", "null_comparison"),
    ("integer division", "integer_division"),
    ("value rule changes the answer: stripped text", "stripped_text"),
    ("value rule changes the answer", "value_rule"),
    ("collation", "collation"),
    ("SQLite and DuckDB disagree", "engines_disagree"),
    ("SQLite cannot run", "sql_error"),
    ("SQL does not parse", "sql_error"),
    ("expected exactly one SQL statement", "sql_error"),
    ("only SELECT", "sql_error"),
    ("SQL must be text", "bad_input"),
    ("DuckDB cannot run", "transpilation"),
]


def reason_kind(reason: str | None) -> str | None:
    """The class of a rejection reason (``tie``, ``null_order``, ``empty``, ...; ``other`` if unknown)."""
    if reason is None:
        return None
    for prefix, kind in REASON_KINDS:
        if reason.startswith(prefix):
            return kind
    return "other"


@dataclass
class ImportResult:
    """``report``: the report lines in input order; ``written``: db_id -> query-set path; ``counts``."""

    report: list[dict]
    written: dict[str, Path] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, Any]:
        acc = sum(1 for r in self.report if r["accepted"])
        return {"inputs": len(self.report), "accepted": acc, "rejected": len(self.report) - acc,
                "written": sum(1 for r in self.report if r["id"]),
                "not_buildable": sum(1 for r in self.report if str(r.get("note") or "").startswith("not buildable")),
                "by_reason": dict(Counter(r["reason_kind"] for r in self.report if not r["accepted"]).most_common())}


class BadLine(str):
    """One line of a JSON Lines question file that is not JSON (its text is why): reported, never dropped."""


def read_question_file(path: str | Path) -> list[Any]:
    """The questions of a Spider/BIRD question file: a JSON list (Spider's and BIRD's ``dev.json``), or JSON Lines
    (one object a line), read as UTF-8 with or without a byte-order mark. A JSON Lines line that is not JSON is kept
    as a :class:`BadLine` (reported as a bad input, never silently lost). Raises InputError when the file is
    missing, empty, not JSON, or JSON that is not a list."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"question file {p} does not exist: pass a Spider-format JSON file (--spider)")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{p} is not UTF-8 text ({e}): pass Spider's dev.json/train_spider.json or BIRD's "
                         f"dev.json") from None
    if not text.strip():
        raise InputError(f"{p} is empty: expected a JSON list of questions [{{\"db_id\", \"question\", "
                         f"\"query\"}}, ...]")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        lines = [x for x in text.splitlines() if x.strip()]
        if p.suffix.lower() in (".jsonl", ".ndjson") or (
                e.msg == "Extra data" and lines and lines[0].lstrip().startswith("{")):
            return [_json_line(x, n) for n, x in enumerate(text.splitlines(), 1) if x.strip()]
        raise InputError(f"{p} is not a JSON file ({type(e).__name__}: {e}): pass Spider's dev.json/train_spider.json "
                         f"or BIRD's dev.json") from None
    if not isinstance(data, list):
        raise InputError(f"{p} holds a JSON {type(data).__name__}, not a list of questions: expected "
                         f"[{{\"db_id\", \"question\", \"query\"}}, ...]")
    return data


def _json_line(text: str, n: int) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        return BadLine(f"line {n} is not JSON ({e.msg} at column {e.colno}): fix or remove it")


def _fields(item: Any) -> tuple[str | None, str | None, Any, str | None]:
    """(db_id, question, sql, problem) of one input object."""
    if isinstance(item, BadLine):
        return None, None, None, str(item)
    if not isinstance(item, dict):
        return None, None, None, f"input is a JSON {type(item).__name__}, not an object with db_id, question, query"
    db_id, question = item.get("db_id"), item.get("question")
    sql = item["query"] if item.get("query") is not None else item.get("SQL")
    missing = [k for k, v in (("db_id", db_id), ("question", question), ("query (or SQL)", sql))
               if v is None or (isinstance(v, str) and not v.strip())]
    if missing:
        return db_id, question, sql, f"input lacks {', '.join(missing)} (or it is blank)"
    if not isinstance(db_id, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", db_id) or db_id in (".", ".."):
        return None, question, sql, f"db_id {db_id!r} is not a database name"
    if not isinstance(question, str):
        return db_id, None, sql, f"question is a JSON {type(question).__name__}, not text"
    ev = item.get("evidence")
    if ev is not None and not isinstance(ev, str):
        return db_id, question, sql, f"evidence is a JSON {type(ev).__name__}, not text (BIRD's evidence is a string)"
    return db_id, question, sql, None


def asked_text(question: str, evidence: Any) -> str:
    """The question a model is asked: the input question, followed by BIRD's ``evidence`` (the external knowledge
    BIRD gives with each question, Li et al. 2023 section 2) when the input has one."""
    q = question.strip()
    ev = evidence.strip() if isinstance(evidence, str) else ""
    return f"{q} (External knowledge: {ev})" if ev else q


def gold_tables_of(db: Database) -> dict[str, tuple[list[str], list[str], list[tuple]]]:
    """A database in the shape :func:`ctxbench.gold.compute_gold` takes: each column's declared type (SQLite's
    type affinity then stores its values as sqlite3 does: ``trip.zip_code`` INTEGER keeps ``94107`` a number and
    ``'nil'`` text), the type of its values where none is declared."""
    return {n: (t.columns, [t.types[i] if i < len(t.types) and t.types[i] else sql_type([r[i] for r in t.rows])
                            for i in range(len(t.columns))], t.rows)
            for n, t in db.tables.items()}


@dataclass
class PreparedDatabase:
    """One database prepared once for every question of an import that reads it: the source as loaded (``raw``),
    its value-rule form (``normalized``: :func:`normalize_database`'s triple), the gold engines loaded with it
    (``engines``, shared by the questions) and a read-only sqlite3 connection to the original file
    (``original``), on which every accepted answer is checked."""

    path: Path
    raw: Database
    normalized: tuple[Database, list[dict], list[dict]]
    tables: dict
    engines: GoldEngines
    original: sqlite3.Connection
    views: dict[str, str]

    @property
    def made_null(self) -> dict[str, int]:
        return self.normalized[0].provenance.get("made_null", {})

    def close(self) -> None:
        self.engines.close()
        self.original.close()


def _load(db_dir: Path, db_id: str, seed: int = 0) -> tuple[PreparedDatabase | None, str | None]:
    path = db_dir / db_id / f"{db_id}.sqlite"
    if not path.is_file():
        return None, f"database {path} not found (expected DIR/<db_id>/<db_id>.sqlite)"
    try:
        raw = load_database(path)
        normalized = normalize_database(raw)
    except InputError as e:
        return None, f"database {path} cannot be read: {e}"
    tables = gold_tables_of(normalized[0])
    original = open_sqlite_readonly(path, check_same_thread=False)
    return PreparedDatabase(path, raw, normalized, tables, GoldEngines(tables, seed), original, _views(path)), None


# how far an answer on the value rule's database may be from sqlite3's on the original file: floats are rounded to
# 4 decimal places by the value rule, so an aggregate over them moves by about that much
ORIGINAL_TOL = 1e-4
ORIGINAL_TIMEOUT_S = 60.0


def _shown(v: Any) -> Any:
    """A value of sqlite3's answer on the original file as the value rule shows it (text stripped, ``''`` and
    ``'NULL'`` text as NULL, floats to 4 places, numeric text as its number): only how a value is shown differs."""
    v = normalize_value(v)
    if isinstance(v, str) and looks_numeric(v):
        n = float(v)
        return int(n) if n.is_integer() and abs(n) < 2**53 else n
    return v


def _same_value(a: Any, b: Any) -> bool:
    a, b = _shown(a), _shown(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=ORIGINAL_TOL, abs_tol=ORIGINAL_TOL)
    return str(a) == str(b)


def same_as_original(gold: list[list[Any]], original: list[tuple], ordered: bool,
                     tie_groups: list[int] | None = None) -> bool:
    """Whether ``gold`` (the accepted answer) equals ``original`` (sqlite3's rows on the original database file)
    except in how projected values are shown (:func:`_shown`), as lists when ``ordered`` else as multisets; numbers
    within a relative (or absolute) 1e-4. ``tie_groups`` (an ordered answer's :func:`ctxbench.gold.compare.tie_groups`,
    the gold engine's ``detail["tie_groups"]``): rows tied on the ORDER BY keys are compared as multisets inside
    their group, exactly as the build's gold check compares the two engines (:func:`~ctxbench.gold.compare.
    equal_in_tie_groups`): sqlite3 may order two equal averages the other way round."""
    if len(gold) != len(original):
        return False
    a = [[_shown(v) for v in r] for r in gold]
    b = [[_shown(v) for v in r] for r in original]
    if ordered and tie_groups is not None and len(tie_groups) == len(a):
        return equal_in_tie_groups(a, b, tie_groups, _same_rows)
    return _same_rows(a, b, ordered)


def _same_rows(a: list[list[Any]], b: list[list[Any]], ordered: bool) -> bool:
    if len(a) != len(b):
        return False
    if not ordered:
        a, b = sorted(a, key=sort_key), sorted(b, key=sort_key)
    return all(len(x) == len(y) and all(_same_value(p, q) for p, q in zip(x, y)) for x, y in zip(a, b))


def original_answer(con: sqlite3.Connection, sql: str, timeout_s: float = ORIGINAL_TIMEOUT_S) -> list[tuple]:
    """sqlite3's answer to ``sql`` on the original database file (``con``: read-only). Raises sqlite3.Error when
    sqlite3 cannot run it (or it runs longer than ``timeout_s``: interrupted)."""
    import time
    end = time.monotonic() + timeout_s
    con.set_progress_handler(lambda: 1 if time.monotonic() > end else 0, 100_000)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.set_progress_handler(None, 0)


def check_original(sql: str, gold: list[list[Any]], db: PreparedDatabase,
                   tie_groups: list[int] | None = None) -> str | None:
    """None when the accepted ``gold`` answer equals sqlite3's on the original file (:func:`same_as_original`),
    else the rejection reason: ``numbers stored as text: ...`` when the SQL reads a column the value rule turned
    from numeric text into numbers (sqlite3 compares the text), ``value rule changes the answer: ...`` otherwise.
    ``tie_groups``: the gold's tie groups (:func:`same_as_original`); rows that differ only in their order inside
    a tie are the same answer. Each reason names its cause with a value of the database itself (a padded text, a
    converted number, a text the rule made NULL)."""
    try:
        orig = original_answer(db.original, sql)
    except sqlite3.Error as e:
        return f"value rule changes the answer: sqlite3 cannot run the SQL on the original file {db.path.name} ({e})"
    try:
        ordered = parse_ordered(sql)
    except InputError:
        ordered = False
    if same_as_original(gold, orig, ordered, tie_groups):
        return None
    read = _columns_read(sql, db.tables)
    converted = sorted(c["column"] for c in db.normalized[1] if c["column"].lower() in read)
    shown = [list(r) for r in orig[:3]]
    if converted:
        ex = _example(db, converted, lambda v: isinstance(v, str) and looks_numeric(v))
        return (f"numbers stored as text: sqlite3 on the original file compares {', '.join(converted)} as text "
                f"({ex}) (answer {shown}{'...' if len(orig) > 3 else ''}, {len(orig)} row(s)), the value rule's "
                f"database as numbers ({gold[:3]}, {len(gold)} row(s)); CAST the column in the SQL to ask for the "
                f"numbers")
    # a difference no column explains is named below
    orig_txt = f"{shown}{'...' if len(orig) > 3 else ''} ({len(orig)} row(s))"
    gold_txt = f"{gold[:3]}{'...' if len(gold) > 3 else ''} ({len(gold)} row(s))"
    nulled = sorted(k for k in db.made_null if k.lower() in read)
    if nulled:
        ex = _example(db, nulled, lambda v: isinstance(v, str) and normalize_value(v) is None)
        return (f"NULL comparison: {', '.join(nulled)}: the value rule made empty text (or 'NULL' text) NULL "
                f"({ex}), and the SQL reads it otherwise than sqlite3 reads the text on the original file "
                f"{db.path.name} (sqlite3: {orig_txt}; after the rule: {gold_txt})")
    padded = sorted(k for k in db.normalized[0].provenance.get("stripped", {}) if k.lower() in read)
    if padded:
        ex = _example(db, padded, lambda v: isinstance(v, str) and normalize_value(v) not in (None, v))
        return (f"value rule changes the answer: stripped text: {', '.join(padded)} hold(s) text with leading or "
                f"trailing spaces (or line breaks) in {db.path.name} ({ex}), which the value rule strips, so the "
                f"SQL matches rows that sqlite3 does not match on the original file (sqlite3: {orig_txt}; after "
                f"the rule: {gold_txt}); compare with TRIM(column) in the SQL")
    return (f"value rule changes the answer: sqlite3 on the original file {db.path.name} gives {orig_txt}, the "
            f"database after the value rule (floats rounded to 4 places, whitespace stripped) {gold_txt}")


def _example(db: PreparedDatabase, columns: list[str], test) -> str:
    """A real value of ``db``'s original rows (``db.raw``) in one of ``columns`` (``table.column``) for which
    ``test(value)`` holds, written ``table.column holds 'value'`` (the first such value in row order of the first
    column that has one); ``no example found`` when none does."""
    for full in columns:
        t, _, c = full.partition(".")
        try:
            table = db.raw.table(t)
            i = table.column_index(c)
        except KeyError:
            continue
        for r in table.rows:
            if test(r[i]):
                return f"{table.name}.{table.columns[i]} holds {r[i]!r}"
    return "no example found"


def parse_ordered(sql: str) -> bool:
    """Whether the SQL's answer is ordered (a top-level ORDER BY). Raises InputError when it does not parse."""
    return parse_sqlite(sql).args.get("order") is not None


def _columns_read(sql: str, tables: dict) -> set[str]:
    """Lower-case ``table.column`` of every column the SQL reads (every table it reads for an unqualified one)."""
    try:
        info = sql_info(sql, {n: cols for n, (cols, _, _) in tables.items()})
    except InputError:
        return set()
    out = set()
    for c in info["columns"]:
        out |= {c.lower()} if "." in c else {f"{t}.{c}".lower() for t in info["tables"]}
    low = {n.lower(): n for n in tables}
    return {f"{low.get(x.split('.', 1)[0], x.split('.', 1)[0])}.{x.split('.', 1)[1]}".lower() for x in out}


def _binary_read(sql: str, tables: dict, binary: list[dict]) -> str | None:
    """The binary (non-text BLOB) column an SQL reads, as ``table.column``, or None."""
    if not binary:
        return None
    try:
        info = sql_info(sql, {n: cols for n, (cols, _, _) in tables.items()})
    except InputError:
        return None
    low = {b["column"].lower(): b["column"] for b in binary}
    for c in info["columns"]:
        for full in ([c] if "." in c else [f"{t}.{c}" for t in info["tables"]]):
            if full in low:
                return low[full]
    return None


def _views(path: Path) -> dict[str, str]:
    """The views of a SQLite file: name -> CREATE VIEW statement (the loader reads tables only)."""
    try:
        con = open_sqlite_readonly(path)
    except InputError:
        return {}
    try:
        return {n: " ".join(str(q).split()) for n, q in
                con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'")}
    except sqlite3.Error:
        return {}
    finally:
        con.close()


def _view_read(reason: str | None, views: dict[str, str]) -> str | None:
    """The view an engine's 'no such table' error names, when it is one of the database's views."""
    m = re.search(r"no such table: (?:\w+\.)?(.+?)\s*$", reason or "")
    low = {v.lower(): v for v in views}
    return low.get(m.group(1).strip().lower()) if m else None


def _finite(rows: list[list[Any]]) -> list[list[Any]]:
    """Rows with non-finite floats written as text (JSON has no NaN or infinity)."""
    return [[str(v) if isinstance(v, float) and not math.isfinite(v) else v for v in r] for r in rows]


def _yaml_dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def _templates_for(raw: Database, spec: DatabaseSpec, qs: list[dict], normalized: tuple | None = None
                   ) -> tuple[Any, dict[str, list[str]] | None]:
    """(TemplateSet the build will use, generated templates to write or None when the database ships its own)."""
    if (assets_dir() / "templates" / f"{raw.db_id}.yaml").exists():
        return load_templates(raw.db_id), None
    gen = generate_templates(raw, spec)
    full = preprocess(raw, None, spec, normalized=normalized).db
    low = {n.lower(): n for n in full.tables}
    cols: dict[str, set[str]] = {n: set(c) for n, c in gen.columns.items()}
    for q in qs:
        try:
            info = sql_info(q["sql"], {n: t.columns for n, t in full.tables.items()})
        except InputError:
            continue
        for c in info["columns"]:
            if "." in c:
                owners, col = [c.split(".", 1)[0]], c.split(".", 1)[1]
            else:
                owners, col = list(info["tables"]), c
            for t in owners:
                name = low.get(t)
                prof = gen.profiles.get(name) if name else None
                real = next((x for x in full.tables[name].columns if x.lower() == col), None) if name else None
                if real is None or prof is None or real not in prof.columns:
                    continue
                cols.setdefault(name, set(prof.label)).add(real)
    templates = {}
    for n in full.tables:
        if n in cols and [c for c in cols[n] if c not in gen.profiles[n].label]:
            templates[n] = table_templates(gen.profiles[n], sorted(cols[n], key=full.tables[n].columns.index))
    if not templates:
        raise InputError(f"database {raw.db_id!r}: no table has a column to state besides its identifiers and names")
    return TemplateSet(raw.db_id, templates, path="the templates: section"), templates


def _buildable(db: PreparedDatabase, qs: list[dict], seed: int, integer_division: str = "exact"
               ) -> tuple[dict[str, list[str]] | None, dict[str, str]]:
    """Check the accepted questions of one database (prepared once: :class:`PreparedDatabase`) as the build will
    (module docstring). Returns the generated templates (None when the database ships its own) and ``{question id:
    why it cannot be built}``."""
    import tempfile

    raw = db.raw
    spec = DatabaseSpec.load(raw.db_id)
    ts, generated = _templates_for(raw, spec, qs, db.normalized)
    pre = preprocess(raw, {t: ts.columns(t) for t in ts.templates if t in raw.tables}, spec, normalized=db.normalized)
    ts.check({n: t.columns for n, t in pre.db.tables.items()})
    tables = {n: t.columns for n, t in pre.db.tables.items()}
    gold_tables = gold_tables_of(pre.db)
    why: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as d, GoldEngines(gold_tables, seed) as engines:
        write_sqlite(pre.db, Path(d) / "source.sqlite")
        con = open_sqlite_readonly(Path(d) / "source.sqlite", what="prepared database", check=False)
        try:
            for q in qs:
                question = Question(q["id"], q["question"], " ".join(q["sql"].split()))
                try:
                    check_question(question, tables, ts)
                    check_runs(question, con)
                except InputError as e:
                    why[q["id"]] = str(e).replace(f"question {q['id']!r}: ", "", 1)
                    continue
                g = compute_gold(q["sql"], gold_tables, seed=seed, engines=engines, null_columns=pre.made_null,
                                 integer_division=integer_division)
                if not g.ok:
                    why[q["id"]] = f"on the database as the build prepares it: {g.reason}"
        finally:
            con.close()
    return generated, why


def import_questions(spider: str | Path, db_dir: str | Path, out: str | Path, seed: int = 0,
                     integer_division: str = "exact", force: bool = False) -> ImportResult:
    """Import the Spider/BIRD question file ``spider`` for the databases under ``db_dir`` into ``out`` (module
    docstring). Returns the report and the query sets written.

    Each database is prepared once (:class:`PreparedDatabase`: loaded, the value rule applied, the gold engines
    loaded) and shared by all its questions. ``integer_division``: ``"exact"`` rejects an answer SQLite's integer
    division truncates, ``"sqlite"`` keeps it (:func:`ctxbench.gold.compute_gold`); recorded in each query set's
    ``source``. Raises InputError when the question file cannot be read, ``db_dir`` is not a directory,
    ``integer_division`` is unknown or ``out`` holds anything but an earlier import (unless ``force``;
    ctxbench.core.outdir); a bad question, a missing database or an SQL the engines reject is a report
    line with its reason (the rest goes on).
    """
    spider, db_dir, out = Path(spider), Path(db_dir), Path(out)
    if integer_division not in INTEGER_DIVISION:
        raise InputError(f"--integer-division {integer_division!r}: use one of {', '.join(INTEGER_DIVISION)}")
    items = read_question_file(spider)
    if not db_dir.is_dir():
        raise InputError(f"--db-dir {db_dir} is not a directory: pass the directory holding <db_id>/<db_id>.sqlite")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file: pass a directory for the query sets and the report")

    # the rule of every --out (ctxbench.core.outdir): an earlier import (its report) is written again, nothing else
    claim_out_dir(out, "questions import", force=force, is_own=(out / REPORT).exists(), what="question import")
    stem = re.sub(r"[^A-Za-z0-9]+", "_", spider.stem).strip("_") or "q"
    dbs: dict[str, tuple[PreparedDatabase | None, str | None]] = {}
    try:
        return _import(items, spider, db_dir, out, seed, integer_division, stem, dbs)
    finally:
        for db, _ in dbs.values():
            if db is not None:
                db.close()


def _import(items: list, spider: Path, db_dir: Path, out: Path, seed: int, integer_division: str, stem: str,
            dbs: dict) -> ImportResult:
    report: list[dict] = []
    sets: dict[str, list[dict]] = {}
    texts: dict[tuple[str, str], str] = {}
    written: dict[str, Path] = {}
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(spider.read_bytes()).hexdigest()
    by_id: dict[str, dict] = {}
    last = {}
    for i, item in enumerate(items):
        last[_fields(item)[0]] = i

    def written_db(db_id: str) -> None:
        """Check one database's accepted questions as the build will, write its query set, free the database."""
        qs = sets.pop(db_id, [])
        db = dbs[db_id][0]
        if qs:
            try:
                generated, why = _buildable(db, qs, seed, integer_division)
            except InputError as e:  # the database cannot be prepared as a build prepares it: none is buildable
                generated, why = None, {q["id"]: f"the build cannot prepare database {db_id!r}: {e}" for q in qs}
            for qid, reason in why.items():
                by_id[qid].update(id=None, note=f"not buildable: {reason}")
            qs = [q for q in qs if q["id"] not in why]
        if qs:
            doc = {"db_id": db_id,
                   "source": {"file": spider.name, "sha256": digest, "format": "spider/bird", "imported_by":
                              "ctxbench questions import", "numbers_from_text": db.normalized[1],
                              "integer_division": integer_division},
                   "questions": qs}
            if generated:
                doc["templates"] = generated
            head = (f"# Questions imported from {spider.name} for {db_id}: accepted when their answer on the full "
                    f"database is\n# unambiguous and equals sqlite3's on the original file (ctxbench.questions."
                    f"importer); SQL exactly as given, read as SQLite SQL.\n"
                    + ("# Templates generated from the schema (templates: below): review them before publishing "
                       "results.\n" if generated else ""))
            p = out / f"{db_id}.yaml"
            tmp = p.with_name(p.name + ".tmp")
            tmp.write_text(head + _yaml_dump(doc), encoding="utf-8")
            tmp.replace(p)
            written[db_id] = p
        if db is not None:
            db.close()
        dbs[db_id] = (None, "closed")

    for i, item in enumerate(items):
        try:
            db_id, question, sql, problem = _fields(item)
            line = {"db_id": db_id, "question": question, "sql": sql, "accepted": False, "reason": problem,
                    "answer": None, "index": i, "id": None, "reason_kind": "bad_input" if problem else None}
            evidence = item.get("evidence") if isinstance(item, dict) else None
            if isinstance(evidence, str) and evidence.strip():
                line["evidence"] = evidence
            report.append(line)
            if problem is not None:
                continue
            if db_id not in dbs:
                dbs[db_id] = _load(db_dir, db_id, seed)
            db, why = dbs[db_id]
            if db is None:
                line.update(reason=why, reason_kind="missing_database")
                continue
            tables = db.tables
            blob = _binary_read(sql, tables, db.normalized[0].provenance.get("binary_values", [])) \
                if isinstance(sql, str) else None
            if blob:
                line.update(reason=f"SQL reads column {blob!r}, which holds binary data (BLOB values that are not "
                                   f"text): a verbalized context cannot state them; ask about another column",
                            reason_kind="binary_column")
                continue
            g = compute_gold(sql, tables, seed=seed, engines=db.engines, null_columns=db.made_null,
                             integer_division=integer_division)
            if g.ok:
                differs = check_original(sql, g.rows, db, g.detail.get("tie_groups"))
                if differs:
                    g = type(g)(None, False, differs)
            if not g.ok:
                view = _view_read(g.reason, db.views)
                if view:
                    line.update(reason=f"SQL reads view {view!r}: the import reads the database's tables only (a "
                                       f"verbalized database states table rows); rewrite the SQL over the tables of the "
                                       f"view's definition: {db.views[view]}", reason_kind="view")
                else:
                    line.update(reason=g.reason, reason_kind=reason_kind(g.reason))
                continue
            info = sql_info(sql, {n: cols for n, (cols, _, _) in tables.items()})
            line.update(accepted=True, answer=_finite(g.rows))
            asked = asked_text(question, evidence)
            key = (db_id, " ".join(asked.split()))
            if key in texts:
                line["note"] = f"same question text as {texts[key]}: written once"
                continue
            qid = f"{db_id}-{stem}-{i:04d}"
            texts[key] = line["id"] = qid
            by_id[qid] = line
            sets.setdefault(db_id, []).append({"id": qid, "question": asked, "sql": sql,
                                               "query_types": info["query_types"], "difficulty": info["difficulty"]})
        finally:  # a database's last question: its query set is written and the database freed
            if last.get(db_id) == i and db_id in dbs and dbs[db_id][0] is not None:
                written_db(db_id)

    for db_id in [d for d, (db, _) in dbs.items() if db is not None]:
        written_db(db_id)
    rp = out / REPORT
    tmp = rp.with_name(rp.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for line in report:
            f.write(json.dumps(line, ensure_ascii=False, allow_nan=False, default=str) + "\n")
    tmp.replace(rp)
    return ImportResult(report, written)
