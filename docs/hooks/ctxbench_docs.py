"""MkDocs hooks of the ctxbench site: pages that are generated from the code at build time, so they cannot go stale.

A page holds a marker comment and the hook replaces it with Markdown:

- ``<!-- ctxbench:cli -->``: every command of ``ctxbench`` (the generated ``build <track>`` and ``import <track>``
  ones too), its help text and a table of its options (name, type, default, help), read from the Typer app's click
  commands;
- ``<!-- ctxbench:tables -->``: every stored table of ``schemas/*.schema.json`` with its columns (type, nullable,
  allowed values, description).

``mkdocs build --strict`` fails where a marker's source cannot be read, as on a broken link.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: object) -> str:
    """``text`` as one table cell: on one line, ``|`` escaped outside code spans only (Python-Markdown's tables do
    not split a row at a pipe inside backticks, and print a backslash there literally: `prefect\\|luigi`)."""
    s = str(text).replace("\\[", "[").replace("\n", " ").strip()
    return "".join(part if part.startswith("`") else part.replace("|", "\\|")
                   for part in re.split(r"(`[^`]*`)", s))


def _option_rows(cmd) -> list[str]:
    rows = ["| option | type | default | help |", "|---|---|---|---|"]
    for p in cmd.params:
        if getattr(p, "param_type_name", "") != "option" or p.hidden:
            continue
        names = " / ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
        kind = "flag" if p.is_flag else _cell(f"`{p.display_type(cmd.context_class(cmd))}`")
        default = "required" if p.required else ("" if p.default in (None, "", ()) or callable(p.default)
                                                 else _cell(f"`{p.default}`"))
        rows.append(f"| {names} | {kind} | {default} | {_cell(p.help or '')} |")
    args = [p for p in cmd.params if getattr(p, "param_type_name", "") == "argument"]
    if args:
        rows.insert(0, "Arguments: " + ", ".join(f"`{(a.metavar or a.name).upper()}`" for a in args) + "\n")
    return rows


def cli_markdown() -> str:
    """Markdown of every ``ctxbench`` command: a heading per command path, its help, its options."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    import typer

    from ctxbench.cli import app

    root = typer.main.get_command(app)
    out: list[str] = []

    def walk(cmd, path: list[str]) -> None:
        if hasattr(cmd, "list_commands"):  # a group (Typer vendors click: duck-typed, not isinstance)
            ctx = cmd.context_class(cmd)
            for name in sorted(cmd.list_commands(ctx)):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name])
            return
        out.append(f"### `{' '.join(path)}`\n")
        out.append(_cell((cmd.help or "").strip()).replace("\\|", "|") + "\n")
        out.extend(_option_rows(cmd))
        out.append("")

    walk(root, ["ctxbench"])
    return "\n".join(out)


def tables_markdown() -> str:
    """Markdown of every stored table's schema (``schemas/*.schema.json``)."""
    out: list[str] = []
    for f in sorted((ROOT / "schemas").glob("*.schema.json")):
        s = json.loads(f.read_text())
        out.append(f"## `{s.get('table', f.name.split('.')[0])}`\n")
        if s.get("description"):
            out.append(s["description"] + "\n")
        out.append(f"Schema file: `schemas/{f.name}`.\n")
        out.append("| column | type | nullable | values | description |")
        out.append("|---|---|---|---|---|")
        for c in s["columns"]:
            vals = ", ".join(f"`{v}`" for v in c.get("values", []))
            out.append(f"| `{c['name']}` | {c['type']} | {'yes' if c.get('nullable', True) else 'no'} | {vals} | "
                       f"{_cell(c.get('description', ''))} |")
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001  (MkDocs hook signature)
    if "<!-- ctxbench:cli -->" in markdown:
        markdown = markdown.replace("<!-- ctxbench:cli -->", cli_markdown())
    if "<!-- ctxbench:tables -->" in markdown:
        markdown = markdown.replace("<!-- ctxbench:tables -->", tables_markdown())
    return markdown
