"""Answerability certificates (issue 23): every gold answer re-derived from the text the model reads.

``ctxbench verify --build DIR`` (and the ``certify`` stage that ends every build) reads ``instances.parquet`` as
stored and, for each instance, re-derives its gold answer from ``context`` alone, using only what its track declares
about how its text is written (verbalization templates, needle definitions, the SQL). The builder's bookkeeping
(``included_rows``, ``evidence_spans``, ``gold``) is read only to compare with at the end, never while deriving.
Each instance gets one :class:`Certificate` in ``certificates.parquet`` (SCHEMA.md): ``status`` ``certified``,
``failed`` (``reason`` names what no longer holds) or ``uncertifiable`` (``reason`` says which fact the text cannot
carry), and ``method`` (how it was checked).

A track's verifier is the ``"module:function"`` named by its :attr:`~ctxbench.core.track.Track.verifier`,
``fn(build_dir: Path, instances: list[dict], manifest: BuildManifest) -> (certificates, notes)``: ``instances``
are ``instances.parquet`` rows with every column (``gold``/``accepted_answers`` as stored JSON text);
``certificates`` one :class:`Certificate` per instance; ``notes`` build-level findings (an asset whose hash differs
from the manifest's: reported, the per-instance checks go on). The built-in verifiers are in
:mod:`ctxbench.tracks.holobench.verify`, :mod:`ctxbench.tracks.needles.verify`, :mod:`ctxbench.tracks.scitrek.verify` and
:mod:`ctxbench.tracks.lara.verify`.
"""

from __future__ import annotations

import gc
import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import canonical_json
from ctxbench.core.manifest import read_manifest
from ctxbench.core.progress import emit
from ctxbench.core.storage import reading, to_table, write_json, write_parquet
from ctxbench.core.track import get_track, resolve
from ctxbench.gold import compute_gold
from ctxbench.gold.compare import norm_rows, results_equal

# where an imported benchmark's own data lives (``ctxbench verify --source-data DIR``): a track verifier that needs
# files outside the build (LaRA's query files) reads it, or its own variable first
SOURCE_DATA_ENV = "CTXBENCH_SOURCE_DATA"

STATUSES = ("certified", "failed", "uncertifiable")
CERTIFICATES = "certificates.parquet"


@dataclass
class Certificate:
    """One instance's certificate: ``status`` in :data:`STATUSES`; ``reason`` ("" when certified); ``method``."""

    instance_id: str
    status: str
    reason: str
    method: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"certificate status {self.status!r} is not one of {STATUSES}")


@dataclass
class VerifyResult:
    """What a verification found: ``certificates`` (one per instance), ``tracks`` (instance id → track name),
    ``notes`` (build-level findings such as an asset hash mismatch)."""

    build_dir: Path
    certificates: list[Certificate]
    tracks: dict[str, str]
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Certificate]:
        return [c for c in self.certificates if c.status == "failed"]

    def counts(self) -> dict[str, dict[str, int]]:
        """``{track: {status: count}}`` (every status present, zero where none)."""
        out: dict[str, Counter] = {}
        for c in self.certificates:
            out.setdefault(self.tracks.get(c.instance_id, "?"), Counter())[c.status] += 1
        return {t: {s: int(n[s]) for s in STATUSES} for t, n in sorted(out.items())}

    def summary_lines(self) -> list[str]:
        """One line per track: counts per status and the certified share; then the notes."""
        lines = []
        for t, n in self.counts().items():
            total = sum(n.values())
            share = n["certified"] / total if total else 0.0
            lines.append(f"{t}: {n['certified']} certified, {n['failed']} failed, {n['uncertifiable']} "
                         f"uncertifiable of {total} ({share:.1%} certified)")
        lines += [f"note: {x}" for x in self.notes]
        return lines


def number_type(declared: str):
    """``int`` for a declared SQLite type with INTEGER affinity (``INT`` in it), ``float`` for REAL affinity
    (``REAL``, ``FLOA``, ``DOUB``), None otherwise (text kept as text). Source: SQLite, "Datatypes In SQLite"
    section 3.1."""
    u = (declared or "").upper()
    if "INT" in u:
        return int
    return float if any(k in u for k in ("REAL", "FLOA", "DOUB")) else None


# the number literals read back as numbers: ASCII digits only (Python's int and float also take "1_000", " 5",
# "infinity", "nan" and other scripts' digits, which SQLite keeps as text; the value rule makes every NaN and
# infinite float NULL, so "nan" or "inf" in a context is a word); an integer literal is an int when it fits int64
_INTEGER = r"-?[0-9]+"
_NUMBER = r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_INT64 = (-(2**63), 2**63 - 1)
_INT_TEXT, _REAL_TEXT = re.compile(_INTEGER), re.compile(_NUMBER)
# a whole column of such literals, one per line (typed_values' bulk path)
_INT_COLUMN = re.compile(rf"(?:{_INTEGER}\n)*{_INTEGER}")
_REAL_COLUMN = re.compile(rf"(?:{_NUMBER}\n)*{_NUMBER}")


