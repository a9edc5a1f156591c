"""The packer (ctxbench.contexts.packer) on real sentences: verbalized wine_1 rows as relevant units, the other
wine_1 tables' rows and the dummy documents as distractors. Lengths are recounted with tiktoken directly; positions
are measured from the evidence spans' token offsets."""

from __future__ import annotations

import random
from collections import Counter
from itertools import chain

import pytest

from ctxbench.contexts.packer import Unit, arrange, pack, sample_without_replacement, take_until
from ctxbench.core.errors import InputError
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tracks.holobench.source import prepare_source

R, D = 25, 75  # relevant and distractor units in the position tests (D / R = 3 distractors between spans)


@pytest.fixture(scope="module")
def texts(spider_db):
    """(relevant sentences, distractor sentences, dummy documents), each in a fixed shuffled order."""
    src = prepare_source(spider_db("wine_1"))
    db, ts = src.db, src.templates

    def sentences(table):
        t = db.tables[table]
        return [ts.verbalize(table, t.columns, row, i + 1, 0) for i, row in enumerate(t.rows)]

    rel = sentences("wine")
    dis = sentences("appellations") + sentences("grapes")
    rnd = random.Random(7)
    rnd.shuffle(rel)
    rnd.shuffle(dis)
    assert len(dis) >= D and len(rel) >= R
    assert src.dummy_documents
    return rel, dis, list(src.dummy_documents)


def _units(texts, relevant):
    return [Unit(t, relevant, ("x", i)) for i, t in enumerate(texts)]


class _Measured:
    """Independent measurements of a packed context."""

    def __init__(self, ctx, enc):
        self.ctx, self.enc = ctx, enc
        self.ids = enc.encode(ctx.text, disallowed_special=())
        self.n = len(self.ids)
        self.spans = [tuple(s) for s in ctx.evidence_spans]
        covered = set()
        for s, e in self.spans:
            covered.update(range(s, e))
        # tokens outside every span that carry text (not just the newline separators)
        self.distractor_tokens = [i for i in range(self.n) if i not in covered
                                  and enc.decode([self.ids[i]]).strip()]

    def char(self, tok_index: int) -> int:
        return len(self.enc.decode(self.ids[:tok_index]))

    def lines_between(self, tok_a: int, tok_b: int) -> int:
        """Non-empty lines (units) wholly or partly in the text between two token offsets."""
        seg = self.ctx.text[self.char(tok_a):self.char(tok_b)]
        return sum(1 for line in seg.split("\n") if line.strip())


