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
_WORD_RE = re.compile(r"[^\W_]+(?:[-'’][^\W_]+)*", re.UNICODE)


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
    """Lower-cased words of ``text`` (letters and digits, inner hyphens/apostrophes kept: ``state-of-the-art``,
    ``cd4-positive``) with their counts."""
    return Counter(w.lower() for w in _WORD_RE.findall(text))


# a hyphen that ended a line between two word parts; each part is taken whole with the hyphenated compound it
# belongs to ("state-of-the" + "art", "CD4" + "positive", "well-estab" + "lished")
_PART_RE = r"[^\W_]+(?:[-'’][^\W_]+)*"
_BREAK_RE = re.compile(rf"({_PART_RE}){SOFT_BREAK}\s*({_PART_RE})", re.UNICODE)


_SUSPENDED = {"and", "or", "to", "nor", "und", "oder"}


def capital_token(t: str) -> bool:
    """A token that is an abbreviation, symbol or name part rather than a word fragment: it holds a digit (``CD4``,
    ``H2O``) or its letters are all upper case (``BERT``, ``T``) or upper case after the first (``mRNA``, ``LaTeX``)."""
    letters = [c for c in t if c.isalpha()]
    return any(c.isdigit() for c in t) or bool(letters) and (
        all(c.isupper() for c in letters) or any(c.isupper() for c in letters[1:]))


def join_hyphenation(text: str) -> str:
    """Resolve the ``SOFT_BREAK`` sentinels (a hyphen that ended a line, followed by the next line's first word).

    The hyphen is kept — the break is inside a compound — when (in this order):
    1. the document itself writes the joined form with a hyphen inside a line (``state-of-the-art``,
       ``sequence-aligned``) at least as often as the closed form; the closed form written more often joins
       (``co-occur`` + ``rence`` → ``co-occurrence`` where the document shows it);
    2. the break follows a digit or a capital-letter token (:func:`capital_token`: ``CD4-`` + ``positive`` →
       ``CD4-positive``, ``BERT-`` + ``based``), or the next part starts with a capital or a digit (``BERT-Base``,
       ``COVID-19``);
    3. the next part is "and", "or", "to" or "nor" (``first-`` + ``and second-order``): a suspended hyphen, kept
       with its space;
    4. either part is itself a hyphenated compound (``state-of-the-`` + ``art``, ``up-`` + ``to-date``): TeX, which
       sets most papers, breaks a word holding an explicit hyphen only at that hyphen (The TeXbook, ch. 14), so such
       a break is an explicit hyphen; so is one after a single letter (``X-`` + ``ray``: TeX's lefthyphenmin is 2).
    Otherwise it is an ordinary word break, joined without the hyphen (``transduc-`` + ``tion`` → ``transduction``).
    Vocabulary: every word of the document outside the breaks, lower-cased. Works on characters."""
    if SOFT_BREAK not in text:
        return text
    vocab = vocabulary(_BREAK_RE.sub(" ", text))

    def fix(m: re.Match) -> str:
        a, b = m.group(1), m.group(2)
        hyph, closed = f"{a}-{b}", a + b
        last = re.split(r"[-'’]", a)[-1]
        nh, nc = vocab.get(hyph.lower(), 0), vocab.get(closed.lower(), 0)
        if nh or nc:
            return hyph if nh >= nc else closed
        if b.lower() in _SUSPENDED:  # "first-" + "and second-order": a suspended hyphen, kept with its space
            return f"{a}- {b}"
        if capital_token(last) or b[0].isupper() or b[0].isdigit():
            return hyph
        if "-" in a or "-" in b or len(last) == 1:
            return hyph
        return closed

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
