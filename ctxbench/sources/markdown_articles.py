"""Markdown reader (``--markdown DIR``): one article per ``.md`` file (e.g. ``../shared/data/articles/arxiv_markdown``,
papers converted by Marker, Nougat, MinerU or pandoc). The text is used as written (LaTeX mathematics included).

Metadata, first found wins:

1. a sidecar JSON beside the file (``<stem>.json`` or ``<stem>.meta.json``): ``title``, ``authors`` (a list, or one
   string separated by commas/"and"), optionally ``ref_count`` (or ``reference_count``), ``id``, ``arxiv_id``,
   ``doi``, ``cites`` (ids of other articles);
2. YAML front matter (``---`` ... ``---``): ``title``, ``author``/``authors`` (strings or ``{name: ...}``);
3. the document's own lines: the title is the first level-1 heading (else the first heading); the authors are read
   from the lines between it and the abstract (or the first numbered section): lines are split at ``<br>``,
   superscript affiliation marks are removed, lines with an e-mail address, a digit, an institution word or a
   country are affiliations, and the rest are split at commas, ``and`` and ``&`` into names of 2-6 capitalised
   words (particles such as ``van``, ``de`` allowed; ``Dr.``/``Prof.`` dropped).

The reference count is the sidecar's, else the number of entries of the last bibliography section
(:func:`ctxbench.sources.fulltext.bibliography_entries`); None (unknown) when the text has no bibliography heading.
A file without a title, without authors, or with less than ``MIN_BODY_CHARS`` of text is a quarantine row (stage
``read``) saying what to add.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import yaml

from ctxbench.core.hashing import file_sha256
from ctxbench.sources.fulltext import (MIN_BODY_CHARS, BibEntry, FullTextArticle, ReadResult, add_id, bibliography_entries,
                       bibliography_section, clean_title, entry_ids, iter_files, latex_to_text, one_line,
                       quarantine_row)

_AFFIL_WORDS = re.compile(
    r"(?i)\b(?:universit\w*|univ\.?|institut\w*|department|dept\.?|laborator\w*|lab|labs|school|college|faculty|"
    r"cent(?:er|re|rum)|corporation|corp\.?|inc\.?|ltd\.?|gmbh|company|research|academy|hospital|foundation|"
    r"group|program(?:me)?|street|road|avenue|email|e-mail|correspond\w*|address\w*|equal contribution|"
    r"keywords?|abstract|ministry|council|agency|polytechnic|politecnico|technolog\w*|sciences?|engineering|"
    r"informati\w*|campus|national|division|unit|office|press|conference|workshop|proceedings|preprint|"
    r"arxiv|submitted|published|copyright|licen[cs]e)\b")
_COUNTRIES = re.compile(
    r"(?i)\b(?:usa|u\.s\.a\.?|united states|uk|u\.k\.|united kingdom|england|scotland|china|p\.\s?r\.\s?china|japan|"
    r"korea|germany|france|italy|spain|portugal|netherlands|belgium|switzerland|austria|sweden|norway|denmark|"
    r"finland|poland|czech\w*|hungary|greece|turkey|israel|iran|india|pakistan|singapore|thailand|vietnam|"
    r"indonesia|malaysia|taiwan|hong kong|australia|new zealand|canada|mexico|brazil|argentina|chile|colombia|"
    r"russia|ukraine|egypt|south africa|nigeria|ireland|luxembourg|estonia|saudi arabia|qatar|uae)\b")
_PARTICLES = {"van", "von", "der", "den", "de", "da", "di", "du", "del", "della", "dos", "das", "la", "le", "bin",
              "ibn", "al", "el", "y", "ten", "ter", "zu"}
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_STOP = re.compile(r"(?i)^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:abstract|summary|introduction|keywords|index terms|"
                   r"(?:\d+|[ivx]+)\.?\s+\w)")


def _strip_marks(s: str) -> str:
    s = "".join(c for c in s if unicodedata.category(c) != "No")  # superscript marks: Smith¹, Lee²
    s = re.sub(r"\$\s*(?:\{\s*\})?\s*\^\s*\{[^{}$]*(?:\{[^{}$]*\}[^{}$]*)*\}\s*\$", " ", s)  # ${ }^{a,b}$
    s = re.sub(r"\$[^$]{0,40}\$", " ", s)  # other short inline maths in a byline: marks
    s = re.sub(r"<sup>.*?</sup>|\^\{[^}]*\}|\^\S+", " ", s)
    s = re.sub(r"\\thanks\{[^}]*\}|\\footnote\{[^}]*\}", " ", s)
    s = s.replace("\\&", "&").replace("\\,", " ")
    s = re.sub(r"[*†‡§¶♯♭✉⋆∗]+|(?<=[a-z])\d+(?:,\d+)*\b", " ", s)
    s = re.sub(r"(?:\*\*|__|`)", " ", s)
    return one_line(s)


def _is_name(part: str) -> bool:
    toks = part.split()
    if not 2 <= len(toks) <= 6:
        return False
    caps = 0
    for t in toks:
        if t.lower() in _PARTICLES:
            continue
        if not t[0].isalpha() or not t[0].isupper() or any(c.isdigit() for c in t):
            return False
        letters = [c for c in t if c.isalpha()]
        if len(letters) >= 2 and all(c.isupper() for c in letters) and "." not in t:
            return False  # an acronym (UC, EECS, MIT), not a name
        if not re.fullmatch(r"[^\W\d_][\w'’.\-]*", t):
            return False
        caps += 1
    return caps >= 2


def _names_in_line(line: str) -> list[str]:
    s = _strip_marks(latex_to_text(line))
    s = re.sub(r"(?i)^(?:authors?|by)\s*:\s*", "", s)
    if not s or "@" in s or re.search(r"\d", s) or _AFFIL_WORDS.search(s) or _COUNTRIES.search(s) or "http" in s:
        return []
    parts = [one_line(p) for p in re.split(r",|;|\s+and\s+|\s*&\s*|\band\s+", s) if one_line(p)]
    parts = [re.sub(r"^(?:Dr|Prof|Professor|Mr|Mrs|Ms)\.?\s+", "", p) for p in parts]
    names = [p for p in parts if _is_name(p)]
    return names if names and len(names) == len(parts) else []


def front_matter(text: str) -> tuple[dict, str]:
    """YAML front matter (``---`` block at the top) as a dict, and the text after it ({} and the text when none)."""
    m = re.match(r"\A---\s*\n(.*?)\n(?:---|\.\.\.)\s*\n", text, re.DOTALL)
    if not m:
        return {}, text
    try:
        d = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return {}, text
    return (d if isinstance(d, dict) else {}), text[m.end():]


def title_and_authors(text: str) -> tuple[str | None, list[str]]:
    """The title and authors a markdown article states in its own first lines (module docstring, point 3)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    ti = None
    for level in (1, None):
        for i, ln in enumerate(lines[:200]):
            m = _HEADING.match(ln)
            if m and (level is None or len(m.group(1)) == level) and re.search(r"[A-Za-z]", m.group(2)):
                ti = i
                break
        if ti is not None:
            break
    if ti is None:
        return None, []
    title = clean_title(re.sub(r"(?:\*\*|__)", "", _HEADING.match(lines[ti]).group(2)))
    authors: list[str] = []
    for ln in lines[ti + 1: ti + 80]:
        if _STOP.match(ln) and not authors_line_heading(ln):
            break
        body = _HEADING.match(ln).group(2) if _HEADING.match(ln) else ln
        for seg in re.split(r"<br\s*/?>|\\\\", body):
            for n in _names_in_line(seg):
                if n not in authors:
                    authors.append(n)
    return title, authors


