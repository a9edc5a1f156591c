"""Answer filters as a small chain (the lm-evaluation-harness pattern): extraction, then normalisation.

Numbers: thousands separators (``1,234``, ``1 234``), trailing zeros (``3.50``), percentages (``45%``) and signs
are normalised; a number is only ever read whole, so it never matches inside a longer number (``12`` is not found
in ``2012`` or ``12.5``), inside a date or time (``4`` is not in ``2013-01-04`` or ``4:30``), or as a list marker
(``4.`` at the start of a line). Text: Unicode NFKC (full-width forms and CJK punctuation to ASCII where they have one),
case folded, punctuation and whitespace collapsed to single spaces.
"""

from __future__ import annotations

import re
import unicodedata

ANSWER_RE = re.compile(r"(?:final answer|answer)\s*[:：]\s*(.+)", re.IGNORECASE | re.DOTALL)
# boundaries exclude ASCII letters, digits and '.', not CJK characters (numbers inside Chinese text are found);
# a number joined to digits by '-', '/' or ':' is part of a date or time and is not read on its own
_NB = r"(?<![A-Za-z0-9_.])(?<!\d[-/:])"
_NA = r"(?![A-Za-z0-9_])(?![-/:]\d)"
NUMBER_RE = re.compile(_NB + r"[-−]?(?:\d{1,3}(?:[,，]\d{3})+|\d{1,3}(?: \d{3})+(?![\d])|\d+)(?:\.\d+)?%?" + _NA
                       + "|" + _NB + r"[-−]?\.\d+%?" + _NA)
# "1. ", "2) " at the start of a line: list markers, not numbers of the answer
LIST_MARKER_RE = re.compile(r"(?m)^[ \t]*\(?\d{1,3}[.)](?=\s)")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_CJK_PUNCT = str.maketrans({"。": ".", "，": ",", "、": ",", "；": ";", "：": ":", "（": "(", "）": ")", "「": '"',
                            "」": '"', "『": '"', "』": '"', "《": '"', "》": '"', "！": "!", "？": "?", "．": "."})


def extract_answer(response: str | None) -> str:
    """The final answer of a reply: the text after the last ``Answer:`` line (CoT prompts end with it), else the
    whole reply, stripped."""
    if not response:
        return ""
    matches = list(re.finditer(r"(?im)^\s*\**\s*(?:final answer|answer)\s*\**\s*[:：]\s*", response))
    if matches:
        return response[matches[-1].end():].strip()
    m = ANSWER_RE.search(response)
    return (m.group(1) if m else response).strip()


def normalize_text(s: str) -> str:
    """NFKC, CJK punctuation to ASCII, case fold, punctuation to spaces, whitespace collapsed."""
    s = unicodedata.normalize("NFKC", s).translate(_CJK_PUNCT).casefold()
    s = re.sub(r"[^\w\s]", " ", s)
    return " ".join(s.split())


def parse_number(tok: str) -> float | None:
    """A number token as float (``1,234.50`` → 1234.5; ``45%`` → 45.0). None when not a number."""
    t = tok.replace("−", "-").replace(",", "").replace("，", "").replace(" ", "").rstrip("%")
    try:
        return float(t)
    except ValueError:
        return None


def numbers_in(text: str) -> list[tuple[float, int]]:
    """Every whole number in ``text`` with its count of decimal places, e.g. ``"1,234.50 and 7%"`` →
    ``[(1234.5, 2), (7.0, 0)]``."""
    text = LIST_MARKER_RE.sub(lambda m: " " * len(m.group(0)), unicodedata.normalize("NFKC", text))
    out = []
    for m in NUMBER_RE.finditer(text):
        tok = m.group(0)
        v = parse_number(tok)
        if v is not None:
            dec = len(tok.rstrip("%").split(".", 1)[1]) if "." in tok else 0
            out.append((v, dec))
    return out


def number_matches(gold: float, found: list[tuple[float, int]]) -> bool:
    """Whether a number in the answer states ``gold``: integers exactly; non-integers equal when rounded to the
    answer's own decimal places (at least one place, or none for magnitudes of 1000 and more)."""
    g = float(gold)
    for v, dec in found:
        if g.is_integer() and v == g:
            return True
        if not g.is_integer():
            if dec == 0 and abs(g) < 1000:
                continue
            if abs(v - g) <= 0.5 * 10 ** (-dec) + 1e-9:
                return True
    return False


def text_matches(gold: str, answer_norm: str) -> bool:
    """Whether the normalised gold text appears in the normalised answer as whole words; text with CJK characters
    (written without spaces) need only appear as a substring."""
    g = normalize_text(gold)
    if not g:
        return False
    if _CJK.search(g):
        return g in answer_norm or g.replace(" ", "") in answer_norm.replace(" ", "")
    return re.search(rf"(?<!\w){re.escape(g)}(?!\w)", answer_norm) is not None
