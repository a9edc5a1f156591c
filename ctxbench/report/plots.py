"""The report's figures, drawn with plotly (interactive: hover values and intervals, zoom, legend toggles), fully
offline: ``plotly.min.js`` from the plotly package is written once into the report directory
(:func:`write_plotly_js`) and every page refers to it by a relative ``<script src>`` (no CDN).

Every figure function takes plain rows (the dicts of :mod:`ctxbench.analysis` tables) and returns a
``plotly.graph_objects.Figure``, or None when there is nothing to draw; :func:`figure_div` turns a figure into the
HTML fragment a page embeds (its div id derived from the figure, so the same data give the same bytes). Names are
never cut: legends sit at the bottom of the figure, under the axis labels (horizontal, wrapping), hover labels show whole trace names
(``hoverlabel.namelength = -1``), category axes grow their margins (``automargin``).

A point may carry a link (``link`` in its row): clicking it opens that address (the instance browser filtered to
the point's instances; :data:`CLICK_JS`, included once per page by :func:`page_head`).

Figures (the source of each layout in parentheses):

* :func:`accuracy_by_length` — accuracy against context length, one line per model × mode (× matcher) with 95%
  error bars, lengths as token counts on a log₂ axis (HoloBench, Maekawa et al. 2025, figure 1);
* :func:`accuracy_by_category` — grouped bars per category (position, query type, skill, difficulty, ...) with
  error bars (HoloBench figures 3-4, SciTrek table 7 by skill);
* :func:`line_figure` — generic lines over numeric x (answer position, retrieval budget: LaRA appendix D,
  HoloBench tables 9-10);
* :func:`heatmap` — a rows × columns grid of accuracies with ``correct/n`` labels (the depth × tier heatmaps of the
  needle study, as in Kamradt's needle-in-a-haystack plots);
* :func:`lc_vs_rag` — long-context against RAG accuracy per model × length (LaRA table 2);
* :func:`contrasts` — interquartile contrasts with intervals as a forest plot (LURCH, section 5).
"""

from __future__ import annotations

import hashlib
import html
import json
import shutil
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from ctxbench.analysis.order import value_order

PLOTLY_JS = "plotly.min.js"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
          "#bcbd22"]
# opens a clicked point's link (customdata[0] of the point): the instances behind an aggregate
CLICK_JS = """<script>
window.addEventListener('load', function () {
  document.querySelectorAll('.js-plotly-plot').forEach(function (el) {
    el.on && el.on('plotly_click', function (ev) {
      var p = ev && ev.points && ev.points[0]; if (!p || p.customdata == null) return;
      var link = Array.isArray(p.customdata) ? p.customdata[0] : p.customdata;
      if (typeof link === 'string' && link) window.location.href = link;
    });
  });
});
</script>"""


