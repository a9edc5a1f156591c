"""Split at newlines (issue 16): for cl100k_base and o200k_base a text ending with a newline followed by one
starting with an ASCII letter or digit encodes as the two encodings one after the other, so unit counts come from
joined encodings and a packed context's length and evidence spans from its units' counts. Every check compares
with whole encodings by tiktoken itself (loaded apart from ctxbench's registry)."""

from __future__ import annotations

import random

import pytest

from ctxbench.contexts.packer import POSITIONS, Unit, pack, summed_measure
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tokenizers import registry

SPLIT_SAFE = ["cl100k_base", "o200k_base"]
# pieces that stress the pre-tokenizer at a unit's start and end: contractions, digit runs, punctuation runs with
# newlines and slashes, whitespace before the newline, marks, CJK, emoji, carriage returns
BODY = ["The", " flight", " 5:17", "'s", "'LL", " 12345", "...", "?!", ")", ".", " /", "/", " ", "  ", "\t", "é",
        "e\u0301", "宋元", "😀", "\r", "\r\n", "\n", " \n", "x", "Z9", "'", "-", "%", " ;", "ǅ", "ſ"]
ENDS = ["", ".", "...", " ", "  ", "\t", "?!", ")", "/", " /", "'", "'s", "\r", " \r", "\n", "é", "e\u0301", "😀", "9"]
STARTS = ["A", "z", "0", "7", "The", "e\u0301", " lead", "\n", "/x", "'s", ".", "é", "😀", "\r"]


def _unit(rnd: random.Random, hard: bool) -> str:
    head = rnd.choice(["A", "z", "0", "7", "The", "Q"]) if hard else rnd.choice(STARTS)
    body = "".join(rnd.choice(BODY) for _ in range(rnd.randrange(0, 8)))
    return head + body + rnd.choice(ENDS) + "\n"


@pytest.mark.parametrize("name", SPLIT_SAFE)
def test_split_safe_encoding_is_the_units_encodings_joined(name, tiktoken_enc):
    enc = tiktoken_enc(name)
    assert get_tokenizer(name).split_safe
    rnd = random.Random(name)
    for _ in range(3000):
        a = _unit(rnd, rnd.random() < 0.5)
        b = _unit(rnd, True)
        ea, eb = enc.encode(a, disallowed_special=()), enc.encode(b, disallowed_special=())
        assert enc.encode(a + b, disallowed_special=()) == ea + eb, (a, b)


@pytest.mark.parametrize("name", SPLIT_SAFE)
def test_joined_counts_are_the_counts_alone(name, tiktoken_enc):
    enc = tiktoken_enc(name)
    tok = get_tokenizer(name)
    rnd = random.Random(7)
    for trial in range(20):
        texts = [_unit(rnd, rnd.random() < 0.9) for _ in range(rnd.randrange(1, 3000))]
        if trial % 4 == 0:  # texts without a final newline, empty texts
            texts[::7] = [t.rstrip("\n") for t in texts[::7]]
            texts[::11] = ["" for _ in texts[::11]]
        alone = [len(enc.encode(t, disallowed_special=())) for t in texts]
        assert tok.count_batch(texts) == alone


def test_only_the_analysed_patterns_are_split_safe(tiktoken_enc):
    import tiktoken

    base = tiktoken_enc("cl100k_base")
    assert base._pat_str in registry.SPLIT_SAFE_PATTERNS
    # the same vocabulary under another pre-tokenizer (GPT-2's, whose " ?\p{L}+" ...) is not taken as split-safe
    other = tiktoken.Encoding("other", pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                              mergeable_ranks=base._mergeable_ranks, special_tokens={})
    tok = registry._tiktoken_tokenizer("other", other, "test", "")
    assert not tok.split_safe
    texts = ["x\n", "Ab\n", "9 \n"] * 300
    assert tok.count_batch(texts) == [len(other.encode_ordinary(t)) for t in texts]
    for name in ("deepseek-v3", "claude-legacy", "llama3", "qwen2.5"):
        assert not get_tokenizer(name).split_safe


def _counted(texts: list[str], relevant: bool, tok) -> list[Unit]:
    counts = tok.count_batch([t + "\n" for t in texts])
    return [Unit(t, relevant, ("t", i), n) for i, (t, n) in enumerate(zip(texts, counts))]


