"""Lexical overlap between a question and its evidence (NoLiMa, Modarressi et al. 2025, section 3: a needle whose
question shares no words with it is what makes long-context retrieval hard; issue 25).

``lexical_overlap`` of an instance is the largest share of the question's *content terms* found in one evidence
sentence: ``max over evidence sentences s of |T(q) ∩ T(s)| / |T(q)|``, in [0, 1], and 0 where the instance has
no evidence sentence (or the question has no content term). Terms (:func:`content_terms`) are sets, so a
repeated term counts once:

* **alphabetic scripts** (Latin, Cyrillic, Greek, ...): words (maximal runs of letters, digits, apostrophes),
  lower-cased, after stop-word removal: bm25s's English list (``STOPWORDS_EN_PLUS``, 179 words), joined by its
  list for the question's language where langdetect finds one of bm25s's other languages;
* **CJK** (Han, kana, Hangul): character bigrams inside each maximal run of CJK characters (a run of one
  character is its own term); punctuation and spaces end a run, so no bigram spans ``，``. No stop-word removal
  (a bigram is not a word).

Text mixing both gets both kinds of terms. An evidence sentence is what a track knows as evidence: a verbalized
relevant row (verbalized databases), the planted statement (needles; each statement of a chain), none for
imports without evidence spans (0).
"""

from __future__ import annotations

import re
from functools import lru_cache
from ctxbench.tokenizers import get_tokenizer

_CJK = "\u2e80-\u2fff\u3040-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0003134f"  # CJK punctuation (U+3000-303F) excluded
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(r"(?:[^\W_]|['’])+", re.UNICODE)
_LANG_LISTS = {"da": "STOPWORDS_DANISH", "nl": "STOPWORDS_DUTCH", "fr": "STOPWORDS_FRENCH",
               "de": "STOPWORDS_GERMAN", "it": "STOPWORDS_ITALIAN", "no": "STOPWORDS_NORWEGIAN",
               "pt": "STOPWORDS_PORTUGUESE", "ru": "STOPWORDS_RUSSIAN", "es": "STOPWORDS_SPANISH",
               "sv": "STOPWORDS_SWEDISH", "tr": "STOPWORDS_TURKISH"}


@lru_cache(maxsize=16)
def stop_words(language: str | None = None) -> frozenset[str]:
    """English stop words (bm25s ``STOPWORDS_EN_PLUS``) with those of ``language`` (an ISO 639-1 code) where
    bm25s has a list for it."""
    import bm25s.stopwords as sw

    words = set(sw.STOPWORDS_EN_PLUS)
    if language in _LANG_LISTS:
        words |= set(getattr(sw, _LANG_LISTS[language]))
    return frozenset(w.lower() for w in words)


@lru_cache(maxsize=200_000)
def content_terms(text: str, language: str | None = None) -> frozenset[str]:
    """The content terms of ``text`` (module docstring): CJK character bigrams and lower-cased non-stop words of
    the other letters. ``language``: the text's language for the stop-word list (default English)."""
    terms: set[str] = set()
    for run in _CJK_RUN.findall(text):
        terms.update(run[i:i + 2] for i in range(max(len(run) - 1, 1)))
    rest = _CJK_RUN.sub(" ", text).lower()
    stop = stop_words(language)
    terms.update(w.strip("'’") for w in _WORD.findall(rest) if w.strip("'’") and w.strip("'’") not in stop)
    return frozenset(terms)


def _question_language(question: str) -> str | None:
    if _CJK_RUN.search(question) or not re.search(r"[^\W\d_]", question):
        return None
    try:
        from langdetect import DetectorFactory, detect

        DetectorFactory.seed = 0
        return detect(question)
    except Exception:  # noqa: BLE001 - langdetect raises on text without features: English stop words only
        return None


def lexical_overlap(question: str, sentences: list[str] | tuple[str, ...]) -> float:
    """The largest share of ``question``'s content terms found in one of the evidence ``sentences`` (module
    docstring), rounded to 6 decimals; 0.0 when there is no sentence or the question has no content term."""
    lang = _question_language(question)
    q = content_terms(question, lang)
    if not q or not sentences:
        return 0.0
    best = 0
    for s in sentences:
        best = max(best, len(q & content_terms(s, lang)))
        if best == len(q):
            break
    return round(best / len(q), 6)


def span_sentences(context: str, spans: list[list[int]], tokenizer: str) -> list[str]:
    """The text of each evidence span (``[start, end)`` token offsets in ``context`` of the registered
    ``tokenizer``): the evidence sentences of a track that stores spans but no sentence (a plugin track).
    Raises TokenizerError when the tokenizer cannot be loaded."""
    if not spans:
        return []
    _ids, starts = get_tokenizer(tokenizer).char_starts(context)
    starts = list(starts) + [len(context)]
    return [context[starts[min(a, len(starts) - 1)]:starts[min(b, len(starts) - 1)]] for a, b in spans]


def fill_lexical_overlap(rows: list[dict]) -> None:
    """Set ``lexical_overlap`` on every instance row that lacks it (the column is never null): from its evidence
    spans decoded with its tokenizer (:func:`span_sentences`), 0.0 without spans. Tracks that know their evidence
    sentences set it themselves."""
    import json

    for r in rows:
        if r.get("lexical_overlap") is not None:
            continue
        spans = r.get("evidence_spans")
        spans = json.loads(spans) if isinstance(spans, str) else (spans or [])
        sentences = span_sentences(r.get("context") or "", spans, r["tokenizer"]) if spans and r.get("tokenizer") \
            else []
        r["lexical_overlap"] = lexical_overlap(r.get("question") or "", sentences)
