"""Identifiers as English words, for generated templates and questions: ``SurfaceArea`` → ``surface area``,
``FlightNo`` → ``flight number``, ``countrylanguage`` → ``country language`` (split by the schema's own words),
``GNP`` stays ``GNP``; nouns in singular and plural."""

from __future__ import annotations

import re
from functools import lru_cache

# abbreviations common in database column names, spelled out in questions and templates
ABBREVIATIONS = {
    "no": "number", "num": "number", "nbr": "number", "qty": "quantity", "abbrev": "abbreviation",
    "abbr": "abbreviation", "indep": "independence", "pct": "percentage", "avg": "average", "dept": "department",
    "yr": "year", "dob": "date of birth", "addr": "address", "amt": "amount", "desc": "description",
    "pop": "population", "dest": "destination", "src": "source", "dst": "destination", "ms": "milliseconds",
    "cnt": "count", "uid": "id",
}
UNCOUNTABLE = {"data", "information", "equipment", "staff", "news", "series", "species", "software", "personnel"}


def _segment(token: str, vocab: frozenset[str]) -> list[str]:
    """Split an all-lower-case run like ``countrylanguage`` into words of ``vocab`` (longest cover), else keep it."""
    n = len(token)
    best: list[list[str] | None] = [None] * (n + 1)
    best[0] = []
    for i in range(1, n + 1):
        for j in range(max(0, i - 24), i):
            w = token[j:i]
            if best[j] is None or w not in vocab or w == token:
                continue
            if best[i] is None or len(best[j]) + 1 < len(best[i]):
                best[i] = best[j] + [w]
    return best[n] if best[n] and len(best[n]) > 1 else [token]


def _camel(part: str) -> list[str]:
    """Split at case and digit changes, any script: ``SurfaceArea`` → Surface, Area; ``GNPOld`` → GNP, Old;
    ``Région`` stays whole."""
    out, cur = [], ""
    for i, ch in enumerate(part):
        if cur:
            prev, nxt = cur[-1], part[i + 1] if i + 1 < len(part) else ""
            if (ch.isdigit() != prev.isdigit() or (prev.islower() and ch.isupper())
                    or (prev.isupper() and ch.isupper() and nxt.islower())):
                out.append(cur)
                cur = ""
        cur += ch
    return out + [cur] if cur else out


def split_identifier(name: str, vocab: frozenset[str] = frozenset()) -> list[str]:
    """The words of an identifier: underscores, spaces, dashes and camelCase split; a lower-case run split into
    words of ``vocab`` (words found elsewhere in the schema, three letters or more); acronyms kept in capitals."""
    out: list[str] = []
    for part in re.split(r"[\s_\-\.]+", str(name)):
        for tok in _camel(part):
            if tok.isupper() and len(tok) > 1:
                out.append(tok)
            elif tok.islower() and vocab and len(tok) > 6:
                out.extend(_segment(tok, vocab))
            else:
                out.append(tok.lower())
    return out


@lru_cache(maxsize=4096)
def _words(name: str, vocab: frozenset[str]) -> str:
    out = []
    parts = split_identifier(name, vocab)
    if len(parts) > 1 and parts[0].lower() in ("is", "has"):  # a yes/no column: IsOfficial → official flag
        parts = parts[1:] + ["flag"]
    for w in parts:
        if w.isupper() and len(w) > 1:  # an acronym stays, except the id words
            out.append("id" if w in ("ID", "UID") else w)
        else:
            out.append(ABBREVIATIONS.get(w, w))
    return " ".join(out) or str(name)


def words(name: str, vocab: frozenset[str] = frozenset()) -> str:
    """Readable words for an identifier (module docstring), e.g. ``IndepYear`` → ``independence year``."""
    return _words(str(name), vocab)


def schema_vocabulary(names: list[str]) -> frozenset[str]:
    """Lower-case words (three letters or more) of the schema's identifiers, for splitting merged words."""
    vocab = set()
    for n in names:
        for w in split_identifier(n):
            if len(w) >= 3 and w.isalpha():
                vocab.add(w.lower())
                vocab.add(singular(w.lower()))
    return frozenset(vocab)


def article(noun: str) -> str:
    """``a`` or ``an`` before a noun phrase, by the sound of its first word (``an airline``, ``a unit price``,
    ``a GNP``, ``an HTML page``)."""
    w = noun.split()[0] if noun.split() else noun
    if w.isupper() and len(w) > 1:
        return "an" if w[0] in "AEFHILMNORSX" else "a"
    low = w.lower()
    if low.startswith(("uni", "use", "usu", "uti", "eu", "one", "ure")):
        return "a"
    if low.startswith(("hour", "honest", "honor", "honour", "heir")):
        return "an"
    return "an" if low[:1] in tuple("aeiou") else "a"


def looks_plural(noun: str) -> bool:
    """Whether a noun phrase reads as plural (``bytes``, ``milliseconds``): it takes no article."""
    last = noun.split()[-1].lower() if noun.split() else ""
    return last.endswith("s") and not last.endswith(("ss", "us", "is", "ous"))


def singular(noun: str) -> str:
    """Singular of an English noun phrase (its last word): ``airlines`` → ``airline``, ``cities`` → ``city``."""
    head, _, last = noun.rpartition(" ")
    low = last.lower()
    if low in UNCOUNTABLE:
        pass
    elif low.endswith("ies") and len(low) > 4:
        last = last[:-3] + "y"
    elif low.endswith(("sses", "xes", "ches", "shes")):
        last = last[:-2]
    elif low.endswith("s") and not low.endswith(("ss", "us", "is")) and len(low) > 3:
        last = last[:-1]
    return f"{head} {last}" if head else last


def plural(noun: str) -> str:
    """Plural of an English noun phrase (its last word): ``city`` → ``cities``, ``country`` → ``countries``."""
    head, _, last = noun.rpartition(" ")
    low = last.lower()
    if low in UNCOUNTABLE:
        pass
    elif last.isupper() or not last[-1:].isalpha():
        last = last + "s"
    elif low.endswith("y") and low[-2:-1] not in tuple("aeiou"):
        last = last[:-1] + "ies"
    elif low.endswith(("s", "x", "z", "ch", "sh")):
        last = last + "es"
    else:
        last = last + "s"
    return f"{head} {last}" if head else last
