"""unArXive reader (``--unarxive PATH``): arXiv papers as JSON lines (Saier, Krause & Färber 2023, "unarXive 2022";
the shape of ``../shared/data/articles/unarxive_sample/data_format.md``), a ``.jsonl`` (``.gz``/``.xz``) file or a
directory of them.

Per paper: the title and the authors in order from ``metadata`` (``authors_parsed``, else the ``authors`` string
with its LaTeX accents decoded), the abstract, the body paragraphs under their section headings (``sec_number`` and
``section``; the heading level from ``sec_type``), formula markers replaced by their LaTeX as written
(``$...$``), citation markers by the number of their bibliography entry (``[3]``), figure and table markers by
``Figure k`` / ``Table k`` with the captions after the body, and the bibliography (``bib_entries``, each entry's
raw text) as ``## References`` numbered in file order. The reference count is the number of bibliography entries.
A line that is not JSON, a record without ``paper_id``, title or authors, or with less than
``MIN_BODY_CHARS`` of body text is a quarantine row (stage ``read``) naming the file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

from ctxbench.core.hashing import canonical_json, file_sha256
from ctxbench.sources.fulltext import (MIN_BODY_CHARS, BibEntry, FullTextArticle, ReadResult, add_id, clean_title, ids_in_text,
                       iter_files, json_lines, latex_to_text, one_line, quarantine_row, render_markdown)

_MARKER = re.compile(r"\{\{(formula|cite|figure|table|[a-z]+):([^{}]+?)\}\}")
_LEVELS = {"section": 2, "subsection": 3, "subsubsection": 4, "paragraph": 5, "subparagraph": 6}


def _authors(meta: dict) -> list[str]:
    parsed = meta.get("authors_parsed")
    if isinstance(parsed, list) and parsed and all(isinstance(x, list) and x for x in parsed):
        out = []
        for x in parsed:
            last, first, suffix = (list(map(str, x)) + ["", "", ""])[:3]
            name = one_line(" ".join(p for p in (first, last, suffix) if p.strip()))
            if name:
                out.append(latex_to_text(name))
        return out
    s = meta.get("authors")
    if not isinstance(s, str) or not s.strip():
        return []
    s = re.sub(r"\([^()]*\)", " ", one_line(s))  # affiliations in parentheses
    parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", s)
    return [latex_to_text(one_line(p)) for p in parts if one_line(p)]


def _paper(rec: dict, where: str, sha: str) -> tuple[FullTextArticle | None, str | None]:
    """(article, None) or (None, reason)."""
    pid = rec.get("paper_id")
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    if not pid:
        return None, "no paper_id"
    title = clean_title(meta.get("title") or "")
    if not title:
        return None, "no metadata.title"
    authors = _authors(meta)
    if not authors:
        return None, "no authors in metadata (authors_parsed / authors)"
    body = rec.get("body_text")
    if not isinstance(body, list):
        return None, "no body_text list"
    bib_raw = rec.get("bib_entries")
    refs = rec.get("ref_entries") if isinstance(rec.get("ref_entries"), dict) else {}
    bib_keys: list[str] = []
    entries: list[BibEntry] = []
    if isinstance(bib_raw, dict):
        for k, b in bib_raw.items():
            b = b if isinstance(b, dict) else {"bib_entry_raw": str(b)}
            text = one_line(str(b.get("bib_entry_raw") or ""))  # markers replaced below, once refs are known
            ids = ids_in_text(text)
            for x in b.get("contained_arXiv_ids") or []:
                add_id(ids, "arxiv", x.get("id") if isinstance(x, dict) else x)
            bids = b.get("ids") if isinstance(b.get("ids"), dict) else {}
            add_id(ids, "arxiv", bids.get("arxiv_id"))
            add_id(ids, "doi", bids.get("doi"))
            bib_keys.append(k)
            entries.append(BibEntry(text, ids))
    number = {k: i for i, k in enumerate(bib_keys, 1)}
    counters: dict[str, int] = {}
    labels: dict[str, str] = {}
    for k, e in refs.items():
        t = (e or {}).get("type") if isinstance(e, dict) else None
        if t in ("figure", "table"):
            counters[t] = counters.get(t, 0) + 1
            labels[k] = f"{t.capitalize()} {counters[t]}"

    def sub(text: str) -> str:
        def one(m: re.Match) -> str:
            kind, key = m.group(1), m.group(2)
            if kind == "cite":
                return f"[{number[key]}]" if key in number else "[?]"
            if kind == "formula":
                e = refs.get(key)
                latex = str(e.get("latex") or "").strip() if isinstance(e, dict) else ""
                return f"${latex}$" if latex else ""
            return labels.get(key, kind.capitalize())
        return _MARKER.sub(one, text)

    blocks = []
    for p in body:
        if not isinstance(p, dict) or not isinstance(p.get("text"), str):
            continue
        sec = one_line(str(p.get("section") or ""))
        num = str(p.get("sec_number") or "").strip()
        num = "" if num in ("-1", "None") else num
        heading = f"{num} {sec}".strip() if sec else ""
        blocks.append((_LEVELS.get(str(p.get("sec_type") or "").lower(), 2), one_line(sub(heading)),
                       sub(p["text"]).strip()))
    body_chars = sum(len(b[2]) for b in blocks)
    if body_chars < MIN_BODY_CHARS:
        return None, f"no full text: {body_chars} characters of body text (at least {MIN_BODY_CHARS} needed)"
    captions = []
    for k, lab in labels.items():
        cap = one_line(sub(str(refs[k].get("caption") or "")))
        if cap:
            captions.append((2, "Figures and tables", f"{lab}: {cap}"))
    abstract = rec.get("abstract")
    abstract = abstract.get("text") if isinstance(abstract, dict) else abstract if isinstance(abstract, str) else None
    abstract = abstract or meta.get("abstract")
    abstract = re.sub(r"(?<!\n)\n(?!\n)", " ", str(abstract)).strip() if abstract else None
    text = render_markdown(title, authors, abstract, blocks + captions, [sub(e.text) for e in entries])
    ids: dict[str, set] = {}
    add_id(ids, "arxiv", pid)
    add_id(ids, "doi", meta.get("doi"))
    identifiers = {k: sorted(v)[0] for k, v in ids.items()}
    art = FullTextArticle("unarxive", str(pid), where, title, authors,
                          len(entries) if isinstance(bib_raw, dict) else None, text, entries, identifiers, [],
                          sha, "unarxive-jsonl",
                          {"discipline": rec.get("discipline"), "license": meta.get("license")})
    return art, None


def read_unarxive(path: str | Path) -> ReadResult:
    """Read unArXive JSON lines from a file or a directory (module docstring). Raises InputError when ``path``
    does not exist or holds no ``.jsonl`` file; bad records are quarantine rows."""
    res = ReadResult()
    for f in iter_files(path, (".jsonl", ".jsonl.gz", ".jsonl.xz"), "--unarxive"):
        sha = file_sha256(f)
        res.files[str(f)] = sha
        try:
            for line, rec in json_lines(f):
                where = f"{f.name}:{line}"
                if isinstance(rec, Exception):
                    res.quarantine.append(quarantine_row(where, f"not JSON ({rec})"))
                    continue
                if not isinstance(rec, dict):
                    res.quarantine.append(quarantine_row(where, f"a line holds {type(rec).__name__}, not a paper object"))
                    continue
                try:
                    art, why = _paper(rec, where, sha)
                except (AttributeError, TypeError, KeyError, ValueError) as e:  # a field of an unexpected type
                    art, why = None, f"malformed record ({type(e).__name__}: {e})"
                if art is None:
                    res.quarantine.append(quarantine_row(where, why or "unreadable",
                                                         canonical_json({"paper_id": rec.get("paper_id")})))
                else:
                    res.articles.append(art)
        except (OSError, EOFError, UnicodeDecodeError) as e:
            res.quarantine.append(quarantine_row(f.name, f"cannot read the file ({type(e).__name__}: {e})"))
    return res