def typed_value(text: str | None, declared: str) -> Any:
    """A value read back from a context as it goes into a column of type ``declared``, so that SQLite stores
    what the source stores (the gold engines insert it under the declared type, and type affinity does the rest):
    under INTEGER affinity an integer literal that fits 64 bits is an int and any other number literal a float
    (a too-large integer or a fraction, which SQLite keeps REAL: "100000000000000000000" is 1e20); under REAL
    affinity a number literal is a float; anything else is the text (``nan`` and ``inf`` too: the value rule
    leaves no NaN or infinite float in a source) (a word in an INTEGER column stays text, as SQLite keeps it);
    None stays NULL. Python's conversion of the literal is exact for every float ``repr`` writes. Source: SQLite,
    "Datatypes In SQLite" section 3 (type affinity)."""
    conv = number_type(declared)
    if text is None or conv is None:
        return text
    if conv is int and _INT_TEXT.fullmatch(text):
        n = int(text)
        if _INT64[0] <= n <= _INT64[1]:
            return n
    if _REAL_TEXT.fullmatch(text):
        return float(text)
    return text


def typed_values(texts: list, declared: str) -> list:
    """:func:`typed_value` of every text of one column (None stays NULL), in bulk (one pattern match over the
    whole column, then C-level conversion) when every text that is not NULL is a number literal of the column's
    kind (the NULLs put back where they stood)."""
    conv = number_type(declared)
    if conv is None or not texts:
        return texts
    nulls = None in texts
    present = [x for x in texts if x is not None] if nulls else texts
    if not present:
        return texts
    joined = "\n".join(present)  # a context line holds no newline, so neither does a value read from it
    if (_INT_COLUMN if conv is int else _REAL_COLUMN).fullmatch(joined):
        out = list(map(conv, present))
        if conv is float or _INT64[0] <= min(out) and max(out) <= _INT64[1]:
            if not nulls:
                return out
            it = iter(out)
            return [None if x is None else next(it) for x in texts]
    return [typed_value(x, declared) for x in texts]


def sqlite_answer(sql: str, eng) -> list | None:
    """SQLite's answer to ``sql`` over the rows read back from a context (``eng``: a
    :class:`ctxbench.gold.GoldEngines` loaded with them; SQLite is the engine a gold is stated for: every accepted
    gold equals SQLite's answer on the rows it was computed from), rows as lists; None when SQLite cannot run it."""
    import sqlite3


    try:
        return norm_rows(eng.sqlite("insert").execute(sql).fetchall())
    except sqlite3.Error:
        return None


def orders_answer(sql: str) -> bool:
    """Whether the SQL's top-level query (or set operation) has an ORDER BY, as :func:`ctxbench.gold.compute_gold`
    decides whether an answer is compared as a list; True when it does not parse (the stricter comparison)."""
    from sqlglot import parse_one

    try:
        return parse_one(sql, read="sqlite").args.get("order") is not None
    except Exception:  # noqa: BLE001
        return True


def _short(rows: Any) -> str:
    s = json.dumps(rows, ensure_ascii=False)
    return s if len(s) <= 120 else s[:117] + "..."


def _fast_agrees(gold: Any, sql: str, fast: list | None) -> bool:
    return fast is not None and (results_equal(fast, gold, True, strict=True)
                                 or (not orders_answer(sql) and results_equal(fast, gold, False, strict=True)))


