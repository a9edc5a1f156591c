"""The one list splitter every matcher uses: an answer's items, however the list is written.

Items are separated by line breaks (bullet and numbered lines: ``- A``, ``* A``, ``• A``, ``1. A``, ``2) A``,
``(3) A``, ``[4] A``, their markers removed), by the markers of a list numbered inside a line (``1. John Smith
2. Jane Doe``, ``(1) A (2) B``: :func:`ctxbench.scoring.numbers.inline_markers`), commas and semicolons (also the CJK ``，`` ``、`` ``；``), and words
joining two items: ``and``, ``&``, ``as well as`` and the Chinese ``以及`` ``和`` ``及`` ``与``. So ``A, B and C``,
``A, B, and C`` (Oxford comma), ``A; B & C``, ``A、B和C`` and a bulleted list all give ``[A, B, C]``; a list inside
brackets (``[A, B]``) is read the same. What is never split:

* a date: ``April 1, 2004`` is one item (:mod:`ctxbench.scoring.dates`);
* a number: ``1,234`` and ``1.234,5`` are one item (:mod:`ctxbench.scoring.numbers` reads them), and so is
  ``one hundred and five``;
* a name the gold holds: pieces that together equal (after :func:`ctxbench.scoring.normalize.normalize_text`) an
  item of ``keep`` stay one item, so ``Procter and Gamble``, ``Johnson & Johnson`` or a title holding commas is one
  item when the gold has it;
* Chinese words holding a joining character (参与, 和平, 及时, 给与 …).

Source: SciTrek appendix D (models answer with bullet or numbered lists, one item per line, "A, B and C",
brackets, trailing full stops).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ctxbench.scoring.dates import read_whens
from ctxbench.scoring.normalize import normalize_text
from ctxbench.scoring.numbers import inline_markers, read_numbers

__all__ = ["split_list", "split_spans"]

_MARKER = re.compile(r"^\s*(?:[-*•·‣◦]|\(?\d{1,3}[.)、]|\[\d{1,3}\])\s+")
# separators between items; "and"/"&" with spaces around them (words: "Anderson" holds no "and")
_SEP = re.compile(r"[,;，、；]|\s+(?:and|as\s+well\s+as)\s+|\s+&\s+|&|以及|(?<=[^\s,;，、；])[和及与](?=[^\s,;，、；])",
                  re.IGNORECASE)
_ZH_WORDS = re.compile("参与|给与|赋与|授与|和平|和谐|温和|缓和|柔和|和睦|和尚|和蔼|和约|和好|总和|共和|调和|和声|及时|及格|"
                       "普及|以及|涉及|提及|波及|危及|来不及|不及|与其|与会|与否")
_LEAD = re.compile(r"^\s*(?:and|&|as\s+well\s+as)\s+", re.IGNORECASE)


def _protected(line: str) -> list[bool]:
    inside = [False] * len(line)
    for n in read_numbers(line, english=True):
        for k in range(n.start, n.end):
            inside[k] = True
    for w in read_whens(line):                # a date is one item: "April 1, 2004"
        for k in range(w.start, w.end):
            inside[k] = True
    for m in _ZH_WORDS.finditer(line):
        if m.group(0) == "以及":
            continue
        for k in range(m.start(), m.end()):
            inside[k] = True
    return inside


def split_spans(text: str, keep: Iterable[str] = ()) -> list[tuple[int, int]]:
    """``[start, end)`` character spans of ``text``'s items (module docstring), in order; ``keep``: items (gold
    values) whose text is never split. Each span is trimmed of spaces, list markers, a leading ``and``, quotes and a
    final full stop."""
    keep_norm = {normalize_text(str(k)) for k in keep if k is not None and str(k).strip()}
    keep_norm.discard("")
    body_start, body_end = 0, len(text)
    st = text.strip()
    if st.startswith("[") and st.endswith("]"):
        body_start = text.index("[") + 1
        body_end = text.rindex("]")
    out: list[tuple[int, int]] = []
    pos = body_start
    for full in text[body_start:body_end].splitlines(keepends=True):
        lstart0 = pos
        pos += len(full)
        full = full.rstrip("\r\n")
        marks = inline_markers(full)
        # a list numbered inside the line ("1. John Smith 2. Jane Doe"): each numbered piece is a line of its own
        segs = ([(a, marks[i + 1][0] if i + 1 < len(marks) else len(full)) for i, (a, _) in enumerate(marks)]
                if marks else [(0, len(full))])
        # (text before the first marker introduces the list: "The authors are 1. John Smith 2. Jane Doe")
        for sa, sb in segs:
            out.extend((lstart0 + sa + a, lstart0 + sa + b) for a, b in _line_spans(full[sa:sb], keep_norm))
    return out


def _line_spans(line: str, keep_norm: set[str]) -> list[tuple[int, int]]:
    """Spans of the items of one line (its list marker removed), relative to the line."""
    out: list[tuple[int, int]] = []
    m = _MARKER.match(line)
    off = m.end() if m else 0
    inside = _protected(line)
    cuts = [(s.start(), s.end()) for s in _SEP.finditer(line, off)
            if not any(inside[s.start():s.end()])]
    pieces, p = [], off
    for a, b in cuts:
        pieces.append((p, a))
        p = b
    pieces.append((p, len(line)))
    i = 0
    while i < len(pieces):
        j_best = i
        if keep_norm:
            for j in range(min(len(pieces) - 1, i + 8), i, -1):
                if normalize_text(line[pieces[i][0]:pieces[j][1]]) in keep_norm:
                    j_best = j
                    break
        a, b = pieces[i][0], pieces[j_best][1]
        i = j_best + 1
        a, b = _trim(line, a, b)
        if b > a:
            out.append((a, b))
    return out


def _trim(line: str, a: int, b: int) -> tuple[int, int]:
    seg = line[a:b]
    lead = _LEAD.match(seg)
    if lead:
        a += lead.end()
    while a < b and line[a] in " \t\"'“”‘’`":
        a += 1
    while b > a and line[b - 1] in " \t\"'“”‘’`.。:;,，、；":
        b -= 1
    return a, b


def split_list(text: str | None, keep: Iterable[str] = ()) -> list[str]:
    """The items of an answer as text (:func:`split_spans`); ``[]`` for None or empty text."""
    if not text:
        return []
    return [text[a:b] for a, b in split_spans(text, keep)]
