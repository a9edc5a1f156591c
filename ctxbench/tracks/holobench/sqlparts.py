"""The SQL side of question generation (:mod:`ctxbench.tracks.holobench.generate`, module docstring steps 1-2):
identifiers quoted only where SQLite, DuckDB or sqlglot reserve the word (:func:`ident`), literals as the context
writes them (:func:`literal`), round thresholds (:func:`nice_number`) and :class:`Table`, a table as the query
families see it (its profile, the columns a question may use, their SQL expressions, sort keys with the label as
tie-breaker, and the values and quantiles a question may compare with)."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from sqlglot.tokens import Tokenizer

from ctxbench.sources.database import quote_ident
from ctxbench.verbalize.generate import ColumnProfile, TableProfile
from ctxbench.verbalize.templates import format_value

__all__ = ["MIN_VALUE_SHARE", "SQLITE_KEYWORDS", "Table", "ident", "literal", "nice_number"]

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


class Table:
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
