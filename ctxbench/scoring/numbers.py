"""The one number reader every matcher uses: numbers in a model's answer or a gold value, read whole.

Every matcher (the row matcher, the list matchers, the numeral-aware substring matcher, token F1) and the gold
side of every comparison read numbers here, so ``1,234``, ``−12`` or ``2013-01-04`` mean the same
thing to all of them. Offsets are characters of the text given: characters are normalised one by one (NFKC where it
maps one character to one, e.g. full-width ``１２３`` → ``123``), never by a length-changing step.

Arabic numerals (:func:`read_numbers`, always)
    * Digit groups joined by separators are read by the convention the grouping shows (a *group* is three digits
      after a 1-3 digit head): ``1,234`` / ``1,234,567.5`` (comma groups, point decimal); ``1.234.567`` and
      ``1.234,5`` (point groups, comma decimal); ``1 234`` with a space, no-break space, thin space or narrow
      no-break space (``1 234,5`` and ``1 234.5``); ``1'234`` / ``1’234.5`` (apostrophe groups); LaTeX ``9{,}500``
      and ``1\\,234``. A full-width comma groups only full-width digits (``１，２３４`` = 1234); between ASCII digits it
      separates list items, as it does in CJK text (``61，961`` = 61 and 961).
    * A single point is a decimal point (``1.234`` = 1.234); ``.5`` = 0.5. A single comma between digits that does
      not group thousands is a decimal comma, the reading of most of Europe (CLDR de, fr, es, it, ru…): ``1,23`` =
      1.23, ``12,5`` = 12.5, ``0,123`` = 0.123 (a head of 0 groups nothing). So ``1,23`` is one number, never 1 and
      23: no matcher credits a gold 23 or 1 for it. Indian (lakh) grouping is one number (``1,23,456`` = 123456).
      Several commas that group nothing separate list items (``3,5,7`` = 3, 5 and 7), as a comma followed by a
      space always does (``3, 5``).
    * Signs: ``-`` ``+`` and the Unicode minus ``−`` and dashes ``‐ ‑ ‒ – — ﹣ －`` directly before the digits, when no
      letter or digit is joined before the sign (``–12`` = −12; ``10–12`` is a range, ``COVID-19`` a name).
    * Percent: ``45%``, ``45 %``, ``45％``, ``45 percent`` are 45 with ``percent`` set (the value as written).
    * Scientific notation and magnitudes are part of the number: ``1e3`` = 1000, ``2.5E-4`` = 0.00025, ``12k`` =
      12000, ``1.5M`` / ``3mn`` = 1500000 / 3000000, ``2B`` / ``2bn`` = 2000000000, ``3 million`` = 3000000 (a
      lower-case ``m`` is metres, ``12km`` no magnitude).
    * ``3万`` = 30000 and ``2.5亿`` = 250000000 (Chinese myriad multipliers written after Arabic digits); ``负12`` and
      ``零下12`` are −12.
    * Never read: a number joined to a Latin letter or underscore before it (``B61``, ``UA12``, ``v1.2``, ``No.12``)
      or to letters and then digits after it (``3D2``, ``4K60``, ``0x1F``; ``61st``, ``61yo`` and ``3万`` are read);
      anything inside a date (``2013-01-04``, ``2013/01/04``, ``01/04/2013``, ``04.01.2013``, ``2013-01``,
      ``January 4, 2013``, ``4 Jan 2013``, the month and day of ``2013年1月4日``), a time (``4:30``, ``16:05:59``,
      ``4pm``, ``4 p.m.``), a ratio or fraction (``3:1``, ``3/4``), a version or address (``1.2.3``,
      ``192.168.0.1``), a phone number (``555-123-4567``, ``(555) 123-4567``, ``+1 555 123 4567``), feet and inches
      (``5'10``), a list marker opening a line (``4. 720``, ``2) UA``) or numbering a list inside a line
      (``1. 720 2. 650``: :func:`inline_markers`), an enumerator naming a step of the
      reasoning (``Step 3``, ``step #2``, ``Case 1``, ``Item 4``, ``Option 2``, ``Phase 1``, ``Part 2``, ``第3步``,
      ``第三步``, ``步骤2``), or a longer number (12 is not in ``2012``,
      ``12.5``, ``1,120`` or ``12345``). Two numbers joined by a dash, neither with a leading zero, are a range and
      both are read (``1900-1961``, ``10–12``).

Chinese numerals (``chinese=True``; text folded traditional → simplified, or folded here where lengths allow)
    * Maximal runs of 零〇一二三四五六七八九十百千万亿两廿卅卌 are read with cn2an (``normal`` mode, after 廿 → 二十,
      卅 → 三十, 卌 → 四十): ``一百零五`` = 105, ``两`` = 2. A run cn2an rejects (``三十五六``, "35 or 36") is read as its
      longest readable pieces from the left (35, 6), each at most 24 characters.
    * Runs of digits without units: one digit is read; two (``三四`` "three or four", ``一二`` "a little") are
      not numbers; three or more are read positionally (``一九六一`` = 1961, ``二〇二四`` = 2024).
    * Unit characters alone (百, 千, 万, 千万 in 百姓, 万物, 千古) are not numbers; 十 alone is 10.
    * Decimals, negatives and fractions are one number (cn2an): ``三点五`` = 3.5 and ``一百点零五`` = 100.05 (not a
      time: ``三点五分``, ``三点一刻``), ``负十二`` = ``零下十二`` = −12, ``三分之一`` = 1/3 (compared to 4 decimal
      places), ``千分之五`` = 0.005, ``二分之一点五`` = 0.75; no piece of them is read again (三点五 holds no 三).
    * Classical forms: ``六十有一`` / ``六十又一`` / ``卅有一`` = 61 / 61 / 31 (a number ending in a tens, hundreds or
      thousands unit, 有 or 又, then a smaller number); ``百有二十`` = 120; ``六旬`` = 60 (旬, a decade of age, after a
      digit); ``百分之四十五`` = 45 percent.
    * Numeral characters inside words are not numbers (:data:`ZH_LEXICAL`): 统一, 唯一, 同一, 一些, 一样, 一起, 一直,
      一定, 一般, 一切, 之一, 万一, 十分 (not 十分钟), 千万, 星期一, …, reduplicated 一一, and four-character idioms
      of the form 一X一Y (一心一意, 一模一样).
    * Month and day of a Chinese date (``一月四日``, ``1月4日``) are not read.

English number words (``english=True``)
    Maximal runs such as ``sixty-one``, ``sixty one``, ``one hundred and five`` (text2num); ``nineteen sixty-one``
    reads as the year 1961. Ordinal words (``sixty-first``) are not read.

Comparing (:func:`number_matches`)
    A gold number is stated by a number of the answer when they are equal: an integer gold exactly (61 is stated by
    ``61`` and ``61.0``, not by ``61.5``); a non-integer gold when it rounds to the answer's own decimal places (at
    least one place, except for magnitudes of 1000 and more). :func:`numeric_value` turns a gold value into a
    number whatever its stored type: a JSON number, or text that is exactly one number (``"61"``, ``"1,234"``,
    ``"$3.50"``, ``"45%"``); so a text gold ``"61"`` is compared as the number 61 and is not stated by ``61.5``,
    ``0.61``, ``-61``, ``4:30`` or a date.

Sources: locale digit grouping as CLDR describes it (grouping and decimal symbols per locale, e.g. en ``1,234.5``,
de ``1.234,5``, fr ``1 234,5``, de-CH ``1’234.5``); classical numerals per the Hanyu Da Cidian (廿, 卅, 卌, 有 "and",
旬 "ten years of age").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Number", "ZH_LEXICAL", "gold_number", "inline_markers", "number_matches", "numeric_value", "read_compounds", "read_number",
           "read_numbers"]


@dataclass(frozen=True)
class Number:
    """A number read from text: ``[start, end)`` character offsets in the text given, its value, the count of its
    decimal places as written, whether it was written as a percentage, the text it was read from and its form
    (``arabic``, ``chinese`` or ``english``)."""

    start: int
    end: int
    value: float
    decimals: int = 0
    percent: bool = False
    text: str = ""
    form: str = "arabic"


# -- per-character normalisation (offsets preserved) ------------------------------------------------------------------

_FW_DIGIT = re.compile("[\uff10-\uff19]")


def _char_fold(text: str) -> str:
    """NFKC per character where it maps one character to one (full-width digits and punctuation, superscripts are
    left alone); a full-width comma between full-width digits becomes ``,`` (a thousands separator of full-width
    text), any other stays ``，`` (a list separator)."""
    out = []
    n = len(text)
    for i, c in enumerate(text):
        if c == "\uff0c":
            between = 0 < i < n - 1 and _FW_DIGIT.match(text[i - 1]) and _FW_DIGIT.match(text[i + 1])
            out.append("," if between else c)
            continue
        if ord(c) < 128:
            out.append(c)
            continue
        f = unicodedata.normalize("NFKC", c)
        out.append(f if len(f) == 1 and not unicodedata.category(c).startswith("No") else c)
    return "".join(out)


# -- Arabic numerals --------------------------------------------------------------------------------------------------

_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2212\ufe63\uff0d"
_SPACES = " \u00a0\u2007\u2009\u202f"
# digit groups joined by one separator each: grouping/decimal marks and compound joiners (date, time, range, ratio)
_JOINER = r"(?:[.,'’:/" + re.escape(_DASHES) + r"]|\{,\}|\\,)"
_CLUSTER = re.compile(rf"\d+(?:{_JOINER}\d+)*")
# scientific notation after the digits (1e3, 2.5E-4, 1e−3), not joined to a word or a longer number after it
_EXPONENT = re.compile(r"[eE]([+\-\u2212]?\d{1,3})(?![\w]|\.\d)")
_MINUS = str.maketrans({"\u2212": "-"})
# magnitude suffixes: 12k / 12K (thousand), 1.5M / 3mn (million, an upper-case M: a lower-case m is metres),
# 2B / 2bn (billion), and the words thousand, million, billion, trillion after a space
_SCALE = re.compile(r"(?:(k|K|M|B|bn|mn|mln)|[ \u00a0](thousand|million|billion|trillion)\b)(?![A-Za-z\d])")
_SCALE_POWER = {"k": 3, "thousand": 3, "M": 6, "mn": 6, "mln": 6, "million": 6, "B": 9, "bn": 9, "billion": 9,
                "trillion": 12}
_PCT = re.compile(r"[ \u00a0]?(?:%|％|percent\b|per cent\b)", re.IGNORECASE)
_MYRIAD = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
_TIME_SUFFIX = re.compile(r"[ \u00a0]?(?:[ap]\.m\.|[ap]m\b)", re.IGNORECASE)
_MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
           r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_ORD = r"(?:st|nd|rd|th)?"
_DATE_WORDS = re.compile(
    rf"\b{_MONTHS}\.?[ \u00a0]+\d{{1,2}}{_ORD}\b(?:,?[ \u00a0]+\d{{4}}\b)?"
    rf"|\b\d{{1,2}}{_ORD}[ \u00a0]+(?:of[ \u00a0]+)?{_MONTHS}\b\.?(?:,?[ \u00a0]+\d{{4}}\b)?"
    rf"|\b\d{{1,2}}-{_MONTHS}-\d{{2,4}}\b", re.IGNORECASE)
_PHONE = re.compile(r"\(\d{2,4}\)[ \u00a0]?\d{3,4}[-. \u00a0]\d{4}")
_ZH_NUM_CHARS = "零〇一二三四五六七八九十百千万亿两廿卅卌"
# "1. ", "2) ", "(3) " opening a line with text after it: list markers, not numbers of the answer
_LIST_MARKER = re.compile(r"(?m)^[ \t]*[(\[]?\d{1,3}[.)\]](?=[ \t]+\S)")
# a marker of a list numbered inside a line ("1. John Smith 2. Jane Doe", "(1) A (2) B", "1) A; 2) B")
_INLINE_MARKER = re.compile(r"(?:(?<=^)|(?<=[\s,;:，；：]))(\(?)(\d{1,2})([.)])(?=[ \t]+\S)", re.MULTILINE)


def inline_markers(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` spans of the markers of lists numbered inside one line: ``1. John Smith 2. Jane Doe``,
    ``(1) A (2) B``, ``1) A, 2) B``. A line's markers count when they number 1, 2, 3… in order, at least two of
    them, all of one style (``1.`` / ``1)`` / ``(1)``); their numbers are list markers, not values of the answer.
    ``[]`` when no line holds such a list."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        runs: dict[tuple[str, str], list[re.Match]] = {}
        for m in _INLINE_MARKER.finditer(line):
            style = (m.group(1), m.group(3))
            if style == ("(", "."):
                continue
            seq = runs.setdefault(style, [])
            if int(m.group(2)) == len(seq) + 1:
                seq.append(m)
        for seq in runs.values():
            if len(seq) >= 2:
                out.extend((pos + m.start(), pos + m.end()) for m in seq)
        pos += len(line)
    return sorted(out)
# step numbers and other enumerators: "Step 3", "step #2", "Case 1:", "Item 4", "Option 2", "Phase 1", "Part 2", "第3步",
# "第三步", "步骤2" name a step of the reasoning, never a value of the answer
_ENUMERATOR = re.compile(rf"(?i)\b(?:step|phase|stage|item|option|case|part|scenario)[ \t]*(?:#|no\.?|number)?[ \t]*\d{{1,3}}\b(?![.,]\d)"
                         rf"|第[ \t]*(?:\d{{1,3}}|[{_ZH_NUM_CHARS}]{{1,4}})[ \t]*步|步骤[ \t]*(?:\d{{1,3}}|[{_ZH_NUM_CHARS}]{{1,4}})")
_ZH_DATE = re.compile(rf"(?:\d{{1,2}}|[{_ZH_NUM_CHARS}]{{1,3}})月(?:\d{{1,2}}|[{_ZH_NUM_CHARS}]{{1,3}})[日号]")


def _is_latin_letter(c: str) -> bool:
    """A letter of an alphabetic script (Latin, Greek, Cyrillic, …), not a CJK character, or an underscore."""
    if c == "_":
        return True
    if not c.isalpha():
        return False
    name = unicodedata.name(c, "")
    return not name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "IDEOGRAPHIC"))


def _grouped(groups: list[str]) -> bool:
    return 1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:])


def _indian(groups: list[str]) -> bool:
    """Digit groups of the Indian (lakh) grouping: a 1-2 digit head, groups of two, a last group of three
    (``1,23,456`` = 123456, ``12,34,56,789``)."""
    return (len(groups) >= 3 and 1 <= len(groups[0]) <= 2 and groups[0][0] != "0"
            and all(len(g) == 2 for g in groups[1:-1]) and len(groups[-1]) == 3)


def _value(int_digits: str, frac: str | None) -> float:
    return float(int_digits + ("." + frac if frac else ""))


def _interpret(tok: str) -> list[tuple[int, int, float, int]] | None:
    """Numbers of one cluster (digit groups joined by single separators), as ``(start, end, value, decimals)``
    relative to ``tok``; None when the cluster is a compound that holds no number of its own (date, time, version,
    ratio, feet and inches)."""
    parts = re.split(rf"({_JOINER})", tok)
    groups, seps = parts[0::2], parts[1::2]
    if not seps:
        return [(0, len(tok), float(tok), 0)]
    kinds = set(seps)
    if ":" in kinds or "/" in kinds:
        return None
    if kinds <= set(_DASHES):
        # two numbers joined by a dash, neither with a leading zero: a range; anything else: a date, phone or id
        if len(groups) == 2 and not any(len(g) > 1 and g[0] == "0" for g in groups):
            return [(0, len(groups[0]), float(groups[0]), 0),
                    (len(tok) - len(groups[1]), len(tok), float(groups[1]), 0)]
        return None
    if kinds & set(_DASHES):
        return None
    if kinds == {"."}:
        if len(groups) == 2:
            return [(0, len(tok), _value(groups[0], groups[1]), len(groups[1]))]
        if _grouped(groups):                       # 1.234.567: point groups
            return [(0, len(tok), float("".join(groups)), 0)]
        return None                                # 1.2.3, 04.01.2013, 192.168.0.1
    if len(kinds) == 1 and kinds <= {",", "'", "’", "{,}", "\\,"}:
        if _grouped(groups) and not (kinds == {","} and groups[0] == "0"):
            return [(0, len(tok), float("".join(groups)), 0)]
        if kinds == {","} and _indian(groups):     # 1,23,456: lakh grouping
            return [(0, len(tok), float("".join(groups)), 0)]
        if kinds == {","} and len(groups) == 2:    # 1,23 / 12,5 / 0,123: one number with a decimal comma
            return [(0, len(tok), _value(groups[0], groups[1]), len(groups[1]))]
        if kinds == {","}:                         # 3,5,7: a list
            out, pos = [], 0
            for g in groups:
                out.append((pos, pos + len(g), float(g), 0))
                pos += len(g) + 1
            return out
        return None                                # 5'10: feet and inches
    # two kinds: groups of one kind, then a decimal mark of the other
    head, last = groups[:-1], groups[-1]
    gseps, dsep = seps[:-1], seps[-1]
    if len(set(gseps)) == 1 and gseps[0] != dsep and _grouped(head):
        g = gseps[0]
        if (g in {",", "'", "’", "{,}", "\\,"} and dsep == ".") or (g == "." and dsep == ","):
            return [(0, len(tok), _value("".join(head), last), len(last))]
    if "," in kinds:                               # 3.5,4.5: a list of decimals
        out, pos = [], 0
        for piece in tok.split(","):
            sub = _interpret(piece) if piece else None
            for s, e, v, d in sub or []:
                out.append((pos + s, pos + e, v, d))
            pos += len(piece) + 1
        return out
    return None


def _joined_before(text: str, s: int) -> bool:
    """Whether the digits at ``s`` are joined to a letter before them (B6, v1): an identifier, never the head of a
    space-grouped number."""
    b = text[s - 1] if s > 0 else ""
    if b == "." or b in _DASHES:
        b = text[s - 2] if s > 1 else ""
    return bool(b) and _is_latin_letter(b)


def _arabic(text: str, masked: list[bool], compounds: list[tuple[int, int, str]]) -> list[Number]:
    clusters = [m for m in _CLUSTER.finditer(text) if not any(masked[m.start():m.end()])]
    # merge clusters separated by one space into space-grouped numbers (1 234 567, 1 234,5), or drop phone-like runs
    runs: list[list[re.Match]] = []
    for m in clusters:
        if (runs and runs[-1][-1].end() + 1 == m.start() and text[m.start() - 1] in _SPACES
                and not _joined_before(text, runs[-1][0].start())):
            runs[-1].append(m)
        else:
            runs.append([m])
    found: list[tuple[int, int, float, int]] = []
    for run in runs:
        toks = [m.group(0) for m in run]
        if len(run) > 1:
            plain = [t.isdigit() for t in toks]
            last = re.fullmatch(r"(\d{3})(?:[.,](\d+))?", toks[-1])
            if all(plain[:-1]) and _grouped(toks[:-1] + [toks[-1][:3]]) and last:
                found.append((run[0].start(), run[-1].end(), _value("".join(toks[:-1]) + last.group(1),
                                                                     last.group(2)), len(last.group(2) or "")))
                continue
            digits = sum(len(re.sub(r"\D", "", t)) for t in toks)
            plus = run[0].start() > 0 and text[run[0].start() - 1] == "+"
            if all(plain) and (len(run) >= 3 and digits >= 7 or plus and digits >= 7):
                compounds.append((run[0].start() - plus, run[-1].end(), "phone"))
                continue                           # a phone number: +1 555 123 4567, 12 34 56 78
        for m in run:
            parts = _interpret(m.group(0))
            if parts is None:
                compounds.append((m.start(), m.end(), "compound"))   # 2013-01-04, 4:30, 1.2.3, 5'10
            for s, e, v, d in parts or []:
                found.append((m.start() + s, m.start() + e, v, d))
    out = []
    for s, e, v, d in found:
        num = _arabic_bounds(text, s, e, v, d)
        if num is not None:
            out.append(num)
    return out


def _arabic_bounds(text: str, s: int, e: int, v: float, d: int) -> Number | None:
    """Apply the boundary rules to a number read at ``[s, e)``: joined letters, sign, leading point, percent,
    myriad multiplier, time suffix. None when it is not a number of its own."""
    before = text[s - 1] if s > 0 else ""
    if before and _is_latin_letter(before):
        return None
    if before == ".":
        b2 = text[s - 2] if s > 1 else ""
        if b2.isalnum() or b2 == "_":
            return None                            # No.12, v1.2 (the "1" is joined through the point)
        if text[s:e].isdigit():                    # .5
            v, d, s = float("0." + text[s:e]), e - s, s - 1
            before = text[s - 1] if s > 0 else ""
    if before == "负" or before == "負" or (s > 1 and text[s - 2:s] == "零下"):
        v, s = -v, s - (2 if before == "下" else 1)   # 负12, 零下12 (below zero): negative
        before = ""
    if before and before in _DASHES + "+":
        b2 = text[s - 2] if s > 1 else ""
        if b2 and _is_latin_letter(b2):
            return None                            # COVID-19: part of a name
        if not b2.isdigit():                       # (a digit before: the second number of a range)
            if before != "+":
                v = -v
            s -= 1
    after = text[e:]
    xm = _EXPONENT.match(after)
    if xm and not re.match(r"[eE]", text[s:e][-1:]):   # 1e3, 2.5E-4: scientific notation, read whole
        power = int(xm.group(1).translate(_MINUS))
        v, d, e = float(f"{v!r}e{power}"), max(0, d - power), e + xm.end()
        after = text[e:]
    sm = _SCALE.match(after)
    if sm:                                         # 12k, 1.5M, 3bn, 2.5 million: the multiplier is part of it
        key = sm.group(1) or sm.group(2)
        power = _SCALE_POWER[key if key in _SCALE_POWER else key.lower()]
        v, d, e = float(f"{v!r}e{power}"), max(0, d - power), e + sm.end()
        after = text[e:]
    m = re.match(r"[A-Za-z]+", after)
    if m and (re.match(r"[\d_]", after[m.end():m.end() + 1]) or after[m.end():m.end() + 1] == "_"):
        return None                                # 3D2, 4K60, 0x1F
    if after[:1] == "_":
        return None
    if _TIME_SUFFIX.match(after):
        return None                                # 4pm, 4 p.m.
    end, percent = e, False
    if after[:1] in _MYRIAD:
        v *= _MYRIAD[after[0]]
        end += 1
    else:
        pm = _PCT.match(after)
        if pm:
            percent, end = True, e + pm.end()
    return Number(s, end, v, d, percent, text[s:end], "arabic")


# -- Chinese numerals -------------------------------------------------------------------------------------------------

_ZH_DIGITS = "零〇一二三四五六七八九两"
_ZH_UNITS = "十百千万亿廿卅卌"
_ZH_RUN = re.compile(f"[{_ZH_DIGITS}{_ZH_UNITS}]+")
_ZH_TRAD = str.maketrans({"萬": "万", "億": "亿", "兩": "两", "○": "〇"})
_ZH_DIGIT_VALUE = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
                   "九": 9}
_ZH_EXPAND = (("廿", "二十"), ("卅", "三十"), ("卌", "四十"))
_ZH_ONLY_UNITS = re.compile("[百千万亿]+")
# tens/hundreds/thousands a following 有/又 ("and") adds to: the unit of the last character
_ZH_JOIN_UNIT = {"十": 10, "廿": 10, "卅": 10, "卌": 10, "旬": 10, "百": 100, "千": 1000}
_MAX_PIECE = 24  # characters (or words) of the longest numeral piece tried when a run must be split

# words whose numeral characters are not numbers (simplified forms; text is folded before reading)
ZH_LEXICAL = (
    "一些 一样 一起 一直 一定 一般 一切 一致 一旦 一向 一再 一律 一概 一贯 一味 一同 一齐 一并 一道 一边 一面 一时 一度 "
    "一心 一下 一会 一番 一连 一旁 一带 一路 一经 一则 一如 一无 一体 一流 一阵 一点儿 一点点 一口气 一方面 一系列 一手 "
    "一举 一早 一丝 一毫 一律 统一 唯一 同一 单一 逐一 专一 划一 不一 万一 之一 其一 独一 一一 略知一二 一二 "
    "星期一 星期二 星期三 星期四 星期五 星期六 礼拜一 礼拜二 礼拜三 礼拜四 礼拜五 礼拜六 周一 周二 周三 周四 周五 周六 "
    "十足 十字 十全 三思 再三 七嘴八舌 乱七八糟 五花八门 四处 四周 四面八方 五湖四海 三心二意 三三两两 七七八八 十之八九 "
    "数一数二 独一无二 接二连三 不三不四 丢三落四 朝三暮四 说三道四 颠三倒四 横七竖八 七上八下 一五一十 千万 万物 万岁 "
    "万事 万分 万般 百姓 百般 百合 千古 千秋 九州 九泉 八卦 二手 三角 五官 零星 零食 零件 零售 零钱 零散 零碎 零乱 二话"
).split()
# a word touching another numeral character is part of a number (三万一千 holds no 万一, 五十分 no 十分)
_ZH_LEX_RE = re.compile(f"(?<![{_ZH_DIGITS}{_ZH_UNITS}])(?:十分(?!钟)|一[^{_ZH_DIGITS}{_ZH_UNITS}\\s]一"
                        f"[^{_ZH_DIGITS}{_ZH_UNITS}\\s]|"
                        + "|".join(sorted(set(ZH_LEXICAL), key=len, reverse=True)) + f")(?![{_ZH_DIGITS}{_ZH_UNITS}])")


@lru_cache(maxsize=1)
def _t2s():
    from opencc import OpenCC

    return OpenCC("t2s")


def _zh_value(run: str) -> float | None:
    if _ZH_ONLY_UNITS.fullmatch(run):
        return None
    if not any(c in _ZH_UNITS for c in run):
        if len(run) == 2:
            return None                            # 三四 "three or four", 一二 "a little"
        if len(run) >= 3:                          # 一九六一: digit by digit
            return float("".join(str(_ZH_DIGIT_VALUE[c]) for c in run))
    return _cn2an(run)


def _zh_pieces(text: str, start: int, end: int) -> list[Number]:
    """Numbers of one run ``text[start:end]``: the whole run when it reads, else its longest readable pieces from
    the left (a piece nothing reads is skipped one character at a time)."""
    if end - start == 2 and not any(c in _ZH_UNITS for c in text[start:end]):
        return []                                  # 三四 "three or four": no number, not two
    return [Number(start + i, start + j, v, 0, False, text[start + i:start + j], "chinese")
            for i, j, v in _longest_pieces(end - start, lambda i, j: _zh_value(text[start + i:start + j]))]


def _longest_pieces(n: int, read) -> list[tuple[int, int, float]]:
    """Split ``n`` items into the longest readable pieces from the left: ``read(i, j)`` is the value of items
    ``[i, j)`` or None; an item no piece reads is skipped. Pieces are at most ``_MAX_PIECE`` items."""
    out: list[tuple[int, int, float]] = []
    i = 0
    while i < n:
        for j in range(min(n, i + _MAX_PIECE), i, -1):
            v = read(i, j)
            if v is not None:
                out.append((i, j, v))
                i = j
                break
        else:
            i += 1
    return out


_ZH_R = f"[{_ZH_DIGITS}{_ZH_UNITS}]+"
_ZH_D = "[零〇一二三四五六七八九]+"
# one number written with more than numeral characters: a fraction (三分之一 = 1/3, 千分之五 = 0.005; 百分之 is a
# percentage, read below), a decimal (三点五 = 3.5, 一百点零五 = 100.05; not a time: 三点五分, 三点一刻), a negative
# (负十二 = -12, 零下十二 = -12); each may carry a sign
_ZH_SIGN = "(?P<neg>负|零下)?"
_ZH_FRACTION = re.compile(rf"{_ZH_SIGN}(?P<den>{_ZH_R})分之(?P<num>{_ZH_R}(?:点{_ZH_D})?)")
_ZH_DECIMAL = re.compile(rf"{_ZH_SIGN}(?P<int>{_ZH_R})点(?P<frac>{_ZH_D})(?![分刻钟秒半整])")
_ZH_NEGATIVE = re.compile(rf"(?P<neg>负|零下)(?P<int>{_ZH_R}(?:点{_ZH_D}(?![分刻钟秒半整]))?)")


def _cn2an(s: str) -> float | None:
    """cn2an's reading of Chinese numerals ``s`` (``normal`` mode: digits and units, 点 decimals, 负 negatives),
    after 廿 → 二十, 卅 → 三十, 卌 → 四十; None for what it rejects."""
    import cn2an

    for a, b in _ZH_EXPAND:
        s = s.replace(a, b)
    try:
        return float(cn2an.cn2an(s, "normal"))
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _zh_compound(s: str, blocked: list[bool]) -> list[Number]:
    """Fractions, decimals and negatives of Chinese numerals (:data:`_ZH_FRACTION`), read whole with cn2an; their
    characters are marked in ``blocked`` so that no piece of them is read again (三点五 holds no 三)."""
    out: list[Number] = []
    for rx in (_ZH_FRACTION, _ZH_DECIMAL, _ZH_NEGATIVE):
        for m in rx.finditer(s):
            if any(blocked[m.start():m.end()]):
                continue
            sign = -1.0 if m.group("neg") else 1.0
            if rx is _ZH_FRACTION:
                if m.group("den") == "百" and not m.group("neg"):
                    continue                       # 百分之四十五: a percentage (read with the runs)
                bare = {"十": 10.0, "百": 100.0, "千": 1000.0, "万": 10000.0}
                den = bare.get(m.group("den")) or _cn2an(m.group("den"))
                num = _cn2an(m.group("num"))
                if not den or num is None:
                    continue
                v, d = sign * num / den, 4
            elif rx is _ZH_DECIMAL:
                v0 = _cn2an(f"{m.group('int')}点{m.group('frac')}")
                if v0 is None:
                    continue
                v, d = sign * v0, len(m.group("frac"))
            else:
                v0 = _cn2an(m.group("int"))
                if v0 is None:
                    continue
                v, d = -v0, len(m.group("int").partition("点")[2])
            out.append(Number(m.start(), m.end(), v, d, False, s[m.start():m.end()], "chinese"))
            for k in range(m.start(), m.end()):
                blocked[k] = True
    return out


def _chinese(text: str, masked: list[bool]) -> list[Number]:
    s = text.translate(_ZH_TRAD)
    try:
        t = _t2s().convert(s)
        s = t if len(t) == len(s) else s
    except Exception:  # noqa: BLE001 — OpenCC unavailable: read the text as it is
        pass
    blocked = list(masked)
    compound = _zh_compound(s, blocked)   # before the words: 三分之一 is a number, though 之一 is "one of"
    for m in _ZH_LEX_RE.finditer(s):
        for k in range(m.start(), m.end()):
            blocked[k] = True
    nums: list[Number] = []
    bare: list[Number] = []                        # 百 / 千 alone: numbers only when 有/又 joins a smaller one
    for m in _ZH_RUN.finditer(s):
        i = m.start()
        while i < m.end():
            if blocked[i]:
                i += 1
                continue
            j = i
            while j < m.end() and not blocked[j]:
                j += 1
            seg = s[i:j]
            if seg in ("百", "千") and s[j:j + 1] in ("有", "又"):
                bare.append(Number(i, j, float(_ZH_JOIN_UNIT[seg]), 0, False, seg, "chinese"))
            else:
                nums.extend(_zh_pieces(s, i, j))
            i = j
    nums = sorted(nums + bare, key=lambda n: n.start)
    out: list[Number] = []
    for n in nums:
        if s[n.end:n.end + 1] == "旬" and 1 <= n.value <= 9 and n.text in _ZH_DIGITS:   # 六旬 = 60
            n = Number(n.start, n.end + 1, n.value * 10, 0, False, s[n.start:n.end + 1], "chinese")
        prev = out[-1] if out else None
        if (prev is not None and prev.end + 1 == n.start and s[prev.end] in "有又"
                and prev.text[-1:] in _ZH_JOIN_UNIT and 0 < n.value < _ZH_JOIN_UNIT[prev.text[-1]]):
            out[-1] = Number(prev.start, n.end, prev.value + n.value, 0, False, s[prev.start:n.end], "chinese")
        else:
            out.append(n)
    bare_ids = {id(b) for b in bare}
    result = []
    for n in out:
        if id(n) in bare_ids:
            continue                               # 百 not joined to anything: not a number (百姓)
        if n.start >= 3 and s[n.start - 3:n.start] == "百分之":
            n = Number(n.start - 3, n.end, n.value, 0, True, s[n.start - 3:n.end], "chinese")
        result.append(n)
    return sorted(result + compound, key=lambda n: n.start)


# -- English number words ---------------------------------------------------------------------------------------------

_EN_SMALL = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
             "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_EN_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_EN_SCALES = ["hundred", "thousand", "million", "billion"]
_EN_WORD = "(?:" + "|".join(sorted(_EN_SMALL + _EN_TENS + _EN_SCALES, key=len, reverse=True)) + ")"
# word boundaries against Latin letters and digits only: CJK characters may touch (著書twenty卷)
_LAT = r"A-Za-z0-9_\-\u00c0-\u024f"
_EN_RUN = re.compile(rf"(?<![{_LAT}]){_EN_WORD}(?:(?:[ \t]+and[ \t]+|[ \t]*-[ \t]*|[ \t]+){_EN_WORD})*(?![{_LAT}])",
                     re.IGNORECASE)
_EN_TOKEN = re.compile(rf"{_EN_WORD}|and", re.IGNORECASE)


def _en_value(words: list[str]) -> float | None:
    from text_to_num import text2num

    words = [w.lower() for w in words]
    try:
        return float(text2num(" ".join(words), "en"))
    except ValueError:
        pass
    # spoken years: "nineteen sixty-one" = 1961 (two parts, the first 10-99)
    for k in range(1, len(words)):
        try:
            a, b = text2num(" ".join(words[:k]), "en"), text2num(" ".join(words[k:]), "en")
        except ValueError:
            continue
        if 10 <= a <= 99 and 0 <= b <= 99 and words[k] != "and":
            return float(a * 100 + b)
    return None


def _english(text: str, masked: list[bool]) -> list[Number]:
    out: list[Number] = []
    for m in _EN_RUN.finditer(text):
        if any(masked[m.start():m.end()]):
            continue
        toks = [(t.start() + m.start(), t.end() + m.start(), t.group(0)) for t in _EN_TOKEN.finditer(m.group(0))]

        def read(i: int, j: int, toks=toks) -> float | None:
            if toks[i][2].lower() == "and" or toks[j - 1][2].lower() == "and":
                return None
            return _en_value([t[2] for t in toks[i:j]])

        for i, j, v in _longest_pieces(len(toks), read):
            s, e = toks[i][0], toks[j - 1][1]
            out.append(Number(s, e, v, 0, False, text[s:e], "english"))
    return out


# -- public API -------------------------------------------------------------------------------------------------------

def _scan(text: str, chinese: bool, english: bool) -> tuple[list[Number], list[tuple[int, int, str]]]:
    t = _char_fold(text)
    masked = [False] * len(t)
    compounds: list[tuple[int, int, str]] = []
    for rx, kind in ((_DATE_WORDS, "date"), (_PHONE, "phone"), (_ZH_DATE, "date"), (_LIST_MARKER, "marker"),
                     (_ENUMERATOR, "marker")):
        for m in rx.finditer(t):
            compounds.append((m.start(), m.end(), kind))
            for k in range(m.start(), m.end()):
                masked[k] = True
    for a, b in inline_markers(t):
        if not any(masked[a:b]):
            compounds.append((a, b, "marker"))
            for k in range(a, b):
                masked[k] = True
    out = _arabic(t, masked, compounds)
    taken = list(masked)
    for n in out:
        for k in range(n.start, n.end):
            taken[k] = True
    if chinese:
        out.extend(_chinese(t, taken))
    if english:
        out.extend(_english(t, taken))
    return sorted(out, key=lambda n: n.start), sorted(compounds)


def read_numbers(text: str | None, *, chinese: bool = False, english: bool = False) -> list[Number]:
    """Every number of ``text`` read whole, in order of position (rules: module docstring). Arabic numerals
    always; Chinese numerals with ``chinese`` and English number words with ``english``. Offsets are characters of
    ``text``. Returns ``[]`` for None or empty text."""
    if not text:
        return []
    return _scan(text, chinese, english)[0]


def read_compounds(text: str | None) -> list[tuple[int, int, str]]:
    """The spans of ``text`` that hold digits but no number of their own, as ``(start, end, kind)``: ``date``
    (``January 4, 2013``, ``1月4日``), ``phone``, ``compound`` (``2013-01-04``, ``4:30``, ``1.2.3``, ``5'10``) and
    ``marker`` (a list marker opening a line). Matchers that compare tokens keep a compound whole and drop markers
    (:func:`ctxbench.scoring.normalize.tokens`)."""
    if not text:
        return []
    return _scan(text, False, False)[1]


_GOLD_WRAP = re.compile(r"^[\s\"'“”‘’`*(\[]*(?:[$€£¥₹]|US\$|USD|EUR|RMB)?\s*(.*?)\s*[.。]?[\s\"'“”‘’`*)\]]*$",
                        re.IGNORECASE | re.DOTALL)


def read_number(text: str | None) -> Number | None:
    """The number ``text`` is, when it is exactly one Arabic number (quotes, brackets, a currency sign before it,
    a percent sign and a final full stop around it allowed): ``"61"``, ``"1,234"``, ``"$3.50"``, ``"–12"``, ``"45%"``.
    None otherwise (``"61 years"``, ``"2013-01-04"``, ``"4:30"``, ``"3, 5"``, text)."""
    if text is None:
        return None
    m = _GOLD_WRAP.match(str(text))
    core = m.group(1) if m else str(text).strip()
    if not core:
        return None
    nums = read_numbers(core)
    if len(nums) == 1 and nums[0].start == 0 and nums[0].end == len(core):
        return nums[0]
    return None


def numeric_value(gold) -> float | None:
    """A gold value as a number whatever its stored type: a JSON number (a bool counts as 0/1), or text that is
    exactly one number (:func:`read_number`); None for anything else (text, NULL)."""
    if gold is None:
        return None
    if isinstance(gold, bool):
        return float(gold)
    if isinstance(gold, (int, float)):
        return float(gold)
    n = read_number(str(gold))
    return None if n is None else n.value


def gold_number(gold) -> float | Number | None:
    """A gold value for :func:`number_matches`: a text percentage (``"25%"``) as its :class:`Number` (so that its
    fraction 0.25 is stated too), any other number as :func:`numeric_value` gives it; None for text and NULL."""
    if isinstance(gold, str):
        n = read_number(gold)
        return None if n is None else n if n.percent else n.value
    return numeric_value(gold)


def number_matches(gold: float | Number, found: Iterable[Number]) -> bool:
    """Whether a number of the answer states ``gold`` (module docstring, "Comparing"): integers exactly;
    non-integers equal when rounded to the answer number's own decimal places (at least one place, or none for
    magnitudes of 1000 and more). A percentage states its fraction both ways: an answer's 25% states a gold 0.25,
    and a gold ``Number`` written as 25% (:func:`gold_number`) is stated by 25 and by 0.25."""
    if isinstance(gold, Number):
        return number_matches(gold.value, found) or (gold.percent and number_matches(gold.value / 100, found))
    g = float(gold)
    for n in found:
        # a percentage also states its fraction: 25% states 0.25 (a ratio computed by SQL), to 2 more places
        for v, dec in ((n.value, n.decimals), *(((n.value / 100, n.decimals + 2),) if n.percent else ())):
            if g.is_integer():
                if v == g:
                    return True
                continue
            if dec == 0 and abs(g) < 1000:
                continue
            if abs(v - g) <= 0.5 * 10 ** (-dec) + 1e-9:
                return True
    return False


def display_number(v: float) -> str:
    """A gold number as shown to people (report, instance browser, labelling, exports): float noise of the SQL
    engines removed (``1627.3000000000009`` → ``1627.3``, ``0.30000000000000004`` → ``0.3``), integers without a
    decimal point (``61.0`` → ``61``). It keeps 12 significant digits, far finer than :func:`number_matches`
    compares (an answer's own decimal places), so an answer that copies the text shown always matches the gold."""
    f = float(v)
    if f != f or f in (float("inf"), float("-inf")):
        return str(f)
    if f.is_integer() and abs(f) < 1e16:
        return str(int(f))
    return repr(float(f"{f:.12g}"))
