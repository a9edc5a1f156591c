"""Full-text article sources for the scientific-article track: one record shape for every source, the readers'
common interface, rendering to markdown, identifiers, deduplication and citation resolution among the articles
present (SciTrek sections 3.1-3.2: a collection's database holds each article's title, authors in order, the number
of bibliography entries and the citations among the collection's articles).

Readers (one module each; every one is tolerant: a malformed record becomes a quarantine row with a reason, the rest
is read): :func:`ctxbench.sources.unarxive.read_unarxive` (unArXive JSON lines), :func:`ctxbench.sources.markdown_articles.read_markdown`
(one article per ``.md``), :func:`ctxbench.sources.s2orc.read_s2orc` (S2ORC JSON), and the PDFs with their metadata
file (``ctxbench.sources.articles``; converted in the track's convert stage). Each returns a :class:`ReadResult` of
:class:`FullTextArticle` records. ``READERS`` maps a source name to its reader; ``SOURCE_ORDER`` is the order in
which a duplicate keeps its first record (``pdfs``, ``unarxive``, ``markdown``, ``s2orc``).

Mathematics written in LaTeX stays as written (``$...$``); reference counts are the number of bibliography entries
of the record.
"""

from __future__ import annotations

import gzip
import lzma
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator
from ctxbench.core.errors import InputError

SOURCE_ORDER = ("pdf", "unarxive", "markdown", "s2orc")
# sources whose records list their citations within the source completely (the PDF metadata file's cites_in_set,
# curated by hand): their bibliographies only add citations of articles from other sources
CURATED_CITATIONS = ("pdf",)
MIN_BODY_CHARS = 1000  # less body text than this is no full text (a metadata-only record or a failed parse)

_ARXIV_NEW = re.compile(r"(?<![\w.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\w])")
_ARXIV_OLD = re.compile(r"(?<![\w])([a-z][a-z.-]{1,15}/\d{7})(?:v\d+)?(?![\w])", re.IGNORECASE)
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"'<>,;]+)", re.IGNORECASE)


@dataclass
class BibEntry:
    """One bibliography entry: its text as the article prints it and the identifiers found in it
    (``{"arxiv": {...}, "doi": {...}, "s2": {...}}``)."""

    text: str
    ids: dict[str, set[str]] = field(default_factory=dict)


@dataclass
class FullTextArticle:
    """One article read from a source.

    ``source``: pdf | unarxive | markdown | s2orc; ``source_id``: its id in that source (metadata id, arXiv id,
    file stem, S2 corpus id); ``input``: where it was read (file name, ``file:line`` for JSON lines); ``title`` and
    ``authors`` (in order) as the text shows them; ``ref_count``: the number of bibliography entries (None:
    unknown); ``text``: the article as markdown (title, authors, abstract, sections with headings, bibliography);
    ``bibliography``: its entries; ``identifiers``: the article's own (``arxiv``, ``doi``, ``s2``, ``pdf``);
    ``cites``: (kind, id) pairs of articles the source itself says it cites (e.g. ``("s2", "123")``,
    ``("pdf", "A02")``); ``sha256``: of the file it came from."""

    source: str
    source_id: str
    input: str
    title: str
    authors: list[str]
    ref_count: int | None
    text: str
    bibliography: list[BibEntry] = field(default_factory=list)
    identifiers: dict[str, str] = field(default_factory=dict)
    cites: list[tuple[str, str]] = field(default_factory=list)
    sha256: str | None = None
    converter: str = ""
    extra: dict = field(default_factory=dict)


@dataclass
class ReadResult:
    """What a reader returns: the articles read, quarantine rows (stage ``read``) and the SHA-256 of every file it
    read (file path -> hash; part of the build hash)."""

    articles: list[FullTextArticle] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def quarantine_row(input_: str, reason: str, detail: str | None = None, stage: str = "read") -> dict:
    """A quarantine row for one unreadable record."""
    return {"input": input_, "stage": stage, "reason": reason, "detail": detail}


# ----------------------------------------------------------------------------------------------- text helpers
def fold(s: str) -> str:
    """NFKC (ligatures to letters), accents removed, case folded."""
    s = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", s))
    return "".join(c for c in s if not unicodedata.combining(c)).casefold()


