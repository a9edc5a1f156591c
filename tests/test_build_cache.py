"""Build speed without changing a byte (issue 16): token offsets from one encoding, the on-disk unit count store, the
packer's look-ahead streams, the prepared-source cache and the verbalizer's compiled templates. Each fast path is
checked against an independent slow computation of the same value."""

from __future__ import annotations

import hashlib
import logging
import random
import shutil
from itertools import chain
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.contexts.packer import (ChainedUnits, CycledUnits, SampledUnits, Unit, cycle_units,
                                      sample_without_replacement, take_until)
from ctxbench.tokenizers import get_tokenizer
from ctxbench.tokenizers import counts as tc
from ctxbench.verbalize.templates import TemplateSet, format_value

TRICKY = ("The flight left John F Kennedy Intl at 5:17.\n宋元學案，卷一。 Ünïcödé 12,345 tokens 😀👩‍👩‍👧 e\u0301 "
          "<|endoftext|> <｜end▁of▁sentence｜> \n\n  tabs\tand   spaces \r\n" * 3)
TOKENIZERS = ["cl100k_base", "o200k_base", "deepseek-v3", "claude-legacy", "llama3", "qwen2.5"]


def _reference_starts(tok, text: str) -> list[int]:
    """Each token's start character, from its own bytes: a token starting inside a multi-byte character starts at
    that character (tiktoken's decode_with_offsets rule)."""
    ids = tok.encode(text)
    if tok.name in ("deepseek-v3", "claude-legacy"):  # Hugging Face: the library's own offsets
        from tokenizers import Tokenizer as HF

        from ctxbench.tokenizers.registry import HF_LITELLM_FILES, _litellm_tokenizer_dir

        hf = HF.from_file(str(_litellm_tokenizer_dir() / HF_LITELLM_FILES[tok.name]))
        hf.encode_special_tokens = True
        return [o[0] for o in hf.encode(text, add_special_tokens=False).offsets]
    enc = tok._encode.__self__
    byte_char = [i for i, ch in enumerate(text) for _ in ch.encode("utf-8")]
    starts, b = [], 0
    for t in ids:
        starts.append(byte_char[b])
        b += len(enc.decode_single_token_bytes(t))
    return starts


@pytest.mark.parametrize("name", TOKENIZERS)
def test_offsets_from_one_encoding_match_the_tokens_bytes(name):
    tok = get_tokenizer(name)
    ids, starts = tok.encode_with_starts(TRICKY)
    assert ids.tolist() == tok.encode(TRICKY)
    assert starts.tolist() == _reference_starts(tok, TRICKY)
    assert tok.count(TRICKY) == len(tok.encode(TRICKY))
    # spans of many ranges at once equal one at a time
    rnd = random.Random(1)
    ranges = sorted((a, a + rnd.randrange(1, 40)) for a in (rnd.randrange(0, len(TRICKY) - 40) for _ in range(200)))
    assert tok.token_spans(starts, ranges) == [list(tok.token_span(starts.tolist(), a, b)) for a, b in ranges]


def test_tiktoken_count_reads_special_token_text_as_text(tiktoken_enc):
    tok = get_tokenizer("cl100k_base")
    text = "a <|endoftext|> b <|fim_prefix|>"
    assert tok.count(text) == len(tiktoken_enc("cl100k_base").encode_ordinary(text))
    assert tok.count_batch([text, "", "x"]) == [tok.count(text), 0, 1]


# ------------------------------------------------------------------------------------------------ count store
def _texts(n: int, seed: int = 0) -> list[str]:
    rnd = random.Random(seed)
    words = ["flight", "宋元", "12,345", "Ünïcödé", "delay", "LGA", "😀", "-7.5"]
    return [" ".join(rnd.choice(words) for _ in range(rnd.randrange(1, 30))) + "\n" for _ in range(n)]


class _Counting:
    """A tokenizer wrapper that records how many texts it was asked to count."""

    def __init__(self, tok):
        self.tok, self.asked = tok, 0
        self.cache_key, self.name = tok.cache_key, tok.name

    def count_batch(self, texts):
        self.asked += len(texts)
        return self.tok.count_batch(texts)


