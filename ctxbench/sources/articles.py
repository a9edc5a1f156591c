"""Scientific-article sources: the article metadata file, and the check that each metadata fact is recoverable
from the article's converted markdown (SciTrek section 3.2: the database facts must agree with the full text the
model reads; the paper applied manual corrections, ctxbench flags the articles that disagree instead).

The metadata file is a JSON list of objects with at least ``id``, ``file``, ``title``, ``authors`` (list, in
order), ``ref_count`` (int or null), ``cites_in_set`` and ``cited_by_in_set`` (lists of ids in the same file);
``../shared/data/articles/pdfs/metadata.json`` and ``ctxbench fetch s2`` write this shape.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ctxbench.core.errors import InputError
from ctxbench.sources.fulltext import fold

# a bibliography heading: on a line of its own (markdown "#", bold, numbered or plain, or ending a line of running
# text), or directly followed by the first entry's label ("References [1] ...", "References 1. ...")
_REF_HEADING = re.compile(r"(?im)(?:^[#*\s\d.IVX]*|[.)]\s+)(?:references|bibliography|literature cited|works cited|"
                          r"references and notes|cited literature)\s*[*:.]?(?:\s*$|\s+(?=\[1\]|1[.)]\s))")
# numbered entry labels: [12] anywhere, or 12. / 12) before a capital letter (not inside a number or a word)
_BRACKET_LABEL = re.compile(r"\[(\d{1,4})\]")
_LINE_LABEL = re.compile(r"(?<![\w.,:/-])(\d{1,4})[.)]\s+(?=[A-Z])")
# the year of an author-year entry: "Surname. 2017." / "Surname, 2017," / "(2017)."
_AY_YEAR = re.compile(r"(?:[.,]\s+|\()(?:19|20)\d{2}[a-z]?\)?[.,:]")

HEAD_CHARS = 12_000  # where a title and author list are looked for (first page or two of a converted article)


@dataclass
class ArticleMeta:
    """One article's metadata (ids are the metadata file's ``id``)."""

    id: str
    file: str
    title: str
    authors: list[str]
    ref_count: int | None
    cites: list[str] = field(default_factory=list)
    cited_by: list[str] = field(default_factory=list)
    sha256: str | None = None
    extra: dict = field(default_factory=dict)


def load_metadata(path: str | Path) -> list[ArticleMeta]:
    """Read an article metadata file (shape in the module docstring).

    Raises InputError naming the file and the entry when the file is not a JSON list, an entry lacks ``id``,
    ``file``, ``title`` or ``authors``, or ids repeat. ``cites_in_set`` ids that are not in the file are dropped
    (the citation graph is restricted to the set)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as e:
        raise InputError(f"--metadata {path}: cannot read it as JSON ({e})") from None
    if not isinstance(raw, list):
        raise InputError(f"--metadata {path}: expected a JSON list of articles, got {type(raw).__name__}")
    out, seen = [], set()
    for i, r in enumerate(raw):
        if not isinstance(r, dict):
            raise InputError(f"--metadata {path}: entry {i} is not an object")
        missing = [k for k in ("id", "file", "title", "authors") if not r.get(k) and r.get(k) != []]
        if missing:
            raise InputError(f"--metadata {path}: entry {i} ({r.get('id') or r.get('file')}) lacks {', '.join(missing)}")
        if not isinstance(r["authors"], list):
            raise InputError(f"--metadata {path}: entry {r['id']}: authors must be a list of names")
        if r["id"] in seen:
            raise InputError(f"--metadata {path}: article id {r['id']!r} appears twice")
        seen.add(r["id"])
        rc = r.get("ref_count")
        out.append(ArticleMeta(str(r["id"]), str(r["file"]), str(r["title"]).strip(),
                               [str(a).strip() for a in r["authors"]], int(rc) if rc is not None else None,
                               list(r.get("cites_in_set") or []), list(r.get("cited_by_in_set") or []),
                               r.get("sha256"), {k: v for k, v in r.items() if k in ("ref_method", "pages", "license", "ids",
                                                                                   "doi", "arxiv_id", "externalIds")}))
    ids = {a.id for a in out}
    for a in out:
        a.cites = [c for c in a.cites if c in ids and c != a.id]
        a.cited_by = [c for c in a.cited_by if c in ids and c != a.id]
    return out


