"""Verbalization templates generated from a database's schema, for a database that has none (issue 14).

HoloBench (section 3.3, table 4) writes five templates per table by hand, each stating the columns the queries
need, with identifiers replaced by names (appendix A.2.1). Here the same is derived from the schema and the values:

1. The database is preprocessed as the build does (:func:`ctxbench.sources.preprocess.preprocess`: value rule,
   foreign keys resolved to the referenced row's name); every column is **profiled** (:func:`profile_database`):
   its kind (integer, real, number stored as text, date, text), distinct values, NULL share and role —
   ``label`` (the row's name), ``key`` (identifiers: primary and foreign keys, ``*_id``, numbers that point into
   another table, and code columns linked by name and values to the table they name where no foreign key is
   declared: ``sales.store_code`` → ``stores.store_code``), ``ref`` (a foreign key resolved to a name),
   ``measure`` (a number), ``number`` (a numbered identifier such as ``FlightNo``), ``code`` (zip and postal
   codes, phone numbers, codes with leading zeros: :func:`is_code_column`), ``category`` (text with few values),
   ``date``, ``text`` or ``constant``. Only measures are summed, averaged, compared and ranked by generated
   questions; codes and identifiers never are.
2. Each table's **columns** (:func:`template_columns`): its label, the columns that join it to other tables, then
   measures and categories in turn, then numbers, other names, dates and text, at most ``MAX_COLUMNS``, adding a
   column only while at least ``MIN_COMPLETE`` of the rows have a value (a NULL states the missing phrase).
3. **Five templates** per table over exactly those columns (every template states every column, so a question may
   use any of them), worded from the identifiers (:mod:`ctxbench.verbalize.words`): ``SurfaceArea`` → "surface
   area", a resolved ``CountryCode`` → "country". Deterministic: the same database gives the same templates.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ctxbench.sources.database import Database, Table, looks_numeric
from ctxbench.sources.preprocess import DatabaseSpec, Preprocessed, preprocess
from ctxbench.verbalize.templates import MIN_TEMPLATES
from ctxbench.verbalize.words import article, plural, schema_vocabulary, singular, words

MAX_COLUMNS = 7
MIN_COMPLETE = 0.9
MAX_CATEGORY_VALUES = 60
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?$")
# an identifier's name: ``id``, ``uid``, ``user_id``, ``item id``, ``item-ID`` (any case after a separator), or camel
# case ``CustomerId``/``AirportID`` (case-sensitive: ``paid``, ``valid``, ``fluid`` are words, not identifiers)
_ID_NAME = re.compile(r"(?i:(?:^|[_\s-])u?id)$|[a-z0-9](?:Id|ID)$")
_NUMBERED = ("number", "code")
# codes and identifiers by name: never summed, averaged, compared with < / > or ranked (issue 22); a zip of 94107
# is no quantity. Matched against the column's words.
_CODE_WORDS = {"zip", "zipcode", "postal", "postcode", "phone", "telephone", "fax", "mobile", "isbn", "issn", "ssn",
               "iban", "code", "codes", "id", "ids", "uid", "key"}
_LEADING_ZERO = re.compile(r"^0\d")


def is_code_column(name: str, words_: str, values: list) -> bool:
    """Whether a column holds codes or identifiers, not quantities: its name says so (zip, postal code, phone,
    fax, ISBN, code, id: :data:`_CODE_WORDS`), or its text values are digit strings with leading zeros
    (``'02134'``)."""
    toks = {t.lower() for t in re.split(r"[\s_\-]+", f"{name} {words_}") if t}
    if toks & _CODE_WORDS or _ID_NAME.search(name):
        return True
    texts = [v for v in values if isinstance(v, str)]
    return bool(texts) and any(_LEADING_ZERO.match(v.strip()) and v.strip().isdigit() for v in texts)
_FIELD_OK = re.compile(r"^[^{}\[\].:!]+$")


@dataclass
class ColumnProfile:
    """One column of a preprocessed table: ``kind`` (int, real, numtext, date, text, empty), ``role`` (module
    docstring), ``words`` (how questions and templates name it), ``distinct`` values, ``null_share`` (fraction of
    rows), ``top`` (most frequent values with counts), ``ref`` the (table, column) it joins to, ``unique``."""

    name: str
    kind: str
    role: str
    words: str
    distinct: int
    null_share: float
    top: list[tuple[Any, int]] = field(default_factory=list)
    ref: tuple[str, str] | None = None
    unique: bool = False
    numeric_text: bool = False  # text (not a number column) with numeric-looking values: '1979' among titles

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "real", "numtext")


@dataclass
class TableProfile:
    """A preprocessed table: ``noun`` (singular words of its name), rows, column profiles in table order,
    ``label`` (the columns naming a row) and whether the label is a name (else an identifier)."""

    name: str
    noun: str
    rows: int
    columns: dict[str, ColumnProfile]
    label: list[str]
    label_is_name: bool

    @property
    def nouns(self) -> str:
        return plural(self.noun)


@dataclass
class JoinEdge:
    """``table.column`` = ``ref_table.ref_column``; ``ref_column`` is unique in ``ref_table``."""

    table: str
    column: str
    ref_table: str
    ref_column: str


def _kind(values: list[Any]) -> str:
    """int, real, numtext (numbers, some or all stored as text: compared through CAST), date (ISO text), text,
    mixed (text beside numbers: never compared or grouped) or empty."""
    nn = [v for v in values if v is not None]
    if not nn:
        return "empty"
    kinds = {type(v) for v in nn}
    if kinds <= {int, bool}:
        return "int"
    if kinds <= {int, float, bool}:
        return "real"
    texts = [v for v in nn if isinstance(v, str)]
    if not kinds <= {str, int, float, bool}:
        return "mixed"
    if len(texts) == len(nn) and all(_DATE.match(v) for v in texts):
        return "date"
    try:
        numbers = [float(v) for v in texts]
    except ValueError:
        return "text" if len(texts) == len(nn) else "mixed"
    return "numtext" if all(math.isfinite(x) for x in numbers) else "mixed"


def _name_columns(t: Table, excluded: set[str]) -> list[str]:
    """The columns naming a row: ``name``, else a person's name parts (first name before last name), else
    ``title``/``label``, else one name-like column that tells most rows apart (``AirportName``; not
    ``start_station_name``, which many trips share)."""
    cand = [c for c in t.columns if c not in excluded]
    low = {c.lower(): c for c in cand}
    if "name" in low:
        return [low["name"]]
    named = [c for c in cand if "name" in c.lower()]
    person = [c for c in named if re.search(r"first|last|given|family|middle|sur|fore", c, re.IGNORECASE)]
    if len(person) >= 2:
        return sorted(person[:2], key=lambda c: ("first" not in c.lower() and "given" not in c.lower(),
                                                  cand.index(c)))
    for w in ("title", "label"):
        if w in low:
            return [low[w]]
    for c in named:
        i = t.columns.index(c)
        vals = [r[i] for r in t.rows if r[i] is not None]
        if vals and len(set(vals)) >= 0.5 * len(t.rows):
            return [c]
    return []


def profile_database(raw: Database, pre: Preprocessed) -> tuple[dict[str, TableProfile], list[JoinEdge]]:
    """Profile every table of the preprocessed database ``pre`` (of ``raw``) and find its join edges: resolved
    foreign keys (``city.CountryCode_name`` = ``country.Name``), unresolved ones (``InvoiceLine.InvoiceId`` =
    ``Invoice.InvoiceId``) and undeclared ones (an integer column named after a table whose values all occur in
    that table's integer primary key: ``flights.Airline`` = ``airlines.uid``). An edge is kept only where the
    referenced column is unique, so a join never multiplies rows.

    Returns (table name → TableProfile, join edges). Column order and every choice follow the data: deterministic.
    """
    vocab = schema_vocabulary(list(raw.tables) + [c for t in raw.tables.values() for c in t.columns])
    tables = pre.db.tables
    replaced = {(r["table"], r["as"]): r for r in pre.replaced}
    fks = {(f.table, f.column): f for f in raw.foreign_keys}
    # integer single-column primary keys, for undeclared references
    int_pks: dict[str, tuple[str, set]] = {}
    # code columns that tell every row of their table apart (a declared primary key or not): a text code of
    # another table named after it links to them by name and values (sales.store_code -> stores.store_code)
    code_keys: dict[str, list[tuple[str, set]]] = {}
    for n, t in tables.items():
        rt = raw.tables.get(n)
        if rt and len(rt.primary_key) == 1 and rt.primary_key[0] in t.columns:
            i = t.columns.index(rt.primary_key[0])
            vals = [r[i] for r in t.rows]
            if vals and all(isinstance(v, int) for v in vals) and len(set(vals)) == len(vals):
                int_pks[n] = (rt.primary_key[0], set(vals))
        for i, c in enumerate(t.columns):
            vals = [r[i] for r in t.rows]
            if (vals and None not in vals and len(set(vals)) == len(vals)
                    and (c in (rt.primary_key if rt else []) or is_code_column(c, words(c, vocab), vals))):
                code_keys.setdefault(n, []).append((c, set(vals)))
    profiles: dict[str, TableProfile] = {}
    edges: list[JoinEdge] = []
    for n, t in tables.items():
        rt = raw.tables.get(n)
        pk = set(rt.primary_key) if rt else set()
        noun = singular(words(n, vocab).lower() if not n.isupper() else n)
        cols: dict[str, ColumnProfile] = {}
        for i, c in enumerate(t.columns):
            vals = [r[i] for r in t.rows]
            nn = [v for v in vals if v is not None]
            cnt = Counter(nn)
            kind = _kind(vals)
            w = words(c, vocab)
            ref = None
            if len(cnt) <= 1:
                role = "constant"
            elif (n, c) in replaced:
                r = replaced[(n, c)]
                role = "ref"
                w = re.sub(r"\s+(id|code|key|number)$", "", words(r["column"], vocab), flags=re.IGNORECASE)
                if len(r["name_columns"]) == 1 and r["ref_table"] in tables:
                    ref = (r["ref_table"], r["name_columns"][0])
            elif (n, c) in fks:
                f = fks[(n, c)]
                role = "key"
                if f.ref_table in tables and f.ref_table != n:
                    ref = (f.ref_table, f.ref_column)
            elif kind == "int" and not (c in pk and len(cnt) == len(vals)) and (
                    target := _undeclared_ref(c, set(nn), int_pks, n, vocab)) is not None:
                role, ref = "key", target if target[1] else None
            elif (n, c) not in fks and (c not in pk or len(cnt) < len(vals)) and (
                    target := _code_ref(c, set(nn), code_keys, n, vocab)) is not None:
                role, ref = "key", target  # an undeclared link by name and values (no foreign key declared)
            elif c in pk or _ID_NAME.search(c):
                role = "key"
            elif is_code_column(c, w, nn):
                role = "code"  # zip, postal code, phone, a code with leading zeros: never summed or compared
            elif kind in ("int", "real", "numtext"):
                last = w.split()[-1].lower() if w.split() else ""
                role = "number" if last in _NUMBERED else "measure"
            elif kind == "date":
                role = "date"
            elif len(cnt) <= min(MAX_CATEGORY_VALUES, max(2, len(nn) // 2)):
                role = "category"
            else:
                role = "text"
            cols[c] = ColumnProfile(c, kind, role, w, len(cnt), 1 - len(nn) / len(vals) if vals else 1.0,
                                    sorted(cnt.items(), key=lambda kv: (-kv[1], str(kv[0])))[:12], ref,
                                    len(cnt) == len(vals) and bool(vals),
                                    kind in ("text", "mixed", "date") and any(looks_numeric(str(v)) for v in cnt))
        label = _name_columns(t, {c for c, p in cols.items() if p.role in ("ref", "key", "constant")
                                  or p.kind != "text"})
        is_name = bool(label)
        unique_text = [c for c in t.columns if cols[c].kind == "text" and cols[c].unique
                       and cols[c].role in ("text", "category")]
        if not label and unique_text:  # a text that tells every row apart names it
            label = unique_text[:1]
            is_name = True
        if not label:  # no name: the row's own identifier (and its number), else its most varied text
            ids = [c for c in t.columns if c in pk and cols[c].role == "key"]
            ids += [c for c in t.columns if cols[c].role == "number"]
            texts = sorted((c for c in t.columns if cols[c].role in ("text", "category") and cols[c].kind == "text"),
                           key=lambda c: (-cols[c].distinct, t.columns.index(c)))
            label, is_name = (ids[:2], False) if ids else (texts[:1], bool(texts))
        for c in label:
            if cols[c].role not in ("key", "number"):
                cols[c].role = "label"
        profiles[n] = TableProfile(n, noun, len(t.rows), cols, label, is_name)
    for n, tp in profiles.items():
        for c, p in tp.columns.items():
            if p.ref is None:
                continue
            rt_, rc = p.ref
            target = profiles.get(rt_)
            if target is not None and rc in target.columns and target.columns[rc].unique:
                edges.append(JoinEdge(n, c, rt_, rc))
    return profiles, edges


def _code_ref(column: str, values: set, code_keys: dict[str, list[tuple[str, set]]], table: str,
              vocab: frozenset[str]) -> tuple[str, str] | None:
    """Where a code column points into another table without a declared foreign key: the other table is named by
    the column (``store_code`` -> table ``stores``; or both columns have the same name) and holds every value in
    one of its code columns that tell its rows apart. Returns (table, column), or None."""
    if not values:
        return None
    w = singular(words(column, vocab).lower())
    base = re.sub(r"\s+(id|code|key|number|no)$", "", w)
    for other, cands in sorted(code_keys.items()):
        if other == table:
            continue
        named = base in (singular(words(other, vocab).lower()), singular(other.lower()))
        for oc, keys in cands:
            if (named or oc.lower() == column.lower()) and values <= keys:
                return (other, oc)
    return None


def _undeclared_ref(column: str, values: set, int_pks: dict[str, tuple[str, set]], table: str,
                    vocab: frozenset[str]) -> tuple[str, str] | None:
    """Where an integer column points into another table without a declared foreign key: every value is a key
    of that table's integer primary key. Returns (table, key column) when the column is named after that table
    (``flights.Airline`` → ``airlines.uid``: a join), (table, "") when it merely holds 20 or more of its keys
    (``country.Capital`` → ``city.ID``: an identifier, never a number to sum), else None."""
    w = singular(words(column, vocab).lower())
    inside = [(o, pkc) for o, (pkc, keys) in sorted(int_pks.items()) if o != table and values and values <= keys]
    for other, pkc in inside:
        if w in (singular(words(other, vocab).lower()), other.lower()):
            return (other, pkc)
    return (inside[0][0], "") if inside and len(values) >= 20 else None


def template_columns(tp: TableProfile, edges: list[JoinEdge], rows: list[tuple], columns: list[str]) -> list[str]:
    """The columns a table's templates state (module docstring, step 2), in table order."""
    cols = tp.columns
    joins = {e.column for e in edges if e.table == tp.name} | {e.ref_column for e in edges if e.ref_table == tp.name}

    def by_nulls(role: str) -> list[str]:
        return sorted((c for c, p in cols.items() if p.role == role and c not in joins and _FIELD_OK.match(c)),
                      key=lambda c: (cols[c].null_share, columns.index(c)))

    measures = by_nulls("measure")[:4]
    cats = sorted([*by_nulls("category"), *(c for c in by_nulls("ref") if cols[c].distinct <= MAX_CATEGORY_VALUES)],
                  key=lambda c: (cols[c].distinct, columns.index(c)))[:3]
    alternating = [x for pair in zip(measures, cats) for x in pair]
    alternating += measures[len(cats):] + cats[len(measures):]
    rest = by_nulls("number") + by_nulls("code") + [c for c in by_nulls("ref") if c not in cats][:2] + by_nulls("date")[:2]
    order = list(dict.fromkeys([*tp.label, *sorted(joins, key=columns.index), *alternating, *rest]))
    idx = {c: columns.index(c) for c in columns}
    chosen: list[str] = []
    for c in order:
        if len(chosen) >= MAX_COLUMNS:
            break
        trial = chosen + [c]
        complete = sum(all(r[idx[x]] is not None for x in trial) for r in rows)
        if c in tp.label or complete >= MIN_COMPLETE * len(rows):
            chosen = trial
    texts = by_nulls("text")
    if len(chosen) < 4 and texts:
        c = texts[0]
        if sum(all(r[idx[x]] is not None for x in chosen + [c]) for r in rows) >= MIN_COMPLETE * len(rows):
            chosen.append(c)
    return sorted(chosen, key=columns.index)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s and not s.startswith("{") else s


def _subject(tp: TableProfile) -> tuple[str, str]:
    """(how a sentence names the row as its subject, the same after a preposition) for a table's label."""
    fields = [f"{{{c}}}" for c in tp.label]
    if not fields:  # nothing names the row: the sentence is about one record
        return f"one {tp.noun} record", f"one {tp.noun} record"
    if tp.label_is_name:
        name = " ".join(fields)
        return name, f"the {tp.noun} {name}"
    ids = " and ".join(f"{tp.columns[c].words} {f}" for c, f in zip(tp.label, fields))
    return f"the {tp.noun} with {ids}", f"the {tp.noun} with {ids}"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def table_templates(tp: TableProfile, columns: list[str]) -> list[str]:
    """Five templates for one table stating every column of ``columns`` (module docstring, step 3). Attributes are
    rotated from template to template, so the five differ in order as well as in wording."""
    attrs = [c for c in columns if c not in tp.label]
    subj, ref = _subject(tp)
    w = {c: tp.columns[c].words.replace("{", "").replace("}", "") for c in attrs}
    out = []
    for k in range(MIN_TEMPLATES):
        rot = attrs[k % len(attrs):] + attrs[:k % len(attrs)] if attrs else []
        plain = _join([f"{w[c]} {{{c}}}" for c in rot])
        the = _join([f"the {w[c]} is {{{c}}}" for c in rot])
        of = _join([f"{w[c]} of {{{c}}}" for c in rot])
        if k == 0:
            s = (f"{subj} is {article(tp.noun)} {tp.noun} with {plain}." if tp.label_is_name
                 else f"{_cap(subj)} has {plain}.")
        elif k == 1:
            s = f"For {ref}, {the}."
        elif k == 2:
            s = f"{_cap(ref)} has a recorded {of}."
        elif k == 3:
            s = f"{_cap(plain)}: these are the details of {ref}."
        else:
            s = f"In the {tp.noun} records, {subj} is listed with {plain}."
        out.append(s if attrs else f"{_cap(ref)} is one of the {tp.nouns}.")
    return out


@dataclass
class GeneratedTemplates:
    """Templates (table → five templates) with the profiles and join edges they were derived from."""

    templates: dict[str, list[str]]
    profiles: dict[str, TableProfile]
    edges: list[JoinEdge]
    columns: dict[str, list[str]]


def generate_templates(raw: Database, spec: DatabaseSpec | None = None) -> GeneratedTemplates:
    """Templates for every table of ``raw`` that the preprocessing keeps (module docstring).

    Tables left with no column besides their label get none (the build then leaves them out). Raises InputError
    (from the preprocessing) when no table is left at all.
    """
    pre = preprocess(raw, None, spec)
    profiles, edges = profile_database(raw, pre)
    temps, chosen = {}, {}
    for n, t in pre.db.tables.items():
        cols = template_columns(profiles[n], edges, t.rows, t.columns)
        if not [c for c in cols if c not in profiles[n].label]:
            continue
        temps[n] = table_templates(profiles[n], cols)
        chosen[n] = cols
    # an edge whose other end lost its column (or its table) is no edge
    edges = [e for e in edges if e.column in chosen.get(e.table, []) and e.ref_column in chosen.get(e.ref_table, [])]
    return GeneratedTemplates(temps, profiles, edges, chosen)
