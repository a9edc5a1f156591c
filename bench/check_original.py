"""Check an import against sqlite3 on the original files (issue 22): every accepted answer of an
``import_report.jsonl`` must equal what the sqlite3 module answers for the same SQL on the user's own database file,
except in how projected values are shown (text stripped of surrounding spaces, ``''`` or ``'NULL'`` text shown as
null, floats to 4 places, numeric text shown as its number). Independent of the import's own check: the file is
opened read-only here, the SQL run as given, and values compared after only that display normalisation; in an
ordered answer, rows whose ORDER BY keys are equal on the original file (the keys read by running the query again
with them as extra columns) may come in any order among themselves. Prints one
line per difference and a summary; exits 1 when any accepted answer differs.

    python bench/check_original.py REPORT.jsonl [--db-dir DIR] [--sample N] [--seed S]

Default DIR: Spider's databases under $CTXBENCH_SHARED_DATA (../shared/data/spider/database). ``--sample N``
checks N accepted answers drawn with the seed (hashlib), all of them by default.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sqlite3
import sys
from pathlib import Path

_NUMBER = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*\Z")


def shown(v):
    """A value as a context shows it: stripped text, '' / 'NULL' text as null, floats to 4 places, numbers."""
    if isinstance(v, bytes):
        try:
            v = v.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(v, str):
        v = v.strip()
        if v.lower() in ("", "null"):
            return None
        if _NUMBER.match(v):
            n = float(v)
            return int(n) if n.is_integer() and abs(n) < 2**53 else n
        return v
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return int(v) if v.is_integer() and abs(v) < 2**53 else round(v, 4)
    return v


def _key(row):
    return tuple((0, 0.0, "") if v is None else (1, float(v), "") if isinstance(v, (int, float)) else (2, 0.0, str(v))
                 for v in row)


def _eq(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-4, abs_tol=1e-4)
    return str(a) == str(b)


def same(gold, orig, ordered: bool, keys=None) -> bool:
    """Equal up to how values are shown; as lists when ``ordered``, except that rows whose ORDER BY keys are equal
    on the original file (``keys``: one tuple per row of ``orig``, None when unknown) may come in any order among
    themselves (their order is undefined: two equal averages)."""
    a = [[shown(v) for v in r] for r in gold]
    b = [[shown(v) for v in r] for r in orig]
    if len(a) != len(b):
        return False
    if not ordered:
        a, b = sorted(a, key=_key), sorted(b, key=_key)
    elif keys is not None and len(keys) == len(b):
        i = 0
        while i < len(b):
            j = i + 1
            while j < len(b) and _key(keys[j]) == _key(keys[i]):
                j += 1
            if not same(gold[i:j], orig[i:j], False):
                return False
            i = j
        return True
    return all(len(x) == len(y) and all(_eq(p, q) for p, q in zip(x, y)) for x, y in zip(a, b))


def order_keys(con, sql: str):
    """The ORDER BY keys of each row of the SQL's answer on ``con``, in answer order: the query run again with its
    ORDER BY expressions appended to its columns (a positional ``ORDER BY 2`` or an alias read as the column it
    names); None for a query where that cannot be done (a set operation, SELECT DISTINCT, a failing rewrite)."""
    import sqlglot
    from sqlglot import exp

    try:
        q = sqlglot.parse_one(sql, read="sqlite")
        if not isinstance(q, exp.Select) or q.args.get("distinct") or q.args.get("order") is None:
            return None
        q = q.copy()
        sel = list(q.expressions)
        alias = {e.alias.lower(): e.this for e in sel if isinstance(e, exp.Alias)}
        extra = []
        for k, o in enumerate(q.args["order"].expressions):
            e = o.this
            if isinstance(e, exp.Literal) and e.is_int and 1 <= int(e.this) <= len(sel):
                e = sel[int(e.this) - 1]
                e = e.this if isinstance(e, exp.Alias) else e
            elif isinstance(e, exp.Column) and not e.table and e.name.lower() in alias:
                e = alias[e.name.lower()]
            extra.append(exp.alias_(e.copy(), f"__k{k}"))
        q.set("expressions", sel + extra)
        rows = con.execute(q.sql(dialect="sqlite")).fetchall()
    except Exception:  # noqa: BLE001 - no keys: the answer is compared as a list
        return None
    return [tuple(r[len(sel):]) for r in rows]


def _ordered(sql: str) -> bool:
    import sqlglot
    return sqlglot.parse_one(sql, read="sqlite").args.get("order") is not None


def main() -> None:
    shared = Path(os.environ.get("CTXBENCH_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    ap = argparse.ArgumentParser()
    ap.add_argument("report", type=Path)
    ap.add_argument("--db-dir", type=Path, default=shared / "spider" / "database")
    ap.add_argument("--sample", type=int)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    lines = [json.loads(x) for x in a.report.read_text(encoding="utf-8").splitlines() if x.strip()]
    acc = [x for x in lines if x["accepted"]]
    if a.sample is not None:
        acc = sorted(acc, key=lambda x: hashlib.sha256(f"{a.seed}|{x['index']}".encode()).hexdigest())[:a.sample]
    cons: dict[str, sqlite3.Connection] = {}
    bad = 0
    for x in acc:
        db = x["db_id"]
        if db not in cons:
            # percent-encoded URI (a '#' or '?' in --db-dir names another file otherwise), read-only, immutable
            uri = (a.db_dir / db / f"{db}.sqlite").resolve().as_uri() + "?mode=ro&immutable=1"
            cons[db] = sqlite3.connect(uri, uri=True)
        orig = cons[db].execute(x["sql"]).fetchall()
        ordered = _ordered(x["sql"])
        if not same(x["answer"], orig, ordered, order_keys(cons[db], x["sql"]) if ordered else None):
            bad += 1
            print(f"DIFFERS #{x['index']} {db}: {x['sql']}\n  accepted {x['answer'][:5]}\n  sqlite3  {orig[:5]}")
    print(f"{len(acc)} accepted answer(s) of {len(lines)} checked against sqlite3 on the original files: {bad} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
