"""Checking generated candidates (:mod:`ctxbench.tracks.holobench.generate`, module docstring step 3): the gold
engine (:func:`ctxbench.gold.compute_gold`) on the full preprocessed database and on context samples drawn exactly as
the build draws the relevant rows (:func:`ctxbench.tracks.holobench.build.draw_relevant`), with quick SQLite
pre-checks (empty answers, more than :data:`MAX_ANSWER_ROWS` rows, a COUNT that is 0 in most samples); every reason
for leaving a candidate out is counted (:class:`Checker`)."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from itertools import product
from typing import TYPE_CHECKING

from ctxbench.gold import compute_gold
from ctxbench.sources.database import quote_ident
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tracks.holobench.build import HoloBenchConfig, draw_relevant
from ctxbench.tracks.holobench.candidates import Candidate

if TYPE_CHECKING:  # the configuration's class, for the annotation only (generate imports this module)
    from ctxbench.tracks.holobench.generate import GenerateConfig

__all__ = ["MAX_ANSWER_ROWS", "Checker"]

MAX_ANSWER_ROWS = 20


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