@pytest.mark.parametrize("name", SPLIT_SAFE)
def test_summed_context_is_the_whole_encoding(name, tiktoken_enc):
    """Random units, tiers and positions: the summed length equals the whole context's encoding, and the
    evidence spans equal those of the encoding path (pack without counts)."""
    enc = tiktoken_enc(name)
    tok = get_tokenizer(name)
    rnd = random.Random(name + "pack")
    summed = 0
    for trial in range(60):
        n_rel, n_dis = rnd.randrange(0, 60), rnd.randrange(0, 200)
        hard = trial % 5 != 0  # one in five has units the sum does not apply to
        rel = [_unit(rnd, hard or rnd.random() < 0.9)[:-1] for _ in range(n_rel)]
        dis = [_unit(rnd, hard or rnd.random() < 0.9)[:-1] for _ in range(n_dis)]
        position = rnd.choice(POSITIONS)
        fast = pack(_counted(rel, True, tok), _counted(dis, False, tok), position, 10**7, tok, counted=True)
        slow = pack(_counted(rel, True, tok), _counted(dis, False, tok), position, 10**7, tok)
        ids = enc.encode(fast.text, disallowed_special=())
        assert fast.text == slow.text
        assert fast.context_tokens == len(ids) == slow.context_tokens
        assert fast.evidence_spans == slow.evidence_spans
        assert fast.relevant_tokens == slow.relevant_tokens
        summed += summed_measure(fast.units, tok) is not None
    assert summed >= 40  # the sum was taken, not only the encoding path


def test_summed_measure_declines_units_it_cannot_sum():
    tok = get_tokenizer("cl100k_base")
    assert summed_measure([Unit("A b", True, None, 3), Unit(" c", False, None, 2)], tok) is None  # starts with a space
    assert summed_measure([Unit("A b", True, None, 0)], tok) is None  # no count
    assert summed_measure([Unit("", True, None, 1)], tok) is None
    assert summed_measure([], tok) == (0, [])


@pytest.mark.parametrize("name", SPLIT_SAFE)
def test_holobench_contexts_measure_what_their_encoding_gives(name, spider_db, tiktoken_enc, tmp_path, monkeypatch):
    """HoloBench contexts for many seeds, tiers and positions (rows verbalized by the seed's templates): the recorded
    context_tokens is the whole context's encoding length and at most the tier, every evidence span is the one an
    encoding of the whole context gives, and a build on an empty count store and one on the store it left (counts
    read, not made) give the same bytes."""
    from ctxbench.tracks.holobench import HoloBenchConfig, build_context
    from ctxbench.tracks.holobench.source import load_database_header, prepare_source_cached

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    enc = tiktoken_enc(name)
    tok = get_tokenizer(name)
    db = str(spider_db("wine_1"))
    raw = load_database_header(db)
    src = prepare_source_cached(raw, tmp_path / "source.sqlite",
                                reload=lambda: __import__("ctxbench.sources", fromlist=["x"]).load_database(db))
    rnd = random.Random(name)
    summed = 0
    for trial in range(12):
        seed, target = rnd.randrange(10**6), rnd.choice([512, 1024, 4096, 16384])
        position = rnd.choice(POSITIONS)
        q = rnd.choice(src.questions)
        tables = sorted(t for t in src.db.tables if t.lower() in q.info["tables"])
        cfg = HoloBenchConfig(db=db, lengths=[target], tokenizer=name, seed=seed)
        ctx = build_context(src, cfg, tables, target, position, tok)
        again = build_context(src, cfg, tables, target, position, tok)  # counts now read from the counter
        assert again.text == ctx.text and again.evidence_spans == ctx.evidence_spans
        ids = enc.encode(ctx.text, disallowed_special=())
        assert ctx.context_tokens == len(ids) <= target
        assert ctx.context_tokens > 0.9 * target
        _, starts = tok.encode_with_starts(ctx.text)
        ranges, at = [], 0
        for u in ctx.units:
            if u.relevant:
                ranges.append((at, at + len(u.text)))
            at += len(u.text) + 1
        assert ctx.evidence_spans == tok.token_spans(starts, ranges)
        summed += summed_measure(ctx.units, tok) is not None
    assert summed == 12


def test_verify_switch_encodes_the_whole_context(monkeypatch):
    """CTXBENCH_VERIFY_CONTEXTS=1 measures a context by encoding it whole; without it the counts measure it."""
    from dataclasses import replace

    base = get_tokenizer("cl100k_base")
    whole: list[str] = []

    def encode_with_starts(text):
        whole.append(text)
        return base.encode_with_starts(text)

    tok = replace(base, _char_starts=base._char_starts)
    monkeypatch.setattr(tok, "encode_with_starts", encode_with_starts)
    rel = _counted([f"Row {i} is relevant." for i in range(30)], True, base)
    dis = _counted([f"Row {i} is not." for i in range(90)], False, base)
    monkeypatch.delenv("CTXBENCH_VERIFY_CONTEXTS", raising=False)
    fast = pack(rel, dis, "bimodal", 10**6, tok, counted=True)
    assert fast.text not in whole
    monkeypatch.setenv("CTXBENCH_VERIFY_CONTEXTS", "1")
    slow = pack(rel, dis, "bimodal", 10**6, tok, counted=True)
    assert whole[-1] == slow.text == fast.text
    assert (slow.context_tokens, slow.evidence_spans) == (fast.context_tokens, fast.evidence_spans)
