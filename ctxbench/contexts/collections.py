"""Article collections: whole documents concatenated into contexts of at most a tier's tokens (SciTrek section 3.1).

A collection starts from a randomly chosen article and grows in one of three orders: ``random`` (the other
articles shuffled), ``bfs`` / ``dfs`` (breadth- or depth-first traversal of the citation graph, edges taken as
undirected, neighbours visited in a seeded random order; only articles reachable from the start). Articles are
added in that order while they fit, and an article that does not fit is skipped so that smaller later ones can
still be added; articles are never cut. Each article is counted once per tokenizer (its text plus the separator;
kept in the count store across tiers, builds and nightly runs, :mod:`ctxbench.tokenizers.counts`); the assembled context is counted once more to verify its length (where the tokenizer merges
across an article boundary, the last article is removed until the recount fits). A collection needs at least
``min_articles`` articles and must fill at least ``min_fill`` of its tier (SciTrek adds articles "until it reaches a
specified length level": a 1M collection of 60K tokens is no 1M collection), and two collections of the same tier
share at most half the articles of the smaller one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ctxbench.core.hashing import seeded_rng, stable_hash
from ctxbench.core.values import SAMPLINGS
from ctxbench.tokenizers import Tokenizer
from ctxbench.tokenizers.counts import TokenCounter, counter_for

ARTICLE_SEP = "\n\n---\n\n"  # a markdown horizontal rule between articles


@dataclass
class Collection:
    """A collection at one tier: article ids in context order, the context, its measured length in tokens,
    and ``shortfall_tokens`` = tier − context_tokens."""

    collection_id: str
    tier: int
    sampling: str
    article_ids: list[str]
    context: str
    context_tokens: int
    shortfall_tokens: int
    start: str = ""


@dataclass
class CollectionsResult:
    """Collections built, quarantine rows (stage ``collections``: candidates that could not reach the minimum),
    and counts of candidates rejected for overlapping an earlier collection."""

    collections: list[Collection] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)
    rejected_overlap: dict[str, int] = field(default_factory=dict)


def article_token_counts(texts: dict[str, str], tok: Tokenizer | TokenCounter) -> dict[str, int]:
    """Tokens of ``text + ARTICLE_SEP`` per article id, each article counted once per tokenizer: read from the
    count store (:mod:`ctxbench.tokenizers.counts`, namespace ``articles``) or counted with one batched call."""
    ids = sorted(texts)
    counter = tok if isinstance(tok, TokenCounter) else counter_for(tok, "articles")
    counts = dict(zip(ids, counter.counts([texts[i] + ARTICLE_SEP for i in ids])))
    counter.flush()
    return counts


def _neighbours(edges: list[tuple[str, str]], ids: set[str]) -> dict[str, list[str]]:
    nb: dict[str, set[str]] = {i: set() for i in ids}
    for a, b in edges:
        if a in ids and b in ids and a != b:
            nb[a].add(b)
            nb[b].add(a)
    return {k: sorted(v) for k, v in nb.items()}


def traversal_order(start: str, ids: list[str], nb: dict[str, list[str]], sampling: str, rng) -> list[str]:
    """Article ids in the order a collection grows from ``start`` (module docstring)."""
    if sampling == "random":
        rest = [i for i in ids if i != start]
        rng.shuffle(rest)
        return [start, *rest]
    order, seen = [], {start}
    if sampling == "bfs":
        q = deque([start])
        while q:
            a = q.popleft()
            order.append(a)
            nxt = [b for b in nb[a] if b not in seen]
            rng.shuffle(nxt)
            for b in nxt:
                seen.add(b)
                q.append(b)
        return order
    if sampling == "dfs":
        stack = [start]
        seen = set()
        while stack:
            a = stack.pop()
            if a in seen:
                continue
            seen.add(a)
            order.append(a)
            nxt = [b for b in nb[a] if b not in seen]
            rng.shuffle(nxt)
            stack.extend(reversed(nxt))
        return order
    raise ValueError(f"unknown sampling {sampling!r}: use {', '.join(SAMPLINGS)}")


def first_fit(order: list[str], tokens: dict[str, int], budget: int) -> tuple[list[str], int]:
    """Take articles in ``order`` while they fit in ``budget`` tokens, skipping one that does not fit and going on
    with the next (smaller ones that still fit are added). Returns (ids, summed tokens)."""
    taken, used = [], 0
    for a in order:
        if used + tokens[a] <= budget:
            taken.append(a)
            used += tokens[a]
    return taken, used


def assemble(ids: list[str], texts: dict[str, str], tier: int, tok: Tokenizer) -> tuple[list[str], str, int]:
    """The context of ``ids`` (each article followed by ARTICLE_SEP) and its length by one recount; articles are
    removed from the end while the recount exceeds ``tier``."""
    ids = list(ids)
    while True:
        text = "".join(texts[i] + ARTICLE_SEP for i in ids)
        n = tok.count(text)
        if n <= tier or not ids:
            return ids, text, n
        ids.pop()


def overlaps_too_much(a: list[str], b: list[str], max_shared: float = 0.5) -> bool:
    """Whether ``a`` and ``b`` share more than ``max_shared`` of the articles of the smaller one."""
    shared = len(set(a) & set(b))
    return shared > max_shared * min(len(a), len(b))


def build_collections(texts: dict[str, str], edges: list[tuple[str, str]], tiers: list[int], samplings: list[str],
                      per_tier: int, tok: Tokenizer, seed: int = 0, min_articles: int = 4,
                      max_shared: float = 0.5, min_fill: float = 0.0) -> CollectionsResult:
    """Up to ``per_tier`` collections per (tier, sampling) from the articles ``texts`` (id → markdown).

    Every article is tried once as a start, in a seeded random order, until ``per_tier`` collections are found. A
    candidate with fewer than ``min_articles`` articles is a quarantine row (stage ``collections``, input
    ``<sampling>@<tier>:<start id>``) with the reason, and so is one filling less than ``min_fill`` × tier tokens
    (a fraction; 0 accepts any length); one sharing more than ``max_shared`` of its articles with an
    earlier collection of the same tier is counted in ``rejected_overlap``. Lengths in tokens of ``tok``.
    """
    res = CollectionsResult()
    tokens = article_token_counts(texts, tok)
    ids = sorted(texts)
    nb = _neighbours(edges, set(ids))
    for tier in tiers:
        kept: list[list[str]] = []
        for sampling in samplings:
            rng = seeded_rng(seed, "collections", tier, sampling)
            starts = [i for i in ids if tokens[i] <= tier and (sampling == "random" or nb[i])]
            rng.shuffle(starts)
            made = rejected = 0
            for start in starts:
                if made >= per_tier:
                    break
                order = traversal_order(start, ids, nb, sampling, rng)
                taken, used = first_fit(order, tokens, tier)
                if len(taken) >= min_articles and used < min_fill * tier:
                    res.quarantine.append({
                        "input": f"{sampling}@{tier}:{start}", "stage": "collections",
                        "reason": f"the {len(taken)} articles "
                                  f"{'reachable through citations' if sampling != 'random' else 'that fit'} fill "
                                  f"{used} of {tier} tokens; a collection must fill at least {min_fill:.0%}",
                        "detail": None})
                    continue
                if len(taken) >= min_articles and any(overlaps_too_much(taken, k, max_shared) for k in kept):
                    rejected += 1  # known before the recount: no need to tokenize it
                    continue
                if len(taken) >= min_articles:
                    taken, text, n = assemble(taken, texts, tier, tok)
                if len(taken) < min_articles:
                    res.quarantine.append({
                        "input": f"{sampling}@{tier}:{start}", "stage": "collections",
                        "reason": f"only {len(taken)} article(s) fit in {tier} tokens "
                                  f"({'reachable through citations' if sampling != 'random' else 'sampled'}); "
                                  f"a collection needs at least {min_articles}",
                        "detail": None})
                    continue
                if any(overlaps_too_much(taken, k, max_shared) for k in kept):
                    rejected += 1
                    continue
                if n < min_fill * tier:  # articles removed at the recount left it short
                    res.quarantine.append({"input": f"{sampling}@{tier}:{start}", "stage": "collections",
                                           "reason": f"{n} of {tier} tokens after the recount; a collection must fill "
                                                     f"at least {min_fill:.0%}", "detail": None})
                    continue
                kept.append(taken)
                cid = f"{sampling}-{tier}-" + stable_hash(sorted(taken), tier, sampling, length=8)
                res.collections.append(Collection(cid, tier, sampling, taken, text, n, tier - n, start))
                made += 1
            res.rejected_overlap[f"{sampling}@{tier}"] = rejected
    return res
