"""HTML pieces every report section uses: tables (with links from aggregate cells to their instances) and number
formatting. Figures are drawn by :mod:`ctxbench.report.plots`."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence


def table(rows: list[dict], cols: list[str], link: Callable[[dict], str | None] | None = None,
          link_cols: Sequence[str] = ("n", "score")) -> str:
    """An HTML table of ``rows`` with one column per key of ``cols`` (floats with 3 decimals, text escaped).
    ``link(row)``: the address of the row's instances (:func:`ctxbench.report.browser.instances_link`), put on its
    ``link_cols`` cells (an aggregate's count and score open the instances behind it)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        href = link(r) if link else None
        cells = []
        for c in cols:
            v = r.get(c)
            text = f"{v:.3f}" if isinstance(v, float) else html.escape(str(v))
            if href and c in link_cols:
                text = f'<a href="{html.escape(href)}" title="the instances behind this number">{text}</a>'
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def fmt(v, digits: int = 3) -> str:
    """A cell value: "–" for None, floats with ``digits`` decimals (scientific below 10^-digits), else str."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) >= 10 ** -digits or v == 0 else f"{v:.1e}"
    return str(v)


def labelled_table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    """An HTML table with ``(key, header label)`` columns and :func:`fmt` cells."""
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(r.get(k)))}</td>" for k, _ in cols) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
