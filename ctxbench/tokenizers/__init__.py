"""Tokenizer registry: name -> tokenizer with ``encode``, ``decode``, ``count`` and token offsets."""

from ctxbench.tokenizers.registry import Tokenizer, available_tokenizers, get_tokenizer

__all__ = ["Tokenizer", "available_tokenizers", "get_tokenizer"]
