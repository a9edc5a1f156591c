"""Prompt rendering: the context first and the question last (shared prefix for providers' prompt caches).

Each benchmark may have its own prompt file ``assets/prompts/<benchmark>.yaml`` (else ``default.yaml``) with the
keys of ``default.yaml``; ``intro_<context_format>`` (e.g. ``intro_tables``) replaces ``intro_lc`` for instances of
that context format. A track's ``prompts`` (``{key: text}``, :class:`ctxbench.core.track.Track`) replace keys of
that file for its instances: how a track defined outside the repository words its prompt."""

from __future__ import annotations

from functools import lru_cache


from ctxbench.core.config import assets_dir
from ctxbench.core.errors import InputError
from ctxbench.core.config import read_yaml
from ctxbench.core.track import find_track
from ctxbench.models.providers import CACHE_HINT_PREFIXES, takes_cache_hint  # noqa: F401 - re-exported

VARIANTS = ("cot", "direct")


@lru_cache(maxsize=16)
def _prompt_file(name: str = "default") -> dict:
    path = assets_dir() / "prompts" / f"{name}.yaml"
    if name != "default" and not path.exists():
        return _prompt_file("default")

    return read_yaml(path, "prompt file")


def _prompts(name: str = "default") -> dict:
    """The prompt keys of a benchmark: its prompt file (else ``default.yaml``) updated by its track's ``prompts``."""
    track = find_track(name) if name != "default" else None
    extra = dict(track.prompts) if track is not None else {}
    return {**_prompt_file(name), **extra} if extra else _prompt_file(name)


def render_messages(context: str, question: str, variant: str = "cot", model: str = "", rag: bool = False,
                    benchmark: str | None = None, context_format: str | None = None) -> list[dict]:
    """Chat messages for one instance, from the benchmark's prompt file (module docstring): a system message and
    one user message whose text is the intro, the context in ``<document>`` tags, then the question, so that all
    requests on one context share the prefix up to ``</document>`` (:func:`shared_prefix`) for providers' prompt
    caches. For a model that takes a cache hint (:func:`takes_cache_hint`) the user message is two content blocks,
    the first (intro and document) marked ``cache_control: ephemeral`` (Anthropic's cache breakpoint); other
    providers cache prefixes themselves. ``rag``: ``context`` holds retrieved passages (RAG mode), and the prompt
    says so (``intro_rag``); otherwise the intro is ``intro_<context_format>`` where the file has one, else
    ``intro_lc``. Raises InputError for an unknown variant."""
    if variant not in VARIANTS:
        raise InputError(f"unknown prompt variant {variant!r}: use {' or '.join(VARIANTS)}")
    p = _prompts(benchmark or "default")
    intro = p["intro_rag"] if rag else p.get(f"intro_{context_format}") or p["intro_lc"]
    text = p[variant].format(intro=intro, context=context, question=question)
    msgs = [{"role": "system", "content": p["system"].strip()}]
    if takes_cache_hint(model):
        cut = _document_end(p[variant], intro, context)
        msgs.append({"role": "user", "content": [
            {"type": "text", "text": text[:cut], "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": text[cut:]}]})
    else:
        msgs.append({"role": "user", "content": text})
    return msgs


def _document_end(template: str, intro: str, context: str) -> int:
    """Offset in the rendered user text just after the context's closing ``</document>`` (after the context itself
    where the template closes no tag): found from the template, so a context that holds ``</document>`` itself
    does not move the cache breakpoint into the context."""
    head, _, tail = template.partition("{context}")
    close = tail.find("</document>")
    after = tail[:close + len("</document>")] if close >= 0 and "{" not in tail[:close] else ""
    return len(head.format(intro=intro)) + len(context) + len(after)


def shared_prefix(messages: list[dict], context: str) -> str:
    """The text every request on ``context`` shares (rendered by :func:`render_messages`): the system message and
    the user text up to the end of the document, joined as :func:`messages_text` joins them; what a provider's
    prompt cache can reuse across the questions of one context. The whole text when the context is not found in
    the user message."""
    text = messages_text(messages)
    at = text.find(context) if context else -1
    if at < 0:
        return text
    end = at + len(context)
    close = "\n</document>"
    return text[:end + len(close)] if text.startswith(close, end) else text[:end]


def messages_text(messages: list[dict]) -> str:
    """All text of the messages, for counting prompt tokens."""
    parts = []
    for m in messages:
        c = m["content"]
        parts.append(c if isinstance(c, str) else "".join(b.get("text", "") for b in c))
    return "\n".join(parts)