def authors_line_heading(line: str) -> bool:
    """A heading in the front matter that is a name (some converters make a byline a heading)."""
    m = _HEADING.match(line)
    return bool(m) and bool(_names_in_line(m.group(2))) and not re.match(r"(?i)\s*(?:\d|[ivx]+\.)", m.group(2))


def _sidecar(md: Path) -> tuple[Path | None, dict | str | None]:
    for cand in (md.with_suffix(".json"), md.with_name(md.stem + ".meta.json"), md.with_name(md.name + ".json")):
        if cand.is_file():
            try:
                d = json.loads(cand.read_text(encoding="utf-8-sig"))
            except (OSError, ValueError) as e:
                return cand, f"sidecar {cand.name} is not JSON ({e})"
            return cand, d if isinstance(d, dict) else f"sidecar {cand.name} is not a JSON object"
    return None, None


def _author_list(v) -> list[str]:
    if isinstance(v, str):
        return [one_line(p) for p in re.split(r",|;|\s+and\s+", v) if one_line(p)]
    if isinstance(v, list):
        out = []
        for x in v:
            if isinstance(x, dict):
                x = x.get("name") or " ".join(str(x.get(k) or "") for k in ("first", "given", "last", "family"))
            if one_line(str(x or "")):
                out.append(one_line(str(x)))
        return out
    return []


