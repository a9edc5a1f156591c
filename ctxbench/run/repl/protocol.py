"""The REPL protocol of ``evaluate --mode repl``: the context read as an environment, after Recursive Language
Models (Zhang, Kraska & Khattab, arXiv 2512.24601): the root model never sees the context in its prompt. It is told
that a Python variable ``context`` holds it (its length in characters and tokens given), that ``llm_query(prompt)``
and ``llm_query_batched(prompts)`` ask a sub-model, and that ``FINAL(value)`` or ``FINAL_VAR(name)`` ends with the
answer. It answers with code in fenced ```` ```repl ```` (or ```` ```python ````) blocks; their output, cut to
:data:`OUTPUT_CHARS` characters, comes back as the next user message.

This module holds the words and the parsing (no process, no call): :func:`root_messages` (the first messages),
:func:`code_blocks`, :func:`final_in_text`, :func:`output_message` and :func:`truncate`. The loop that runs them is
:mod:`ctxbench.run.repl.loop`, the process the code runs in :mod:`ctxbench.run.repl.sandbox`.
"""

from __future__ import annotations

import re

OUTPUT_CHARS = 4000  # characters of a step's output shown to the root model (and stored in steps.parquet)

SYSTEM = """You are tasked with answering a query about a long context. You cannot read the context directly: it \
is held by a Python REPL environment, which you use to examine it, transform it and query sub-LLMs about parts of it.

The REPL environment is initialized with:
1. A variable `context` (a str) that holds the whole context, exactly as given. It is too long to print: look at \
it in slices, search it with `re`, split it, and so on.
2. A function `llm_query(prompt: str) -> str` that sends `prompt` to a sub-LLM and returns its reply. The sub-LLM \
sees only the prompt you send, so put the part of the context it needs into the prompt.
3. A function `llm_query_batched(prompts: list[str]) -> list[str]` that sends several prompts at once and returns \
their replies in order (faster than calling `llm_query` in a loop).
4. `print()`: what your code prints is shown to you, cut to {limit} characters.
5. `FINAL(value)`: ends the task with `value` as your answer. `FINAL_VAR(name)` ends it with the value of the \
variable called `name`.

To run code, reply with a fenced block that starts with ```repl (or ```python) and ends with ```. Variables persist \
between blocks. Each block has a time limit of {wall_s:g} seconds and no network access. Work step by step: look at \
the context, then compute the answer in code. When you have it, call FINAL(answer) in a code block, or write \
FINAL(answer) or FINAL_VAR(name) on its own line outside code. Give only the answer to the question as the value, \
every item if there are several."""

USER = """The variable `context` holds a {kind} of {chars:,} characters ({tokens} tokens).

Question: {question}

Write code in a ```repl block to examine `context` and answer the question; end with FINAL(answer)."""

_OPEN = re.compile(r"```(?:repl|python|py)[ \t]*\n", re.IGNORECASE)
_CLOSE = re.compile(r"^[ \t]*```", re.MULTILINE)  # a closing fence starts its line: a ``` inside code does not
_FINAL_VAR = re.compile(r"^[ \t]*FINAL_VAR\(\s*['\"]?([A-Za-z_]\w*)['\"]?\s*\)[ \t]*$", re.MULTILINE)
_FINAL = re.compile(r"^[ \t]*FINAL\((.*)\)[ \t]*$", re.MULTILINE)


def system_prompt(wall_s: float, limit: int = OUTPUT_CHARS) -> str:
    """The root model's system message (module docstring), naming the output limit (characters) and the step's
    wall-clock limit (seconds)."""
    return SYSTEM.format(limit=limit, wall_s=wall_s)


def root_messages(question: str, context_chars: int, context_tokens: int | None, wall_s: float,
                  kind: str = "document", limit: int = OUTPUT_CHARS) -> list[dict]:
    """The first messages of a REPL answer: the system message and a user message with the question and the
    context's size (``context_chars`` characters, ``context_tokens`` tokens in the instance's tokenizer, or
    "unknown"). The context itself is not in them: it is the REPL's ``context`` variable."""
    tokens = f"{context_tokens:,}" if context_tokens is not None else "an unknown number of"
    return [{"role": "system", "content": system_prompt(wall_s, limit)},
            {"role": "user", "content": USER.format(kind=kind, chars=context_chars, tokens=tokens,
                                                    question=question)}]


def _normal(reply: str | None) -> str:
    """The reply with every line ending as ``\n`` (a CRLF reply parses as any other)."""
    return (reply or "").replace("\r\n", "\n").replace("\r", "\n")


def _block_spans(text: str) -> list[tuple[int, int, int, int]]:
    """``(start, code_start, code_end, end)`` of every fenced ```` ```repl ```` / ```` ```python ```` block of
    ``text``: the closing fence is the first line that starts with ```` ``` ```` (so a fence inside a string of
    the code, mid-line, does not end it); a block left open (a reply cut short) runs to the end."""
    spans, pos = [], 0
    while (m := _OPEN.search(text, pos)) is not None:
        c = _CLOSE.search(text, m.end())
        if c is None:
            spans.append((m.start(), m.end(), len(text), len(text)))
            break
        spans.append((m.start(), m.end(), c.start(), c.end()))
        pos = c.end()
    return spans


def code_blocks(reply: str) -> list[str]:
    """The code of every fenced ```` ```repl ```` / ```` ```python ```` block of a reply, in order (line endings
    normalised; a block the reply leaves open runs to its end)."""
    text = _normal(reply)
    return [text[a:b] for _, a, b, _ in _block_spans(text)]


def final_in_text(reply: str) -> tuple[str, str] | None:
    """A ``FINAL(answer)`` or ``FINAL_VAR(name)`` the reply writes on a line of its own outside its code blocks
    and after the last of them (a FINAL written before the code, e.g. the protocol restated, is not an answer):
    ``("value", answer)`` or ``("var", name)``; None when it writes neither. The last one written counts."""
    text = _normal(reply)
    spans = _block_spans(text)
    text = text[spans[-1][3]:] if spans else text
    found: list[tuple[int, tuple[str, str]]] = []
    for m in _FINAL_VAR.finditer(text):
        found.append((m.start(), ("var", m.group(1))))
    for m in _FINAL.finditer(text):
        value = m.group(1).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found.append((m.start(), ("value", value)))
    return max(found)[1] if found else None


def truncate(text: str, limit: int = OUTPUT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit:,} more characters not shown]"


def output_message(outputs: list[str], limit: int = OUTPUT_CHARS) -> str:
    """The user message that hands a step's output (one per code block) back to the root model."""
    if not outputs:
        return ("Your reply had no ```repl code block and no FINAL(...). Write code in a ```repl block, or end "
                "with FINAL(answer).")
    parts = [f"REPL output{f' of block {i + 1}' if len(outputs) > 1 else ''}:\n{truncate(o, limit) or '(nothing printed)'}"
             for i, o in enumerate(outputs)]
    return "\n\n".join(parts)
