"""Text normalisation for comparing answers with gold values (both sides; stored text is never changed).

* :func:`normalize_text`: LaTeX written plainly (``$\\alpha$-stable``, ``\\text{SAT}``: :func:`plain_latex`), Unicode NFKC (full-width forms and CJK punctuation to ASCII where they have one), case
  folded, punctuation and whitespace collapsed to single spaces.
* :func:`fold`: NFKC, traditional → simplified Chinese (OpenCC ``t2s``: 兩 → 两, 萬 → 万), case folded, curly
  apostrophes straightened; a full-width comma stays a list separator (``61，961`` → ``61, 961``) except between
  full-width digits (``１，２３４`` → ``1,234``), as the number reader reads it.
* :func:`text_matches`: a gold text inside an answer, as whole words (Latin) or as a substring (CJK, written
  without spaces).
* :func:`tokens`: the tokens F1 compares: words of Latin text, single characters of CJK text (Chinese is written
  without spaces, so ``答案是魏国`` is five tokens and shares two with ``魏国``), each number as its value
  (``1,234`` and ``1234`` are one token ``1234``; :mod:`ctxbench.scoring.numbers`), a date or time as its ISO form
  whatever its writing (``April 1, 2004`` and ``2004-04-01 00:00:00`` are one token ``2004-04-01``; ``8:00 PM`` is
  ``20:00:00``: :mod:`ctxbench.scoring.dates`), a phone number as one token (``2013-01-04`` holds no token ``4``)
  and no list markers.

Numbers are never read here: :mod:`ctxbench.scoring.numbers` is the one number reader.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from ctxbench.scoring.dates import read_whens, when_token
from ctxbench.scoring.numbers import read_compounds, read_numbers
from ctxbench.scoring.tidy import unwrap_latex

__all__ = ["CJK_RE", "fold", "normalize_text", "plain_latex", "text_matches", "tokens"]

CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_CJK_PUNCT = str.maketrans({"。": ".", "，": ",", "、": ",", "；": ";", "：": ":", "（": "(", "）": ")", "「": '"',
                            "」": '"', "『": '"', "』": '"', "《": '"', "》": '"', "！": "!", "？": "?", "．": "."})
_FW_COMMA = re.compile("(?<![\uff10-\uff19])\uff0c|\uff0c(?![\uff10-\uff19])")


_GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon "
          "phi chi psi omega").split()
_LATEX_SYMBOL = re.compile(r"\\(" + "|".join(_GREEK) + r"|" + "|".join(g.capitalize() for g in _GREEK) + r"|var(?:epsilon|"
                           r"theta|phi|rho|sigma|pi))(?![A-Za-z])")
_LATEX_STYLE = re.compile(r"\\[A-Za-z]+\*?\s*(?=\{)")


def _greek(m: re.Match) -> str:
    name = m.group(1).removeprefix("var")
    case = "CAPITAL" if name[0].isupper() else "SMALL"
    return unicodedata.lookup(f"GREEK {case} LETTER {name.upper()}")


def plain_latex(s: str) -> str:
    """``s`` with its LaTeX written plainly, the same on the gold and the answer side: the answer pipeline's
    unwrapping (:func:`ctxbench.scoring.tidy.unwrap_latex`: ``$…$``, ``\\(…\\)``, ``\\text{}``,
    ``\\mathrm{}``…), Greek letter commands as letters (``\\alpha`` → α), the name of any other command applied
    to a braced argument dropped (``\\mathcal{O}`` → ``{O}``). Text without ``\\`` or ``$`` is returned as is."""
    if "\\" not in s and "$" not in s:
        return s
    s = unwrap_latex(s)
    if "\\" in s:
        s = _LATEX_SYMBOL.sub(_greek, s)
        s = _LATEX_STYLE.sub("", s)
    return s


def normalize_text(s: str) -> str:
    """LaTeX written plainly (:func:`plain_latex`), NFKC, CJK punctuation to ASCII, case fold, punctuation to
    spaces, whitespace collapsed. Gold and answer pass through it alike."""
    s = unicodedata.normalize("NFKC", plain_latex(s)).translate(_CJK_PUNCT).casefold()
    s = re.sub(r"[^\w\s]", " ", s)
    return " ".join(s.split())


@lru_cache(maxsize=1)
def _t2s():
    from opencc import OpenCC

    return OpenCC("t2s")


def fold(text: str, casefold: bool = True) -> str:
    """NFKC, traditional → simplified Chinese (OpenCC t2s), case folded (unless ``casefold`` is False: numbers are
    read before case folding, as ``1.5M`` is a million and ``1.5m`` metres), curly apostrophes straightened; a
    full-width comma not between full-width digits followed by a space (so ``61，961`` is two numbers). Used for
    comparison only."""
    text = _FW_COMMA.sub(", ", text)
    out = _t2s().convert(unicodedata.normalize("NFKC", text))
    return (out.casefold() if casefold else out).replace("\u2019", "'")


def text_matches(gold: str, answer_norm: str) -> bool:
    """Whether the normalised gold text appears in the normalised answer as whole words; text with CJK characters
    (written without spaces) need only appear as a substring."""
    g = normalize_text(gold)
    if not g:
        return False
    if CJK_RE.search(g):
        return g in answer_norm or g.replace(" ", "") in answer_norm.replace(" ", "")
    return re.search(rf"(?<!\w){re.escape(g)}(?!\w)", answer_norm) is not None


def _num_token(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def tokens(text: str | None) -> list[str]:
    """F1 tokens of ``text`` (module docstring): normalised words, CJK characters one by one, numbers by value,
    dates/times/phone numbers whole, list markers dropped."""
    if not text:
        return []
    # (start, priority, end, tokens): a date or time read as one first (its ISO form: "April 1, 2004" and
    # "2004-04-01 00:00:00" are one token 2004-04-01), then numbers and other compounds
    spans: list[tuple[int, int, int, list[str]]] = [(w.start, 0, w.end, when_token(w)) for w in read_whens(text)
                                                   if w.date is not None or w.time is not None]
    spans += [(n.start, 1, n.end, [_num_token(n.value)]) for n in read_numbers(text)]
    for s, e, kind in read_compounds(text):
        spans.append((s, 1, e, [] if kind == "marker" else ["_".join(normalize_text(text[s:e]).split())]))
    out: list[str] = []
    pos = 0
    for s, _, e, toks in sorted(spans, key=lambda x: (x[0], x[1], x[2])):
        if s < pos:
            continue
        out.extend(_words(text[pos:s]))
        out.extend(t for t in toks if t)
        pos = e
    out.extend(_words(text[pos:]))
    return out


def _words(s: str) -> list[str]:
    out: list[str] = []
    for w in normalize_text(s).split():
        if CJK_RE.search(w):
            # CJK characters one by one; a Latin or digit run inside stays one token
            out.extend(m.group(0) for m in re.finditer(rf"{CJK_RE.pattern}|[^\u3040-\u30ff\u3400-\u4dbf"
                                                       rf"\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+", w))
        else:
            out.append(w)
    return out
