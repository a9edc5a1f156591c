"""Numeral-aware substring matcher (``substring``) for planted-fact answers (needles).

Source: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text"
(2026), section 3.6 (scoring): a reply is correct when the expected value appears in it as a substring; numeric
answers are accepted in Arabic or Chinese-numeral form ("61" matches "六十一"); no format is imposed on the reply.

What is compared
    The expected values are the gold answer (``gold = [[answer]]``) and every ``accepted_answers`` entry; the reply
    is correct when any one of them is found. Only the visible answer is scored: ``responses.response``, never the
    exposed reasoning (``responses.reasoning``, stored separately by evaluate), so a value the model considered and
    rejected in its reasoning earns nothing; reasoning a server leaves inline in ``<think>…</think>`` is dropped too. Where the reply has an explicit final-answer line (``Answer:``,
    ``Final answer:``, ``答案：``, ``答：``) the text after the last such line is scored, else the whole reply.

Folding (both sides, for comparison only; stored text is never changed)
    Unicode NFKC (full-width digits, letters and punctuation to their ASCII forms), traditional → simplified
    Chinese (OpenCC ``t2s``: 兩 → 两, 萬 → 万, 陸 → 陆), case folding.

Numerals
    Numeral *spans* are extracted from the folded text and only those spans are converted to values; the rest of
    the text is never converted (a whole-string conversion would turn 萬物 into 10000物 or 一心 into 1心):

    * Arabic: integers and decimals, with ``,`` thousands separators (``1,961`` = 1961); a span is read whole, so
      61 is not found in 1961, 161 or 61.5; a span is not read after a Latin letter (``B61``) but may be followed by
      one (``61st``, ``61yo``) or by 万/亿 (``3万`` = 30000).
    * Chinese: maximal runs of 零〇○一二三四五六七八九十百千万亿两廿卅卌, converted with cn2an (``normal`` mode,
      after 卅 → 三十, 卌 → 四十, ○ → 〇): 十 = 10, 廿一 = 21, 一百零五 = 105, 两 = 2; digits without units read
      positionally, 一九六一 = 1961 (so the approximation 三四, "three or four", reads 34).
      Classical 六十有一 / 六十又一 ("sixty and one") reads 61. A run of unit characters alone (百, 千, 万, 千万)
      is not a number (百姓, 萬物, 千古). A run cn2an rejects (三十五六, "thirty-five or -six") is split into its
      longest convertible pieces from the left, at most 24 characters each (35, 6). Financial forms (壹, 貳, 陸,
      參 …) are not read: in classical text they are mostly words or surnames (陸九淵).
    * English number words (any reply; they occur only where the reply is in English): maximal runs such as
      ``sixty-one``, ``sixty one``, ``one hundred and five``, converted with text2num; ``nineteen sixty-one`` reads
      as the year 1961. Ordinal words (``sixty-first``) are not read.

Matching one expected value
    * The expected value is one numeral span (a JSON number, ``"61"``, ``"六十一"``, ``"sixty-one"``): correct when
      some numeral span of the reply has the same value.
    * It holds no numeral (``"浦城"``, ``"Pucheng"``): the folded expected text must appear in the folded reply; text
      with CJK characters as a substring (spaces ignored), Latin text as whole words.
    * It mixes text and numerals (``"61歲"``, ``"1961年"``): both sides' numeral spans are replaced by their values and
      the result compared as text, so ``六十一歲`` ≡ ``61歲`` but ``161歲`` does not match.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from .matchers import MatchResult
from .normalize import text_matches

_CN_DIGITS = "零〇○一二三四五六七八九两廿卅卌"
_CN_UNITS = "十百千万亿"
_CN_RUN = re.compile(f"[{_CN_DIGITS}{_CN_UNITS}]+")
_CN_PRE = str.maketrans({"○": "〇"})
_CN_EXPAND = (("卅", "三十"), ("卌", "四十"), ("廿", "二十"))
_ONLY_UNITS = re.compile("[百千万亿]+")
_UNIT_VALUE = {"十": 10, "百": 100, "千": 1000}
_MAX_PIECE = 24  # characters (or words) of the longest numeral piece tried when a run must be split

# Arabic: thousands-separated first (so "1,961" is one span), then plain; no letter, digit or '.' joined before, no
# digit (or decimal part) after; optional 万/亿 multiplier
_AR = re.compile(r"(?<![A-Za-z0-9_.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!\d)(?!\.\d)"
                 r"([万亿])?")

_EN_SMALL = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_EN_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_EN_SCALES = ["hundred", "thousand", "million", "billion"]
_EN_WORD = "(?:" + "|".join(sorted(_EN_SMALL + _EN_TENS + _EN_SCALES, key=len, reverse=True)) + ")"
# word boundaries against Latin letters and digits only: CJK characters may touch (著書twenty卷)
_LAT = r"A-Za-z0-9_\-\u00c0-\u024f"
_EN_RUN = re.compile(rf"(?<![{_LAT}]){_EN_WORD}(?:(?:[ \t]+and[ \t]+|[ \t]*-[ \t]*|[ \t]+){_EN_WORD})*(?![{_LAT}])")
_EN_TOKEN = re.compile(rf"{_EN_WORD}|and")

_FINAL_LINE = re.compile(r"(?im)^[ \t]*[*#>]*[ \t]*(?:final answer|answer|答案|答)[ \t]*[*]*[ \t]*[:：][ \t]*[*]*\s*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_NUM_OPEN, _NUM_CLOSE = "\ue000", "\ue001"


@dataclass(frozen=True)
class NumeralSpan:
    """A numeral found in folded text: ``[start, end)`` character offsets in the folded text and its value."""

    start: int
    end: int
    value: float
    text: str


@lru_cache(maxsize=1)
def _t2s():
    from opencc import OpenCC

    return OpenCC("t2s")


def fold(text: str) -> str:
    """NFKC, traditional → simplified Chinese (OpenCC t2s), case folded, curly apostrophes straightened, a
    full-width comma followed by a space (so ``61，961`` is two numbers). Used for comparison only."""
    # a full-width comma separates list items in CJK text, never thousands: keep it apart from digits
    text = text.replace("\uff0c", ", ")
    return _t2s().convert(unicodedata.normalize("NFKC", text)).casefold().replace("\u2019", "'")


_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)


def answer_text(response: str | None) -> str:
    """The part of a visible reply that is scored: reasoning a server left inline in ``<think>…</think>`` removed
    (an unclosed ``<think>`` runs to the end), then the text after the last final-answer line (``Answer:``,
    ``Final answer:``, ``答案：``, ``答：``), else the whole reply; ``""`` for None."""
    if not response:
        return ""
    response = _THINK.sub(" ", response)
    last = None
    for last in _FINAL_LINE.finditer(response):
        pass
    return (response[last.end():] if last else response).strip()


def _cn_value(run: str) -> float | None:
    import cn2an

    if _ONLY_UNITS.fullmatch(run):
        return None
    s = run.translate(_CN_PRE)
    for a, b in _CN_EXPAND:
        s = s.replace(a, b)
    try:
        return float(cn2an.cn2an(s, "normal"))
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _cn_spans(text: str, start: int, end: int) -> list[NumeralSpan]:
    """Spans of one maximal Chinese-numeral run ``text[start:end]``: the whole run when cn2an reads it, else its
    longest readable pieces from the left (a piece nothing reads is skipped one character at a time)."""
    out: list[NumeralSpan] = []
    i = start
    while i < end:
        for j in range(min(end, i + _MAX_PIECE), i, -1):
            v = _cn_value(text[i:j])
            if v is not None:
                out.append(NumeralSpan(i, j, v, text[i:j]))
                i = j
                break
        else:
            i += 1
    return out


def _en_value(words: list[str]) -> float | None:
    from text_to_num import text2num

    phrase = " ".join(words)
    try:
        return float(text2num(phrase, "en"))
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


def _en_spans(text: str, m: re.Match) -> list[NumeralSpan]:
    toks = [(t.start() + m.start(), t.end() + m.start(), t.group(0)) for t in _EN_TOKEN.finditer(m.group(0))]
    out: list[NumeralSpan] = []
    i = 0
    while i < len(toks):
        for j in range(min(len(toks), i + _MAX_PIECE), i, -1):
            if toks[i][2] == "and" or toks[j - 1][2] == "and":
                continue
            v = _en_value([t[2] for t in toks[i:j]])
            if v is not None:
                out.append(NumeralSpan(toks[i][0], toks[j - 1][1], v, text[toks[i][0]:toks[j - 1][1]]))
                i = j
                break
        else:
            i += 1
    return out


def numeral_spans(folded: str) -> list[NumeralSpan]:
    """Every numeral span of already folded text (see :func:`fold`), in order: Arabic, Chinese and English forms
    (module docstring). Offsets are characters of ``folded``."""
    spans: list[NumeralSpan] = []
    taken = [False] * len(folded)
    for m in _AR.finditer(folded):
        v = float(m.group(1).replace(",", ""))
        if m.group(2):
            v *= 10_000 if m.group(2) == "万" else 100_000_000
        spans.append(NumeralSpan(m.start(), m.end(), v, m.group(0)))
        for k in range(m.start(), m.end()):
            taken[k] = True
    cn: list[NumeralSpan] = []
    for m in _CN_RUN.finditer(folded):
        s, e = m.start(), m.end()
        while s < e and taken[s]:
            s += 1
        if s < e:
            cn.extend(_cn_spans(folded, s, e))
    spans.extend(_join_you(folded, cn))
    for m in _EN_RUN.finditer(folded):
        spans.extend(_en_spans(folded, m))
    return sorted(spans, key=lambda x: x.start)


def _join_you(folded: str, cn: list[NumeralSpan]) -> list[NumeralSpan]:
    """Classical 六十有一 / 六十又一 ("sixty and one") = 61: a Chinese numeral ending in 十, 百 or 千, then 有 or 又,
    then a smaller numeral below that unit, read as one span."""
    out: list[NumeralSpan] = []
    for sp in cn:
        prev = out[-1] if out else None
        if (prev is not None and prev.end + 1 == sp.start and folded[prev.end] in "有又"
                and prev.text[-1:] in _UNIT_VALUE and 0 < sp.value < _UNIT_VALUE[prev.text[-1]]):
            out[-1] = NumeralSpan(prev.start, sp.end, prev.value + sp.value, folded[prev.start:sp.end])
        else:
            out.append(sp)
    return out


def _num_token(v: float) -> str:
    return _NUM_OPEN + (str(int(v)) if float(v).is_integer() else repr(float(v))) + _NUM_CLOSE


def _canonical(folded: str, spans: list[NumeralSpan]) -> str:
    """Numeral spans replaced by value tokens, other punctuation to spaces, whitespace collapsed."""
    parts, i = [], 0
    for sp in spans:
        parts.append(folded[i:sp.start])
        parts.append(_num_token(sp.value))
        i = sp.end
    parts.append(folded[i:])
    s = re.sub(rf"[^\w\s{_NUM_OPEN}{_NUM_CLOSE}]", " ", "".join(parts))
    return " ".join(s.split())


@dataclass
class _Reply:
    folded: str
    spans: list[NumeralSpan]

    @property
    def values(self) -> set[float]:
        return {s.value for s in self.spans}

    @property
    def canonical(self) -> str:
        return _canonical(self.folded, self.spans)


def _reply(text: str) -> _Reply:
    f = fold(text)
    return _Reply(f, numeral_spans(f))


@lru_cache(maxsize=4096)
def _expected_form(expected: str) -> tuple[str, list[NumeralSpan]]:
    fe = fold(expected).strip()
    return fe, numeral_spans(fe)


def expected_found(expected, reply: str | _Reply) -> bool:
    """Whether one expected value (str, int or float) is stated in ``reply`` (the answer text, unfolded, or a
    prepared reply), by the rules of the module docstring."""
    r = _reply(reply) if isinstance(reply, str) else reply
    if expected is None:
        return False
    if isinstance(expected, bool):
        expected = int(expected)
    if isinstance(expected, (int, float)):
        return float(expected) in r.values
    fe, es = _expected_form(str(expected))
    if not fe:
        return False
    if len(es) == 1 and es[0].start == 0 and es[0].end == len(fe):
        return es[0].value in r.values
    if not es:
        return text_matches(fe, r.folded)
    ce, cr = _canonical(fe, es), r.canonical
    if _CJK.search(ce):
        return ce.replace(" ", "") in cr.replace(" ", "")
    return re.search(rf"(?<!\w){re.escape(ce)}(?!\w)", cr) is not None


def expected_values(instance: dict) -> list:
    """The expected values of a needles instance: every value of ``gold`` (``[[answer]]``) then every entry of
    ``accepted_answers`` (a list of values, or of rows), in order."""
    out: list = []
    for row in instance.get("gold") or []:
        out.extend(row if isinstance(row, list) else [row])
    for a in instance.get("accepted_answers") or []:
        out.extend(a if isinstance(a, list) else [a])
    return out


def substring_match(response: str | None, instance: dict) -> MatchResult:
    """Matcher ``substring`` (registry signature): 1.0 when any expected value (gold or accepted answer) is stated in
    the answer text of ``response`` (:func:`answer_text`), else 0.0. An empty reply is tagged ``null_answer``;
    failure-mode tags of wrong replies are added by :func:`ctxbench.tracks.needles.analysis.tag_failures` once the whole
    build is known."""
    text = answer_text(response)
    if not text:
        return MatchResult(0.0, [0.0], ["null_answer"])
    r = _reply(text)
    hit = any(expected_found(e, r) for e in expected_values(instance))
    return MatchResult(1.0 if hit else 0.0, [1.0 if hit else 0.0], [])
