"""Text clean-up shared by the offline PDF converters: ligatures, control characters, end-of-line hyphenation.

All functions work on characters (never tokens)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

# Unicode presentation-form ligatures (U+FB00–U+FB06) as the letters they stand for
LIGATURES = {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st",
             "\ufb06": "st", "\u0132": "IJ", "\u0133": "ij", "\ua732": "AA", "\ua733": "aa",
             "\u2010": "-", "\u2011": "-"}  # and the Unicode hyphen / non-breaking hyphen as the ASCII hyphen
# TeX's OT1 encoding puts ff, fi, fl, ffi, ffl at codes 0x0B–0x0F; old Type 3 (bitmap) TeX fonts carry no Unicode map,
# so text extractors return those control characters in place of the ligature (e.g. "Je\x0berson" = "Jefferson")
OT1_LIGATURES = {"\x0b": "ff", "\x0c": "fi", "\x0d": "fl", "\x0e": "ffi", "\x0f": "ffl"}
_OT1_RE = re.compile(r"(?<=[A-Za-z])([\x0b-\x0f])(?=[a-z])|(?<=\s)([\x0b-\x0f])(?=[a-z]{2})")
# a word broken at a line end: pdfium marks a hyphen it judged a line-break hyphen as U+FFFE or U+0002;
# SOFT_BREAK is the sentinel the converters put in place of "-\n" between two word parts
SOFT_BREAK = "\u00ad"
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff\ufffd]")
_WORD_RE = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*", re.UNICODE)


def expand_ligatures(s: str) -> str:
    """Replace ligature code points (U+FB00–FB06 and TeX OT1 control codes between letters) by their letters."""
    s = s.translate(str.maketrans(LIGATURES))
    if any(c in s for c in OT1_LIGATURES):
        s = _OT1_RE.sub(lambda m: OT1_LIGATURES[m.group(1) or m.group(2)], s)
    return s


def strip_control(s: str) -> str:
    """Drop control characters (keeping newline and tab) and Unicode noncharacters; NFC-normalise."""
    s = _CONTROL_RE.sub("", s)
    return unicodedata.normalize("NFC", s)


def vocabulary(text: str) -> Counter:
    """Lower-cased words of ``text`` (letters only, inner hyphens/apostrophes kept) with their counts."""
    return Counter(w.lower() for w in _WORD_RE.findall(text))


_BREAK_RE = re.compile(r"([^\W\d_]+)" + SOFT_BREAK + r"\s*([^\W\d_]+)", re.UNICODE)


def join_hyphenation(text: str) -> str:
    """Resolve the ``SOFT_BREAK`` sentinels (a hyphen that ended a line, followed by the next line's first word).

    A break is joined without the hyphen ("transduc-" + "tion" → "transduction") unless the document itself shows the
    hyphenated compound ("sequence-aligned" written with a hyphen inside a line) and never the closed form; an
    upper-case second part keeps the hyphen ("BERT-" + "Base"). Vocabulary: every word of the document outside
    the breaks."""
    if SOFT_BREAK not in text:
        return text
    vocab = vocabulary(_BREAK_RE.sub(" ", text))

    def fix(m: re.Match) -> str:
        a, b = m.group(1), m.group(2)
        closed, hyph = (a + b).lower(), f"{a}-{b}".lower()
        if b[0].isupper() or b[0].isdigit():
            return f"{a}-{b}"
        if vocab.get(hyph, 0) > vocab.get(closed, 0):
            return f"{a}-{b}"
        return a + b

    text = _BREAK_RE.sub(fix, text)
    return text.replace(SOFT_BREAK, "-")


_CID_RE = re.compile(r"\(cid:(\d+)\)")


def _cid(m: re.Match) -> str:
    # a Type 3 TeX font's unmapped glyph code 11–15 between letters is an OT1 ligature; any other is dropped
    code = int(m.group(1))
    s, i, j = m.string, m.start(), m.end()
    if 11 <= code <= 15 and i > 0 and s[i - 1].isalpha() and j < len(s) and s[j].islower():
        return OT1_LIGATURES[chr(code)]
    return ""


def clean(s: str) -> str:
    """Ligatures expanded, control characters and pdfminer's ``(cid:N)`` placeholders for glyphs without a Unicode
    mapping dropped (the order matters: OT1 ligatures are control codes)."""
    return strip_control(expand_ligatures(_CID_RE.sub(_cid, s)))
