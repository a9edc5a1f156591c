"""``--help`` that can be read at any terminal width and in a pipe (issue 32 item 5).

Typer's rich help puts each option in a table of seven columns whose widths rich shrinks proportionally when the
terminal is narrow, so a long option name is cut (``--prompt-varia…``) while the help column wraps to a few words
a line (``evaluate --help`` ran to 186 lines at 80 columns). :func:`install` replaces, in ``typer.rich_utils``,
the function that prints one panel of options with :func:`print_options_panel`, which never cuts a name:

* the names (``--flag``, its short form, a ``--no-flag`` on its own line) sit in a column as wide as the longest
  name of the panel, which is never wrapped nor shrunk; the type (``<int range> [x>=1]``) opens the help text;
* where a name column and a help column of at least :data:`MIN_HELP` characters do not fit side by side, each
  option's help goes on the lines under its name, indented; where even a name does not fit in a box, the panel
  is printed without its box.

It also wraps ``rich_format_help`` so that a command with more than :data:`GROUP_FROM` options shows them in
titled panels (what to evaluate, the model to call, retrieval, budgets and cost, statistics, output...), chosen
by option name in :data:`PANELS` unless the option was declared with its own ``rich_help_panel``; the other
options stay in "Options". A command's one-line summary in a group's help folds a word wider than its column
instead of cutting it.

In typer's ``rich`` markup mode a command's docstring keeps the line breaks of its source in a group's list of
commands and in the paragraphs after its first (typer's own test of that mode asserts it), so a summary written
over several source lines was printed as ragged lines, broken mid-sentence. :func:`reflow` makes each paragraph
one line before rich wraps it to the terminal: paragraphs (a blank line between them) and click's ``\\b``
blocks (an example's lines, printed as written) stay as they are; options' help was already reflowed by typer.
Nothing else of the help changes.
"""

from __future__ import annotations

import inspect
from typing import Any

from rich import box
from rich.columns import Columns
from rich.console import Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer import rich_utils as ru
from typer.core import TyperArgument

MIN_HELP = 28  # the narrowest help column worth having beside the names (characters)
GROUP_FROM = 8  # commands with more options than this show them in panels

SELECT, MODEL, RAG, COST, STATS, OUTPUT, SOURCE, CONTEXTS = (
    "What to evaluate", "Model to call", "Retrieval (RAG)", "Budgets and cost", "Statistics", "Output",
    "Source data", "Contexts and lengths")
REPL = "REPL (--mode repl)"
PANELS: dict[str, str] = {
    # what to evaluate: which build and which of its instances
    "--build": SELECT, "--per-length": SELECT, "--language": SELECT, "--question-language": SELECT,
    "--min-context-tokens": SELECT, "--max-context-tokens": SELECT, "--exclude-closed-book": SELECT,
    "--prompt-variant": SELECT, "--runs": SELECT, "--benchmarks": SELECT, "--dry-run": SELECT,
    # the model to call and how
    "--model": MODEL, "--base-url": MODEL, "--api-key-env": MODEL, "--concurrency": MODEL, "--samples": MODEL,
    "--temperature": MODEL, "--reasoning-effort": MODEL, "--max-retry-after": MODEL, "--batch": MODEL,
    "--batch-poll": MODEL, "--batch-wait": MODEL, "--engine": MODEL, "--judge": MODEL, "--judge-prompt": MODEL,
    "--judge-base-url": MODEL, "--judge-api-key-env": MODEL, "--question-model": MODEL,
    "--question-base-url": MODEL, "--question-api-key-env": MODEL, "--max-attempts": MODEL, "--workers": MODEL,
    # retrieval
    "--mode": RAG, "--rag-tokens": RAG, "--chunk-tokens": RAG, "--chunk-overlap": RAG, "--top-k": RAG,
    "--retriever": RAG, "--embedding-model": RAG,
    # the context as an environment (ctxbench.run.repl)
    "--sub-model": REPL, "--max-steps": REPL, "--sandbox": REPL, "--step-timeout": REPL, "--step-memory": REPL,
    "--repl-max-tokens": REPL, "--repl-max-cost": REPL,
    # budgets and cost
    "--max-tokens": COST, "--thinking-budget": COST, "--output-budget": COST, "--max-cost": COST, "--price": COST,
    # statistics
    "--target-ci": STATS, "--adaptive-calls": STATS, "--accuracy": STATS, "--mde": STATS, "--power": STATS, "--alpha": STATS,
    "--pilot": STATS, "--models": STATS, "--threshold": STATS, "--regime": STATS,
    # output
    "--out": OUTPUT, "--force": OUTPUT, "--json": OUTPUT, "--format": OUTPUT, "--test-fraction": OUTPUT,
    # a build's sources and contexts
    "--db": SOURCE, "--queries": SOURCE, "--pdfs": SOURCE, "--metadata": SOURCE, "--unarxive": SOURCE,
    "--markdown": SOURCE, "--s2orc": SOURCE, "--corpus": SOURCE, "--data": SOURCE, "--needles": SOURCE,
    "--local": SOURCE, "--source-data": SOURCE,
    "--tokenizer": CONTEXTS, "--tokenizers": CONTEXTS, "--lengths": CONTEXTS, "--setting": CONTEXTS,
    "--amount-tokens": CONTEXTS, "--density": CONTEXTS, "--position": CONTEXTS, "--fill": CONTEXTS,
    "--depths": CONTEXTS, "--chain-depths": CONTEXTS, "--boundary": CONTEXTS, "--seed": CONTEXTS,
    "--distractors": CONTEXTS, "--integer-division": SOURCE,
}