def fast_agrees(gold_json: str | None, sql: str, fast: list | None) -> bool:
    """Whether SQLite's answer ``fast`` (:func:`sqlite_answer` over the rows read back from the context) is the
    stored gold (``gold_json``) by the first test of :func:`gold_mismatch` (in order when the SQL orders its
    answer, else as a multiset; integers exactly, a number never equal to a text, floats within 1e-6): then
    :func:`gold_mismatch` is None without running any engine. False for a gold that is not JSON."""
    try:
        return _fast_agrees(json.loads(gold_json), sql, fast)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def gold_mismatch(gold_json: str | None, sql: str, fast: list | None, tables: dict, seed: int, eng,
                  strict_order: bool = False, integer_division: str = "exact") -> str | None:
    """Why the stored gold (``gold_json``, the instance's ``gold`` column) is not the answer re-derived from the
    context (None when it is). ``fast``: :func:`sqlite_answer` over ``tables`` (name -> (columns, types, rows) read
    back from the context), ``eng`` the engines loaded with them (None: made here when needed).

    The gold is read only here, after the derivation. SQLite's answer equal to the gold certifies it (in order
    when the SQL orders its answer, else as a multiset: unordered golds are stored in a canonical order; integers
    exactly, a number never equal to a text, floats within 1e-6);
    otherwise the SQL goes through :func:`ctxbench.gold.compute_gold` (both engines and every check that accepted
    the gold, with the build's ``strict_order`` and ``integer_division``) to say why: no accepted answer, or a
    different one (rows tied inside an ordered answer may come in any order)."""

    try:
        gold = json.loads(gold_json)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "stored gold is not JSON"
    if _fast_agrees(gold, sql, fast):
        return None
    res = compute_gold(sql, tables, seed=seed, strict_order=strict_order, engines=eng,
                       integer_division=integer_division)
    if not res.ok:
        return f"the SQL over the rows read back from the context has no accepted answer: {res.reason}"
    # SQLite's answer is the reference where SQLite runs the SQL (the engines' agreed rows may be DuckDB's, whose
    # floats for large integers would pass a numeric tolerance)
    ref = fast if fast is not None else res.rows
    if fast is None and results_equal(ref, gold, True, strict=True):
        return None
    if results_equal(ref, gold, False, strict=True) and not compute_gold(sql, tables, seed=seed, strict_order=True,
                                                                         integer_division=integer_division).ok:
        return None  # tied rows inside an ordered answer: any order of them is the answer
    return f"stored gold {_short(gold)} differs from the answer re-derived from the context {_short(res.rows)}"


def certificates_table(certs: list[Certificate]):
    """``certificates.parquet``'s Arrow table (schemas/certificates.schema.json)."""
    return to_table("certificates", [asdict(c) for c in certs])


def verify_rows(build_dir: str | Path, instances: list[dict], manifest: Any) -> VerifyResult:
    """Certificates of ``instances`` (rows of one build, every column) by each row's track verifier
    (``benchmark`` names the track). A track without a verifier makes its instances ``uncertifiable``; a verifier
    that raises makes its instances ``failed`` with the error (the other tracks' certificates stand).

    The cyclic garbage collector is paused while the verifiers run (and restored after): parsing a context makes
    one small tuple per row, and a 1M-token build's hundreds of thousands of them would otherwise trigger full
    collections that scan every one again (measured: a third of the 1M HoloBench build's verify time,
    ``bench/verify_cost.py``); the cyclic garbage they leave (sqlglot trees) is collected after, as usual."""
    with gc_paused():
        return _verify_rows(Path(build_dir), instances, manifest)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused inside the block (its state restored after): parsing contexts makes one
    small tuple per row, which would otherwise trigger full collections (:func:`verify_rows`)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _verify_rows(build_dir: Path, instances: list[dict], manifest: Any) -> VerifyResult:
    by_track: dict[str, list[dict]] = {}
    for r in instances:
        by_track.setdefault(str(r["benchmark"]), []).append(r)
    certs: list[Certificate] = []
    notes: list[str] = []
    tracks: dict[str, str] = {}
    for name, rows in by_track.items():
        for r in rows:
            tracks[r["instance_id"]] = name
        try:
            track = get_track(name)
            ref = getattr(track, "verifier", None)
        except Exception as e:  # noqa: BLE001 - an unknown track: its instances cannot be certified here
            ref, why = None, f"track {name!r} is not registered ({e})"
        else:
            why = f"track {name!r} declares no verifier (Track.verifier)"
        if ref is None:
            certs += [Certificate(r["instance_id"], "uncertifiable", why, "none") for r in rows]
            continue
        try:
            got, found = resolve(ref, f"track {name} verifier")(build_dir, rows, manifest)
        except Exception as e:  # noqa: BLE001 - reported per instance, the other tracks go on
            certs += [Certificate(r["instance_id"], "failed", f"the {name} verifier raised "
                                  f"{type(e).__name__}: {e}", "error") for r in rows]
            continue
        certs += got
        notes += found
    order = {r["instance_id"]: i for i, r in enumerate(instances)}
    certs.sort(key=lambda c: order.get(c.instance_id, len(order)))
    return VerifyResult(build_dir, certs, tracks, notes)


def manifest_notes(build_dir: Path, instances: list[dict], manifest: Any) -> list[str]:
    """Build-level checks of the manifest against the instances: the ``build_hash`` each row carries and the
    instance count. Reported; they never stop the per-instance checks."""
    notes = []
    bh = getattr(manifest, "build_hash", None)
    other = Counter(r.get("build_hash") for r in instances if r.get("build_hash") not in (None, bh))
    if other:
        notes.append(f"manifest hash mismatch: {sum(other.values())} instance(s) carry build_hash "
                     f"{', '.join(map(str, other))}, the manifest says {bh}")
    n = (getattr(manifest, "counts", None) or {}).get("instances")
    if n is not None and n != len(instances):
        notes.append(f"manifest counts {n} instances, instances.parquet holds {len(instances)}")
    return notes


