"""Context packing: units of text (sentences, documents) into exact token budgets at chosen positions."""

from .packer import POSITIONS, PackedContext, Unit, arrange, pack, take_until

__all__ = ["POSITIONS", "PackedContext", "Unit", "arrange", "pack", "take_until"]
