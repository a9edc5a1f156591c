"""HTML pieces every report section uses: tables, line charts as inline SVG, number formatting (no network
assets: inline HTML only)."""

from __future__ import annotations

import html
from collections import defaultdict

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def table(rows: list[dict], cols: list[str]) -> str:
    """An HTML table of ``rows`` with one column per key of ``cols`` (floats with 3 decimals, text escaped)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"<td>{v:.3f}</td>" if isinstance(v, float) else f"<td>{html.escape(str(v))}</td>")
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


def line_chart(series: dict[str, list[tuple[float, float]]], xticks: list[tuple[float, str]], xlabel: str,
               label: str) -> str:
    """Lines of (x in [0, 1], score in [0, 1]) points with labelled x ticks, as inline SVG ("" without series)."""
    if not series:
        return ""
    W, H, P = 680, 300, 50

    def sx(x: float) -> float:
        return P + x * (W - 2.6 * P)

    def sy(y: float) -> float:
        return H - P - y * (H - 1.5 * P)

    parts = [f'<svg width="{W}" height="{H}" role="img" aria-label="{html.escape(label)}">',
             f'<line x1="{P}" y1="{H - P}" x2="{sx(1)}" y2="{H - P}" stroke="#333"/>',
             f'<line x1="{P}" y1="{P / 2}" x2="{P}" y2="{H - P}" stroke="#333"/>']
    for v in (0, 0.5, 1):
        parts.append(f'<text x="{P - 8}" y="{sy(v) + 4}" text-anchor="end" font-size="11">{v:.1f}</text>')
    for x, t in xticks:
        parts.append(f'<text x="{sx(x):.1f}" y="{H - P + 16}" text-anchor="middle" font-size="11">{html.escape(t)}</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = COLORS[i % len(COLORS)]
        pts = sorted(pts)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
                     + " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts) + '"/>')
        parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>' for x, y in pts]
        parts.append(f'<text x="{sx(1) + 8}" y="{P / 2 + 14 * i}" font-size="11" fill="{c}">{html.escape(name)}</text>')
    parts.append(f'<text x="{sx(0.5)}" y="{H - 8}" text-anchor="middle" font-size="12">{html.escape(xlabel)}</text>')
    return "".join(parts) + "</svg>"


def length_curves(by_len: list[dict]) -> str:
    """Accuracy by context length, one line per model (mode), as inline SVG (a note when nothing is scored)."""
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in by_len:
        series[f"{r['model']} ({r['mode']})"].append((r["context_length"], r["score"]))
    if not series:
        return "<p>No scores yet.</p>"
    lengths = sorted({L for s in series.values() for L, _ in s})
    W, H, P = 640, 300, 50
    xs = {L: P + (i * (W - 2 * P) / max(1, len(lengths) - 1)) for i, L in enumerate(lengths)}
    parts = [f'<svg width="{W}" height="{H}" role="img" aria-label="accuracy by context length">',
             f'<line x1="{P}" y1="{H - P}" x2="{W - P}" y2="{H - P}" stroke="#333"/>',
             f'<line x1="{P}" y1="{P / 2}" x2="{P}" y2="{H - P}" stroke="#333"/>']
    for v in (0, 0.5, 1):
        y = H - P - v * (H - 1.5 * P)
        parts.append(f'<text x="{P - 8}" y="{y + 4}" text-anchor="end" font-size="11">{v:.1f}</text>')
    for L, x in xs.items():
        parts.append(f'<text x="{x}" y="{H - P + 16}" text-anchor="middle" font-size="11">{L:,}</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = COLORS[i % 6]
        pts = sorted(pts)
        path = " ".join(f"{xs[L]:.1f},{H - P - s * (H - 1.5 * P):.1f}" for L, s in pts)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{path}"/>')
        for L, s in pts:
            parts.append(f'<circle cx="{xs[L]:.1f}" cy="{H - P - s * (H - 1.5 * P):.1f}" r="3" fill="{c}"/>')
        parts.append(f'<text x="{W - P + 4}" y="{P / 2 + 14 * i}" font-size="11" fill="{c}">'
                     f'{html.escape(name)}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="12">context length (tokens)</text>')
    parts.append("</svg>")
    return "".join(parts)
