"""Stored tables: Arrow schemas from ``schemas/*.schema.json``, atomic Parquet writes, the build manifest,
and a DuckDB catalogue over a build directory's Parquet files (SCHEMA.md)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.core.config import REPO_ROOT
from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.core.hashing import canonical_json
from ctxbench.core.userfiles import duckdb_path, sql_text

SCHEMA_DIR = Path(os.environ.get("CTXBENCH_SCHEMAS", REPO_ROOT / "schemas"))
_TYPES = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
TABLES = ("instances", "quarantine", "responses", "scores")


def schema(table: str) -> pa.Schema:
    """Arrow schema of a stored table, from ``schemas/<table>.schema.json``."""
    d = json.loads((SCHEMA_DIR / f"{table}.schema.json").read_text(encoding="utf-8"))
    return pa.schema([pa.field(c["name"], _TYPES[c["type"]], nullable=c["nullable"]) for c in d["columns"]])


class SchemaError(CtxbenchError, ValueError):
    """Rows do not fit a stored table's schema (a column it lacks, a required value missing)."""


# ------------------------------------------------------------------ I/O failures that name their file (issue 31)

# what to do about an unreadable stored table, by file name (a derived table is rebuilt by the command that reads it)
_FIX = {"instances.parquet": "rebuild the build (the same `ctxbench build` command with --force)",
        "quarantine.parquet": "rebuild the build (the same `ctxbench build` command with --force)",
        "responses.parquet": "move it away and rerun `ctxbench evaluate` for each model (answers come back from "
                             "the response cache; no call is made again)",
        "scores.parquet": "it is derived: `ctxbench score` rebuilds it"}


class UnreadableFile(InputError):
    """A stored file that exists but cannot be read (a damaged or foreign Parquet file). ``path`` names it; the
    message says what to do (rebuild, move it away, or nothing for a derived table)."""

    def __init__(self, path: str | Path, error: BaseException):
        self.path = Path(path)
        fix = _FIX.get(self.path.name, "restore it from a copy, or move it away and rerun the command that wrote it")
        super().__init__(f"{self.path} cannot be read ({type(error).__name__}: {str(error)[:300]}): the file is "
                         f"damaged or not a Parquet table; {fix}")


class DiskFull(CtxbenchError, OSError):
    """A write that failed for lack of space (ENOSPC, EDQUOT, SQLite's ``database or disk is full`` or ``disk I/O
    error`` on write). The message names the directory and what to do; the CLI exits 1 (the run failed, the input
    was fine). Nothing already stored is lost: every table is written atomically."""

    def __init__(self, where: str | Path, error: BaseException | str):
        self.where = Path(where)
        d = self.where if self.where.is_dir() or not self.where.suffix else self.where.parent
        super().__init__(errno.ENOSPC, f"no space left to write {self.where} ({str(error)[:200]}): free space in "
                                       f"{d} (or write elsewhere: --out, $CTXBENCH_HOME for the response cache) and "
                                       f"rerun the same command; nothing already stored is lost")

    def __str__(self) -> str:
        return self.strerror


_FULL_WORDS = ("no space left", "disk is full", "disk i/o error", "quota exceeded", "errno 28", "errno 122")