@pytest.mark.parametrize("tok_name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("target", [2048, 8192])
def test_budget_and_count(texts, tiktoken_enc, tok_name, target):
    rel_texts, dis_texts, dummy = texts
    tok = get_tokenizer(tok_name)
    enc = tiktoken_enc(tok_name)

    def n_tokens(t):
        return len(enc.encode(t + "\n", disallowed_special=()))

    budget = target // 2
    rel, used = take_until(iter(_units(rel_texts, True)), budget, tok)
    assert 0 < len(rel) < len(rel_texts)
    assert used == sum(n_tokens(u.text) for u in rel) <= budget
    assert budget - used < n_tokens(rel_texts[len(rel)])  # the next sentence did not fit

    dis_pool = dis_texts + dummy * (1 + target // 200)
    dis, used_d = take_until(iter(_units(dis_pool, False)), target - used, tok)
    assert len(dis) < len(dis_pool)
    assert used_d == sum(n_tokens(u.text) for u in dis)

    ctx = pack(rel, dis, "uniform", target, tok)
    m = _Measured(ctx, enc)
    assert ctx.context_tokens == m.n
    assert ctx.context_tokens <= target
    next_unit = dis_pool[len(ctx.units) - len(rel)]
    assert target - ctx.context_tokens < n_tokens(next_unit)
    # the context is exactly the chosen units, one per line
    assert ctx.text.endswith("\n")
    assert Counter(ctx.text.split("\n")[:-1]) == Counter(u.text for u in chain(rel, dis))
    # every evidence span decodes to its relevant sentence, in the relevant units' order
    assert len(ctx.evidence_spans) == len(rel)
    for (s, e), u in zip(ctx.evidence_spans, rel):
        assert 0 <= s < e <= m.n
        assert enc.decode(m.ids[s:e]).strip() == u.text
    assert ctx.relevant_tokens == sum(e - s for s, e in ctx.evidence_spans)


@pytest.fixture(scope="module")
def positioned(texts):
    rel_texts, dis_texts, _ = texts
    tok = get_tokenizer("cl100k_base")

    def build(position):
        return pack(_units(rel_texts[:R], True), _units(dis_texts[:D], False), position, 100_000, tok)

    return build


def _measure(positioned, tiktoken_enc, position):
    ctx = positioned(position)
    m = _Measured(ctx, tiktoken_enc("cl100k_base"))
    assert len(m.spans) == R
    assert m.spans == sorted(m.spans)
    assert m.distractor_tokens
    return m


def test_position_beginning(positioned, tiktoken_enc):
    m = _measure(positioned, tiktoken_enc, "beginning")
    assert m.spans[0][0] == 0
    assert max(e for _, e in m.spans) <= min(m.distractor_tokens)


def test_position_end(positioned, tiktoken_enc):
    m = _measure(positioned, tiktoken_enc, "end")
    assert min(s for s, _ in m.spans) > max(m.distractor_tokens)
    assert m.n - m.spans[-1][1] <= 1  # at most the final newline after the last span


def test_position_middle(positioned, tiktoken_enc):
    m = _measure(positioned, tiktoken_enc, "middle")
    first, last = m.spans[0][0], m.spans[-1][1]
    # one contiguous block: no distractor text between the first and the last span
    assert not [t for t in m.distractor_tokens if first <= t < last]
    before, after = m.lines_between(0, first), m.lines_between(last, m.n)
    assert before + after == D
    assert abs(before - after) <= 1
    centre = (first + last) / 2 / m.n
    assert 0.35 < centre < 0.65


def test_position_uniform(positioned, tiktoken_enc):
    m = _measure(positioned, tiktoken_enc, "uniform")
    assert m.spans[0][0] < 0.2 * m.n
    assert m.spans[-1][1] > 0.8 * m.n
    gaps = [m.lines_between(e, s2) for (_, e), (s2, _) in zip(m.spans, m.spans[1:])]
    assert all(D // R - 1 <= g <= D // R + 1 for g in gaps), gaps
    # each span sits near its uniform slot (i + 0.5) / R of the context
    for i, (s, _) in enumerate(m.spans):
        assert abs(s / m.n - (i + 0.5) / R) < 0.1, (i, s / m.n)


def test_position_bimodal(positioned, tiktoken_enc):
    m = _measure(positioned, tiktoken_enc, "bimodal")
    thirds = Counter(min(int(3 * s / m.n), 2) for s, _ in m.spans)
    assert thirds[0] > thirds[1] and thirds[2] > thirds[1], thirds
    # by unit position (the fraction p_i the packer places each unit at): the arcsine law puts 78% of the R units
    # in the outer thirds (sin^2 maps the middle third of i to 22% of them); by tokens the share moves with the
    # sentences' lengths (relevant wine sentences are longer than the distractors)
    lines = [m.ctx.text[:m.char(s)].count("\n") for s, _ in m.spans]
    by_unit = Counter(min(int(3 * x / len(m.ctx.units)), 2) for x in lines)
    assert by_unit[0] + by_unit[2] >= 2 * by_unit[1] + 5, by_unit
    assert m.spans[0][0] < 0.1 * m.n and m.spans[-1][1] > 0.9 * m.n
    # the uniform arrangement of the same units does not concentrate at the ends
    u = _measure(positioned, tiktoken_enc, "uniform")
    u_thirds = Counter(min(int(3 * s / u.n), 2) for s, _ in u.spans)
    assert thirds[1] < u_thirds[1]


def test_relevant_alone_over_target_raises(texts):
    rel_texts, _, _ = texts
    tok = get_tokenizer("cl100k_base")
    with pytest.raises(InputError):
        pack(_units(rel_texts[:20], True), [], "uniform", 50, tok)


def test_unknown_position_raises(texts):
    rel_texts, dis_texts, _ = texts
    with pytest.raises(InputError):
        arrange(_units(rel_texts[:2], True), _units(dis_texts[:2], False), "sideways")


def test_sample_without_replacement_is_a_permutation():
    got = list(sample_without_replacement(200, random.Random(3)))
    assert sorted(got) == list(range(200))
    assert got != list(range(200))
    assert got == list(sample_without_replacement(200, random.Random(3)))


@pytest.mark.parametrize("position", ["beginning", "middle", "end", "uniform", "bimodal"])
def test_arrange_merges_in_the_order_of_sorting_every_key(position):
    """arrange merges the two key-ordered sequences in linear time: the order of sorting every unit by (fraction,
    relevant first, index), worked out here by that sort."""
    from ctxbench.contexts.packer import _relevant_fraction

    for r, d in [(0, 0), (0, 5), (4, 0), (1, 1), (3, 7), (999, 1000), (5000, 7777), (37, 2)]:
        rel = [Unit(f"r{i}", True) for i in range(r)]
        dis = [Unit(f"d{j}", False) for j in range(d)]
        keyed = sorted([((_relevant_fraction(i, r, position), 0, i), u.text) for i, u in enumerate(rel)]
                       + [(((j + 0.5) / d, 1, j), u.text) for j, u in enumerate(dis)])
        assert [u.text for u in arrange(rel, dis, position)] == [t for _, t in keyed], (r, d)