def reflow(text: str) -> str:
    """``text`` (a command's help, a docstring) with each paragraph on one line: the lines of a paragraph joined
    by single spaces, paragraphs separated by one blank line, a paragraph that starts with click's ``\\b`` marker
    kept line for line (its indentation too, the marker removed). Dedented as typer does
    (``inspect.cleandoc``)."""
    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if para.startswith("\b"):
            out.append(para[1:].lstrip("\n").rstrip())
        else:
            out.append(" ".join(line.strip() for line in para.splitlines() if line.strip()))
    return "\n\n".join(p for p in out if p)


def option_panel(param: Any, n_options: int) -> str | None:
    """The panel title for ``param`` (a click parameter) in the help of a command with ``n_options`` options: the
    one it was declared with (``rich_help_panel``), else :data:`PANELS`'s for its first ``--`` name when the
    command has more than :data:`GROUP_FROM` options, else None (typer's "Options")."""
    own = getattr(param, "rich_help_panel", None)
    if own or n_options <= GROUP_FROM:
        return own
    long = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return PANELS.get(long[0]) if long else None


def _names(param: Any) -> list[str]:
    """The lines of ``param``'s name cell: its names joined by commas, its secondary (``--no-x``) names on a
    second line; an argument's shown name."""
    if isinstance(param, TyperArgument):
        name = param.display_name_raw or param.name or ""
        if param.metavar is None and param.nargs != 1:
            name += "..."
        return [name]
    first = [o for o in param.opts if o.startswith("--")] + [o for o in param.opts if not o.startswith("--")]
    lines = [", ".join(first)]
    if param.secondary_opts:
        lines.append(", ".join(param.secondary_opts))
    return lines


