"""Answer filters, step 5 of the default chain and the optional ones (:mod:`ctxbench.scoring.pipeline`): ``tidy``
(NFC; echoed prompt tags removed; LaTeX wrappers, math delimiters and Markdown emphasis unwrapped: :func:`unwrap_latex`;
spaces collapsed), ``strip_code_fences`` (the judges' replies) and the filters a track may add (``first_line``,
``fold_width``, ``strip_trailing_period``)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from ctxbench.core.config import assets_dir
from ctxbench.scoring.extract import brace_content
from ctxbench.scoring.filters import AnswerContext, register_filter

__all__ = ["first_line", "fold_width", "strip_code_fences", "strip_trailing_period", "tidy", "unwrap_latex"]


# -- 5. tidy ---------------------------------------------------------------------------------------------------------

_WRAPPERS = re.compile(r"\\(?:boxed|fbox|text|textbf|mathrm|mbox)\s*\{")
_MATH_DOLLARS = re.compile(r"\$\$?([^$\n]+?)\$\$?")
_MATH_PARENS = re.compile(r"\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)


def _unwrap(text: str) -> str:
    while True:
        m = _WRAPPERS.search(text)
        if m is None:
            return text
        inner = brace_content(text, m.end())
        if inner is None:
            return text[:m.start()] + text[m.end():]
        text = text[:m.start()] + inner[0] + text[inner[1]:]


def unwrap_latex(text: str) -> str:
    """LaTeX wrappers unwrapped as ``tidy`` does: ``\\(x\\)`` / ``\\[x\\]`` delimiters, ``\\text{x}``,
    ``\\textbf{x}``, ``\\mathrm{x}``, ``\\boxed{x}``… and ``$x$`` math spans (prices such as ``$3 and $5`` kept).
    :func:`ctxbench.scoring.normalize.normalize_text` applies it to gold and answer alike, so a gold title holding
    ``$…$`` or ``\\text{}`` compares equal to a reply that repeats it."""
    text = _MATH_PARENS.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _unwrap(text)
    return _MATH_DOLLARS.sub(_math, text)


def _math(m: re.Match) -> str:
    inner = m.group(1)
    # a math span ($x$, $9{,}500$); "$3 and $5" (prices) is no math span: keep it as written
    if "\\" in inner or "{" in inner or re.fullmatch(r"[\s\d.,+\-−^*/=()%]+", inner):
        return inner
    return m.group(0)


# tags that delimit the parts of a prompt (the context, the question): a model that echoes them ("Answer: 42
# </document>", "<document>42</document>", the answer followed by "<question>...") put no answer in them
_PROMPT_TAGS = ("document", "documents", "context", "passage", "passages", "question", "query")


@lru_cache(maxsize=1)
def _prompt_tag_res() -> tuple[re.Pattern, re.Pattern]:
    """(an opening prompt tag, any prompt tag): the names above plus every tag that one of the prompt files
    (``assets/prompts/*.yaml``) both opens and closes."""
    names = set(_PROMPT_TAGS)
    for f in sorted((assets_dir() / "prompts").glob("*.yaml")):
        body = f.read_text(encoding="utf-8")
        names |= {n for n in re.findall(r"<([A-Za-z][\w-]*)>", body) if f"</{n}>" in body}
    alt = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return (re.compile(rf"<(?:{alt})(?:\s[^<>]*)?>", re.IGNORECASE),
            re.compile(rf"</?(?:{alt})(?:\s[^<>]*)?>", re.IGNORECASE))


def _strip_prompt_tags(text: str) -> str:
    """The answer without echoed prompt delimiters: cut at an opening one that follows the answer (the model went
    on to repeat the prompt), then drop the others."""
    opening, any_tag = _prompt_tag_res()
    for m in opening.finditer(text):
        if any_tag.sub("", text[:m.start()]).strip():
            text = text[:m.start()]
            break
    return any_tag.sub(" ", text)


@register_filter("tidy", version="2")
def tidy(text: str, ctx: AnswerContext) -> str:
    """NFC; the prompt's own delimiter tags that the model echoed removed (``</document>``, ``<question>``...: see
    :data:`_PROMPT_TAGS`); LaTeX wrappers, math delimiters and Markdown emphasis unwrapped; spaces collapsed, ends
    trimmed."""
    text = unicodedata.normalize("NFC", text)
    text = _strip_prompt_tags(text)
    text = unwrap_latex(text)
    text = re.sub(r"\*\*|__", "", text)
    s = text.strip()
    if len(s) > 1 and s[0] == s[-1] and s[0] in "`*_":
        s = s.strip(s[0])
    lines = [" ".join(ln.split()) for ln in s.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


# -- code fences (judge replies) ------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)


@register_filter("strip_code_fences")
def strip_code_fences(text: str, ctx: AnswerContext) -> str:
    """Markdown code fences unwrapped (````json\n{…}\n````→ ``{…}``), the text around them kept: what a judge that
    fences its JSON means."""
    return _FENCE.sub(lambda m: m.group(1), text).strip()


# -- filters a track may add -----------------------------------------------------------------------------------------

@register_filter("first_line")
def first_line(text: str, ctx: AnswerContext) -> str:
    """The first non-empty line of the answer (for tracks whose answers are one line)."""
    for ln in text.splitlines():
        if ln.strip():
            return ln.strip()
    return ""


@register_filter("fold_width")
def fold_width(text: str, ctx: AnswerContext) -> str:
    """NFKC: full-width and compatibility forms (ＡＢＣ, １２３, ：) to their plain forms."""
    return unicodedata.normalize("NFKC", text)


@register_filter("strip_trailing_period")
def strip_trailing_period(text: str, ctx: AnswerContext) -> str:
    """Remove a full stop (``.``, ``。``) ending the answer."""
    return re.sub(r"[.。]+\s*$", "", text)
