"""Offline PDF → markdown converters (no model): pdfminer.six layout analysis and pypdfium2's text layer.

``pdfminer_markdown`` (the default offline converter) reads pdfminer's text boxes with their coordinates and fonts,
orders them column by column (an XY cut: bands between boxes that span the gutter, then each column top to bottom),
drops running heads, page numbers and rotated margin stamps, marks headings (larger or bold type, section numbers)
as ``#`` lines, joins each box's lines into a paragraph, expands ligatures and rejoins words hyphenated at a line end.
``pdfium_markdown`` is the fast baseline: pdfium's text in content-stream order, with the same clean-up, no layout.
Both return ``(markdown, pages)``; they raise whatever the PDF library raises (``pdf.py`` turns that into a reason).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from statistics import median

from ctxbench.convert.text import SOFT_BREAK, clean, join_hyphenation

_BOLD_RE = re.compile(r"bold|medi|semibold|demi|black|heavy|cmbx|cmssbx|\.b$|-b$|,b$", re.I)
_NUM_HEADING_RE = re.compile(r"^((?:\d+\.)*\d+\.?|[IVX]+\.|[A-H]\.?(?:\d+\.?)*)\s+\S")
_KNOWN_HEADINGS = {
    "abstract", "introduction", "references", "bibliography", "acknowledgments", "acknowledgements",
    "acknowledgment", "acknowledgement", "conclusion", "conclusions", "related work", "background", "methods",
    "method", "results", "discussion", "appendix", "limitations", "ethics statement", "ethical considerations",
    "experiments", "evaluation", "materials and methods", "results and discussion", "conclusions and future work",
    "supplementary material", "supporting information", "author contributions", "funding", "competing interests",
    "data availability", "keywords", "literature cited", "future work", "summary",
}


@dataclass
class Box:
    """One pdfminer text box: top-down coordinates in points, its lines and their dominant font."""

    page: int
    x0: float
    top: float
    x1: float
    bottom: float
    lines: list[str]
    size: float  # median character size (points)
    bold: bool
    chars: int
    kind: str = "text"  # text | heading | title
    line_x: list[float] = field(default_factory=list)  # left edge of each line (points)
    level: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def text(self) -> str:
        return " ".join(ln.strip() for ln in self.lines)


def _boxes_from_layout(el, page_no: int, page_h: float) -> list[Box]:
    """pdfminer text box → Boxes, split where the type size changes by 1 pt or more between lines (a title set in
    larger type above its author list in one pdfminer box becomes two)."""
    from pdfminer.layout import LTChar, LTTextLine

    groups: list[list] = []  # [line, size, bold_chars, chars]
    for line in el:
        if not isinstance(line, LTTextLine):
            continue
        sizes = []
        bold = 0
        chars = [ch for ch in line if isinstance(ch, LTChar) and ch.get_text().strip()]
        if sum(abs(ch.matrix[1]) + abs(ch.matrix[2]) > abs(ch.matrix[0]) + abs(ch.matrix[3]) for ch in chars) > len(
                chars) / 2:
            continue  # rotated text: margin stamps (arXiv identifier, dates), axis labels
        for ch in chars:
            if True:
                sizes.append(round(ch.size, 1))
                bold += bool(_BOLD_RE.search(ch.fontname or ""))
        if not sizes:
            continue
        groups.append([line, median(sizes), bold, len(sizes)])
    out: list[Box] = []
    run: list[list] = []

    def flush():
        if not run:
            return
        n = sum(g[3] for g in run)
        sizes = [g[1] for g in run for _ in range(g[3])]
        x0 = min(g[0].x0 for g in run)
        x1 = max(g[0].x1 for g in run)
        y0 = min(g[0].y0 for g in run)
        y1 = max(g[0].y1 for g in run)
        out.append(Box(page_no, x0, page_h - y1, x1, page_h - y0, [g[0].get_text().rstrip("\n") for g in run],
                       median(sizes), sum(g[2] for g in run) > n / 2, n, line_x=[g[0].x0 for g in run]))
        run.clear()

    for g in groups:
        if run and abs(g[1] - run[-1][1]) >= 1.0:
            flush()
        run.append(g)
    flush()
    return out


def _is_stamp(b: Box) -> bool:
    """A rotated margin stamp (arXiv identifier) that pdfminer reads as one character per line."""
    short = sum(len(ln.strip()) <= 2 for ln in b.lines)
    return len(b.lines) >= 4 and short >= 0.8 * len(b.lines) and b.bottom - b.top > 3 * b.width


def _columns(boxes: list[Box], width: float) -> list[tuple[float, float]]:
    """Column x-ranges of a page. Only boxes narrower than 55% of the page can sit in one column of a multi-column
    page; when they hold under 40% of the page's characters the page is single-column. A gutter is an interior
    vertical strip crossed by under 15% of those boxes' lines (a centred caption or page number may cross it) with
    at least 15% of their characters on each side; columns are the ranges between gutters. Returns [(0, width)]
    for a single-column page. (Lines, not heights: Type 3 fonts can have near-zero glyph boxes.)"""
    body = [b for b in boxes if b.width < 0.55 * width]
    total = sum(b.chars for b in body)
    if total < 200 or total < 0.4 * sum(b.chars for b in boxes):
        return [(0.0, width)]
    step = 2.0
    nb = int(width // step) + 1
    cross = [0] * nb
    for b in body:
        for i in range(max(0, int(b.x0 // step) + 1), min(nb, int(b.x1 // step))):
            cross[i] += len(b.lines)
    lo = min(b.x0 for b in body)
    hi = max(b.x1 for b in body)
    limit = 0.15 * sum(len(b.lines) for b in body)
    gaps: list[tuple[float, float]] = []
    i = 0
    while i < nb:
        x = i * step
        if lo < x < hi and cross[i] <= limit:
            j = i
            while j + 1 < nb and (j + 1) * step < hi and cross[j + 1] <= limit:
                j += 1
            a, z = i * step, (j + 1) * step
            left = sum(b.chars for b in body if b.x1 <= a + step)
            right = sum(b.chars for b in body if b.x0 >= z - step)
            if left >= 0.15 * total and right >= 0.15 * total:
                gaps.append((a, z))
            i = j + 1
        else:
            i += 1
    if not gaps:
        return [(0.0, width)]
    edges = [0.0] + [e for g in gaps for e in g] + [width]
    return [(edges[k], edges[k + 1]) for k in range(0, len(edges), 2)]


def order_boxes(boxes: list[Box], width: float) -> list[Box]:
    """Reading order of one page's boxes: bands split at boxes spanning more than one column; in each band, the
    columns left to right, each top to bottom. A single-column page is simply top to bottom."""
    cols = _columns(boxes, width)
    if len(cols) < 2:
        return sorted(boxes, key=lambda b: (round(b.top), b.x0))

    def col_of(b: Box) -> int | None:
        for i, (a, z) in enumerate(cols):
            if b.x0 >= a - 6 and b.x1 <= z + 6:
                return i
        # mostly inside one column (a box overhanging its column a little)
        for i, (a, z) in enumerate(cols):
            inside = max(0.0, min(b.x1, z) - max(b.x0, a))
            if inside >= 0.8 * b.width:
                return i
        return None

    spans = sorted((b for b in boxes if col_of(b) is None), key=lambda b: b.top)
    out: list[Box] = []
    rest = [b for b in boxes if col_of(b) is not None]
    prev_cut = float("-inf")
    for cut in spans + [None]:
        lim = cut.top if cut is not None else float("inf")
        band = [b for b in rest if prev_cut <= (b.top + b.bottom) / 2 < lim]
        for i in range(len(cols)):
            out.extend(sorted((b for b in band if col_of(b) == i), key=lambda b: b.top))
        if cut is not None:
            out.append(cut)
            prev_cut = (cut.top + cut.bottom) / 2
    placed = {id(b) for b in out}
    out.extend(b for b in rest if id(b) not in placed)  # boxes straddling a cut's centre line
    return out


# large type on first pages that is not the title: journal banners, article-type labels, licence badges, links
_BOILERPLATE_RE = re.compile(r"^(journal of|research( article)?$|open access|original (article|research)|review"
                             r"( article)?$|article$|letter$)|https?://|doi\b|www\.|©|copyright", re.I)
_CAPTION_RE = re.compile(r"(Figure|Fig\.|Table|Algorithm|Listing)\s*[A-Z]?\d+[:.]")


def _norm_running(s: str) -> str:
    return re.sub(r"\d+", "#", s.strip().lower())


def _drop_running(pages: list[list[Box]], heights: list[float]) -> None:
    """Remove running heads/feet (same text, digits ignored, in the top or bottom 8% of 3+ pages, or of over a third
    of them) and bare page numbers in those margins."""
    seen: Counter = Counter()
    for boxes, h in zip(pages, heights):
        keys = {_norm_running(b.text) for b in boxes if b.bottom < 0.08 * h or b.top > 0.92 * h}
        seen.update(keys)
    n = len(pages)
    running = {k for k, c in seen.items() if c >= 3 and c >= n / 3 and k}
    for boxes, h in zip(pages, heights):
        boxes[:] = [b for b in boxes if not (
            (b.bottom < 0.08 * h or b.top > 0.92 * h)
            and (_norm_running(b.text) in running or re.fullmatch(r"\W*\d{1,4}\W*", b.text.strip())))]


def _mark_headings(pages: list[list[Box]]) -> None:
    """Title (largest type in the upper half of page 1) and section headings (short boxes in larger or bold type,
    or numbered like "3.2 Results"); levels from the numbering depth."""
    allb = [b for p in pages for b in p]
    if not allb:
        return
    size_chars: Counter = Counter()
    for b in allb:
        size_chars[b.size] += b.chars
    body = size_chars.most_common(1)[0][0]
    first = pages[0] if pages else []
    cand = [b for b in first if b.top < 0.55 * (max((x.bottom for x in first), default=1)) and len(b.text) >= 15
            and len(b.text.split()) >= 2 and len(b.lines) <= 6 and re.search(r"[A-Za-z]{3}", b.text)
            and not _BOILERPLATE_RE.search(b.text)]
    title = None
    if cand:
        top = max(cand, key=lambda b: (b.size, len(b.text)))
        if top.size >= body + 1.5 or (top.bold and top.size >= body + 0.5):
            title = top
            title.kind = "title"
            # a title set in two boxes: the next one right below it in the same type
            for b in sorted(first, key=lambda b: b.top):
                if b is not title and b.kind == "text" and abs(b.size - title.size) < 0.3 and b.bold == title.bold \
                        and 0 <= b.top - title.bottom < 1.2 * title.size and len(b.lines) <= 2:
                    b.kind = "title"
                    break
    # on the first page, between the title and the abstract, larger type is the author block, not headings
    first_known = min((b.top for b in first if re.sub(r"[^a-z ]", "", b.text.lower()).strip() in _KNOWN_HEADINGS),
                      default=None)
    front = (title.bottom, first_known) if title is not None and first_known is not None else None
    for b in allb:
        if b.kind == "title":
            continue
        if front and b.page == 0 and front[0] <= b.top < front[1]:
            continue
        t = b.text.strip()
        words = t.split()
        if not words or len(b.lines) > 2 or len(words) > 14 or len(t) > 110:
            continue
        low = re.sub(r"^[\dIVX.\s]+", "", t).strip().rstrip(":.").lower()
        known = low in _KNOWN_HEADINGS
        numbered = bool(_NUM_HEADING_RE.match(t)) and not re.search(r"[.:;,]\s*$", t) and any(
            c.isalpha() for c in t) and t[-1] not in ")]"
        larger = b.size >= body + 0.9
        if t.endswith(".") and not known and not larger:
            continue
        if re.fullmatch(r"[\d\W]+", t) or re.match(r"(Figure|Fig\.|Table|Algorithm|Listing)\s*[A-Z]?\d", t):
            continue
        if (larger and (b.bold or numbered or known or b.size >= body + 2)) or (b.bold and (numbered or known)) or (
                known and (b.bold or larger or len(words) <= 3 and b.chars <= 40 and t[:1].isupper()
                           and len(b.lines) == 1 and t.isupper())):
            b.kind = "heading"
            m = _NUM_HEADING_RE.match(t)
            depth = m.group(1).rstrip(".").count(".") if m and m.group(1)[0].isdigit() else 0
            b.level = min(2 + depth, 4)


def _paragraph(lines: list[str]) -> str:
    """Join a box's lines into one paragraph; a line ending "letter-" or "digit-" before a letter or digit
    (``transduc-``/``tion``, ``CD4-``/``positive``, ``COVID-``/``19``) becomes a SOFT_BREAK for ``join_hyphenation``,
    which decides whether the hyphen stays."""
    out = ""
    for ln in lines:
        ln = ln.strip()
        if not ln:
            continue
        if not out:
            out = ln
        elif re.search(r"[^\W_][.)\]]?[-\u2010\u2011\u00ad]$", out) and re.match(r"[^\W_]", ln):
            out = out[:-1] + SOFT_BREAK + ln
        else:
            out += " " + ln
    return out


_REF_HEADING_RE = re.compile(r"^#+ (?:[\dIVX]+\.? *)?(references|bibliography|literature cited|works cited)\s*$", re.I)
_REF_LABEL_RE = re.compile(r"^\s*(\[\d+\]|\d{1,3}\.\s|\(\d+\)\s)")


def _reference_entries(b: Box, base: float | None, labelled: bool) -> list[tuple[list[str], bool]]:
    """Split a bibliography box into entries: at numbered labels ("[12]", "12.") when the page's bibliography has
    them (``labelled``), else at the lines of a hanging indent — an entry's first line starts at ``base`` (the
    left edge of its column's bibliography lines), its continuation lines further right. Returns
    [(lines, starts_an_entry)]; a chunk that does not start an entry continues the previous one (an entry broken
    across boxes, columns or pages)."""
    lines, xs = b.lines, b.line_x or [b.x0] * len(b.lines)
    if labelled:
        starts = [i for i, ln in enumerate(lines) if _REF_LABEL_RE.match(ln)]
    elif base is not None:
        starts = [i for i, x in enumerate(xs) if x <= base + 1.5]
    else:
        return [(lines, True)]
    out: list[tuple[list[str], bool]] = []
    if not starts or starts[0] > 0:
        out.append((lines[: starts[0] if starts else len(lines)], False))
    for k, i in enumerate(starts):
        out.append((lines[i: starts[k + 1] if k + 1 < len(starts) else len(lines)], True))
    return out


def _bib_layout(boxes: list[Box], cols: list[tuple[float, float]]) -> tuple[dict[int, float | None], bool]:
    """For a page's bibliography boxes: {id(box): left edge of its column's entries when the column uses a hanging
    indent, else None} and whether the entries are numbered."""
    lines = [ln for b in boxes for ln in b.lines]
    labelled = bool(lines) and sum(bool(_REF_LABEL_RE.match(ln)) for ln in lines) >= 0.2 * len(lines)
    bases: dict[int, float | None] = {}
    for a, z in cols:
        inside = [b for b in boxes if b.x0 >= a - 6 and b.x1 <= z + 6] or [
            b for b in boxes if a - 6 <= (b.x0 + b.x1) / 2 <= z + 6]
        xs = [x for b in inside for x in (b.line_x or [b.x0])]
        if not xs:
            continue
        base = min(xs)
        hanging = sum(x > base + 2.5 for x in xs) >= 0.2 * len(xs) and sum(x <= base + 1.5 for x in xs) >= 2
        for b in inside:
            bases.setdefault(id(b), base if hanging else None)
    return bases, labelled


def _merge_number_boxes(boxes: list[Box]) -> list[Box]:
    """A section number that pdfminer put in its own box ("3" | "Model Architecture") joins the heading on its
    right at the same height."""
    out: list[Box] = []
    skip = set()
    for i, b in enumerate(boxes):
        if i in skip:
            continue
        if re.fullmatch(r"(\d+\.)*\d+\.?", b.text.strip()) and len(b.lines) == 1:
            for j, c in enumerate(boxes):
                if j != i and j not in skip and abs(c.top - b.top) < 3 and 0 <= c.x0 - b.x1 < 40:
                    c.lines[0] = b.text.strip() + " " + c.lines[0].strip()
                    if c.line_x:
                        c.line_x[0] = b.x0
                    c.x0 = b.x0
                    skip.add(i)
                    break
            else:
                out.append(b)
            continue
        out.append(b)
    return out


def pdfminer_markdown(path: str) -> tuple[str, int]:
    """Markdown of ``path`` from pdfminer.six's layout analysis (text boxes with coordinates and fonts), ordered
    column by column. Returns (markdown, pages). Raises pdfminer's exceptions on unreadable files."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTFigure, LTTextBox, LTTextLine

    def text_boxes(container):
        for el in container:
            if isinstance(el, LTTextBox):
                yield el
            elif isinstance(el, LTFigure):
                # text inside a form XObject: kept when it reads like prose (a page drawn as one XObject, as the
                # ACL Anthology's stamped PDFs are), dropped when it is a plot's tick labels and legends
                inner = list(text_boxes(el))
                lines = [ln for b in inner for ln in b if isinstance(ln, LTTextLine)]
                chars = sum(len(ln.get_text().strip()) for ln in lines)
                if lines and chars >= 300 and chars / len(lines) >= 25:
                    yield from inner

    pages: list[list[Box]] = []
    heights: list[float] = []
    widths: list[float] = []
    for page_no, page in enumerate(extract_pages(
            path, laparams=LAParams(line_margin=0.5, boxes_flow=None, all_texts=True))):
        boxes = []
        for el in text_boxes(page):
            boxes.extend(b for b in _boxes_from_layout(el, page_no, page.height) if not _is_stamp(b))
        pages.append(_merge_number_boxes(boxes))
        heights.append(page.height)
        widths.append(page.width)
    _drop_running(pages, heights)
    _mark_headings(pages)
    parts: list[str] = []
    held: list[str] = []  # captions and footers met inside a sentence: placed after the sentence ends
    in_refs = False
    for boxes, w, h in zip(pages, widths, heights):
        bib = None
        ordered = order_boxes(boxes, w)
        for pos, b in enumerate(ordered):
            if in_refs and b.kind == "text":
                if bib is None:  # the page's bibliography layout, from the boxes read after the heading
                    bib = _bib_layout([x for x in ordered[pos:] if x.kind == "text"], _columns(boxes, w))
                for lines, starts in _reference_entries(b, bib[0].get(id(b)), bib[1]):
                    text = clean(_paragraph(lines))
                    if not text.strip():
                        continue
                    prev = parts[-1] if parts and not parts[-1].startswith("#") else ""
                    if prev and re.search(r"[^\W_]-$", prev) and re.match(r"[a-z\d]", text):
                        parts[-1] = prev[:-1] + SOFT_BREAK + text
                    elif prev and (not starts or not re.search(r"[.)]$", prev) and re.match(r"[a-z]", text)):
                        parts[-1] = prev + " " + text  # an entry broken across a column or page
                    else:
                        parts.append(text)
                continue
            text = clean(_paragraph(b.lines))
            if not text.strip():
                continue
            if b.kind == "title" and parts and parts[-1].startswith("# "):
                parts[-1] += " " + text  # the title's second box
                continue
            if b.kind in ("title", "heading"):
                parts.extend(held)
                held.clear()
                parts.append(("# " if b.kind == "title" else "#" * b.level + " ") + text)
                in_refs = bool(_REF_HEADING_RE.match(parts[-1])) or (in_refs and b.level > 2)
                continue
            prev = parts[-1] if parts and not parts[-1].startswith("#") else ""
            unfinished = bool(re.search(r"[\w,;]$", prev))
            if unfinished and (_CAPTION_RE.match(text) or b.top > 0.88 * h):  # a caption, a footer or footnote
                held.append(text)
                continue
            if re.search(r"[^\W_]-$", prev) and re.match(r"[a-z\d]", text):
                parts[-1] = prev[:-1] + SOFT_BREAK + text  # a word hyphenated across a column or page break
            elif unfinished and (re.match(r"[a-z]", text) or prev.endswith(",") and re.match(r"[\d(]", text)):
                parts[-1] = prev + " " + text  # a sentence running on across a column, page or figure
            else:
                parts.extend(held)
                held.clear()
                parts.append(text)
                continue
            if not re.search(r"[\w,;]$", parts[-1]):
                parts.extend(held)
                held.clear()
    parts.extend(held)
    md = join_hyphenation("\n\n".join(parts))
    return md + "\n", len(pages)


