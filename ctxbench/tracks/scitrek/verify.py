"""Certificates of scientific-article instances (SciTrek, section 3.2 and appendix A): every metadata fact the
question's SQL reads, and that the article text carries, must be found in the rendered collection (the context).

The collection's metadata database (``collections/<collection_id>.sqlite``: ``articles``, ``article_author``,
``citing_cited``) is what the SQL reads; its columns map to the text as follows:

* ``article_title`` and ``title_word_count``: each article's title is found in the context (case and whitespace
  folded);
* ``author_name``, ``author_position`` and ``author_count``: each author's name is found, and an article's authors
  occur in the order of their positions after its title;
* ``citing_cited``: each cited article's title occurs in the context again besides its own title (a reference
  entry); an edge not found that way makes the instance ``uncertifiable`` (the edge comes from the metadata);
* ``reference_count``: the number of an article's references is a count the metadata holds (the S2 API's, aligned
  with the converted text where the build could) and no sentence of the text states: such instances are
  ``uncertifiable`` with that reason.

A fact that should be in the text and is not makes the instance ``failed``. Every full-text certificate also
compares the stored gold with the SQL's answer over the collection database (:func:`ctxbench.verify.gold_mismatch`,
SciTrek's ordered comparison): an edited gold makes the instance ``failed``, whatever the text shows.

An instance whose context is the metadata tables rendered as text (``context_format = tables``, SciTrek's D-*
setting, :func:`ctxbench.tracks.scitrek.questions.render_tables`) is certified as a verbalized database is: the
tables are read back from the context (a ``Table <name>`` line, the column names, one line per row with values
separated by `` | ``, ``NULL`` for a missing value), typed by the collection database's declared column types,
and the SQL is re-run over them (:func:`ctxbench.verify.gold_mismatch`, SciTrek's ordered comparison and SQLite
integer division); reference counts are then facts the text states. A table the SQL reads that the context lacks,
other columns than the database's, or a gold that differs make it ``failed``; a row that does not split into its
columns (a value holding `` | `` or a line break) makes it ``uncertifiable``.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from ctxbench.verify import Certificate, typed_value
from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.gold import GoldEngines
from ctxbench.questions.sqlinfo import sql_info
from ctxbench.sources.database import quote_ident
from ctxbench.tracks.scitrek.questions import INTEGER_DIVISION, SCHEMA
from ctxbench.verify import gold_mismatch, sqlite_answer

METHOD = "metadata facts the SQL reads found in the rendered collection"
TABLES_METHOD = "metadata tables read back from the context, SQL re-run over them"
METADATA_ONLY = {"reference_count": "reference_count (the article's number of references) comes from the "
                                    "metadata database, not from a statement of the text"}


def _fold(s: str) -> str:
    """``s`` with each run of whitespace one space, trimmed, case-folded (``str.split`` and ``\\s`` agree on what
    whitespace is: both use Py_UNICODE_ISSPACE; split and join do it in one C pass)."""
    return " ".join(str(s).split()).casefold()


# a bracketed note at the end of a metadata title: '(3-page excerpt)', '(page 9 only)'
# the characters after a title in which its authors are looked for (an article's head, as the aligner reads it)
HEAD_WINDOW = 4000
_TRAILING_NOTE = re.compile(r"\s*[(\[][^()\[\]]*[)\]]\s*$")


def certify(build_dir: Path, instances: list[dict], manifest: Any) -> tuple[list[Certificate], list[str]]:
    """Certificates of a SciTrek build's instances (module docstring)."""
    certs = []
    folded: dict[str, str] = {}
    read_back: dict[tuple, tuple] = {}  # (context, database) -> (tables or error, engines)
    seed = int(getattr(manifest, "seed", None) or 0)
    infos: dict = {}  # sql -> its tables and columns; db -> its titles and authors (read once per build)
    try:
        for r in instances:
            iid = r["instance_id"]
            db = build_dir / "collections" / f"{r.get('source_id')}.sqlite"
            if not db.exists():
                certs.append(Certificate(iid, "uncertifiable", f"collection database {db.name} is missing",
                                         TABLES_METHOD if r.get("context_format") == "tables" else METHOD))
                continue
            if r.get("context_format") == "tables":
                certs.append(_certify_tables(r, db, seed, read_back, infos))
                continue
            cert = _certify_text(r, db, folded, infos)
            if cert.status != "failed":
                why = _text_gold_mismatch(r, db, seed, read_back)
                if why:
                    cert = Certificate(iid, "failed", why, METHOD)
            certs.append(cert)
    finally:
        for _, eng in read_back.values():
            if eng is not None:
                eng.close()
    return certs, []