def read_markdown(path: str | Path) -> ReadResult:
    """Read every ``.md`` article under ``path`` (module docstring). Raises InputError when the directory does
    not exist or holds no markdown file; bad files are quarantine rows."""
    res = ReadResult()
    for f in iter_files(path, (".md", ".markdown"), "--markdown"):
        sha = file_sha256(f)
        res.files[str(f)] = sha
        try:
            text = f.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            res.quarantine.append(quarantine_row(f.name, f"cannot read it as UTF-8 text ({e})"))
            continue
        text = text.replace("\r\n", "\n").replace("\r", "\n").strip() + "\n"
        side_path, side = _sidecar(f)
        if isinstance(side, str):
            res.quarantine.append(quarantine_row(f.name, side))
            continue
        side = side or {}
        if side_path is not None:
            res.files[str(side_path)] = file_sha256(side_path)
        fm, body = front_matter(text)
        own_title, own_authors = title_and_authors(body)
        title = clean_title(side.get("title") or fm.get("title") or own_title or "")
        authors = (_author_list(side.get("authors")) or _author_list(fm.get("authors") or fm.get("author"))
                   or own_authors)
        how = "sidecar" if side.get("title") else "front matter" if fm.get("title") else "text"
        if not title:
            res.quarantine.append(quarantine_row(f.name, "no title: the file has no '# ' heading; add a sidecar "
                                                 f"{f.stem}.json with title and authors"))
            continue
        if not authors:
            res.quarantine.append(quarantine_row(f.name, "no authors: no author line found below the title; add a "
                                                 f"sidecar {f.stem}.json with title and authors"))
            continue
        if len(body) < MIN_BODY_CHARS:
            res.quarantine.append(quarantine_row(f.name, f"no full text: {len(body)} characters (at least "
                                                 f"{MIN_BODY_CHARS} needed)"))
            continue
        sec = bibliography_section(body)
        entries = [BibEntry(one_line(e), entry_ids(e)) for e in bibliography_entries(sec[0])] if sec else []
        rc = side.get("ref_count", side.get("reference_count"))
        if rc is not None:
            try:
                rc = int(rc)
            except (TypeError, ValueError):
                res.quarantine.append(quarantine_row(f.name, f"sidecar ref_count {rc!r} is not a whole number"))
                continue
        else:
            rc = len(entries) if sec else None
        ids: dict[str, set] = {}
        add_id(ids, "arxiv", side.get("arxiv_id") or fm.get("arxiv") or fm.get("arxiv_id") or f.stem)
        add_id(ids, "doi", side.get("doi") or fm.get("doi"))
        identifiers = {k: sorted(v)[0] for k, v in ids.items()}
        sid = str(side.get("id") or f.stem)
        cites = [("markdown", str(c)) for c in side.get("cites") or [] if isinstance(c, (str, int))]
        res.articles.append(FullTextArticle("markdown", sid, f.name, title, [latex_to_text(a) for a in authors], rc,
                                            text, entries, identifiers, cites, sha, "markdown",
                                            {"metadata_from": how}))
    return res
