"""In-memory relational database: tables of Python rows plus primary and foreign keys."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ForeignKey:
    """``table.column`` references ``ref_table.ref_column``."""

    table: str
    column: str
    ref_table: str
    ref_column: str


@dataclass
class Table:
    """A table: column names, their declared SQL types (with the column's ``COLLATE NOCASE``/``RTRIM`` clause where
    it declares one: :func:`with_collation`), rows as tuples (Python values), primary-key columns."""

    name: str
    columns: list[str]
    rows: list[tuple]
    types: list[str] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)

    def column_index(self, column: str) -> int:
        """Index of ``column`` (case-insensitive). Raises KeyError naming the table when absent."""
        low = [c.lower() for c in self.columns]
        try:
            return low.index(column.lower())
        except ValueError:
            raise KeyError(f"table {self.name!r} has no column {column!r} (columns: {', '.join(self.columns)})") from None


@dataclass
class Database:
    """A database: ``db_id``, tables by name, foreign keys, and provenance (where it came from)."""

    db_id: str
    tables: dict[str, Table]
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> Table:
        """Table by name (case-insensitive). Raises KeyError naming the database when absent."""
        for t in self.tables.values():
            if t.name.lower() == name.lower():
                return t
        raise KeyError(f"database {self.db_id!r} has no table {name!r} (tables: {', '.join(self.tables)})")


def quote_ident(name: str) -> str:
    """A quoted SQL identifier (SQLite and DuckDB): ``we"ird`` → ``"we""ird"``."""
    return '"' + name.replace('"', '""') + '"'


# SQLite's well-formed integer and real literals ("Datatypes In SQLite" section 3, NUMERIC affinity): optional sign,
# digits with an optional decimal point (or a leading point), optional exponent; surrounding spaces allowed.
# Hexadecimal literals are not converted by type affinity, so they are not numbers here either.
_SQLITE_NUMBER = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*\Z")


def looks_numeric(v: Any) -> bool:
    """Whether ``v`` is text that SQLite's NUMERIC type affinity would store as a number (``'2014'``, ``' 9 '``,
    ``'-3.5e2'``; not ``'0x1A'``, ``'94040-1724'``, ``'1,234'``). Source: SQLite, "Datatypes In SQLite" section 3."""
    return isinstance(v, str) and _SQLITE_NUMBER.match(v) is not None


def sqlite_numbers(texts: list[str]) -> list[Any]:
    """``texts`` as SQLite's NUMERIC affinity stores them: INTEGER where the text is an integer (or a real literal
    that is an exact integer, e.g. ``'3.0e2'`` -> 300), else REAL; text that is not a number stays text.

    The conversion is SQLite's own: the values are inserted into a NUMERIC column of an in-memory database and
    read back (SQLite, "Datatypes In SQLite" section 3.1)."""
    con = sqlite3.connect(":memory:")
    try:
        con.execute("CREATE TABLE n (v NUMERIC)")
        con.executemany("INSERT INTO n VALUES (?)", [(t,) for t in texts])
        return [r[0] for r in con.execute("SELECT v FROM n ORDER BY rowid")]
    finally:
        con.close()


def sql_type(values: list[Any], declared: str = "") -> str:
    """SQLite column type for a column: INTEGER, REAL or TEXT, from the values present (declared type as a tie-break)."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return declared or "TEXT"
    if kinds <= {int, bool}:
        return "INTEGER"
    if kinds <= {int, float, bool}:
        return "REAL"
    return "TEXT"


def write_sqlite(db: Database, path: str | Path) -> None:
    """Write ``db`` to a new SQLite file at ``path``; each table's rowids are 1..n in row order.

    The file is written to a temporary name and renamed, so a killed build never leaves a half-written file.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    con = sqlite3.connect(tmp)
    try:
        for t in db.tables.values():
            # declared types as given (SQLite applies their affinity to the rows); from the values where none is
            types = [(t.types[i] if i < len(t.types) and t.types[i] else sql_type([r[i] for r in t.rows]))
                     for i in range(len(t.columns))]
            cols = ", ".join(f"{quote_ident(c)} {ty}" for c, ty in zip(t.columns, types))
            con.execute(f"CREATE TABLE {quote_ident(t.name)} ({cols})")
            ph = ", ".join("?" for _ in t.columns)
            con.executemany(f"INSERT INTO {quote_ident(t.name)} VALUES ({ph})", t.rows)
        con.commit()
    finally:
        con.close()
    tmp.replace(path)


# a declared type's COLLATE clause, as the loader keeps it (``TEXT COLLATE NOCASE``)
_COLLATE = re.compile(r"\s*\bCOLLATE\s+\"?([A-Za-z_][A-Za-z0-9_]*)\"?\s*$", re.IGNORECASE)


def declared_collations(con: sqlite3.Connection, table: str) -> dict[str, str]:
    """``column -> collation`` (``NOCASE`` or ``RTRIM``) of the columns of ``table`` whose ``CREATE TABLE``
    statement declares one of SQLite's built-in collations other than the default ``BINARY``. A user-defined
    collation is not kept: only the application that registered it can apply it (sqlite3 itself cannot). SQLite has
    no pragma for a column's collation, so the statement in ``sqlite_master`` is parsed (sqlglot); {} when it does
    not parse. Source: SQLite, "Datatypes In SQLite" section 7 (collating sequences)."""
    import sqlglot
    from sqlglot import exp

    row = con.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if not row or not row[0]:
        return {}
    try:
        tree = sqlglot.parse_one(row[0], read="sqlite")
    except Exception:  # noqa: BLE001 - an exotic statement: no collation read (the columns stay BINARY)
        return {}
    out = {}
    for cd in tree.find_all(exp.ColumnDef):
        for c in cd.args.get("constraints") or []:
            if isinstance(c.args.get("kind"), exp.CollateColumnConstraint):
                name = c.args["kind"].this.name.upper()
                if name in ("NOCASE", "RTRIM"):
                    out[cd.name] = name
    return out


def with_collation(declared: str, collation: str | None) -> str:
    """A declared type with its column's collation written after it, as SQLite's column definition reads it
    (``TEXT`` and ``NOCASE`` -> ``TEXT COLLATE NOCASE``; no collation or ``BINARY``: the type unchanged). The gold
    engines and :func:`write_sqlite` put the declared type into ``CREATE TABLE`` as it is, so the collation
    travels with it."""
    if not collation or collation.upper() == "BINARY":
        return declared
    return f"{declared} COLLATE {collation.upper()}".strip()


def collation_of(declared: str | None) -> str | None:
    """The collation a declared type carries (:func:`with_collation`), upper case; None for none."""
    m = _COLLATE.search(declared or "")
    return m.group(1).upper() if m else None
