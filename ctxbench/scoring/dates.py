"""Dates and times in an answer or a gold value, read as dates and times (issue 30, kind 7).

A gold ``2004-04-01 00:00:00`` (what SQLite and DuckDB print for a DATETIME) is stated by ``2004-04-01``,
``April 1, 2004``, ``1 April 2004``, ``Apr. 1st, 2004`` or ``2004年4月1日``; a gold ``8:00 AM`` by ``08:00`` and a
gold ``20:00`` by ``8:00 PM``. A different day, or ``8:00 PM`` for ``08:00``, is still wrong. Every matcher that
compares values (the row matcher, SciTrek's exact match and F1, the needles matcher, token F1) reads them here.

What is read (:func:`read_whens`), strictly: a span is a date only in one of these shapes, never a plain number
(``17`` or ``2004`` is no date)

* ISO and year-first dates: ``2004-04-01``, ``2004/04/01``, ``2004.04.01``, with an optional time
  (``2004-04-01 00:00:00``, ``2004-04-01T08:30``, fractions of a second and a zone suffix ignored);
* written months in English: ``April 1, 2004``, ``Apr. 1st 2004``, ``1 April 2004``, ``1st of April, 2004``,
  ``01-Apr-2004``, with a weekday before it that must agree (``Thursday, April 1, 2004``)
  (a date without its year is no date: it cannot be compared with a gold that has one);
* Chinese dates: ``2004年4月1日``, ``2004年04月01号``, ``二〇〇四年四月一日``;
* day-month-year with points (``01.04.2004``, the German order) and with slashes or dashes only when both
  readings (day first, month first) agree or one is impossible (``13/04/2004``): ``01/04/2004`` is ambiguous and
  read as no date (nothing is guessed);
* times: ``08:00``, ``8:00:30``, ``8:00 AM``, ``8 p.m.``, ``下午8点``, ``20时30分``, alone or after a date; 12 AM is
  00:00 and 12 PM is 12:00.

Comparing (:func:`when_matches`): the dates must be equal; a time the gold states must be stated equal, except
that a gold time of midnight (``00:00:00``) adds nothing to a date (a DATETIME column holding a day); a time the
answer adds to the gold's date is not asked for and costs nothing. Validity comes from :mod:`datetime` (30 February
is no date).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

__all__ = ["When", "gold_when", "read_whens", "when_matches", "when_token"]


@dataclass(frozen=True)
class When:
    """A date and/or time read from text: ``[start, end)`` character offsets, the date (None for a time alone) and
    the time of day (None for a date alone)."""

    start: int
    end: int
    date: dt.date | None = None
    time: dt.time | None = None


_MONTHS = {m: i + 1 for i, ms in enumerate(("jan january", "feb february", "mar march", "apr april", "may",
                                            "jun june", "jul july", "aug august", "sep sept september",
                                            "oct october", "nov november", "dec december")) for m in ms.split()}
_MON = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORD = r"(?:st|nd|rd|th)?"
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# a weekday before a written date ("Thursday, April 1, 2004"): part of the date, and it must agree with it
_WDAY = (r"(?:(?P<wd>(?:mon|tues|wednes|thurs|fri|satur|sun)day|mon|tues?|wed|thur?s?|fri|sat|sun)\.?,?[ \u00a0]+"
         r"(?:the[ \u00a0]+)?)?")
_ZH_DIG = "〇零一二三四五六七八九"
_ZH_N = rf"[{_ZH_DIG}十]{{1,3}}"
# a time after a date or alone: 08:00, 8:00:30.5, 8:00 AM, 8 p.m. (an hour alone only with am/pm)
_TIME = (r"(?P<h>\d{1,2})(?::(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,]\d+)?)?(?:[ \u00a0]*(?P<ap>[ap])\.?[ \u00a0]?m\b\.?)?"
         r"|[ \u00a0]*(?P<ap2>[ap])\.?[ \u00a0]?m\b\.?)")
_ZH_TIME = (rf"(?P<zp>凌晨|早上|上午|中午|下午|晚上)?(?P<zh>\d{{1,2}}|{_ZH_N})[时点](?:(?P<zm>\d{{1,2}}|{_ZH_N})分?"
            rf"(?:(?P<zs>\d{{1,2}}|{_ZH_N})秒)?|整|半)?")
_SEP_T = r"(?:[ \u00a0]*(?:T|[ \u00a0]|,[ \u00a0]*|[ \u00a0]at[ \u00a0]|[ \u00a0]@[ \u00a0])[ \u00a0]*)"
_ISO = re.compile(rf"(?<![\w.:/-])(?P<y>\d{{4}})(?P<sep>[-/.])(?P<m>\d{{1,2}})(?P=sep)(?P<d>\d{{1,2}})"
                  rf"(?:{_SEP_T}(?P<t>{_TIME.replace('?P<', '?P<i_')}))?(?:Z|[+-]\d{{2}}:?\d{{2}})?(?![\w/-]|\.\d)",
                  re.IGNORECASE)
_EN_MDY = re.compile(rf"\b{_WDAY}{_MON}[ \u00a0]+(?P<d>\d{{1,2}}){_ORD},?[ \u00a0]+(?P<y>\d{{4}})\b"
                     rf"(?:{_SEP_T}(?P<t>{_TIME.replace('?P<', '?P<i_')}))?", re.IGNORECASE)
_EN_DMY = re.compile(rf"\b{_WDAY}(?P<d>\d{{1,2}}){_ORD}(?:[ \u00a0]+(?:of[ \u00a0]+)?|-){_MON}(?:,?[ \u00a0]+|-)(?P<y>\d{{4}})\b"
                     rf"(?:{_SEP_T}(?P<t>{_TIME.replace('?P<', '?P<i_')}))?", re.IGNORECASE)
_ZH_DATE = re.compile(rf"(?P<y>\d{{4}}|[{_ZH_DIG}]{{4}})[ \u00a0]*年[ \u00a0]*(?P<m>\d{{1,2}}|{_ZH_N})[ \u00a0]*月"
                      rf"[ \u00a0]*(?P<d>\d{{1,2}}|{_ZH_N})[ \u00a0]*[日号]"
                      rf"(?:[ \u00a0]*(?P<t>{_ZH_TIME.replace('?P<', '?P<i_')}))?")
_NUM_DMY = re.compile(rf"(?<![\w.:/-])(?P<a>\d{{1,2}})(?P<sep>[./-])(?P<b>\d{{1,2}})(?P=sep)(?P<y>\d{{4}})"
                      rf"(?:{_SEP_T}(?P<t>{_TIME.replace('?P<', '?P<i_')}))?(?![\w/-]|\.\d)", re.IGNORECASE)
_TIME_ALONE = re.compile(rf"(?<![\w.:/-])(?:{_TIME})(?![\w:]|\.\d)", re.IGNORECASE)
_ZH_TIME_ALONE = re.compile(_ZH_TIME)


def _zh_int(s: str) -> int | None:
    """A small Chinese or Arabic number (1-31 for months and days, four digits for a year)."""
    if s.isdigit():
        return int(s)
    digits = {c: i for i, c in enumerate("〇一二三四五六七八九")}
    digits["零"] = 0
    if "十" in s:
        tens, _, ones = s.partition("十")
        if len(tens) > 1 or len(ones) > 1:
            return None
        return (digits.get(tens, 1) if tens else 1) * 10 + (digits.get(ones, 0) if ones else 0)
    if all(c in digits for c in s):
        return int("".join(str(digits[c]) for c in s))
    return None


def _date(y, m, d) -> dt.date | None:
    try:
        return dt.date(int(y), int(m), int(d))
    except (TypeError, ValueError):
        return None


def _clock(h, mi, s, ap) -> dt.time | None:
    try:
        h, mi, s = int(h), int(mi or 0), int(s or 0)
    except (TypeError, ValueError):
        return None
    if ap:
        if not 1 <= h <= 12:
            return None
        h = (0 if h == 12 else h) + (12 if ap.lower() == "p" else 0)
    try:
        return dt.time(h, mi, s)
    except ValueError:
        return None


def _time_of(m: re.Match, p: str = "") -> dt.time | None:
    g = m.groupdict()
    if g.get(p + "h") is None:
        return None
    if g.get(p + "mi") is None and not g.get(p + "ap2"):
        return None                                   # "8" alone is no time
    return _clock(g[p + "h"], g.get(p + "mi"), g.get(p + "s"), g.get(p + "ap") or g.get(p + "ap2"))


def _zh_time_of(m: re.Match, p: str = "") -> dt.time | None:
    g = m.groupdict()
    h = _zh_int(g.get(p + "zh") or "")
    if h is None:
        return None
    half = m.group(0).endswith("半")
    mi = 30 if half else _zh_int(g.get(p + "zm") or "0")
    s = _zh_int(g.get(p + "zs") or "0")
    part = g.get(p + "zp")
    if part in ("下午", "晚上") and h < 12:
        h += 12
    elif part == "中午" and h < 11:
        h += 12
    try:
        return dt.time(h, mi or 0, s or 0)
    except (TypeError, ValueError):
        return None


def read_whens(text: str | None) -> list[When]:
    """Every date and time of ``text`` (module docstring), in order of position, non-overlapping; a span whose
    shape is a date but whose day is ambiguous or impossible (``01/04/2004``, ``2004-02-30``) is read with
    ``date`` None and never matches. ``[]`` for None or empty text."""
    if not text:
        return []
    found: list[When] = []
    taken = [False] * len(text)

    def add(s: int, e: int, date, time) -> None:
        if any(taken[s:e]):
            return
        for k in range(s, e):
            taken[k] = True
        found.append(When(s, e, date, time))

    for m in _ISO.finditer(text):
        t = _time_of(m, "i_") if m.group("t") else None
        if m.group("t") and t is None:                # "2004-04-01 8": the number after it is no time
            add(m.start(), m.start("t") - 0, _date(m["y"], m["m"], m["d"]), None)
            continue
        add(m.start(), m.end(), _date(m["y"], m["m"], m["d"]), t)
    for rx in (_EN_MDY, _EN_DMY):
        for m in rx.finditer(text):
            t = _time_of(m, "i_") if m.group("t") else None
            end = m.end() if t is not None or not m.group("t") else m.start("t")
            d = _date(m["y"], _MONTHS[m["mon"].lower()], m["d"])
            if d is not None and m["wd"] and _DAYS.index(m["wd"][:3].lower()) != d.weekday():
                d = None                              # "Friday, April 1, 2004": the weekday contradicts the date
            add(m.start(), end, d, t)
    for m in _ZH_DATE.finditer(text):
        t = _zh_time_of(m, "i_") if m.group("t") else None
        end = m.end() if t is not None or not m.group("t") else m.start("t")
        add(m.start(), end, _date(_zh_int(m["y"]), _zh_int(m["m"]), _zh_int(m["d"])), t)
    for m in _NUM_DMY.finditer(text):
        a, b, y = int(m["a"]), int(m["b"]), m["y"]
        day_first = _date(y, b, a)
        month_first = None if m["sep"] == "." else _date(y, a, b)   # points: day first (German order) only
        date = (day_first if month_first is None or month_first == day_first else
                month_first if day_first is None else None)         # both readings possible and different
        t = _time_of(m, "i_") if m.group("t") else None
        end = m.end() if t is not None or not m.group("t") else m.start("t")
        add(m.start(), end, date, t)
    for m in _TIME_ALONE.finditer(text):
        t = _time_of(m)
        if t is not None:
            add(m.start(), m.end(), None, t)
    for m in _ZH_TIME_ALONE.finditer(text):
        # a clock time only where it cannot be a decimal (三点五 = 3.5): a part of the day, 时, or 分/秒/整/半 after it
        z = m.group(0)
        if not (m.group("zp") or "时" in z or z.endswith(("分", "秒", "整", "半"))):
            continue
        t = _zh_time_of(m)
        if t is not None:
            add(m.start(), m.end(), None, t)
    return sorted(found, key=lambda w: w.start)


def gold_when(value) -> When | None:
    """A gold value as a date/time when it is exactly one (``"2004-04-01 00:00:00"``, ``"8:00 AM"``, a
    :class:`datetime.date`, :class:`datetime.datetime` or :class:`datetime.time`); None otherwise (numbers, text,
    NULL, an ambiguous date)."""
    if value is None or isinstance(value, (bool, int, float)):
        return None
    if isinstance(value, dt.datetime):
        return When(0, 0, value.date(), value.time())
    if isinstance(value, dt.date):
        return When(0, 0, value, None)
    if isinstance(value, dt.time):
        return When(0, 0, None, value)
    s = str(value).strip().strip("\"'“”‘’`").strip()
    s = re.sub(r"[.。]$", "", s) if not re.search(r"[ap]\.m\.$", s, re.IGNORECASE) else s
    ws = read_whens(s)
    if len(ws) == 1 and ws[0].start == 0 and ws[0].end == len(s) and (ws[0].date or ws[0].time):
        return ws[0]
    return None


_MIDNIGHT = dt.time(0, 0)


def when_matches(gold: When, found) -> bool:
    """Whether a date/time of the answer (``found``: :class:`When` values) states the gold one: equal dates; the
    gold's time equal unless it is midnight after a date (it adds nothing); a time alone compared as a time."""
    for w in found:
        if gold.date is not None:
            if w.date != gold.date:
                continue
            if gold.time is None or gold.time == _MIDNIGHT and w.time in (None, _MIDNIGHT) or w.time == gold.time:
                return True
        elif gold.time is not None and w.time == gold.time:
            return True
    return False


def when_token(w: When) -> list[str]:
    """The F1 tokens of a date/time: the ISO date, then the time (``HH:MM:SS``) unless it is a midnight after a
    date; ``[]`` for a span that is no valid date."""
    out = []
    if w.date is not None:
        out.append(w.date.isoformat())
    if w.time is not None and not (w.date is not None and w.time == _MIDNIGHT):
        out.append(w.time.isoformat())
    return out