def print_options_panel(*, name: str, params: list, ctx: Any, markup_mode: Any, console: Any) -> None:
    """Print one panel of options (typer's ``_print_options_panel`` signature) so that no name is ever cut:
    side by side (names | type and help) where a help column of :data:`MIN_HELP` characters fits beside the
    longest name, else each help under its name; without a box where a name is wider than the box's inside."""
    if not params:
        return
    rows = []
    for param in params:
        names = _names(param)
        t = param.display_type_rich(ctx=ctx) if hasattr(param, "display_type_rich") else None
        rng = param._get_number_range_help_str() if hasattr(param, "_get_number_range_help_str") else ""
        kind = (t or "") + (ru.RANGE_STRING.format(rng) if rng else "")
        if getattr(param, "is_flag", False):
            kind = ""  # a flag's <bool> says nothing its name does not
        items = list(ru._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode).renderables)
        if kind:
            items.insert(0, Text(kind, style=ru.STYLE_TYPES))
        if all(isinstance(i, Text) for i in items):  # one paragraph: type, help, default, required
            helptext: Any = Text(" ").join(items)
            helptext.overflow = "fold"  # a word wider than the column is folded, never cut with an ellipsis
        else:  # markdown help: rich's own columns
            helptext = Columns(items)
        star = ru.REQUIRED_SHORT_STRING if param.required else " "
        rows.append((star, names, helptext))
    name_w = max(len(line) for _, names, _ in rows for line in names)
    width = console.width
    inside = width - 4  # a panel's two borders and their padding
    star_w = 2
    boxed = inside >= star_w + name_w

    def cell(names: list[str], indent: str = "") -> Text:
        out = Text(no_wrap=True, overflow="ignore")
        for i, line in enumerate(names):
            if i:
                out.append("\n" + indent)
            out.append(line, style=ru.STYLE_NEGATIVE_OPTION if i else ru.STYLE_OPTION)
        return out

    if boxed and inside - star_w - name_w - 2 >= MIN_HELP:  # side by side
        table = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False, expand=True)
        table.add_column(no_wrap=True, width=1)
        table.add_column(no_wrap=True, min_width=name_w, max_width=name_w, overflow="ignore")
        table.add_column(ratio=1)
        for star, names, helptext in rows:
            table.add_row(Text(star, style=ru.STYLE_REQUIRED_SHORT), cell(names), helptext)
        body: Any = table
    else:  # each help under its name
        parts = []
        for star, names, helptext in rows:
            head = Text(star + " ", style=ru.STYLE_REQUIRED_SHORT, no_wrap=True, overflow="ignore")
            head.append_text(cell(names, " " * len(head)))
            parts += [head, Padding(helptext, (0, 0, 0, 6))]
        body = Group(*parts)
    if boxed:
        console.print(Panel(body, border_style=ru.STYLE_OPTIONS_PANEL_BORDER, title=name,
                            title_align=ru.ALIGN_OPTIONS_PANEL, box=box.ROUNDED))
    else:
        console.print(Text(name, style="bold"))
        console.print(body, crop=False, overflow="ignore")


def install() -> None:
    """Put :func:`print_options_panel` and the panel grouping into ``typer.rich_utils`` (idempotent; a typer
    without these functions keeps its own help)."""
    if getattr(ru, "_ctxbench_help", False) or not hasattr(ru, "_print_options_panel"):
        return
    original = ru.rich_format_help

    def rich_format_help(*, obj, ctx, markup_mode):
        params = [p for p in obj.get_params(ctx) if getattr(p, "param_type_name", "") == "option"
                  and not getattr(p, "hidden", False)]
        for p in params:
            panel = option_panel(p, len(params))
            if panel:
                p.rich_help_panel = panel
        return original(obj=obj, ctx=ctx, markup_mode=markup_mode)

    command_help = ru._make_command_help
    fix_linebreaks = getattr(ru, "_fix_linebreaks", None)

    def make_command_help(**kw):
        if kw.get("markup_mode") == ru.MARKUP_MODE_RICH and kw.get("help_text"):
            kw["help_text"] = reflow(kw["help_text"])  # a summary over several source lines: one paragraph
        text = command_help(**kw)
        if hasattr(text, "overflow"):
            text.overflow = "fold"  # a command's summary: a long word (a file name) folded, not cut
        return text

    def reflowed_linebreaks(paragraphs, markup_mode):
        if markup_mode == ru.MARKUP_MODE_RICH:  # a description's paragraphs after its first, and the epilog
            return reflow("\n\n".join(paragraphs))
        return fix_linebreaks(paragraphs, markup_mode)

    if fix_linebreaks is not None:
        ru._fix_linebreaks = reflowed_linebreaks
    ru._make_command_help = make_command_help
    ru._print_options_panel = print_options_panel
    ru.rich_format_help = rich_format_help
    ru._ctxbench_help = True
