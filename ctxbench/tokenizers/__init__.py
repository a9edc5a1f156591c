"""Tokenizer registry: name -> tokenizer with ``encode``, ``decode``, ``count`` and token offsets."""

from .registry import Tokenizer, available_tokenizers, get_tokenizer

__all__ = ["Tokenizer", "available_tokenizers", "get_tokenizer"]