def test_count_store_keeps_counts_across_processes_and_reads_them_exactly(tmp_path, tiktoken_enc):
    enc = tiktoken_enc("cl100k_base")
    tok = get_tokenizer("cl100k_base")
    texts = _texts(3000) + _texts(10)  # repeats counted once
    truth = [len(enc.encode_ordinary(t)) for t in texts]
    first = _Counting(tok)
    c1 = tc.TokenCounter(first, "ns", root=tmp_path, disk=True)
    assert c1.counts(texts) == truth
    assert first.asked == len(set(texts))
    c1.flush()
    # a new counter (another process) reads them all from the files
    again = _Counting(tok)
    c2 = tc.TokenCounter(again, "ns", root=tmp_path, disk=True)
    assert c2.counts(list(reversed(texts))) == list(reversed(truth))
    assert again.asked == 0 and c2.misses == 0
    # new texts are counted, old ones read; another namespace does not see these files
    more = _texts(50, seed=9)
    assert c2.counts(texts[:5] + more) == truth[:5] + [len(enc.encode_ordinary(t)) for t in more]
    assert again.asked == len(set(more) - set(texts))
    other = _Counting(tok)
    assert tc.TokenCounter(other, "other", root=tmp_path, disk=True).counts(texts[:20]) == truth[:20]
    assert other.asked == len(set(texts[:20]))


def test_threads_counting_at_once_get_the_counts_alone(tmp_path, tiktoken_enc):
    """Threads building contexts at once share one counter; they tokenize outside its lock and every count is
    the text's own."""
    from concurrent.futures import ThreadPoolExecutor

    enc = tiktoken_enc("cl100k_base")
    tok = get_tokenizer("cl100k_base")
    texts = _texts(4000)
    truth = {t: len(enc.encode_ordinary(t)) for t in texts}
    c = tc.TokenCounter(tok, "threads", root=tmp_path, disk=True)
    parts = [texts[i::3] + texts[: 200] for i in range(6)]  # overlapping batches
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(c.counts, parts))
    assert all(g == [truth[t] for t in p] for g, p in zip(got, parts))
    assert c.misses >= len(set(texts))  # (a text missed by two threads at once is counted by both)
    c.flush()
    again = _Counting(tok)
    assert tc.TokenCounter(again, "threads", root=tmp_path, disk=True).counts(texts) == [truth[t] for t in texts]
    assert again.asked == 0


def test_holobench_contexts_on_one_or_several_threads_are_the_same(spider_db, tmp_path, monkeypatch):
    """Contexts built on several threads (CTXBENCH_BUILD_THREADS) and with the helper process off write the bytes
    of a build on one thread."""
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    cfg = HoloBenchConfig(db=str(spider_db("wine_1")), lengths=[1024, 2048, 4096], positions=["uniform", "end"], seed=5)
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home1"))
    monkeypatch.setenv("CTXBENCH_BUILD_THREADS", "1")
    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")
    one = build_holobench(cfg, tmp_path / "one")
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home2"))
    monkeypatch.setenv("CTXBENCH_BUILD_THREADS", "4")
    monkeypatch.setenv("CTXBENCH_SIDECAR", "on")
    four = build_holobench(cfg, tmp_path / "four")
    assert one.build_hash == four.build_hash and one.n_instances == four.n_instances > 0
    assert _tree(tmp_path / "one") == _tree(tmp_path / "four")


def test_processes_writing_the_store_at_once(tmp_path):
    """Four processes count overlapping texts into one store at the same moment: none fails or waits, and a fifth
    reads every count without tokenizing."""
    import subprocess
    import sys

    code = ("import sys; from ctxbench.tokenizers import get_tokenizer; from ctxbench.tokenizers.counts import "
            "TokenCounter; from tests_texts import texts; i = int(sys.argv[1]); "
            "c = TokenCounter(get_tokenizer('cl100k_base'), 'ns', root=sys.argv[2], disk=True); "
            "c.counts(texts()[i * 300: i * 300 + 600]); c.flush()")
    (tmp_path / "tests_texts.py").write_text(
        "import random\n"
        "def texts():\n"
        "    rnd = random.Random(0)\n"
        "    return [' '.join(str(rnd.random()) for _ in range(rnd.randrange(1, 9))) + '\\n' for _ in range(1500)]\n")
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parent.parent}"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i), str(tmp_path / "store")], env=env,
                              stderr=subprocess.PIPE) for i in range(4)]
    assert all(p.wait(timeout=300) == 0 for p in procs), [p.stderr.read() for p in procs]
    sys.path.insert(0, str(tmp_path))
    try:
        from tests_texts import texts
    finally:
        sys.path.remove(str(tmp_path))
    tok = get_tokenizer("cl100k_base")
    probe = _Counting(tok)
    t = texts()[:1500]
    assert tc.TokenCounter(probe, "ns", root=tmp_path / "store", disk=True).counts(t) == [tok.count(x) for x in t]
    assert probe.asked == 0


