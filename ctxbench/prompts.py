"""Prompt rendering: the context first and the question last (shared prefix for providers' prompt caches).

Each benchmark may have its own prompt file ``assets/prompts/<benchmark>.yaml`` (else ``default.yaml``) with the
keys of ``default.yaml``; ``intro_<context_format>`` (e.g. ``intro_tables``) replaces ``intro_lc`` for instances of
that context format."""

from __future__ import annotations

from functools import lru_cache

import yaml

from .config import assets_dir
from .errors import InputError

VARIANTS = ("cot", "direct")


@lru_cache(maxsize=16)
def _prompts(name: str = "default") -> dict:
    path = assets_dir() / "prompts" / f"{name}.yaml"
    if name != "default" and not path.exists():
        return _prompts("default")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def render_messages(context: str, question: str, variant: str = "cot", model: str = "", rag: bool = False,
                    benchmark: str | None = None, context_format: str | None = None) -> list[dict]:
    """Chat messages for one instance, from the benchmark's prompt file (module docstring). For Anthropic models
    the document part is marked cacheable (``cache_control``), which their API requires for prompt caching; other
    providers cache prefixes themselves. ``rag``: ``context`` holds retrieved passages (RAG mode), and the prompt
    says so (``intro_rag``); otherwise the intro is ``intro_<context_format>`` where the file has one, else
    ``intro_lc``."""
    if variant not in VARIANTS:
        raise InputError(f"unknown prompt variant {variant!r}: use {' or '.join(VARIANTS)}")
    p = _prompts(benchmark or "default")
    intro = p["intro_rag"] if rag else p.get(f"intro_{context_format}") or p["intro_lc"]
    text = p[variant].format(intro=intro, context=context, question=question)
    msgs = [{"role": "system", "content": p["system"].strip()}]
    if model.startswith("anthropic/") or model.startswith("claude"):
        cut = text.index("</document>") + len("</document>")
        msgs.append({"role": "user", "content": [
            {"type": "text", "text": text[:cut], "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": text[cut:]}]})
    else:
        msgs.append({"role": "user", "content": text})
    return msgs


def messages_text(messages: list[dict]) -> str:
    """All text of the messages, for counting prompt tokens."""
    parts = []
    for m in messages:
        c = m["content"]
        parts.append(c if isinstance(c, str) else "".join(b.get("text", "") for b in c))
    return "\n".join(parts)