def write_plotly_js(out_dir: str | Path) -> str:
    """Copy the plotly package's ``plotly.min.js`` into ``out_dir`` (once: kept when it has the same size) and
    return its file name, for ``<script src>`` relative to a page in ``out_dir``. Raises ImportError (naming the
    package to install) when plotly is missing."""
    try:
        import plotly
    except ImportError as e:  # a core dependency: reaching this means a broken install
        raise ImportError("the report draws its figures with plotly: pip install plotly") from e
    src = Path(plotly.__file__).parent / "package_data" / PLOTLY_JS
    dst = Path(out_dir) / PLOTLY_JS
    if not dst.exists() or dst.stat().st_size != src.stat().st_size:
        tmp = dst.with_name(f".{PLOTLY_JS}.tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dst)
    return PLOTLY_JS


def page_head(prefix: str = "") -> str:
    """The ``<script>`` tags a page with figures needs in its head: the local plotly.min.js (``prefix``: the path
    from the page to the report directory, e.g. ``"../"``) and the click-to-open handler."""
    return f'<script src="{html.escape(prefix + PLOTLY_JS)}"></script>{CLICK_JS}'


def figure_div(fig: Any, div_id: str | None = None, height: int | None = None) -> str:
    """The HTML fragment of a figure (a div and the script drawing it; plotly.min.js must be in the page's head:
    :func:`page_head`); "" for None. ``div_id``: default ``plot-`` + a hash of the figure (stable output)."""
    if fig is None:
        return ""
    if height:
        fig.update_layout(height=height)
    spec = fig.to_json()
    div_id = div_id or "plot-" + hashlib.sha256(spec.encode()).hexdigest()[:12]
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def _text(s: Any) -> str:
    """A name or label as plotly shows it: its pseudo-HTML (``<b>``, ``<br>``) escaped, so a model or category
    name is shown as written (plotly decodes the entities)."""
    return html.escape(str(s), quote=False)


def _layout(fig: Any, title: str, x_title: str, y_title: str, n_traces: int) -> Any:
    fig.update_layout(
        title={"text": _text(title), "x": 0, "xanchor": "left"}, template="plotly_white",
        height=420 + 22 * max(0, (n_traces - 4) // 2), margin={"l": 60, "r": 20, "t": 50, "b": 20},
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0, "xanchor": "left"},
        hoverlabel={"namelength": -1}, font={"size": 12})
    fig.update_xaxes(title_text=_text(x_title), automargin=True)
    fig.update_yaxes(title_text=_text(y_title), automargin=True)
    return fig


def _errors(ys: Sequence[float | None], lo: Sequence[float | None], hi: Sequence[float | None]) -> dict | None:
    if all(v is None for v in (*lo, *hi)):
        return None
    return {"type": "data", "symmetric": False, "thickness": 1,
            "array": [None if h is None or y is None else max(0.0, h - y) for y, h in zip(ys, hi)],
            "arrayminus": [None if lo_ is None or y is None else max(0.0, y - lo_) for y, lo_ in zip(ys, lo)]}


def _series_label(r: Mapping[str, Any], keys: Sequence[str]) -> str:
    """``model (mode, matcher)`` from the row's values of ``keys`` (the first is the name, the rest in brackets;
    empty values left out)."""
    head, *rest = [str(r[k]) for k in keys if r.get(k) not in (None, "")] or ["all"]
    return f"{head} ({', '.join(rest)})" if rest else head


def line_figure(series: Mapping[str, Sequence[Mapping[str, Any]]], title: str, x_title: str,
                y_title: str = "accuracy", log2_x: bool = False, x_ticks: Sequence[tuple[float, str]] = (),
                y_range: tuple[float, float] | None = (0, 1.02)) -> Any:
    """Lines, one per series name: points ``{"x", "y", "lo", "hi", "n", "link"}`` (``lo``/``hi``: the 95%
    interval, drawn as error bars; ``link``: opened on click; ``n``: shown on hover). ``log2_x``: a log₂ x axis
    (context lengths); ``x_ticks``: (value, label) pairs. None without series."""
    import plotly.graph_objects as go

    if not series:
        return None
    fig = go.Figure()
    for i, (name, pts) in enumerate(sorted(series.items())):
        pts = sorted(pts, key=lambda p: p["x"])
        ys = [p["y"] for p in pts]
        fig.add_trace(go.Scatter(
            x=[p["x"] for p in pts], y=ys, name=_text(name), mode="lines+markers",
            line={"color": COLORS[i % len(COLORS)], "width": 2}, marker={"size": 7},
            error_y=_errors(ys, [p.get("lo") for p in pts], [p.get("hi") for p in pts]),
            customdata=[[p.get("link") or "", p.get("n")] for p in pts],
            hovertemplate="%{x}: %{y:.3f} (n=%{customdata[1]})<extra>%{fullData.name}</extra>"))
    _layout(fig, title, x_title, y_title, len(series))
    if log2_x:
        fig.update_xaxes(type="log")
    if x_ticks:
        fig.update_xaxes(tickmode="array", tickvals=[v for v, _ in x_ticks], ticktext=[t for _, t in x_ticks])
    if y_range:
        fig.update_yaxes(range=list(y_range))
    return fig


def accuracy_by_length(rows: Sequence[Mapping[str, Any]], link: Any = None) -> Any:
    """Accuracy against context length (tokens, log₂ axis labelled with the token counts, e.g. 4,096), one line
    per model × mode × matcher (the matcher named only where a model has several), with 95% intervals. ``rows``:
    :func:`ctxbench.analysis.core.results_table` rows (model, mode, matcher, context_length, n, score, ci_low,
    ci_high); ``link(row) -> str | None``: the address a point opens. None without rows."""
    if not rows:
        return None
    several = defaultdict(set)
    for r in rows:
        several[(r["model"], r["mode"])].add(r["matcher"])
    series: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        keys = ["model", "mode"] + (["matcher"] if len(several[(r["model"], r["mode"])]) > 1 else [])
        series[_series_label(r, keys)].append(
            {"x": r["context_length"], "y": r["score"], "lo": r.get("ci_low"), "hi": r.get("ci_high"),
             "n": r.get("n"), "link": link(r) if link else None})
    lengths = sorted({r["context_length"] for r in rows})
    return line_figure(series, "Accuracy by context length", "context length (tokens)", log2_x=len(lengths) > 1,
                       x_ticks=[(L, f"{L:,}") for L in lengths])


def accuracy_by_category(rows: Sequence[Mapping[str, Any]], key: str, title: str, x_title: str | None = None,
                         series_keys: Sequence[str] = ("model", "mode"), link: Any = None) -> Any:
    """Grouped bars: one group per value of ``key`` (position, query type, skill, ...), one bar per series
    (``series_keys`` of the row, e.g. model and mode), with 95% error bars (``ci_low``/``ci_high``) and ``n`` on
    hover. ``link(row)``: the address a bar opens. None without rows or when ``key`` has no value."""
    import plotly.graph_objects as go

    rows = [r for r in rows if r.get(key) is not None]
    if not rows:
        return None

    cats = sorted({str(r[key]) for r in rows}, key=value_order)  # easy, medium, hard: not the alphabet's order
    series: dict[str, dict[str, Mapping]] = defaultdict(dict)
    for r in rows:
        series[_series_label(r, series_keys)][str(r[key])] = r
    fig = go.Figure()
    for i, (name, by) in enumerate(sorted(series.items())):
        ys = [by[c]["score"] if c in by else None for c in cats]
        fig.add_trace(go.Bar(
            x=[_text(c) for c in cats], y=ys, name=_text(name), marker_color=COLORS[i % len(COLORS)],
            error_y=_errors(ys, [by[c].get("ci_low") if c in by else None for c in cats],
                            [by[c].get("ci_high") if c in by else None for c in cats]),
            customdata=[[(link(by[c]) or "") if link and c in by else "", by[c].get("n") if c in by else None]
                        for c in cats],
            hovertemplate="%{x}: %{y:.3f} (n=%{customdata[1]})<extra>%{fullData.name}</extra>"))
    _layout(fig, title, x_title or key.replace("_", " "), "accuracy", len(series))
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.02])
    return fig


