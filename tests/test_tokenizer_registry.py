"""Every registered tokenizer loads offline, round-trips text and locates tokens in it."""

from __future__ import annotations

import unicodedata

import pytest

from ctxbench.core.errors import TokenizerError
from ctxbench.tokenizers import available_tokenizers, get_tokenizer

def nfkc(s: str) -> str:
    return unicodedata.normalize("NFKC", s)


TEXT = "The flight left John F Kennedy Intl at 5:17.\n宋元學案，卷一。 Ünïcödé 12,345 tokens."


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "deepseek-v3", "claude-legacy", "llama3", "qwen2.5"])
def test_registered_tokenizer_round_trips_and_locates_tokens(name):
    tok = get_tokenizer(name)
    ids, starts = tok.char_starts(TEXT)
    assert ids == tok.encode(TEXT) and tok.count(TEXT) == len(ids) > 10
    # some tokenizer.json files normalise (NFKC: the Claude one turns "，" into ","); compare in that form
    assert nfkc(tok.decode(ids)) == nfkc(TEXT)
    assert starts[0] == 0 and starts == sorted(starts) and all(0 <= s < len(TEXT) for s in starts)
    # the token span of a sentence decodes to text containing it
    a = TEXT.index("宋元學案")
    s, e = tok.token_span(starts, a, a + len("宋元學案，卷一。"))
    assert nfkc("宋元學案，卷一。") in nfkc(tok.decode(ids[s:e]))
    assert tok.file_sha256  # the vocabulary file is identified for build manifests


def test_llama3_ids_of_a_common_phrase():
    # Llama 3's vocabulary keeps cl100k_base's ids for common English tokens ("Hello" 9906, " world" 1917)
    assert get_tokenizer("llama3").encode("Hello world") == [9906, 1917]


def test_unknown_tokenizer_names_the_choices():
    with pytest.raises(TokenizerError, match="cl100k_base"):
        get_tokenizer("no-such-tokenizer")
    assert {"llama3", "qwen2.5", "cl100k_base"} <= set(available_tokenizers())