def citation_edges(articles: list[ArticleMeta]) -> list[tuple[str, str]]:
    """Directed (citing, cited) pairs among ``articles``, from both ``cites_in_set`` and ``cited_by_in_set``,
    deduplicated and sorted."""
    ids = {a.id for a in articles}
    edges = set()
    for a in articles:
        edges.update((a.id, c) for c in a.cites if c in ids)
        edges.update((c, a.id) for c in a.cited_by if c in ids)
    return sorted(edges)


_fold = fold  # NFKC (ligatures to letters), accents removed, case folded


def _compact(s: str) -> str:
    """Letters and digits only (robust to line breaks, hyphenation and markdown markup)."""
    return re.sub(r"[^0-9a-z]", "", _fold(s))


def reference_count_estimates(markdown: str) -> list[int]:
    """Readings of the number of bibliography entries in converted markdown, from the text after the last
    bibliography heading: the longest run 1..N of ``[n]`` labels, of ``n.`` line labels, and the number of
    author-year entry years (``Surname. 2017.``). Empty when no bibliography heading is found. Several readings
    because text after the bibliography (appendices) can hold labels or years of its own."""
    markdown = markdown.replace("\r\n", "\n").replace("\r", "\n")
    heads = list(_REF_HEADING.finditer(markdown))
    if not heads:
        return []
    bib = markdown[heads[-1].end():]
    out = []
    for labels in ({int(x) for x in _BRACKET_LABEL.findall(bib)}, {int(x) for x in _LINE_LABEL.findall(bib)}):
        n = 0
        while n + 1 in labels:
            n += 1
        if n >= 3:
            out.append(n)
    n = len(_AY_YEAR.findall(bib))
    if n:
        out.append(n)
    return list(dict.fromkeys(out))


def alignment_issues(markdown: str, meta: ArticleMeta, ref_tolerance: float = 0.15,
                     ref_abs_tolerance: int = 3) -> list[str]:
    """What in ``meta`` cannot be recovered from ``markdown`` (empty list: aligned).

    Checked: the title (letters and digits, in order, within the first HEAD_CHARS characters; or 90% of its words
    of 3+ letters there), each author's surname (last word of the name) within the first HEAD_CHARS characters or
    the whole text, and the reference count: one reading of :func:`reference_count_estimates` within
    ``max(ref_abs_tolerance, ref_tolerance · ref_count)`` of ``ref_count`` (an article whose metadata has no
    reference count, or 0, needs no bibliography)."""
    issues = []
    head = markdown[:HEAD_CHARS]
    chead = _compact(head)
    t = _compact(meta.title)
    if t not in chead:
        words = [w for w in re.findall(r"[0-9a-z]+", _fold(meta.title)) if len(w) >= 3]
        hw = set(re.findall(r"[0-9a-z]+", _fold(head)))
        if not words or sum(w in hw for w in words) / len(words) < 0.9:
            issues.append(f"title not found: {meta.title!r}")
    if not meta.authors:
        issues.append("no authors in the metadata")
    call = None
    for name in meta.authors:
        sur = _compact(name.split()[-1]) if name.split() else ""
        if not sur:
            continue
        if sur in chead:
            continue
        call = call if call is not None else _compact(markdown)
        if sur not in call:
            issues.append(f"author not found: {name!r}")
    if meta.ref_count:
        ests = reference_count_estimates(markdown)
        tol = max(ref_abs_tolerance, ref_tolerance * meta.ref_count)
        if not ests:
            issues.append(f"reference count {meta.ref_count}: no bibliography heading with countable entries found")
        elif all(abs(e - meta.ref_count) > tol for e in ests):
            issues.append(f"reference count {meta.ref_count}: the bibliography reads as {ests} entries")
    return issues