def heatmap(cells: Mapping[tuple[str, Any], tuple[int, int]], rows: Sequence[str], cols: Sequence[Any],
            title: str, x_title: str, y_title: str, col_label: Any = None, link: Any = None) -> Any:
    """A grid of accuracies: ``cells[(row, col)] = (correct, n)``, coloured red (0) to green (1), each labelled
    ``correct/n``; a missing cell is left blank. ``col_label(col) -> str`` (default: ``f"{col:,}"`` for numbers);
    ``link(row, col)``: the address a cell opens. None without cells."""
    import plotly.graph_objects as go

    if not cells:
        return None
    col_label = col_label or (lambda c: f"{c:,}" if isinstance(c, int) else str(c))
    xs = [col_label(c) for c in cols]
    z, text, custom = [], [], []
    for r in rows:
        cell = [cells.get((r, c)) for c in cols]
        z.append([None if v is None else (v[0] / v[1] if v[1] else 0.0) for v in cell])
        text.append(["" if v is None else f"{v[0]}/{v[1]}" for v in cell])
        custom.append([[(link(r, c) if link and v is not None else "") or ""] for c, v in zip(cols, cell)])
    fig = go.Figure(go.Heatmap(
        z=z, x=[_text(x) for x in xs], y=[_text(r) for r in rows], text=text, texttemplate="%{text}", customdata=custom, zmin=0, zmax=1,
        colorscale=[[0, "#f4a3a3"], [0.5, "#f7e08a"], [1, "#9fdc9f"]], colorbar={"title": {"text": "accuracy"}},
        hovertemplate=f"{html.escape(y_title)} %{{y}}, {html.escape(x_title)} %{{x}}: %{{text}} = %{{z:.2f}}"
                      "<extra></extra>", xgap=2, ygap=2))
    _layout(fig, title, x_title, y_title, 1)
    fig.update_layout(height=max(260, 90 + 48 * len(rows)))
    fig.update_xaxes(type="category", side="bottom")
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def lc_vs_rag(rows: Sequence[Mapping[str, Any]], link: Any = None) -> Any:
    """Long context (LC) against RAG accuracy per model × length (× task): paired bars from
    :func:`ctxbench.analysis.rag.gap_table` rows (model, length, task, n, lc, rag, gap). ``link(row, mode)``: the
    address a bar opens. None without rows."""
    import plotly.graph_objects as go

    rows = [r for r in rows if r.get("lc") is not None or r.get("rag") is not None]
    if not rows:
        return None

    def label(r: Mapping[str, Any]) -> str:
        length = r.get("length")
        length = f"{length:,}" if isinstance(length, int) else str(length)
        return " · ".join(x for x in (str(r["model"]), length, str(r.get("task") or "")) if x and x != "all") \
            or str(r["model"])

    xs = [_text(label(r)) for r in rows]
    fig = go.Figure()
    for i, mode in enumerate(("lc", "rag")):
        fig.add_trace(go.Bar(
            x=xs, y=[r.get(mode) for r in rows], name={"lc": "long context (LC)", "rag": "RAG"}[mode],
            marker_color=COLORS[i], customdata=[[(link(r, mode) if link else "") or "", r.get("n")] for r in rows],
            hovertemplate="%{x}: %{y:.3f} (n=%{customdata[1]})<extra>%{fullData.name}</extra>"))
    _layout(fig, "Long context versus RAG", "model · context length · task", "accuracy", 2)
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.02])
    fig.update_xaxes(type="category")
    return fig


