"""Verbalization: a table row becomes a sentence through one of its table's templates."""

from ctxbench.verbalize.templates import TemplateSet, format_value, load_templates

__all__ = ["TemplateSet", "format_value", "load_templates"]