def verify_build(build_dir: str | Path, write: bool = True) -> VerifyResult:
    """Verify an existing build directory: read ``manifest.json`` and ``instances.parquet`` as stored, certify
    every instance (:func:`verify_rows`) and, with ``write``, write ``certificates.parquet`` into it. Raises
    InputError when the directory holds no build."""
    import pyarrow.parquet as pq


    d = Path(build_dir)
    p = d / "instances.parquet"
    if not p.exists():
        # a runs root (ctxbench run's runs/default, a build's --out): the builds are the directories under it
        inner = sorted(x for x in d.iterdir() if (x / "instances.parquet").exists()) if d.is_dir() else []
        hint = (f"it holds the builds {', '.join(str(x) for x in inner[:3])}{' ...' if len(inner) > 3 else ''}: "
                f"give one" if inner else "give a build directory (ctxbench run's runs/default/latest, or the --out "
                                          "DIR of ctxbench build)")
        raise InputError(f"--build {d}: no instances.parquet there; {hint}")
    manifest = read_manifest(d)
    # contexts read dictionary-encoded: instances sharing a context (most do) decode its pages once

    with reading(p):  # a damaged file is named (storage.UnreadableFile)
        names = pq.read_schema(p).names
        rows = pq.read_table(p, read_dictionary=[c for c in ("context",) if c in names]).to_pylist()
    res = verify_rows(d, rows, manifest)
    res.notes[:0] = manifest_notes(d, rows, manifest)
    if write:
        write_parquet(certificates_table(res.certificates + _quarantined_certificates(d, res)), d / CERTIFICATES)
    return res


def _quarantined_certificates(d: Path, res: VerifyResult) -> list[Certificate]:
    """The certificates ``certificates.parquet`` already holds for instances the build's ``certify`` stage
    quarantined (``quarantine.parquet`` rows of stage ``verify``): they are no longer in ``instances.parquet``, and
    verifying the build again keeps their failed certificates rather than dropping them."""
    import pyarrow.parquet as pq

    old, quar = d / CERTIFICATES, d / "quarantine.parquet"
    if not (old.exists() and quar.exists()):
        return []
    try:
        gone = {r["input"] for r in pq.read_table(quar, columns=["input", "stage"]).to_pylist() if r["stage"] == "verify"}
        kept = pq.read_table(old).to_pylist()
    except (OSError, KeyError, ValueError):  # an unreadable earlier file is replaced, as before
        return []
    present = {c.instance_id for c in res.certificates}
    return [Certificate(r["instance_id"], r["status"], r["reason"] or "", r["method"] or "") for r in kept
            if r["instance_id"] in gone and r["instance_id"] not in present and r.get("status") in STATUSES]


def certify_stage(result: Any) -> Any:
    """Build stage ``certify`` (every track, after ``write``): verify the written build; a ``failed`` instance is
    moved from ``instances.parquet`` into ``quarantine.parquet`` (stage ``verify``, the certificate's reason);
    ``certificates.parquet`` keeps every certificate, failed ones included; the manifest's counts follow. Returns
    the BuildResult with its counts updated."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq


    d = Path(result.out)
    res = verify_build(d)
    for line in res.summary_lines():
        emit("build", f"certify: {line}")
    failed = {c.instance_id: c for c in res.failed}
    if not failed:
        return result
    inst = pq.read_table(d / "instances.parquet")
    keep = pc.invert(pc.is_in(inst["instance_id"], value_set=__import__("pyarrow").array(list(failed))))
    kept = inst.filter(keep)
    quar = pq.read_table(d / "quarantine.parquet").to_pylist()
    quar += [{"input": i, "stage": "verify", "reason": c.reason,
              "detail": canonical_json({"method": c.method, "track": res.tracks.get(i)})} for i, c in failed.items()]
    write_parquet(to_table("quarantine", quar), d / "quarantine.parquet")
    write_parquet(kept, d / "instances.parquet")
    mp = d / "manifest.json"
    m = json.loads(mp.read_text(encoding="utf-8"))
    m.setdefault("counts", {}).update(instances=kept.num_rows, quarantined=len(quar))
    write_json(m, mp)
    for k, v in (("n_instances", kept.num_rows), ("n_quarantined", len(quar))):
        if hasattr(result, k):
            setattr(result, k, v)
    return result
