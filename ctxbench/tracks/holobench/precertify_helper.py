"""The helper process's side of :mod:`ctxbench.tracks.holobench.precertify`: it parses a build's contexts,
checks their rows against ``included_rows`` and answers their questions' SQL over the rows read back with the very
functions of the ``certify`` stage
(:mod:`ctxbench.tracks.holobench.verify`), keeping the results until the main process collects them. Called by
name through :mod:`ctxbench.core.sidecar` (``"module:function"``), never imported by the build."""

from __future__ import annotations

from pathlib import Path

from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.gold import GoldEngines
from ctxbench.tracks.common import unstaged
from ctxbench.tracks.holobench.verify import load_grammar, parse_context, recovered_tables, rows_mismatch, sql_tables
from ctxbench.verbalize.templates import format_value
from ctxbench.verify import gc_paused, sqlite_answer

# build key -> its state: the grammar and its fingerprint, the line memo, the parses by context index, the rows
# checks by (context index, included_rows JSON, seed), SQLite's answers by (context index, SQL, seed),
# source.sqlite open (before the build moves it into place)
_STATE: dict[str, dict] = {}


def placed(path: str) -> Path:
    """``path``, or the build file it has become: a stage writes ``.NAME.staging`` (ctxbench.tracks.common) and the
    build renames it ``NAME`` in the same directory when it is written, which a quick build can do before this
    helper reads its first request. The bytes are the same; the grammar's fingerprint, which hashes
    ``source.sqlite``'s bytes and the templates, still tells certify whether this work is of the files it reads."""
    p = Path(path)
    if p.exists():
        return p
    try:
        final = unstaged(p)
    except ValueError:  # no staged name: kept as given (and fails where it is read)
        return p
    return final if final.exists() else p


def _state(key: str, db_id: str, source: str, templates: str | None) -> dict:
    st = _STATE.get(key)
    if st is None:
        src = placed(source)
        g = load_grammar(db_id, src, placed(templates) if templates else None)
        st = _STATE[key] = {"g": g, "fingerprint": g.fingerprint(), "memo": {}, "parses": {}, "checks": {},
                            "answers": {}, "cache": {}, "con": open_sqlite_readonly(src, what="source database")}
    return st


def parse_ahead(key: str, db_id: str, source: str, templates: str | None, idx: int, text: str) -> None:
    """Parse context ``idx`` of the build ``key`` with the grammar of ``source`` and ``templates`` (loaded at the
    build's first context) and keep it. The collector is paused meanwhile, as ``verify_rows`` pauses it (one
    tuple per row)."""
    st = _state(key, db_id, source, templates)
    with gc_paused():
        st["parses"][idx] = parse_context(st["g"], text, st["memo"])


def check_ahead(key: str, idx: int, included_json: str, seed: int, sqls: list[str]) -> None:
    """For the rows parsed from context ``idx``: the rows check against ``included_json`` (the ``included_rows``
    of its instances; ``seed``: the build's, which chose each row's template) and SQLite's answer to each of
    ``sqls`` (the questions over it) over the rows read back, as the certify stage computes them; kept for
    :func:`collect_ahead`. Nothing is kept for a context that does not parse (certify reports that instead)."""
    st = _STATE[key]
    g = st["g"]
    rows, err = st["parses"][idx]
    if err:
        return
    with gc_paused():
        st["checks"][(idx, included_json, seed)] = rows_mismatch(included_json, rows, g, seed, st["con"],
                                                                  st["cache"], format_value)
        by_tables: dict[tuple, list[str]] = {}
        for sql in dict.fromkeys(sqls):
            tabs = sql_tables(sql, list(g.columns))
            if tabs:
                by_tables.setdefault(tuple(tabs), []).append(sql)
        for tabs, group in by_tables.items():  # the recovered tables loaded once per set of tables read
            with GoldEngines(recovered_tables(rows, g, tabs), seed) as eng:
                for sql in group:
                    st["answers"][(idx, sql, seed)] = sqlite_answer(sql, eng)


def collect_ahead(key: str) -> tuple[str, dict, dict, dict]:
    """``(grammar fingerprint, {context index: parse error or None}, {(index, included_rows JSON, seed): reason},
    {(index, SQL, seed): SQLite's answer})`` of the build ``key``, forgotten here (the rows parsed stay here: the
    main process reads a context again only where it works something out itself)."""
    st = _STATE.pop(key)
    st["con"].close()
    return st["fingerprint"], {i: err for i, (_, err) in st["parses"].items()}, st["checks"], st["answers"]


def drop_ahead(key: str) -> None:
    """Forget the build ``key``'s work (an unknown key: nothing)."""
    st = _STATE.pop(key, None)
    if st is not None:
        st["con"].close()


def kept() -> int:
    """How many builds' work this helper keeps (each build's is dropped when collected or discarded)."""
    return len(_STATE)
