"""List matchers of the scientific-article track: ``exact_match`` and ``f1`` over answer items (SciTrek section 4:
"average exact match and F1, as the expected outputs are factual items with minimal variation").

The gold answer (rows of values) is flattened row by row into items; the reply's final answer is split into items
after the output-format normalisation that SciTrek appendix D motivates (models answer with bullet or numbered lists,
one item per line, "A, B and C", brackets or quotes, trailing full stops): items are separated by commas,
semicolons, line breaks, "and" / "&" between items (also ``，``, ``、``, ``；``, 和/及/与) by the one list splitter
(:mod:`ctxbench.scoring.lists`), list markers and a leading "and" removed; a comma or "and" inside a gold item
(titles hold commas) does not split it, and neither does a comma inside a number (``1,234`` is one item, 1234, as the one number
reader reads it: :mod:`ctxbench.scoring.numbers`). The answer is the answer pipeline's output
(:mod:`ctxbench.scoring.pipeline`: reasoning and chat tokens removed, the text after the final-answer label).

Items compare as dates or times when both are (``2004-04-01 00:00:00`` = ``April 1, 2004``, ``8:00 AM`` =
``08:00``: :mod:`ctxbench.scoring.dates`), as numbers when both are numbers — a gold number, or gold text that is exactly one number, against an
item that is exactly one number (``3.50`` = ``3.5``, ``–12`` = −12; a non-integer gold is met by its rounding to
the item's decimal places, :func:`ctxbench.scoring.numbers.number_matches`) — else as text after
:func:`ctxbench.scoring.normalize.normalize_text`; ``NULL``, ``none`` or an empty answer stands for an empty result.

*Exact match*: the item lists are equal — in order when the SQL orders its result (a top-level ORDER BY), else as
multisets (every gold item paired with its own equal item). *F1*: the harmonic mean of precision and recall of the
largest pairing of equal items.

Failure tags (SCHEMA.md, from SciTrek appendix D's error analysis), set only when the score is below 1:
``null_answer`` (NULL, none or nothing given for a non-empty gold), ``wrong_format`` (a list where one value is
asked for, text where numbers are asked for, or several items in one line without the comma separator),
``partial_list`` (some but not all gold items given and nothing else), ``negation`` (the question or SQL filters
with a negation: NOT, <>, "not", "never").
"""

from __future__ import annotations

import re

from ctxbench.questions.sqlinfo import sql_is_ordered
from ctxbench.scoring.dates import gold_when, read_whens, when_matches
from ctxbench.scoring.matchers import MatchResult
from ctxbench.scoring.normalize import normalize_text
from ctxbench.scoring.lists import split_list
from ctxbench.scoring.numbers import gold_number, number_matches, read_number

__all__ = ["exact_match", "f1", "gold_items", "split_items"]

_NULLS = {"null", "none", "n a", "nothing", "no result", "no results", "empty", "no such article",
          "no such articles"}
_NEG_SQL = re.compile(r"\bNOT\b|<>|!=", re.IGNORECASE)
_NEG_Q = re.compile(r"\b(?:not|never|no|none|without|neither|nor)\b|n't\b", re.IGNORECASE)


def _gold_key(v) -> tuple:
    """A gold item: ("when", date/time), ("num", value) or ("text", normalised text)."""
    w = gold_when(v)
    if w is not None:
        return ("when", w)
    g = gold_number(v)
    if g is not None:
        return ("num", g)
    return ("text", normalize_text(str(v)))


def _item_key(item: str) -> tuple:
    """An answer item: ("when", date/time) when it is exactly one date or time, ("num", Number) when it is exactly
    one number, else ("text", normalised text)."""
    s = item.strip().strip("\"'“”‘’`").strip()
    s = re.sub(r"(?<![ap]\.m)[.;:。]+$", "", s).strip()
    ws = read_whens(s)
    if len(ws) == 1 and ws[0].start == 0 and ws[0].end == len(s) and (ws[0].date or ws[0].time):
        return ("when", ws[0])
    n = read_number(s)
    if n is not None:
        return ("num", n)
    return ("text", normalize_text(s))


def _equal(g: tuple, p: tuple) -> bool:
    if g[0] != p[0]:
        return False
    if g[0] == "num":
        return number_matches(g[1], [p[1]])
    if g[0] == "when":
        return when_matches(g[1], [p[1]])
    return g[1] == p[1]


