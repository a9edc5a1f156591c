"""The helper process's side of :mod:`ctxbench.tracks.holobench.precertify`: it parses a build's contexts and
checks their rows against ``included_rows`` with the very functions of the ``certify`` stage
(:mod:`ctxbench.tracks.holobench.verify`), keeping the results until the main process collects them. Called by
name through :mod:`ctxbench.core.sidecar` (``"module:function"``), never imported by the build."""

from __future__ import annotations

import gc
from pathlib import Path

from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.tracks.holobench.verify import _parse_context, _rows_mismatch, load_grammar
from ctxbench.verbalize.templates import format_value

# build key -> its state: the grammar and its fingerprint, the line memo, the parses by context index, the rows
# checks by (context index, included_rows JSON, seed), source.sqlite open (before the build moves it into place)
_STATE: dict[str, dict] = {}


def _state(key: str, db_id: str, source: str, templates: str | None) -> dict:
    st = _STATE.get(key)
    if st is None:
        g = load_grammar(db_id, Path(source), Path(templates) if templates else None)
        st = _STATE[key] = {"g": g, "fingerprint": g.fingerprint(), "memo": {}, "parses": {}, "checks": {},
                            "con": open_sqlite_readonly(Path(source), what="source database"), "cache": {}}
    return st


def parse_ahead(key: str, db_id: str, source: str, templates: str | None, idx: int, text: str) -> None:
    """Parse context ``idx`` of the build ``key`` with the grammar of ``source`` and ``templates`` (loaded at the
    build's first context) and keep it. The collector is paused meanwhile, as ``verify_rows`` pauses it (one
    tuple per row)."""
    st = _state(key, db_id, source, templates)
    paused = gc.isenabled()
    gc.disable()
    try:
        st["parses"][idx] = _parse_context(st["g"], text, st["memo"])
    finally:
        if paused:
            gc.enable()


def rows_ahead(key: str, idx: int, included_json: str, seed: int) -> None:
    """Check the rows parsed from context ``idx`` against ``included_json`` (the ``included_rows`` of its
    instances; ``seed``: the build's, which chose each row's template) and keep the reason (None: they agree).
    Nothing is kept for a context that does not parse (certify reports that instead)."""
    st = _STATE[key]
    rows, err = st["parses"][idx]
    if err:
        return
    paused = gc.isenabled()
    gc.disable()
    try:
        st["checks"][(idx, included_json, seed)] = _rows_mismatch(included_json, rows, st["g"], seed, st["con"],
                                                                  st["cache"], format_value)
    finally:
        if paused:
            gc.enable()


def collect_ahead(key: str) -> tuple[str, dict, dict]:
    """``(grammar fingerprint, {context index: parse}, {(index, included_rows JSON, seed): reason})`` of the
    build ``key``, forgotten here."""
    st = _STATE.pop(key)
    st["con"].close()
    return st["fingerprint"], st["parses"], st["checks"]


def drop_ahead(key: str) -> None:
    """Forget the build ``key``'s work (an unknown key: nothing)."""
    st = _STATE.pop(key, None)
    if st is not None:
        st["con"].close()
