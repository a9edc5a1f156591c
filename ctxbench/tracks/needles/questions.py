"""Needles (planted facts, real and altered) and multi-hop chains: definitions from ``assets/needles/*.yaml``,
insertion at depths, and the exhaustive absence check.

Method: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text"
(2026): section 3.4 (Test 1: a biographical fact about a real scholar, planted in a real and an altered variant at
25/50/75% of paragraph index; the planted facts verified absent from the master haystack by exhaustive search) and
section 3.5 (Test 2: chains of planted statements, A studied under B, B was a friend of C, C has attribute X, with
fictional names verified absent, inserted at fixed depths and asked as one question). Any number of hops is allowed.

Depths are fractions of the context's tokens in the sizing model's tokenizer (the study's "25/50/75% of paragraph
index" is a paragraph fraction; with paragraphs of very unequal length that puts a "50%" needle at 39% or 85% of
the tokens, so a depth here means tokens, and the paragraph fraction reached is recorded beside it):
:func:`plan_token_insertions` puts each statement at the sentence boundary (``boundary="sentence"``: a sentence end
inside a paragraph, or a paragraph boundary; sentence ends are 。！？ and .!? with any closing quotes, the corpus's
own script) or paragraph boundary (``boundary="paragraph"``) whose token offset is nearest ``depth × tokens``.
:func:`plan_insertions` is the paragraph-index placement (before paragraph ``round(depth × n)``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path


from ctxbench.core.config import assets_dir, check_keys, read_yaml
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import file_sha256
from ctxbench.core.hashing import seeded_rng
from ctxbench.features.language import detect_language
from ctxbench.tracks.needles.config import BOUNDARIES

VARIANTS = ("real", "altered")
_SENT_END = re.compile(r"[。！？!?]+[」』”’\"')）]*|(?<![A-Z])\.(?!\d)[”’\"')]*(?=\s|$)")


@dataclass
class PlantItem:
    """What one instance plants and asks: ``statements`` (text of each planted statement, in chain order),
    ``depths`` (requested fraction of the context's tokens for each), the question, gold ``answer`` and ``accepted``
    forms."""

    needle_id: str
    variant: str  # real | altered | chain
    attribute: str
    statements: list[str]
    depths: list[float]
    question: str
    answer: str
    accepted: list[str]
    lookalikes: list[str] = field(default_factory=list)  # look-alike statements (distractors), none answering


@dataclass
class NeedleSet:
    """A needle asset file: needles (real/altered facts), chains, the language and per-corpus volume exclusions."""

    path: Path
    sha256: str
    language: str
    needles: list[dict]
    chains: list[dict]
    exclude_volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    lookalike_subjects: list[str] = field(default_factory=list)

    def lookalikes(self, needle: dict, variant: str, k: int, seed_parts: tuple = ()) -> list[str]:
        """``k`` look-alike statements for ``needle``'s ``variant`` (issue 25; Context Rot's similar distractors):
        its statement with another subject in the place of the subject and every alias (the needle's own
        ``lookalike_subjects``, else the set's), each with a value other than the needle's (the other variant's
        and the values of the set's other needles of the same attribute) that neither holds nor is held by any
        accepted form of the answer. So each is of the needle's form but about another subject, and none answers
        the question. Subjects and values are chosen from a seed (``seed_parts``, hashlib). Raises InputError when
        there are fewer than ``k`` look-alike subjects or no other value."""
        if k <= 0:
            return []
        subjects = [str(x) for x in (needle.get("lookalike_subjects") or self.lookalike_subjects)]
        own = [needle["subject"], *needle.get("subject_aliases", [])]
        subjects = [x for x in dict.fromkeys(subjects) if x not in own]
        if len(subjects) < k:
            raise InputError(f"{self.path}: needle {needle['id']}: {k} look-alike needles need {k} look-alike "
                             f"subjects, the set has {len(subjects)}: add names to lookalike_subjects or lower "
                             f"--distractor-needles")
        forms = [str(needle[variant]["value"]), *map(str, needle[variant].get("accepted", []))]
        pool = [needle[v]["value"] for v in VARIANTS if v != variant]
        pool += [n[v]["value"] for n in self.needles if n is not needle and n.get("attribute") == needle.get("attribute")
                 for v in VARIANTS]
        values = [str(v) for v in dict.fromkeys(map(str, pool))
                  if not any(f in str(v) or str(v) in f for f in forms)]
        if not values:
            raise InputError(f"{self.path}: needle {needle['id']}: no value for a look-alike other than the answer "
                             f"(add a needle of attribute {needle.get('attribute')!r} or change a value)")
        rng = seeded_rng("lookalikes", needle["id"], variant, k, *seed_parts)
        chosen = rng.sample(subjects, k)
        rng.shuffle(values)
        names = sorted(own, key=len, reverse=True)
        pat = re.compile("|".join(re.escape(x) for x in names))
        out = []
        for i, subj in enumerate(chosen):
            st = pat.sub(lambda m: subj, needle["statement"])
            st = re.sub(f"(?:{re.escape(subj)})(?:\\s*{re.escape(subj)})+", subj, st)  # 鶴山先生魏了翁 → one name
            st = st.format(value=values[i % len(values)])
            if any(x in st for x in own) or any(f in st for f in forms):  # never answers the question
                raise InputError(f"{self.path}: needle {needle['id']}: look-alike {st!r} still names the subject or "
                                 f"holds the answer: change its statement or lookalike_subjects")
            out.append(st)
        return out

    def exclusions_for(self, corpus_id: str) -> list[str]:
        return list((self.exclude_volumes or {}).get(corpus_id, {}) or {})

    def items(self, depths: list[float], chain_depths: list[float] | None = None,
              variants: tuple[str, ...] = VARIANTS, lookalikes: int = 0) -> list[PlantItem]:
        """Every (needle × variant × depth) and every chain (at ``chain_depths``, default evenly spaced
        ``(i + 1) / (hops + 1)``: 25/50/75% for three statements); ``lookalikes``: look-alike statements per
        needle (:meth:`lookalikes`; chains get none)."""
        out = []
        for n in self.needles:
            for v in variants:
                val = n[v]["value"]
                st = n["statement"].format(value=val)
                for d in depths:
                    out.append(PlantItem(n["id"], v, n.get("attribute", ""), [st], [d], n["question"], val,
                                         _dedupe(n[v].get("accepted", []), val),
                                         self.lookalikes(n, v, lookalikes, (d,))))
        for c in self.chains:
            k = len(c["statements"])
            cd = list(chain_depths) if chain_depths else [round((i + 1) / (k + 1), 6) for i in range(k)]
            if len(cd) != k:
                raise InputError(f"chain {c['id']} has {k} statements but {len(cd)} chain depths were given")
            out.append(PlantItem(c["id"], "chain", c.get("attribute", ""), list(c["statements"]), cd, c["question"],
                                 c["answer"], _dedupe(c.get("accepted", []), c["answer"])))
        return out


def _dedupe(xs: list, answer: str) -> list[str]:
    return [x for x in dict.fromkeys(str(x) for x in xs) if x != answer]


def needle_asset_path(name_or_path: str) -> Path:
    """``assets/needles/<name>.yaml`` for a bare name, else the path itself. Raises InputError when absent."""
    p = Path(name_or_path)
    if not p.suffix:
        p = assets_dir() / "needles" / f"{name_or_path}.yaml"
    if not p.exists():
        names = sorted(x.stem for x in (assets_dir() / "needles").glob("*.yaml"))
        raise InputError(f"needle set {name_or_path!r} not found: give a YAML path or one of {', '.join(names)}")
    return p


NEEDLE_SET_KEYS = ("needles", "chains", "language", "exclude_volumes", "lookalike_subjects", "name", "description")


def load_needle_set(name_or_path: str) -> NeedleSet:
    """Load and check a needle asset (fields in ``assets/needles/zh-classical.yaml``). Raises InputError naming
    the file and the entry for a missing field, a statement without ``{value}``, a duplicate id or a chain
    without names."""
    p = needle_asset_path(name_or_path)
    d = read_yaml(p, "needle set") or {}  # a syntax error names its line and column
    if not isinstance(d, dict):
        raise InputError(f"{p}: the top level must be a mapping with 'needles' and/or 'chains' lists")
    check_keys(d, NEEDLE_SET_KEYS, p)
    needles, chains = d.get("needles") or [], d.get("chains") or []
    for what, items in (("needles", needles), ("chains", chains)):
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise InputError(f"{p}: '{what}' must be a list of mappings (one per {what[:-1]})")
    ids = set()
    for n in needles:
        for k in ("id", "subject", "statement", "question", "real", "altered"):
            if k not in n:
                raise InputError(f"{p}: needle {n.get('id', '?')} lacks {k!r}")
        if "{value}" not in n["statement"]:
            raise InputError(f"{p}: needle {n['id']}: statement must hold {{value}}")
        for v in VARIANTS:
            if not isinstance(n[v], dict) or not str(n[v].get("value", "")).strip():
                raise InputError(f"{p}: needle {n['id']}: {v} needs a value")
        if n["id"] in ids:
            raise InputError(f"{p}: duplicate id {n['id']}")
        ids.add(n["id"])
    for c in chains:
        for k in ("id", "statements", "question", "answer", "names"):
            if not c.get(k):
                raise InputError(f"{p}: chain {c.get('id', '?')} lacks {k!r}")
        if c["id"] in ids:
            raise InputError(f"{p}: duplicate id {c['id']}")
        ids.add(c["id"])
        missing = [nm for nm in c["names"] if not any(nm in s for s in c["statements"])]
        if missing:
            raise InputError(f"{p}: chain {c['id']}: names {missing} appear in none of its statements")
    if not needles and not chains:
        raise InputError(f"{p}: no needles and no chains")
    return NeedleSet(p, file_sha256(p), str(d.get("language", "")), needles, chains,
                     d.get("exclude_volumes") or {}, [str(x) for x in d.get("lookalike_subjects") or []])


def corpus_language(text: str) -> str:
    """Language code of a corpus text (:func:`ctxbench.features.language.detect_language`: langdetect, with
    Han-only text as Chinese); ``""`` when undecidable."""
    return detect_language(text) or ""


def default_needle_set(language: str) -> str:
    """The needle asset for a corpus language: ``zh`` → ``zh-classical``, ``en`` → ``en``. Raises InputError
    for other languages (give ``--needles``)."""
    if language.startswith("zh"):
        return "zh-classical"
    if language == "en":
        return "en"
    raise InputError(f"no default needle set for corpus language {language!r}: write one like "
                     f"assets/needles/en.yaml and pass --needles FILE")


# ---------------------------------------------------------------- absence check

def _sentence_at(text: str, i: int, j: int) -> tuple[int, int]:
    """Character bounds of the sentence around ``text[i:j]``."""
    a = max(text.rfind(ch, 0, i) for ch in "。！？!?\n.") + 1
    ends = [k for k in (text.find(ch, j) for ch in "。！？!?\n.") if k >= 0]
    return a, (min(ends) + 1 if ends else len(text))


def verify_absent(text: str, ns: NeedleSet, where: str = "the haystack") -> dict:
    """Exhaustive search of ``text`` (the master haystack) for every planted fact and fictional name.

    A needle's fact occurs when its statement (either variant) occurs, or one sentence holds the subject (or an
    alias), a value of that variant (or an accepted form) and every ``fact_terms`` word (case-insensitive). A chain
    fails when any of its names or statements occurs. Raises InputError naming the needle or chain, the fact or
    name, and the sentence found. Returns counts of what was checked."""
    low = text.casefold()
    checked = {"statements": 0, "facts": 0, "names": 0, "subject_mentions": {}}
    for n in ns.needles:
        subjects = [n["subject"], *n.get("subject_aliases", [])]
        terms = [t.casefold() for t in n.get("fact_terms", [])]
        mentions = 0
        for v in VARIANTS:
            val = str(n[v]["value"])
            st = n["statement"].format(value=val)
            checked["statements"] += 1
            if st.casefold() in low:
                raise InputError(f"needle {n['id']} ({v}): its statement {st!r} already occurs in {where}: choose "
                                 f"another fact or exclude the volume holding it")
            forms = [f.casefold() for f in [val, *map(str, n[v].get("accepted", []))]]
            checked["facts"] += 1
            for s in subjects:
                sf = s.casefold()
                i = low.find(sf)
                while i >= 0:
                    mentions += 1
                    a, b = _sentence_at(low, i, i + len(sf))
                    sent = low[a:b]
                    if any(f in sent for f in forms) and all(t in sent for t in terms):
                        raise InputError(
                            f"needle {n['id']} ({v}): the fact '{n['subject']} {n.get('attribute', '')} = {val}' "
                            f"already occurs in {where}: {text[a:b].strip()!r} (character {a}); choose another "
                            f"fact or exclude the volume holding it")
                    i = low.find(sf, i + 1)
        checked["subject_mentions"][n["id"]] = mentions // len(VARIANTS)
    def absent(nm: str, what: str, fix: str) -> None:  # a fictional name must not occur in the corpus
        checked["names"] += 1
        k = low.find(nm.casefold())
        if k >= 0:
            a, b = _sentence_at(low, k, k + len(nm))
            raise InputError(f"{what} {nm!r} occurs in {where}: {text[a:b].strip()!r} (character {k}); {fix}")

    for nm in ns.lookalike_subjects:
        absent(nm, "look-alike subject", "choose another name in lookalike_subjects")
    for c in ns.chains:
        for nm in c["names"]:
            absent(nm, f"chain {c['id']}: the fictional name", "choose another name")
        for st in c["statements"]:
            checked["statements"] += 1
            if st.casefold() in low:
                raise InputError(f"chain {c['id']}: the statement {st!r} already occurs in {where}")
    return checked


# ---------------------------------------------------------------- insertion

def sentence_ends(paragraph: str) -> list[int]:
    """Character offsets just after each sentence end inside ``paragraph`` (not its very end), ascending."""
    end = len(paragraph.rstrip())
    return [m.end() for m in _SENT_END.finditer(paragraph) if m.end() < end]


def sentence_boundary(paragraph: str) -> int | None:
    """Character offset just after the sentence end nearest the middle of ``paragraph`` (not its very end), or
    None when the paragraph has no inner sentence end."""
    ends = [m.end() for m in _SENT_END.finditer(paragraph) if m.end() < len(paragraph.rstrip())]
    if not ends:
        return None
    mid = len(paragraph) / 2
    return min(ends, key=lambda e: (abs(e - mid), e))


def _glue(before: str) -> str:
    """What joins a statement to the sentence before it: nothing after a full-width sentence end (。！？ and
    closing brackets such as 」), a space after a Latin-script one."""
    return "" if before and ord(before[-1]) > 0x2E7F else " "


@dataclass
class Insertion:
    """Where one statement went: paragraph index ``j`` of the base haystack (paragraphs ``0..j-1`` are wholly
    before it), ``char_in_par`` (None: a paragraph of its own before paragraph ``j``; else the offset inside
    paragraph ``j`` after which the statement was put)."""

    statement: str
    depth: float
    j: int
    char_in_par: int | None
    unit_tokens: int = 0  # token planner: tokens between the boundaries around the target (the sentence it falls in)


def plan_insertions(paragraphs: list[str], statements: list[str], depths: list[float],
                    boundary: str = "sentence") -> list[Insertion]:
    """Insertion points of ``statements`` at ``depths`` (fractions of ``len(paragraphs)``; module docstring).
    Raises InputError for a depth outside [0, 1] or an unknown boundary."""
    if boundary not in BOUNDARIES:
        raise InputError(f"unknown boundary {boundary!r}: use {' or '.join(BOUNDARIES)}")
    n = len(paragraphs)
    out = []
    for st, d in zip(statements, depths):
        if not 0.0 <= d <= 1.0:
            raise InputError(f"depth {d} is outside 0..1 (a fraction of the haystack's paragraphs)")
        j = min(max(round(d * n), 0), n)
        cut = sentence_boundary(paragraphs[j]) if boundary == "sentence" and j < n else None
        out.append(Insertion(st, d, j, cut))
    return out


def plan_token_insertions(paragraphs: list[str], para_tokens: list[int], statements: list[str],
                          statement_tokens: list[int], depths: list[float], boundary: str,
                          token_offset: Callable[[int, int], int]) -> list[Insertion]:
    """Insertion points of ``statements`` at token ``depths`` (module docstring).

    ``para_tokens[j]``: tokens of paragraph ``j`` with its newline (the sizing tokenizer's); ``statement_tokens``:
    tokens each statement adds; ``token_offset(j, c)``: tokens of paragraph ``j`` before its character ``c``. The
    context will hold ``T + S`` tokens (T of the paragraphs, S of the statements), so statement ``i`` aims at
    ``depth_i × (T + S)`` tokens of the context, i.e. ``depth_i × (T + S) − (tokens of the statements placed before
    it)`` tokens of the paragraphs; it goes to the boundary nearest that (an earlier one on a tie): a paragraph
    boundary (a paragraph of its own before paragraph ``j``) or, with ``boundary="sentence"``, a sentence end
    inside the paragraph holding the target (the statement glued after it). ``unit_tokens`` is the distance
    between the boundaries on either side of the target: the length of the sentence (or paragraph) it fell in,
    which bounds how close any placement can come. Statements at equal depths keep their order. Raises InputError
    for a depth outside [0, 1], an unknown boundary, or lengths that do not match."""
    if boundary not in BOUNDARIES:
        raise InputError(f"unknown boundary {boundary!r}: use {' or '.join(BOUNDARIES)}")
    if len(para_tokens) != len(paragraphs) or not len(statements) == len(statement_tokens) == len(depths):
        raise InputError("plan_token_insertions: one token count per paragraph and per statement, one depth each")
    for d in depths:
        if not 0.0 <= d <= 1.0:
            raise InputError(f"depth {d} is outside 0..1 (a fraction of the context's tokens)")
    n = len(paragraphs)
    prefix = [0, *accumulate(para_tokens)]
    total = prefix[-1] + sum(statement_tokens)
    out: list[Insertion | None] = [None] * len(statements)
    placed = 0
    for i in sorted(range(len(statements)), key=lambda i: depths[i]):
        t = depths[i] * total - placed
        j = min(max(bisect_right(prefix, t) - 1, 0), n)  # the paragraph holding the target (n: past the end)
        cands: list[tuple[int, int, int | None]] = [(prefix[j], j, None)]  # (token offset, paragraph, char)
        if j < n:
            cands.append((prefix[j + 1], j + 1, None))
            if boundary == "sentence":
                cands.extend((prefix[j] + token_offset(j, c), j, c) for c in sentence_ends(paragraphs[j]))
        cands.sort(key=lambda c: c[0])
        best = min(cands, key=lambda c: (abs(c[0] - t), c[0]))
        below = max((c[0] for c in cands if c[0] <= t), default=cands[0][0])
        above = min((c[0] for c in cands if c[0] >= t), default=cands[-1][0])
        out[i] = Insertion(statements[i], depths[i], best[1], best[2], above - below)
        placed += statement_tokens[i]
    return [x for x in out if x is not None]


def apply_insertions(paragraphs: list[str], ins: list[Insertion]
                     ) -> tuple[list[str], list[tuple[int, int, int]], list[int | None]]:
    """The paragraphs with the statements inserted; for each insertion (in the given order) ``(paragraph index in
    the result, start char, end char)`` of the statement inside that paragraph; and for each result paragraph the
    index of the unchanged input paragraph it is (None for a paragraph that holds a statement). Statements at one
    place keep their given order; statements inside one paragraph go each after its own sentence end."""
    by_j: dict[int, list[int]] = {}
    for k, x in enumerate(ins):
        by_j.setdefault(x.j, []).append(k)
    result: list[str] = []
    origin: list[int | None] = []
    where: list[tuple[int, int, int] | None] = [None] * len(ins)
    for j in range(len(paragraphs) + 1):
        ks = by_j.get(j, [])
        own = [k for k in ks if ins[k].char_in_par is None]
        inside = [k for k in ks if ins[k].char_in_par is not None]
        for k in own:
            where[k] = (len(result), 0, len(ins[k].statement))
            result.append(ins[k].statement)
            origin.append(None)
        if j == len(paragraphs):
            break
        p = paragraphs[j]
        if inside:
            # statements at different sentence ends of one paragraph go each to its own; equal cuts keep their
            # order. The paragraph's own text is kept whole (its spacing too): a statement is glued after its
            # sentence end, and a Latin-script glue space goes after it only where the text did not have one
            cuts = sorted({ins[k].char_in_par for k in inside})
            text, prev, glue = "", 0, ""
            for cut in cuts:
                seg = p[prev:cut]
                text += glue + seg if prev and glue and seg and not seg[0].isspace() else seg
                glue = _glue(p[:cut])
                for k in (k for k in inside if ins[k].char_in_par == cut):
                    text += glue
                    where[k] = (len(result), len(text), len(text) + len(ins[k].statement))
                    text += ins[k].statement
                prev = cut
            tail = p[prev:]
            p = text + (glue + tail if glue and tail and not tail[0].isspace() else tail)
        result.append(p)
        origin.append(None if inside else j)
    return result, [w for w in where if w is not None], origin
