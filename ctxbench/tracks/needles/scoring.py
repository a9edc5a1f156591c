"""Numeral-aware substring matcher (``substring``) for planted-fact answers (needles).

Source: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text"
(2026), section 3.6 (scoring): a reply is correct when the expected value appears in it as a substring; numeric
answers are accepted in Arabic or Chinese-numeral form ("61" matches "六十一"); no format is imposed on the reply.

What is compared
    The expected values are the gold answer (``gold = [[answer]]``) and every ``accepted_answers`` entry; the answer
    is correct when any one of them is found. The answer is what the answer pipeline gives
    (:mod:`ctxbench.scoring.pipeline`): the visible reply with reasoning blocks, chat tokens and everything before
    the last final-answer line (``Answer:``, ``答案：``, ``答：``) removed, never the exposed reasoning field, so a value
    the model considered and rejected in its reasoning earns nothing.

Folding (both sides, for comparison only): :func:`ctxbench.scoring.normalize.fold` (NFKC, traditional →
simplified, case folded).

Numerals: read by the one number reader (:func:`ctxbench.scoring.numbers.read_numbers` with Chinese numerals and
English number words): Arabic numbers whole (61 is not found in 1961, 161, 61.5 or a date such as 2013-01-04),
Chinese numerals only where a numeral is meant (统一 and 一些 hold no 1), classical forms (六十有一, 卅有一, 六旬),
English words (sixty-one, nineteen sixty-one).

Matching one expected value
    * The expected value is a date or time (``2004-04-01``, ``8:00 AM``): correct when the answer states the same
      date or time in any written form (``2004年4月1日``, ``April 1, 2004``, ``08:00``; :mod:`ctxbench.scoring.dates`).
    * The expected value is one number (a JSON number, ``"61"``, ``"六十一"``, ``"sixty-one"``): correct when some
      number of the answer has the same value.
    * It holds no numeral (``"浦城"``, ``"Pucheng"``): the folded expected text must appear in the folded answer;
      text with CJK characters as a substring (spaces ignored), Latin text as whole words.
    * It mixes text and numerals (``"61歲"``, ``"1961年"``): both sides' numbers are replaced by their values and
      the result compared as text, so ``六十一歲`` ≡ ``61歲`` but ``161歲`` does not match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ctxbench.scoring.dates import gold_when, read_whens, when_matches
from ctxbench.scoring.matchers import MatchResult
from ctxbench.scoring.normalize import CJK_RE, fold, normalize_text, text_matches
from ctxbench.scoring.numbers import Number, number_matches, read_numbers
from ctxbench.scoring.filters import strip_invisible

__all__ = ["Reply", "expected_found", "expected_values", "prepare", "substring_match"]

_NUM_OPEN, _NUM_CLOSE = "\ue000", "\ue001"


def _numbers(folded: str) -> list[Number]:
    return read_numbers(folded, chinese=True, english=True)


def _folded(text: str) -> tuple[str, list[Number]]:
    """``fold(text)`` and its numbers, read before case folding (``1.5M`` a million, ``1.5m`` metres) where folding
    the case keeps every offset, else from the folded text. One fold: case folding is applied to the cased fold."""
    cased = fold(text, casefold=False)
    folded = cased.casefold()
    return folded, _numbers(cased if len(cased) == len(folded) else folded)


def _num_token(v: float) -> str:
    return _NUM_OPEN + (str(int(v)) if float(v).is_integer() else repr(float(v))) + _NUM_CLOSE


def _canonical(folded: str, nums: list[Number]) -> str:
    """Numbers replaced by value tokens, other punctuation to spaces, whitespace collapsed."""
    parts, i = [], 0
    for n in nums:
        parts.append(folded[i:n.start])
        parts.append(_num_token(n.value))
        i = n.end
    parts.append(folded[i:])
    s = re.sub(rf"[^\w\s{_NUM_OPEN}{_NUM_CLOSE}]", " ", "".join(parts))
    return " ".join(s.split())


@dataclass
class Reply:
    """An answer prepared for matching: its folded text and the numbers read from it."""

    folded: str
    numbers: list[Number]

    @property
    def canonical(self) -> str:
        return _canonical(self.folded, self.numbers)


def prepare(answer: str) -> Reply:
    """Fold an answer and read its numbers once, for several :func:`expected_found` calls."""
    return Reply(*_folded(answer))


@lru_cache(maxsize=4096)
def _expected_form(expected: str) -> tuple[str, tuple[Number, ...]]:
    fe = fold(expected).strip()
    cased = fold(expected.strip(), casefold=False)  # cached: the second fold costs once per expected value
    return fe, tuple(_numbers(cased if len(cased) == len(fe) else fe))


def expected_found(expected, answer: str | Reply) -> bool:
    """Whether one expected value (str, int or float) is stated in ``answer`` (the answer text or a prepared
    :class:`Reply`), by the rules of the module docstring."""
    r = prepare(answer) if isinstance(answer, str) else answer
    if expected is None:
        return False
    if isinstance(expected, bool):
        expected = int(expected)
    if isinstance(expected, (int, float)):
        return number_matches(float(expected), r.numbers)
    w = gold_when(expected)
    if w is not None:                          # a date or time: compared as one (2004年4月1日 = 2004-04-01)
        return when_matches(w, read_whens(r.folded))
    fe, es = _expected_form(str(expected))
    if not fe:
        return False
    if len(es) == 1 and es[0].start == 0 and es[0].end == len(fe):
        return number_matches(es[0], r.numbers)  # the Number: a gold written as 25% is stated by 0.25 too
    if not es:
        return text_matches(fe, normalize_text(r.folded))
    ce, cr = _canonical(fe, list(es)), r.canonical
    if CJK_RE.search(ce):
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


def substring_match(answer: str | None, instance: dict) -> MatchResult:
    """Matcher ``substring``: 1.0 when any expected value (gold or accepted answer) is stated in the answer (the
    answer pipeline's output), else 0.0. An empty answer is tagged ``null_answer``; failure-mode tags of wrong
    answers are added by :func:`ctxbench.tracks.needles.analysis.tag_failures` once the whole build is known."""
    gold = (instance.get("gold") or [[None]])[0]
    answer = strip_invisible(answer or "")
    if not answer.strip():
        return MatchResult(0.0, [0.0], ["null_answer"], [{"gold": gold, "credit": 0.0, "text": None}])
    r = prepare(answer)
    found = next((e for e in expected_values(instance) if expected_found(e, r)), None)
    hit = found is not None
    return MatchResult(1.0 if hit else 0.0, [1.0 if hit else 0.0], [],
                       [{"gold": gold, "credit": 1.0 if hit else 0.0, "text": _stated(found, r) if hit else None}])


def _stated(expected, r: Reply) -> str:
    """The answer's (folded) text that states ``expected``: the number of the same value, else the expected text."""
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        n = next((n for n in r.numbers if number_matches(float(expected), [n])), None)
        return r.folded[n.start:n.end] if n else str(expected)
    fe, es = _expected_form(str(expected))
    if len(es) == 1 and es[0].start == 0 and es[0].end == len(fe):
        n = next((n for n in r.numbers if number_matches(es[0], [n])), None)
        return r.folded[n.start:n.end] if n else str(expected)
    return str(expected)