def disk_full(e: BaseException | None) -> bool:
    """Whether ``e`` (or an exception it was raised from) is a write that failed for lack of space: ENOSPC /
    EDQUOT, an Arrow or SQLite error saying so (SQLite says ``database or disk is full``, or ``disk I/O error``
    when its journal cannot grow)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, DiskFull):
            return True
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
            return True
        if isinstance(e, (OSError, sqlite3.OperationalError, pa.ArrowException)) and any(
                w in str(e).lower() for w in _FULL_WORDS):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def disk_full_message(e: BaseException) -> str:
    """The one line for a full disk: the file or directory (``filename`` of the OSError where known) and what
    to do."""
    if isinstance(e, DiskFull):
        return str(e)
    cur: BaseException | None = e
    where = None
    while cur is not None and where is None:
        where = getattr(cur, "where", None) or getattr(cur, "filename", None)
        cur = cur.__cause__ or cur.__context__
    return str(DiskFull(where or Path.cwd(), e))


@contextlib.contextmanager
def reading(path: str | Path):
    """Run the block that reads the stored file ``path``; a damaged file (an Arrow error, an OSError other than a
    missing file or a full disk) becomes :class:`UnreadableFile` naming it and what to do."""
    try:
        yield
    except (UnreadableFile, FileNotFoundError, DiskFull):
        raise
    except (pa.ArrowException, OSError, EOFError) as e:
        if disk_full(e):
            raise
        raise UnreadableFile(path, e) from None


@contextlib.contextmanager
def writing(path: str | Path):
    """Run the block that writes ``path``; a full disk becomes :class:`DiskFull` naming it."""
    try:
        yield
    except DiskFull:
        raise
    except (OSError, sqlite3.OperationalError, pa.ArrowException) as e:
        if disk_full(e):
            raise DiskFull(path, e) from e
        raise


def to_table(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts) to an Arrow table with the stored schema; JSON columns must already be strings.
    Missing keys become null. Raises SchemaError naming the columns when a row has a key the schema lacks (never
    dropped silently: add the column to ``schemas/<table>.schema.json``) and when a required value is missing."""
    sch = schema(table)
    known = set(sch.names)
    extra = sorted({k for r in rows for k in r if k not in known})
    if extra:
        raise SchemaError(f"{table}: column(s) {', '.join(extra)} are not in schemas/{table}.schema.json; add them "
                          f"there (type and nullable) instead of losing them")
    cols = {}
    for f in sch:
        vals = [r.get(f.name) for r in rows]
        if not f.nullable and any(v is None for v in vals):
            raise SchemaError(f"{table}.{f.name} is required but missing in {sum(v is None for v in vals)} row(s)")
        cols[f.name] = pa.array(vals, type=f.type)
    return pa.Table.from_pydict(cols, schema=sch)


def _remove_stale_temporaries(path: Path) -> None:
    """Remove temporary files of ``path`` left by writers that were killed (their process is gone)."""
    for f in path.parent.glob(f".{path.name}.tmp-*"):
        try:
            pid = int(f.name.rsplit("-", 1)[1])
            os.kill(pid, 0)  # raises when no such process
        except ProcessLookupError:
            f.unlink(missing_ok=True)
        except (ValueError, PermissionError):
            continue