def title_key(title: str) -> str:
    """The normalised title that identifies an article across sources: letters and digits only, accents removed,
    case folded (``WSe$_{2}$`` and ``WSe2`` agree)."""
    return re.sub(r"[^0-9a-z]", "", fold(title))


def clean_title(title: str) -> str:
    """A title as stored: whitespace (line wraps of arXiv metadata) collapsed, LaTeX kept as written."""
    return re.sub(r"\s+", " ", str(title)).strip()


def one_line(s: str) -> str:
    """Text with its line breaks and runs of spaces collapsed to single spaces."""
    return re.sub(r"\s+", " ", s).strip()


_ACCENTS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "=": "\u0304",
            ".": "\u0307", "u": "\u0306", "v": "\u030c", "H": "\u030b", "c": "\u0327", "k": "\u0328", "r": "\u030a"}
_LETTERS = {"l": "ł", "L": "Ł", "o": "ø", "O": "Ø", "ss": "ß", "aa": "å", "AA": "Å", "ae": "æ", "AE": "Æ",
            "oe": "œ", "OE": "Œ", "i": "ı", "j": "ȷ"}


def latex_to_text(s: str) -> str:
    """LaTeX accent commands in a name to Unicode (``Dra\\v{s}ki\\'c`` -> ``Draškić``, ``{\\l}`` -> ``ł``); other
    text unchanged. For author names only: mathematics stays as written."""
    def accent(m: re.Match) -> str:
        cmd, arg = m.group(1), m.group(2) or m.group(3) or ""
        if arg in ("\\i", "\\j"):
            arg = arg[1]
        return unicodedata.normalize("NFC", arg + _ACCENTS[cmd]) if arg else m.group(0)

    s = re.sub(r"\\([a-zA-Z]{1,2})\b\s*(?=[}\s]|$)", lambda m: _LETTERS.get(m.group(1), m.group(0)), s)
    s = re.sub(r"\\(['`^\"~=.]|[uvHckr](?![a-zA-Z]))\s*(?:\{(\\?[a-zA-Z]?)\}|(\\?[a-zA-Z]))", accent, s)
    return re.sub(r"[{}]", "", s) if "\\" not in s else s


def render_markdown(title: str, authors: list[str], abstract: str | None, blocks: list[tuple[int, str, str]],
                    bibliography: list[str]) -> str:
    """An article as markdown: ``# title``, the author line, ``## Abstract``, each block (heading level, heading,
    paragraph; a heading is written when it differs from the previous block's), and ``## References`` with the
    entries numbered ``[1]``, ``[2]``, ... (the labels the text's citation markers use)."""
    out = [f"# {title}", ", ".join(authors)]
    if abstract and abstract.strip():
        out += ["## Abstract", abstract.strip()]
    prev = None
    for level, heading, para in blocks:
        if heading and (level, heading) != prev:
            out.append("#" * max(2, min(level, 6)) + " " + heading)
        prev = (level, heading) if heading else prev
        if para.strip():
            out.append(para.strip())
    if bibliography:
        out.append("## References")
        out += [f"[{i}] {one_line(e)}" for i, e in enumerate(bibliography, 1)]
    return "\n\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------- identifiers
def norm_arxiv(s: str) -> str | None:
    """An arXiv id without version and ``arXiv:`` prefix (``arXiv:1706.03762v5`` -> ``1706.03762``), or None."""
    s = str(s or "").strip()
    m = _ARXIV_NEW.search(s) or _ARXIV_OLD.search(s)
    return m.group(1).lower() if m else None


def norm_doi(s: str) -> str | None:
    """A DOI in lower case without resolver prefix and trailing punctuation, or None."""
    m = _DOI.search(str(s or ""))
    return m.group(1).rstrip(".)]}").lower() if m else None


def ids_in_text(text: str) -> dict[str, set[str]]:
    """arXiv ids (``1706.03762``, ``hep-ph/9412269``) and DOIs written in a piece of text."""
    out: dict[str, set[str]] = {}
    ax = {m.group(1).lower() for m in _ARXIV_NEW.finditer(text)}
    ax |= {m.group(1).lower() for m in _ARXIV_OLD.finditer(text)}
    if ax:
        out["arxiv"] = ax
    dois = {m.group(1).rstrip(".)]}").lower() for m in _DOI.finditer(text)}
    if dois:
        out["doi"] = dois
    return out