def test_count_store_compacts_and_skips_damaged_files(tmp_path, caplog, monkeypatch):
    tok = get_tokenizer("o200k_base")
    texts = _texts(40 * (tc.COMPACT_AT + 2), seed=3)
    compact_at = tc.COMPACT_AT
    monkeypatch.setattr(tc, "COMPACT_AT", 10**6)
    for i in range(compact_at + 2):  # one file per flush
        c = tc.TokenCounter(tok, "ns", root=tmp_path, disk=True)
        c.counts(texts[i * 40:(i + 1) * 40])
        c.flush()
    monkeypatch.setattr(tc, "COMPACT_AT", compact_at)
    d = tc.TokenCounter(tok, "ns", root=tmp_path, disk=True).dir
    assert len(list(d.glob("part-*.parquet"))) == tc.COMPACT_AT + 2
    (d / "part-99999999999999999999-0-bad.parquet").write_bytes(b"not parquet")
    probe = _Counting(tok)
    c = tc.TokenCounter(probe, "ns", root=tmp_path, disk=True)
    with caplog.at_level(logging.WARNING):
        assert c.counts(texts) == [tok.count(t) for t in texts]
    assert probe.asked == 0
    assert "not readable" in caplog.text
    parts = [p for p in d.glob("part-*.parquet") if "bad" not in p.name]
    assert len(parts) == 1  # merged into one file on that load
    assert pq.read_table(parts[0]).num_rows == len(set(texts))


def test_count_store_off_writes_nothing(tmp_path, monkeypatch, tiktoken_enc):
    monkeypatch.setenv("CTXBENCH_COUNT_CACHE", "off")
    c = tc.TokenCounter(get_tokenizer("cl100k_base"), "ns", root=tmp_path)
    assert c.counts(["a b c\n"]) == [len(tiktoken_enc("cl100k_base").encode_ordinary("a b c\n"))] == [4]
    c.flush()
    assert not any(tmp_path.rglob("*.parquet"))


def test_unwritable_store_counts_anyway(tmp_path, caplog):
    blocker = tmp_path / "store"
    blocker.write_text("a file where the directory should be")
    c = tc.TokenCounter(get_tokenizer("cl100k_base"), "ns", root=blocker, disk=True)
    with caplog.at_level(logging.WARNING):
        assert c.counts(["one two\n"]) == [get_tokenizer("cl100k_base").count("one two\n")]
        c.flush()
    assert "cannot be written" in caplog.text


# ------------------------------------------------------------------------------------------------ streams
def _pool_units(n: int, tag: str):
    rnd = random.Random(len(tag))
    texts = [f"{tag} row {i} " + "word " * rnd.randrange(1, 60) for i in range(n)]
    return lambda k: Unit(texts[k], tag == "rel", (tag, k))


@pytest.mark.parametrize("budget", [0, 7, 300, 5000, 40_000, 10**7])
def test_look_ahead_draws_what_one_at_a_time_draws(budget, tmp_path, monkeypatch):
    """take_until over a look-ahead stream takes the same units as over a generator drawing one unit at a time,
    and leaves the shared RNG in the same state (so the distractors drawn next are the same too)."""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path))
    tok = get_tokenizer("cl100k_base")
    rel, dis = _pool_units(900, "rel"), _pool_units(400, "dis")
    dummy = ["dummy document one.", "dummy document two, a little longer than the first."]

    def one_at_a_time():
        rng = random.Random(42)
        r, used = take_until((rel(k) for k in sample_without_replacement(900, rng)), budget, tok)
        d, used_d = take_until(chain((dis(k) for k in sample_without_replacement(400, rng)), cycle_units(dummy)),
                               budget, tok)
        return r, used, d, used_d, rng.random()

    def look_ahead():
        rng = random.Random(42)
        r, used = take_until(SampledUnits(900, rng, rel), budget, tok)
        d, used_d = take_until(ChainedUnits(SampledUnits(400, rng, dis), CycledUnits(dummy)), budget, tok)
        return r, used, d, used_d, rng.random()

    a, b = one_at_a_time(), look_ahead()
    assert [u.text for u in a[0]] == [u.text for u in b[0]] and a[1] == b[1]
    assert [u.text for u in a[2]] == [u.text for u in b[2]] and a[3] == b[3]
    assert [u.tokens for u in a[0] + a[2]] == [u.tokens for u in b[0] + b[2]]
    assert a[4] == b[4]