def mark_line_breaks(raw: str) -> str:
    """Plain text with its line breaks (pdfium's, pdfplumber's): a hyphen (ASCII, U+2010, U+2011 or a soft hyphen)
    ending a line after a letter or digit (or one followed by ``.``, ``)``, ``]``: ``U.S.-``) before a letter or
    digit becomes a SOFT_BREAK for ``join_hyphenation``.
    Characters in, characters out."""
    return re.sub(r"(?:(?<=[^\W_])|(?<=[^\W_][.)\]]))[-\u2010\u2011\u00ad][ \t]*\n[ \t]*(?=[^\W_])", SOFT_BREAK,
                  raw)


def pdfium_markdown(path: str) -> tuple[str, int]:
    """Text of ``path`` from pypdfium2 in content-stream order, one paragraph per page with its line breaks kept,
    ligatures expanded and hyphenated line ends joined; no headings. Returns (markdown, pages)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        parts = []
        for i in range(len(pdf)):
            page = pdf[i]
            tp = page.get_textpage()
            raw = tp.get_text_range().replace("\r\n", "\n")
            tp.close()
            page.close()
            # pdfium reports a hyphen it judged a line-break hyphen as U+FFFE or U+0002
            raw = re.sub(r"[\ufffe\x02]\n?", SOFT_BREAK, raw)
            parts.append(clean(mark_line_breaks(raw)))
        return join_hyphenation("\n\n".join(parts)) + "\n", len(pdf)
    finally:
        pdf.close()


def pdfplumber_markdown(path: str) -> tuple[str, int]:
    """Text of ``path`` from pdfplumber's ``extract_text`` (pdfminer characters grouped into lines top to bottom,
    no column handling), with the same clean-up as ``pdfium_markdown``; no headings. Returns (markdown, pages)."""
    import pdfplumber

    parts = []
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages:
            raw = page.extract_text() or ""
            parts.append(clean(mark_line_breaks(raw)))
            page.close()
        n = len(pdf.pages)
    return join_hyphenation("\n\n".join(parts)) + "\n", n