def add_id(ids: dict[str, set[str]], kind: str, value) -> None:
    """Add one identifier (normalised by kind; empty values ignored)."""
    if value is None or value == "" or value == []:
        return
    v = norm_arxiv(value) if kind == "arxiv" else norm_doi(value) if kind == "doi" else str(value).strip()
    if v:
        ids.setdefault(kind, set()).add(v)


# ----------------------------------------------------------------------------------------------- files
def iter_files(path: str | Path, suffixes: tuple[str, ...], flag: str) -> list[Path]:
    """The files a source path names: the file itself, or every file under the directory whose name ends in one
    of ``suffixes`` (sorted). Raises InputError naming ``flag`` when the path does not exist or holds none."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError(f"{flag} {p} does not exist: pass a file or a directory of {'/'.join(suffixes)} files")
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(suffixes))
    if not files:
        raise InputError(f"{flag} {p} holds no {'/'.join(suffixes)} file")
    return files


def open_text(path: Path):
    """A text stream of a plain, ``.gz`` or ``.xz`` file (UTF-8; a byte-order mark, as Windows tools write one, is dropped)."""
    n = path.name.lower()
    if n.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig")
    if n.endswith(".xz"):
        return lzma.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def json_lines(path: Path) -> Iterator[tuple[int, object | Exception]]:
    """(line number, parsed object or the exception) for each non-empty line of a JSON-lines file."""
    import json

    with open_text(path) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield i, json.loads(line)
            except ValueError as e:
                yield i, e


# ----------------------------------------------------------------------------------------------- bibliography
def bibliography_section(markdown: str) -> tuple[str, int] | None:
    """The text of the last bibliography section of a markdown article (from its heading to the next heading of
    the same or a higher level, e.g. an appendix) and its heading level (0 for a plain ``References`` line).
    None when the text has no bibliography heading."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    head = re.compile(r"^\s*(#{1,6})?\s*(?:\*\*|__)?\s*(?:\d+\.?\s+|[IVX]+\.\s+)?(references|bibliography|"
                      r"literature cited|works cited|references and notes|cited literature)\s*:?\s*(?:\*\*|__)?\s*$",
                      re.IGNORECASE)
    found = None
    for i, ln in enumerate(lines):
        m = head.match(ln)
        if m:
            found = (i, len(m.group(1) or ""))
    if found is None:
        return None
    start, level = found
    end = len(lines)
    for j in range(start + 1, len(lines)):
        m = re.match(r"^(#{1,6})\s+\S", lines[j])
        if m and (level == 0 or len(m.group(1)) <= level):
            end = j
            break
    return "\n".join(lines[start + 1:end]), level


_LABEL = re.compile(r"^\s*(?:\[(\d{1,4})\]|(\d{1,4})[.)]\s)")