def test_sampled_units_peek_does_not_draw():
    rng = random.Random(5)
    s = SampledUnits(50, rng, lambda k: Unit(str(k), False))
    state = rng.getstate()
    first = [u.text for u in s.peek(30)]
    assert rng.getstate() == state
    s.advance(10)
    assert [u.text for u in s.peek(20)] == first[10:30]
    assert [str(k) for k in sample_without_replacement(50, random.Random(5))][:30] == first
    assert len(s.peek(1000)) == 40
    with pytest.raises(ValueError):
        s.advance(41)


@pytest.mark.parametrize("plan", [[(300, 300)], [(300, 1)], [(300, 129), (200, 200), (64, 7)],
                                  [(1, 1), (128, 128), (129, 127), (400, 0), (400, 256), (50, 50)],
                                  [(1000, 1000)], [(700, 640), (700, 700)]])
def test_sampled_units_advance_lands_where_one_at_a_time_does(plan):
    """Peek ``p`` units then draw ``k`` of them, repeatedly (``plan``), across the state snapshots the stream keeps
    every SNAP_EVERY draws: the units and the shared RNG's state equal those of drawing one unit at a time."""
    n = 600
    rng = random.Random(11)
    s = SampledUnits(n, rng, lambda k: Unit(str(k), False))
    got: list[str] = []
    for peek, k in plan:
        ahead = [u.text for u in s.peek(peek)]
        k = min(k, len(ahead))
        s.advance(k)
        got += ahead[:k]
    ref_rng = random.Random(11)
    ref = sample_without_replacement(n, ref_rng)
    assert got == [str(next(ref)) for _ in got]
    assert rng.getstate() == ref_rng.getstate()
    assert rng.random() == ref_rng.random()


def test_sampled_units_make_many_gives_the_units_of_make():
    made: list[list[int]] = []

    def many(ks):
        made.append(list(ks))
        return [Unit(f"u{k}", True, k) for k in ks]

    a = SampledUnits(500, random.Random(3), lambda k: Unit(f"u{k}", True, k), many)
    b = SampledUnits(500, random.Random(3), lambda k: Unit(f"u{k}", True, k))
    assert [u.text for u in a.peek(300)] == [u.text for u in b.peek(300)]
    assert sum(map(len, made)) == 300  # each unit made once, in batches


# ------------------------------------------------------------------------------------------------ verbalizer
def test_compiled_templates_give_the_text_of_str_format():
    ts = TemplateSet("x", {"t": ["{a} and {b} {{braces}} {a}", "{b}: {c}!", "no fields", "{a}{b}{c}", "{a b} {c}",
                                 "{x.real} {a}"]})
    cols = ["a", "b", "c", "a b", "x"]
    rows = [(1, 2.0, "s", None, 3), (True, 2.5, "{b}", "sp", 1.0), (-0.0, 10**20, "é", 1e-7, 2)]
    for i, row in enumerate(rows * 10):
        k = ts.choose("t", i + 1, 0)
        # a NULL states the missing phrase, "not recorded" by default (issue 22)
        values = {c: "not recorded" if v is None else format_value(v) for c, v in zip(cols, row)}
        if "{x.real}" in ts.templates["t"][k]:
            with pytest.raises(AttributeError):  # str has no .real: the same error as before
                ts.verbalize("t", cols, row, i + 1, 0)
            continue
        assert ts.verbalize("t", cols, row, i + 1, 0) == ts.templates["t"][k].format(**values)


def test_verbalize_many_gives_the_sentences_of_verbalize():
    """The batch verbalizer (compiled templates and the seed's hash prefix once per batch) writes each row's
    sentence exactly as verbalize does, also where a template falls back to str.format."""
    ts = TemplateSet("x", {"t": ["{a} and {b} {{braces}} {a}", "{b}: {c}!", "no fields", "{a}{b}{c}", "{c} {a}"],
                           "u": ["{a b} {c}", "{c}"], "v": ["{a[0]}-{c}", "{b}"]})  # v: str.format's own lookup
    cols = ["a", "b", "c", "a b"]
    rows = [(1, 2.0, "s", None), (True, 2.5, "{b}", "sp"), (-0.0, 10**20, "é", 1e-7), (None, float("nan"), 3, 0)]
    rows = rows * 30
    for seed in (0, 7, 123456789):
        for table in ("t", "u", "v"):
            rowids = [3 * i + 1 for i in range(len(rows))]
            assert ts.verbalize_many(table, cols, rows, rowids, seed) == [
                ts.verbalize(table, cols, r, i, seed) for r, i in zip(rows, rowids)]