def _pairing(gkeys: list[tuple], pkeys: list[tuple], pairs: dict[int, int] | None = None) -> int:
    """Size of the largest pairing of equal gold and answer items (augmenting paths; lists are short); ``pairs``
    (a dict) receives gold item index → answer item index of the pairing."""
    match: dict[int, int] = {}                # answer item index -> gold item index

    def augment(gi: int, seen: set[int]) -> bool:
        for pi, p in enumerate(pkeys):
            if pi in seen or not _equal(gkeys[gi], p):
                continue
            seen.add(pi)
            if pi not in match or augment(match[pi], seen):
                match[pi] = gi
                return True
        return False

    n = sum(augment(gi, set()) for gi in range(len(gkeys)))
    if pairs is not None:
        pairs.update({gi: pi for pi, gi in match.items()})
    return n


def gold_items(gold: list[list]) -> list:
    """Gold rows flattened into items (row by row, values in SELECT order)."""
    return [v for row in gold for v in row]


def split_items(answer: str, gold: list) -> tuple[list[str], bool]:
    """Items of a final answer by the one list splitter (:func:`ctxbench.scoring.lists.split_list`: commas,
    semicolons, "and", "&", 、/和/及/与, bullet and numbered lines; a gold item holding commas or "and" stays whole)
    and whether it was a one-line list without separators (several numbers separated by spaces, ``3 5 7``)."""
    out = split_list(answer.strip(), keep=[str(g) for g in gold if isinstance(g, str)])
    spaced = len(out) == 1 and len(re.findall(r"\d+", out[0])) > 1 and re.fullmatch(r"[\d\s.]+", out[0]) is not None
    return out, spaced


def _score(answer: str | None, instance: dict) -> tuple[float, float, list[str], list[dict]]:
    gold = gold_items(instance["gold"])
    gkeys = [_gold_key(v) for v in gold]
    items, spaced = split_items(answer or "", gold)
    is_null = not items or (len(items) == 1 and normalize_text(items[0]) in _NULLS)
    pkeys = [] if is_null else [_item_key(x) for x in items]
    ordered = sql_is_ordered(instance.get("sql"))
    gold_null = all(v is None for v in gold)
    overlap = 0
    pairs: dict[int, int] = {}
    if gold_null:
        exact = 1.0 if is_null else 0.0
        f1 = exact
    else:
        overlap = _pairing(gkeys, pkeys, pairs)
        same = (all(_equal(g, p) for g, p in zip(gkeys, pkeys)) if ordered else overlap == len(gkeys))
        exact = 1.0 if len(pkeys) == len(gkeys) and same else 0.0
        p = overlap / len(pkeys) if pkeys else 0.0
        r = overlap / len(gkeys) if gkeys else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
    tags: list[str] = []
    if exact < 1:
        if is_null and not gold_null:
            tags.append("null_answer")
        elif pkeys:
            numeric_gold = all(k[0] == "num" for k in gkeys)
            if spaced or (len(gkeys) == 1 and len(pkeys) > 1) or (numeric_gold and any(k[0] == "text" for k in pkeys)):
                tags.append("wrong_format")
            if len(gkeys) > 1 and 0 < len(pkeys) < len(gkeys) and overlap == len(pkeys):
                tags.append("partial_list")
        if _NEG_SQL.search(instance.get("sql") or "") or _NEG_Q.search(instance.get("question") or ""):
            tags.append("negation")
    if gold_null:
        details = [{"gold": None, "credit": exact, "text": items[0] if items else None}]
    else:
        details = [{"gold": g, "credit": 1.0 if gi in pairs else 0.0,
                    "text": items[pairs[gi]] if gi in pairs else None} for gi, g in enumerate(gold)]
    return exact, f1, tags, details


def exact_match(answer: str | None, instance: dict) -> MatchResult:
    """1 when the answer's items equal the gold items (in order where the SQL orders them), else 0. ``details``:
    per gold item whether an answer item equals it (1/0) and that item."""
    exact, _, tags, details = _score(answer, instance)
    return MatchResult(exact, [exact], tags, details)


def f1(answer: str | None, instance: dict) -> MatchResult:
    """F1 of the largest pairing of equal items between the answer's items and the gold items. ``details``: per
    gold item whether it is paired (1/0) and the answer item it is paired with."""
    _, f, tags, details = _score(answer, instance)
    return MatchResult(f, [f], tags, details)