def bibliography_entries(section: str) -> list[str]:
    """The entries of a bibliography section: its paragraphs (blank-line separated; a converter writes one per
    entry); where entries are labelled ``[n]`` or ``n.``, each line starting with a label opens an entry and a
    paragraph without a label continues the previous one (an entry broken by a page or column change). Images, footnote definitions and horizontal rules are not
    entries."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", section) if p.strip()]
    paras = [p for p in paras if not re.fullmatch(r"(?:!\[[^\]]*\]\([^)]*\)|-{3,}|\*{3,}|<[^>]+>)", p)
             and not re.match(r"\[\^[^\]]+\]:", p)]  # footnote definitions a converter put at the end
    labelled = [p for p in paras if _LABEL.match(p)]
    label_lines = sum(1 for p in paras for ln in p.split("\n") if _LABEL.match(ln))
    if label_lines >= 3 and len(labelled) >= len(paras) // 2:
        out: list[str] = []
        for p in paras:
            for ln in p.split("\n"):  # a label at a line start opens an entry even without a blank line
                if _LABEL.match(ln) or not out:
                    out.append(ln.strip())
                else:
                    out[-1] += " " + ln.strip()
        return out
    return paras


def entry_ids(text: str) -> dict[str, set[str]]:
    """Identifiers written in one bibliography entry."""
    return ids_in_text(text)


# ----------------------------------------------------------------------------------------------- dedup + citations
@dataclass
class Merged:
    """Articles kept after deduplication (in source order) with their final ids, and the dropped duplicates
    (final id of the dropped record -> kept article id)."""

    kept: list[tuple[str, FullTextArticle]]
    duplicates: list[tuple[str, FullTextArticle, str]]


def assign_ids(articles: list[FullTextArticle], taken: set[str] | None = None) -> list[tuple[str, FullTextArticle]]:
    """A unique article id per record: its source id, or ``<source>:<source id>`` when an earlier record or
    ``taken`` (the PDF metadata's ids, which keep theirs) holds that id."""
    seen: set[str] = set(taken or ())
    out = []
    for a in articles:
        aid = a.source_id
        if aid in seen:
            aid = f"{a.source}:{a.source_id}"
            k = 2
            while aid in seen:
                aid, k = f"{a.source}:{a.source_id}#{k}", k + 1
        seen.add(aid)
        out.append((aid, a))
    return out


def deduplicate(records: list[tuple[str, FullTextArticle]]) -> Merged:
    """Keep the first record of each normalised title (:func:`title_key`) in the order given (callers pass the
    sources in ``SOURCE_ORDER``); later records of the same article are duplicates of the kept id."""
    first: dict[str, str] = {}
    kept, dups = [], []
    for aid, a in records:
        k = title_key(a.title)
        if k and k in first:
            dups.append((aid, a, first[k]))
            continue
        if k:
            first[k] = aid
        kept.append((aid, a))
    return Merged(kept, dups)


def _title_pattern(title: str) -> re.Pattern | None:
    words = re.findall(r"[0-9a-z]+", fold(title))
    if len(words) < 3 or sum(len(w) for w in words) < 15:
        return None  # too short to find safely inside other text
    return re.compile(r"(?<![0-9a-z])" + r"[^0-9a-z]*".join(map(re.escape, words)) + r"\s*(?:[.,;:!?\"”’')\]]|$)")


def resolve_citations(merged: Merged) -> dict[str, list[str]]:
    """Citations among the kept articles: kept id -> sorted ids of the other kept articles it cites.

    An article cites another when the source says so (``cites``: ids of its own kind, e.g. the PDF metadata's
    ``cites_in_set`` or S2ORC's outbound citations), when one of its bibliography entries carries an identifier of
    the other (arXiv id, DOI, S2 id; identifiers of a dropped duplicate count for the article kept in its place),
    or when an entry contains the other's title as a whole phrase (three or more words, ended by punctuation or
    the end of the entry). A record of a source in ``CURATED_CITATIONS`` keeps its source's citations within that
    source as they are (its bibliography adds only articles of other sources)."""
    index: dict[tuple[str, str], str] = {}
    for aid, a in merged.kept:
        for kind, v in a.identifiers.items():
            index.setdefault((kind, v), aid)
        index.setdefault((a.source, a.source_id), aid)
    for aid, a, kept_id in merged.duplicates:
        for kind, v in a.identifiers.items():
            index.setdefault((kind, v), kept_id)
        index.setdefault((a.source, a.source_id), kept_id)
    src = {aid: a.source for aid, a in merged.kept}
    # titles indexed by their first three words: an entry is matched only against the titles whose first words
    # it contains (linear in the entries' words, not articles x entries)
    by_start: dict[tuple[str, ...], list[tuple[str, re.Pattern]]] = {}
    for aid, a in merged.kept:
        pat = _title_pattern(a.title)
        if pat is not None:
            by_start.setdefault(tuple(re.findall(r"[0-9a-z]+", fold(a.title))[:3]), []).append((aid, pat))
    out: dict[str, list[str]] = {}
    for aid, a in merged.kept:
        cited: set[str] = set()
        for kind, v in a.cites:
            t = index.get((kind, v))
            if t:
                cited.add(t)
        curated = a.source in CURATED_CITATIONS
        for e in a.bibliography:
            for kind, vals in e.ids.items():
                for v in vals:
                    t = index.get((kind, v))
                    if t and not (curated and src[t] == a.source):
                        cited.add(t)
            folded = fold(e.text)
            words = re.findall(r"[0-9a-z]+", folded)
            for i in range(len(words) - 2):
                for other, pat in by_start.get((words[i], words[i + 1], words[i + 2]), ()):
                    if (other != aid and other not in cited and not (curated and src[other] == a.source)
                            and pat.search(folded)):
                        cited.add(other)
        cited.discard(aid)
        out[aid] = sorted(cited)
    return out


ReaderFn = Callable[[str | Path], ReadResult]  # the full-text sources' readers: ctxbench.sources.readers