def contrasts(rows: Sequence[Mapping[str, Any]], label_keys: Sequence[str] = ("predictor",), title: str = "",
              value: str = "pp", lo: str = "ci_low_pp", hi: str = "ci_high_pp") -> Any:
    """A forest plot: one horizontal bar per row (label from ``label_keys``), its ``value`` with the ``lo``-``hi``
    interval, in percentage points (LURCH's within-task interquartile contrasts). Rows without a value are left
    out; None when none has one."""
    import plotly.graph_objects as go

    rows = [r for r in rows if isinstance(r.get(value), (int, float)) and r.get(value) == r.get(value)]
    if not rows:
        return None
    ys = [_text(" · ".join(str(r.get(k)) for k in label_keys if r.get(k) is not None)) for r in rows]
    xs = [r[value] for r in rows]
    fig = go.Figure(go.Bar(
        x=xs, y=ys, orientation="h", marker_color=[COLORS[1] if v < 0 else COLORS[2] for v in xs],
        error_x=_errors(xs, [r.get(lo) for r in rows], [r.get(hi) for r in rows]),
        hovertemplate="%{y}: %{x:+.1f} pp<extra></extra>", showlegend=False))
    _layout(fig, title or "Interquartile contrasts", "Δ score (percentage points)", "", 1)
    fig.update_layout(height=max(260, 90 + 34 * len(rows)))
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def figures_in_html(doc: str) -> list[dict]:
    """The figures a page draws (``{"id", "data", "layout"}`` of every ``Plotly.newPlot`` call, in page order):
    what :func:`figure_div` embedded, read back for tests and tools."""
    dec = json.JSONDecoder()
    out, pos = [], 0
    while (i := doc.find("Plotly.newPlot(", pos)) >= 0:
        j = i + len("Plotly.newPlot(")
        items = []
        for k in range(3):
            if k:
                j = doc.index(",", j) + 1
            while doc[j].isspace():
                j += 1
            obj, j = dec.raw_decode(doc, j)
            items.append(obj)
        div_id = items.pop(0)
        out.append({"id": div_id, "data": items[0], "layout": items[1]})
        pos = j
    return out


def figure_data(fig: Any) -> dict:
    """The figure as plain JSON data (``{"data": [...], "layout": {...}}``), for tests and other writers."""
    return json.loads(fig.to_json())


__all__ = ["CLICK_JS", "COLORS", "PLOTLY_JS", "accuracy_by_category", "accuracy_by_length", "contrasts",
           "figure_data", "figure_div", "figures_in_html", "heatmap", "lc_vs_rag", "line_figure", "page_head", "write_plotly_js"]
