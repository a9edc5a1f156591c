"""Stored tables: Arrow schemas from ``schemas/*.schema.json``, atomic Parquet writes, the build manifest,
and a DuckDB catalogue over a build directory's Parquet files (SCHEMA.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .config import REPO_ROOT
from .errors import CtxbenchError, InputError
from .hashing import canonical_json

SCHEMA_DIR = Path(os.environ.get("CTXBENCH_SCHEMAS", REPO_ROOT / "schemas"))
_TYPES = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
TABLES = ("instances", "quarantine", "responses", "scores")


def schema(table: str) -> pa.Schema:
    """Arrow schema of a stored table, from ``schemas/<table>.schema.json``."""
    d = json.loads((SCHEMA_DIR / f"{table}.schema.json").read_text(encoding="utf-8"))
    return pa.schema([pa.field(c["name"], _TYPES[c["type"]], nullable=c["nullable"]) for c in d["columns"]])


class SchemaError(CtxbenchError, ValueError):
    """Rows do not fit a stored table's schema (a column it lacks, a required value missing)."""


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


def write_parquet(tbl: pa.Table, path: str | Path) -> None:
    """Write Parquet atomically (temporary name, then rename): a killed writer leaves no half-written file, and
    the temporaries of killed writers are removed by the next write."""
    path = Path(path)
    _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(tbl, tmp, compression="zstd", write_statistics=True)
    os.replace(tmp, path)


def read_table(path: str | Path, table: str) -> pa.Table:
    """Read a stored table, or an empty one with the stored schema when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return schema(table).empty_table()
    return pq.read_table(path)


def append_rows(path: str | Path, table: str, rows: list[dict[str, Any]], key: str = "request_key",
                replace: set[str] | frozenset[str] = frozenset()) -> int:
    """Append ``rows`` to the stored ``table`` at ``path`` under an exclusive file lock (several writers of one
    build may run at once), skipping rows whose ``key`` another writer stored meanwhile, except keys in
    ``replace``, whose stored rows are replaced (a call made again because its recorded outcome no longer holds,
    e.g. an over-length answer of a server whose window has grown). The file is rewritten atomically. Returns the
    number of rows written."""
    if not rows:
        return 0
    import fcntl

    path = Path(path)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            new = to_table(table, rows)
            if path.exists():
                old = pq.read_table(path)
                if replace:
                    old = old.filter(pa.array([k not in replace for k in old.column(key).to_pylist()]))
                have = set(old.column(key).to_pylist())
                new = new.filter(pa.array([k not in have for k in new.column(key).to_pylist()]))
                n = new.num_rows
                new = pa.concat_tables([old, new.select(old.column_names)
                                        if set(old.column_names) == set(new.column_names) else new],
                                       promote_options="default")
            else:
                n = new.num_rows
            write_parquet(new, path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return n


def write_json(obj: Any, path: str | Path) -> None:
    """Write canonical, indented JSON atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(json.loads(canonical_json(obj)), indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)


def require_build(build_dir: str | Path) -> Path:
    """``build_dir`` as a Path. Raises InputError when it holds no ``instances.parquet``."""
    from .errors import InputError

    build_dir = Path(build_dir)
    if not (build_dir / "instances.parquet").exists():
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
            con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{p.as_posix()}')")
    return con


def _sql_text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


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
        parts = [f"SELECT {_sql_text(str(b['build_dir']))} AS build_dir, * FROM "
                 f"read_parquet({_sql_text((Path(b['build_dir']) / f'{t}.parquet').as_posix())})"
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
    foreign build hashes."""
    build_dir = Path(build_dir)
    bh = build_hash_of_dir(build_dir)
    for name in ("instances", "responses", "scores"):
        p = build_dir / f"{name}.parquet"
        if not p.exists() or "build_hash" not in pq.read_schema(p).names:
            continue
        found = set(pq.read_table(p, columns=["build_hash"]).column("build_hash").to_pylist()) - {None, bh}
        if found:
            raise InputError(f"{p} holds rows of other builds ({sorted(found)}) besides {bh}: results of different "
                             f"builds are never mixed; evaluate each build in its own directory")
    return bh
