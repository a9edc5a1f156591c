"""Context packing: units of text (sentences, documents) into exact token budgets at chosen positions."""

from ctxbench.contexts.packer import MAX_CONTEXT_TOKENS, POSITIONS, PackedContext, Unit, arrange, pack, take_until

__all__ = ["MAX_CONTEXT_TOKENS", "POSITIONS", "PackedContext", "Unit", "arrange", "pack", "take_until"]