def _read_tables(text: str, db: Path) -> dict | str:
    """The tables of a D-* context (:func:`~ctxbench.tracks.scitrek.questions.render_tables`) as
    ``{name: (columns, declared types, rows)}`` with values typed by ``db``'s declared types, or why they cannot
    be read back (a string starting ``uncertifiable:`` or ``failed:``)."""
    con = open_sqlite_readonly(db, what="collection database")
    try:
        declared = {n: [(c[1], (c[2] or "TEXT").upper()) for c in con.execute(f'PRAGMA table_info("{n}")')]
                    for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()
    out: dict[str, tuple] = {}
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        if not lines[0].startswith("Table ") or len(lines) < 2:
            return f"failed: a block of the context is not a table (it starts {lines[0][:60]!r})"
        name, cols = lines[0][len("Table "):], lines[1].split(" | ")
        want = declared.get(name) or [(c, t) for c, t in zip(*SCHEMA.get(name, ([], [])))]
        if [c for c, _ in want] != cols:
            return f"failed: table {name}'s columns in the context ({', '.join(cols)}) are not the database's"
        types = [t for _, t in want]
        rows = []
        for k, ln in enumerate(lines[2:]):
            vals = ln.split(" | ")
            if len(vals) != len(cols):
                return (f"uncertifiable: row {k + 1} of table {name} does not split into its {len(cols)} columns "
                        f"(a value holding ' | ' or a line break): {ln[:100]!r}")
            rows.append(tuple(None if v == "NULL" else typed_value(v, t) for v, t in zip(vals, types)))
        out[name] = (cols, types, rows)
    return out


def _sql_info(sql: str, infos: dict) -> dict:
    """:func:`ctxbench.questions.sqlinfo.sql_info` of ``sql``, parsed once per build (instances share questions);
    raises what it raises."""
    if ("sql", sql) not in infos:
        try:
            infos[("sql", sql)] = sql_info(sql)
        except Exception as e:  # noqa: BLE001 - kept, so that every instance of the question gets the error
            infos[("sql", sql)] = e
    got = infos[("sql", sql)]
    if isinstance(got, Exception):
        raise got
    return got


def _collection(con: sqlite3.Connection, db: Path, infos: dict) -> tuple[dict, dict, dict]:
    """A collection database's titles (``{article_id: title}``), each title folded (and without a trailing
    note), and each article's author names folded in position order: read once per build."""
    key = ("db", str(db))
    if key not in infos:
        titles = dict(con.execute("SELECT article_id, article_title FROM articles").fetchall())
        folded = {aid: (_fold(t), _fold(_TRAILING_NOTE.sub("", t))) for aid, t in titles.items()}
        names: dict = {}
        for aid, nm in con.execute("SELECT article_id, author_name FROM article_author "
                                   "ORDER BY article_id, author_position"):
            names.setdefault(aid, []).append(nm)
        infos[key] = (titles, folded, names)
    return infos[key]


def _certify_tables(r: dict, db: Path, seed: int, read_back: dict, infos: dict) -> Certificate:
    """The certificate of a D-* instance (module docstring): its SQL re-run over the tables its context states."""
    iid, sql, text = r["instance_id"], r.get("sql") or "", r.get("context") or ""
    key = (text, str(db))
    if key not in read_back:
        tables = _read_tables(text, db)
        read_back[key] = (tables, GoldEngines(tables, seed) if isinstance(tables, dict) else None)
    tables, eng = read_back[key]
    if isinstance(tables, str):
        status, why = tables.split(": ", 1)
        return Certificate(iid, status, why, TABLES_METHOD)
    try:
        reads = {t.lower() for t in _sql_info(sql, infos)["tables"]}
    except Exception as e:  # noqa: BLE001
        return Certificate(iid, "failed", f"the SQL does not parse: {e}", TABLES_METHOD)
    lacking = sorted(reads - {t.lower() for t in tables})
    if lacking:
        return Certificate(iid, "failed", f"the context lacks table {lacking[0]}, which the SQL reads", TABLES_METHOD)
    why = gold_mismatch(r.get("gold"), sql, sqlite_answer(sql, eng), tables, seed, eng, strict_order=True,
                        integer_division=INTEGER_DIVISION)
    return Certificate(iid, "failed" if why else "certified", why or "", TABLES_METHOD)


def _text_gold_mismatch(r: dict, db: Path, seed: int, read_back: dict) -> str | None:
    """Why a full-text instance's stored gold is not the answer of its SQL over the collection database (the
    facts the SQL reads, found in the text or not, are the database's): :func:`ctxbench.verify.gold_mismatch`
    with SciTrek's ordered comparison and SQLite integer division; None when it is. The database's tables are
    loaded into the gold engines once per build (``read_back``, keyed by the database)."""
    key = ("database", str(db))
    if key not in read_back:
        con = open_sqlite_readonly(db, what="collection database")
        try:
            tables = {}
            for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid"):
                info = con.execute(f"PRAGMA table_info({quote_ident(n)})").fetchall()
                cols = [c[1] for c in info]
                rows = con.execute(f"SELECT {', '.join(map(quote_ident, cols))} FROM {quote_ident(n)} "
                                   f"ORDER BY rowid").fetchall()
                tables[n] = (cols, [(c[2] or "TEXT").upper() for c in info], rows)
        finally:
            con.close()
        read_back[key] = (tables, GoldEngines(tables, seed))
    tables, eng = read_back[key]
    sql = r.get("sql") or ""
    why = gold_mismatch(r.get("gold"), sql, sqlite_answer(sql, eng), tables, seed, eng, strict_order=True,
                        integer_division=INTEGER_DIVISION)
    return f"{why} (the SQL over the collection database)" if why else None


def _certify_text(r: dict, db: Path, folded: dict, infos: dict) -> Certificate:
    """The certificate of a full-text instance (module docstring): the facts its SQL reads found in the text
    (what a context and its collection show is worked out once, :func:`_text_facts`, and shared by the questions
    over that context)."""
    iid, sql = r["instance_id"], r.get("sql") or ""
    try:
        info = _sql_info(sql, infos)
        cols = {c.split(".")[-1] for c in info["columns"]}
        tables = set(info["tables"])
    except Exception as e:  # noqa: BLE001
        return Certificate(iid, "failed", f"the SQL does not parse: {e}", METHOD)
    only = [why for c, why in METADATA_ONLY.items() if c in cols]
    text = r.get("context") or ""
    key = ("facts", text, str(db))
    if key not in infos:
        if text not in folded:
            folded[text] = _fold(text)
        infos[key] = _TextFacts(folded[text], db, infos)
    facts = infos[key]
    if facts.missing:
        return Certificate(iid, "failed", facts.missing, METHOD)
    if "article_title" in cols:
        only += facts.bare_notes
    if "article_author" in tables or cols & {"author_count", "author_name", "author_position"}:
        if facts.author_note():
            only.append(facts.author_note())
    if "citing_cited" in tables and facts.citation_note():
        only.append(facts.citation_note())
    if only:
        return Certificate(iid, "uncertifiable", only[0], METHOD)
    return Certificate(iid, "certified", "", METHOD)


class _TextFacts:
    """What one folded context ``ft`` shows of a collection's metadata: ``missing`` (why an article's title is
    not in it, None when every title is), ``bare_notes`` (titles found only without a note the metadata adds),
    and, worked out at their first use, the author and citation findings (None when they hold)."""

    def __init__(self, ft: str, db: Path, infos: dict):
        con = open_sqlite_readonly(db, what="collection database")
        try:
            self.titles, self.ftitles, self.authors = _collection(con, db, infos)
            self.edges = con.execute("SELECT article_id_citing, article_id_cited FROM citing_cited").fetchall()
        finally:
            con.close()
        self.ft, self.missing, self.bare_notes = ft, None, []
        self.located: dict[str, str] = {}  # article -> the folded title as the text carries it
        self._author: list = []
        self._citation: list = []
        for aid, title in self.titles.items():
            whole, fbare = self.ftitles[aid]
            if whole in ft:
                self.located[aid] = whole
                continue
            # a metadata title with a trailing note the text does not carry ('… (3-page excerpt)'): the
            # article is there; a gold holding the title cannot be read from the text verbatim
            bare = _TRAILING_NOTE.sub("", title)
            if bare != title and fbare in ft:
                self.located[aid] = fbare
                self.bare_notes.append(f"article title {title!r} is in the text only without its note "
                                       f"{title[len(bare):].strip()!r} (the metadata adds it)")
                continue
            self.missing = f"article title {title!r} is not in the context"
            break

    def author_note(self) -> str | None:
        """Why an article's author list is not read from the text after its title, in position order (None:
        every list is)."""
        if not self._author:
            self._author.append(self._find_author_note())
        return self._author[0]

    def _find_author_note(self) -> str | None:
        ft = self.ft
        for aid, title in self.titles.items():
            names = self.authors.get(aid, [])
            ftitle = self.located.get(aid, self.ftitles[aid][0])
            starts, at = [], ft.find(ftitle)
            while at >= 0:  # the title may stand in other articles' reference lists too: try each place
                starts.append(at)
                at = ft.find(ftitle, at + 1)

            def in_order(pos: int) -> bool:
                for nm in names:
                    k = ft.find(_fold(nm), pos, pos + HEAD_WINDOW)
                    if k < 0:
                        return False
                    pos = k + 1
                return True

            if names and not any(in_order(p) for p in starts):
                heads = [ft[p:p + HEAD_WINDOW] for p in starts]
                if any(all(_fold(nm) in h for nm in names) for h in heads):  # all there, out of order
                    pos, bad = starts[0], names[0]
                    for p, h in zip(starts, heads):
                        if all(_fold(nm) in h for nm in names):
                            pos = p
                            break
                    for nm in names:  # the first author not found after the ones before it
                        k = ft.find(_fold(nm), pos, pos + HEAD_WINDOW)
                        if k < 0:
                            bad = nm
                            break
                        pos = k + 1
                    # the text lists the authors in another order than the metadata (real collections do:
                    # shared PDFs disagree with their metadata): not proof, not a failed build either
                    return f"author {bad!r} of {title!r} is not in the context after its title (or not in author order)"
                # the aligner matched surnames; a name spelt otherwise in the text is no proof
                absent = next(nm for nm in names if not any(_fold(nm) in h for h in heads)) if heads else names[0]
                return f"author {absent!r} of {title!r} is not in the context as the metadata spells it, after its title"
        return None

    def citation_note(self) -> str | None:
        """Why a citation edge is not found as a reference entry in the text (None: every one is)."""
        if not self._citation:
            note = None
            for a, b in self.edges:
                t = _fold(self.titles.get(b, ""))
                if t and self.ft.count(t) < 2:
                    note = (f"citation {self.titles.get(a)!r} → {self.titles.get(b)!r} is not found as a reference "
                            f"entry in the text (the edge comes from the metadata)")
                    break
            self._citation.append(note)
        return self._citation[0]