# ------------------------------------------------------------------------------------------------ prepared source
def _tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


@pytest.mark.slow
def test_holobench_rebuild_from_caches_is_byte_identical(spider_db, tmp_path, monkeypatch):
    """A build on empty caches, a build on full ones (source neither parsed nor preprocessed, unit counts read)
    and a build with caches off write the same bytes and the same build hash."""
    from ctxbench.sources import loaders
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench
    from ctxbench.tracks.holobench import source as source_mod

    db = tmp_path / "wine_1.sqlite"
    shutil.copyfile(spider_db("wine_1"), db)
    cfg = HoloBenchConfig(db=str(db), lengths=[1024, 4096], positions=["uniform", "bimodal"])
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    cold = build_holobench(cfg, tmp_path / "cold")
    assert any((tmp_path / "home" / "cache" / "token_counts").rglob("part-*.parquet"))

    def refuse(*a, **k):
        raise AssertionError("a warm rebuild must not load or preprocess the source")

    with monkeypatch.context() as m:
        m.setattr(source_mod, "preprocess", refuse)
        m.setattr(source_mod, "load_database", refuse)
        m.setattr(loaders, "load_sqlite", refuse)
        warm = build_holobench(cfg, tmp_path / "warm")
    monkeypatch.setenv("CTXBENCH_COUNT_CACHE", "off")
    monkeypatch.setenv("CTXBENCH_PREPARED_CACHE", "off")
    monkeypatch.setenv("CTXBENCH_LANGUAGE_CACHE", "off")
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home2"))
    off = build_holobench(cfg, tmp_path / "off")
    assert cold.build_hash == warm.build_hash == off.build_hash
    assert _tree(tmp_path / "cold") == _tree(tmp_path / "warm") == _tree(tmp_path / "off")
    assert not (tmp_path / "home2" / "cache").exists()


def test_prepared_source_follows_the_files(spider_db, tmp_path, monkeypatch):
    """A changed database file or query set is prepared again (never read stale from the cache); a damaged cache
    entry is prepared again too."""
    import sqlite3

    from ctxbench.core.buildcache import PAYLOAD
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    db = tmp_path / "wine_1.sqlite"
    shutil.copyfile(spider_db("wine_1"), db)
    cfg = HoloBenchConfig(db=str(db), lengths=[1024])
    a = build_holobench(cfg, tmp_path / "a")
    con = sqlite3.connect(db)
    con.execute("UPDATE wine SET Price = Price + 1")
    con.commit()
    con.close()
    b = build_holobench(cfg, tmp_path / "b")
    assert a.build_hash != b.build_hash
    with sqlite3.connect(tmp_path / "b" / "source.sqlite") as c1, sqlite3.connect(tmp_path / "a" / "source.sqlite") as c0:
        assert sum(r[0] or 0 for r in c1.execute("SELECT Price FROM wine")) == \
            sum(r[0] or 0 for r in c0.execute("SELECT Price FROM wine")) + c0.execute("SELECT COUNT(Price) FROM wine").fetchone()[0]
    for f in (tmp_path / "home" / "cache" / "prepared").rglob(PAYLOAD):
        f.write_bytes(b"damaged")
    c = build_holobench(cfg, tmp_path / "c")
    assert c.build_hash == b.build_hash and _tree(tmp_path / "c") == _tree(tmp_path / "b")


# ------------------------------------------------------------------------------------------------ 10M tiers
def test_lengths_accept_ten_million_tokens():
    """--lengths accepts up to 10M tokens (10,000,000 and the CLI's 10m = 10,485,760) in every building track, and
    names the bound beyond it."""
    from pydantic import ValidationError

    from ctxbench.cli.options import parse_ints
    from ctxbench.tracks.holobench import HoloBenchConfig
    from ctxbench.tracks.needles.build import NeedlesConfig
    from ctxbench.tracks.scitrek.build import SciTrekConfig

    ten_m = parse_ints("10m", "--lengths")
    assert ten_m == [10 * 1024 * 1024]
    for make in (lambda v: HoloBenchConfig(lengths=v), lambda v: NeedlesConfig(corpus="c", lengths=v),
                 lambda v: SciTrekConfig(pdfs="p", metadata="m", lengths=v)):
        assert make([10_000_000, 1_048_576]).lengths == [1_048_576, 10_000_000]
        assert make(ten_m).lengths == ten_m
        with pytest.raises(ValidationError, match="outside .*10485760"):
            make([ten_m[0] + 1])