def read_parquet(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file as a table (``columns``: only these), as ``pyarrow.parquet.read_table`` reads it, without
    the dataset layer that function goes through, whose import pulls in pandas: 0.3-0.4 s of CPU in a fresh process
    (an evaluation worker's first call came that much later). Raises what pyarrow raises (a missing file, an
    unknown column)."""
    with pq.ParquetFile(path) as f:
        if columns is not None:  # ParquetFile.read leaves an unknown column out; read_table refuses it
            unknown = [c for c in columns if c not in f.schema_arrow.names]
            if unknown:
                raise pa.ArrowInvalid(f"No match for column(s) {', '.join(unknown)} in {path}")
        out = f.read(columns=columns)
    if columns is not None and len(set(columns)) < len(columns):  # read once; read_table repeats a named column
        out = out.select(columns)
    return out


def write_parquet(tbl: pa.Table, path: str | Path) -> None:
    """Write Parquet atomically (temporary name, then rename): a killed writer leaves no half-written file, and
    the temporaries of killed writers are removed by the next write."""
    path = Path(path)
    _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with writing(path):
            pq.write_table(tbl, tmp, compression="zstd", write_statistics=True)
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk (or a kill) leaves no half-written temporary behind
        raise


# ------------------------------------------------------------------ appended tables (responses.parquet)
#
# ``responses.parquet`` is the table (SCHEMA.md). An evaluation appends to it in O(new rows): each flush writes its
# rows as one part file in ``.<name>.parts/`` beside the table (under the table's file lock, skipping keys already
# stored), and the parts are merged into the table when the evaluation ends (:func:`consolidate`; a run killed
# before that leaves parts that the next evaluation merges first). :func:`read_table` reads the table with any
# pending parts, so a reader sees every row stored, also while workers are appending.

REPLACE_META = b"ctxbench_replace"  # part file metadata: JSON list of keys whose earlier rows the part replaces


def parts_dir(path: str | Path) -> Path:
    """Where the pending part files of the table at ``path`` are kept: ``.<name>.parts/`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.parts")


def pending_parts(path: str | Path) -> list[Path]:
    """The table's part files not yet merged, in the order they were written."""
    d = parts_dir(path)
    try:
        return sorted(d.glob("part-*.parquet"))
    except OSError:
        return []


class _FileLock:
    """``fcntl.flock`` on ``.<table>.lock`` beside the table (exclusive for writers, shared for readers). The file
    stays after the lock is released (removing it would race another process locking it), hidden like the
    table's ``.<name>.parts/``."""

    def __init__(self, path: Path, exclusive: bool = True):
        self.file, self.exclusive = path.with_name(f".{path.name}.lock"), exclusive

    def __enter__(self):
        import fcntl

        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.file, "a")
        fcntl.flock(self.fh, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc):
        import fcntl

        try:
            fcntl.flock(self.fh, fcntl.LOCK_UN)
        finally:
            self.fh.close()


def _replaced(t: pa.Table) -> set[str]:
    meta = t.schema.metadata or {}
    return set(json.loads(meta[REPLACE_META])) if REPLACE_META in meta else set()


def _merge(old: pa.Table | None, new: pa.Table, key: str, replace: set[str]) -> tuple[pa.Table, int]:
    """``old`` with the rows of ``new`` appended: rows of ``old`` whose key is in ``replace`` are dropped first, and
    rows of ``new`` whose key ``old`` still holds are skipped (the first row stored for a key wins). Returns the
    table and how many rows of ``new`` went in."""
    new = new.replace_schema_metadata(None)
    if old is None:
        return new, new.num_rows
    if replace:
        old = old.filter(pa.array([k not in replace for k in old.column(key).to_pylist()], pa.bool_()))
    have = set(old.column(key).to_pylist())
    new = new.filter(pa.array([k not in have for k in new.column(key).to_pylist()], pa.bool_()))
    n = new.num_rows
    return pa.concat_tables([old, new.select(old.column_names) if set(old.column_names) == set(new.column_names)
                             else new], promote_options="default"), n


def _with_parts(path: Path, table: str, key: str) -> tuple[pa.Table | None, list[Path]]:
    """The stored table with its pending parts merged in (None when neither exists), and those parts."""
    with reading(path):
        old = read_parquet(path) if path.exists() else None
    parts = pending_parts(path)
    for p in parts:
        try:
            with reading(p):
                part = read_parquet(p)
        except FileNotFoundError:
            continue  # merged away by another process meanwhile (it holds the table's lock: not here)
        old, _ = _merge(old, part, key, _replaced(part))
    return old, parts


def read_table(path: str | Path, table: str, columns: list[str] | None = None, key: str = "request_key") -> pa.Table:
    """Read a stored table (with the rows of pending part files of an evaluation, see above, deduplicated by
    ``key``), or an empty one with the stored schema when the file does not exist. ``columns``: only these (each
    must exist)."""
    path = Path(path)
    if not parts_dir(path).exists():
        if not path.exists():
            out = pa.Table.from_batches([], schema=schema(table))  # Schema.empty_table() imports pandas (0.3 s)
        else:
            with reading(path):
                return read_parquet(path, columns=columns)
    else:
        with _FileLock(path, exclusive=False), reading(path):
            out, _ = _with_parts(path, table, key)
        if out is None:
            out = pa.Table.from_batches([], schema=schema(table))
    return out.select(columns) if columns is not None else out


def consolidate(path: str | Path, table: str = "responses", key: str = "request_key") -> int:
    """Merge the table's pending part files into it (one atomic rewrite, under the table's file lock) and remove
    them. Returns how many parts were merged (0: nothing to do, nothing written)."""
    path = Path(path)
    if not pending_parts(path):
        return 0
    with _FileLock(path):
        merged, parts = _with_parts(path, table, key)
        if not parts:
            return 0
        if merged is not None:
            write_parquet(merged, path)
        for p in parts:
            p.unlink(missing_ok=True)
        for f in parts_dir(path).glob(".part-*.tmp-*"):  # temporaries of killed writers
            try:
                os.kill(int(f.name.rsplit("-", 1)[1]), 0)
            except ProcessLookupError:
                f.unlink(missing_ok=True)
            except (ValueError, PermissionError):
                pass
        try:
            parts_dir(path).rmdir()
        except OSError:
            pass  # another worker's part arrived meanwhile, or a temporary of a live writer
    return len(parts)


class TableAppender:
    """Appends rows to a stored table in O(new rows) (see above): :meth:`append` writes one part file, skipping
    rows whose key is stored already (in the table or a part, by any worker) except keys in ``replace``, whose
    stored rows the part replaces when merged; :meth:`close` merges the parts into the table. Several appenders
    (threads, processes) may work on one table at once."""

    def __init__(self, path: str | Path, table: str, key: str = "request_key"):
        self.path, self.table, self.key = Path(path), table, key
        self._known: set = set()
        self._seen: set[str] = set()
        self._main: tuple | None = None
        self.added: set = set()  # keys of the rows this appender wrote (what this process added itself)

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
            ident = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            ident = None
        if ident != self._main:  # the table was (re)written, e.g. parts merged by another worker: read its keys
            self._main = ident
            if ident is not None:
                self._known |= set(read_parquet(self.path, columns=[self.key]).column(self.key).to_pylist())
        for p in pending_parts(self.path):
            if p.name not in self._seen:
                try:
                    self._known |= set(read_parquet(p, columns=[self.key]).column(self.key).to_pylist())
                except FileNotFoundError:
                    continue  # merged meanwhile: its keys are in the table, read at the next change
                self._seen.add(p.name)

    def append(self, rows: list[dict[str, Any]], replace: set[str] | frozenset[str] = frozenset()) -> int:
        """Write ``rows`` as one part file; returns how many rows it holds."""
        if not rows:
            return 0
        import time
        import uuid

        new = to_table(self.table, rows)
        with _FileLock(self.path):
            self._refresh()
            keys = new.column(self.key).to_pylist()
            new = new.filter(pa.array([k not in self._known or k in replace for k in keys], pa.bool_()))
            if not new.num_rows:
                return 0
            if replace:
                new = new.replace_schema_metadata({REPLACE_META: json.dumps(sorted(replace)).encode()})
            d = parts_dir(self.path)
            d.mkdir(parents=True, exist_ok=True)
            name = f"part-{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
            write_parquet(new, d / name)
            self._seen.add(name)
            self._known |= set(new.column(self.key).to_pylist())
            self.added |= set(new.column(self.key).to_pylist())
        return new.num_rows

    def close(self) -> None:
        """Merge the pending parts (this appender's and any other's) into the table."""
        consolidate(self.path, self.table, self.key)


def append_rows(path: str | Path, table: str, rows: list[dict[str, Any]], key: str = "request_key",
                replace: set[str] | frozenset[str] = frozenset()) -> int:
    """Append ``rows`` to the stored ``table`` at ``path`` at once (the table rewritten atomically under its file
    lock; several writers of one build may run at once), skipping rows whose ``key`` another writer stored
    meanwhile, except keys in ``replace``, whose stored rows are replaced (a call made again because its recorded
    outcome no longer holds, e.g. an over-length answer of a server whose window has grown). Returns the number
    of rows written. An evaluation appends through a :class:`TableAppender` instead (O(new rows) per flush)."""
    if not rows:
        return 0
    path = Path(path)
    with _FileLock(path):
        old, parts = _with_parts(path, table, key)
        merged, n = _merge(old, to_table(table, rows), key, set(replace))
        write_parquet(merged, path)
        for p in parts:
            p.unlink(missing_ok=True)
    return n


def write_json(obj: Any, path: str | Path) -> None:
    """Write canonical, indented JSON atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(json.loads(canonical_json(obj)), indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)


def require_build(build_dir: str | Path) -> Path:
    """``build_dir`` as a Path. Raises InputError when it holds no ``instances.parquet``; for a run root (what
    ``ctxbench run --out`` writes: ``ROOT/<build_hash>`` and ``ROOT/latest``), the message names its builds."""
    build_dir = Path(build_dir)
    if not (build_dir / "instances.parquet").exists():
        if build_dir.is_dir() and (latest_build(build_dir) is not None or builds_of(build_dir)):
            raise InputError(f"{build_dir} is a run root, not a build directory: give one of its builds, e.g. "
                             f"{build_dir / LATEST} (the newest)")
        raise InputError(f"{build_dir} is not a build directory (no instances.parquet): run `ctxbench build` first")
    return build_dir


def catalogue(build_dir: str | Path):
    """A DuckDB connection with one view per stored table of the build directory (instances, quarantine,
    responses, scores), e.g. ``catalogue(d).sql("SELECT model, avg(score) FROM scores GROUP BY 1")``."""
    import duckdb

    con = duckdb.connect(":memory:")
    for t in TABLES:
        p = Path(build_dir) / f"{t}.parquet"
        if p.exists():
            con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet({duckdb_path(p)})")
    return con


def builds_catalogue(builds: list[dict[str, Any]], path: str | Path | None = None):
    """A DuckDB catalogue over many builds (e.g. every build of several run roots): a table ``builds`` (one row per
    build: the dicts of ``builds``, each with at least ``build_dir``, the directory as an absolute path) and one
    view per stored table (instances, quarantine, responses, scores) that reads every build's Parquet file
    (columns matched by name, a column a build lacks is null) with a ``build_dir`` column naming the build.
    ``path``: a DuckDB file, written anew (None: in memory). Returns the open connection."""
    import duckdb

    if path is not None:
        path = Path(path)
        path.unlink(missing_ok=True)
        Path(str(path) + ".wal").unlink(missing_ok=True)
    con = duckdb.connect(":memory:" if path is None else str(path))
    tbl = pa.Table.from_pylist([{k: (str(v) if isinstance(v, Path) else v) for k, v in b.items()} for b in builds])
    con.register("builds_rows", tbl)
    con.execute("CREATE TABLE builds AS SELECT * FROM builds_rows")
    con.unregister("builds_rows")
    for t in TABLES:
        parts = [f"SELECT {sql_text(str(b['build_dir']))} AS build_dir, * FROM "
                 f"read_parquet({duckdb_path(Path(b['build_dir']) / f'{t}.parquet')})"
                 for b in builds if (Path(b["build_dir"]) / f"{t}.parquet").exists()]
        if parts:
            con.execute(f"CREATE VIEW {t} AS " + " UNION ALL BY NAME ".join(parts))
        else:  # no build has the table: an empty view with the stored schema
            cols = ", ".join(f"CAST(NULL AS {_DUCK[f.type]}) AS {f.name}" for f in schema(t))
            con.execute(f"CREATE VIEW {t} AS SELECT CAST(NULL AS VARCHAR) AS build_dir, {cols} WHERE false")
    return con


_DUCK = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}


# ------------------------------------------------------------------------------------------ one build per table

def build_hash_of_dir(build_dir: str | Path) -> str:
    """The ``build_hash`` in a build directory's manifest (InputError without one)."""
    m = Path(build_dir) / "manifest.json"
    try:
        return json.loads(m.read_text(encoding="utf-8"))["build_hash"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{m} is missing or not a ctxbench manifest: the build is unfinished or not a build") from None


def check_build_tables(build_dir: str | Path) -> str:
    """Check that every stored table of the build holds rows of this build only (``build_hash`` column, where
    present, equal to the manifest's). Returns the build hash; raises InputError naming the table and the
    foreign build hashes, and UnreadableFile for a damaged instances or responses table (a damaged
    ``scores.parquet`` is skipped: it is derived and rebuilt)."""
    build_dir = Path(build_dir)
    bh = build_hash_of_dir(build_dir)
    for name in ("instances", "responses", "scores"):
        p = build_dir / f"{name}.parquet"
        try:
            with reading(p):
                if not p.exists() or "build_hash" not in pq.read_schema(p).names:
                    continue
                found = set(pq.read_table(p, columns=["build_hash"]).column("build_hash").to_pylist()) - {None, bh}
        except UnreadableFile:
            if name == "scores":  # derived: unreadable scores are not current, `score` rebuilds them
                continue
            raise
        if found:
            raise InputError(f"{p} holds rows of other builds ({sorted(found)}) besides {bh}: results of different "
                             f"builds are never mixed; evaluate each build in its own directory")
    return bh


# ------------------------------------------------------------------------------------------ run roots and builds

LATEST = "latest"


def set_latest(root: str | Path, build_hash: str) -> Path:
    """Point ``ROOT/latest`` at ``ROOT/<build_hash>`` (a relative symlink, replaced atomically)."""
    root = Path(root)
    link = root / LATEST
    if link.is_symlink() and os.readlink(link) == build_hash:
        return link  # already there: a no-change run writes nothing
    tmp = root / f".{LATEST}.tmp-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(build_hash, tmp)
    os.replace(tmp, link)
    return link


def latest_build(root: str | Path) -> Path | None:
    """The build ``ROOT/latest`` points at, or None."""
    link = Path(root) / LATEST
    return link.resolve() if link.is_symlink() and link.resolve().is_dir() else None


def resolve_build(path: str | Path) -> Path:
    """A build directory from a build directory or a run root (its ``latest`` build). Raises InputError when
    ``path`` is neither."""
    path = Path(path)
    lb = latest_build(path)
    if lb is not None:
        return lb
    if (path / "manifest.json").exists() or (path / "instances.parquet").exists():
        return path
    if lb is None:
        raise InputError(f"{path} is neither a build directory nor a run root with a `latest` build: run "
                         f"`ctxbench build` or `ctxbench run` first")
    return lb


def builds_of(root: str | Path) -> list[Path]:
    """Every complete build directory of a run root (sorted by name)."""
    root = Path(root)
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and (p / "manifest.json").exists())


def build_benchmark(build_dir: Path) -> str:
    """The benchmark of a completed build: the manifest's ``benchmark`` or ``track``, else the ``benchmark``
    column of its instances."""
    try:
        man = json.loads((build_dir / "manifest.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(f"{build_dir / 'manifest.json'} is not valid JSON ({e}): rebuild it") from None
    name = man.get("benchmark") or man.get("track") if isinstance(man, dict) else None
    if not name:
        col = pq.read_table(build_dir / "instances.parquet", columns=["benchmark"]).column("benchmark")
        names = sorted(set(col.to_pylist()))
        name = names[0] if len(names) == 1 else ",".join(names)
    return str(name)


def find_builds(runs_root: str | Path, benchmarks: list[str] | None = None) -> list[Path]:
    """Completed builds (a directory with ``manifest.json`` beside ``instances.parquet``) under ``runs_root``,
    sorted by path, keeping those whose benchmark is in ``benchmarks`` (all when empty). Raises InputError when
    ``runs_root`` is not a directory."""
    root = Path(runs_root)
    if not root.is_dir():
        raise InputError(f"runs root {root} is not a directory: give the directory holding your builds")
    want = set(benchmarks or [])
    out = []
    for m in sorted(root.rglob("manifest.json")):
        d = m.parent
        if (d / "instances.parquet").exists() and (not want or build_benchmark(d) in want):
            out.append(d)
    return out
