"""``ctxbench compare DIR... --out OUT``: the leaderboard across runs as an offline page (issue 17 item 3).

Writes into ``OUT``: ``catalogue.duckdb`` (the DuckDB catalogue over every build found: ``builds`` table, views of
every build's instances / responses / scores, and the leaderboard tables ``leaderboard``, ``averages``, ``missing``
and ``groups`` computed from it by :mod:`ctxbench.analysis.compare`), the same tables as Parquet
(``leaderboard.parquet``, ``averages.parquet``, ``missing.parquet``, ``builds.parquet``), and ``index.html``,
rendered from the catalogue's tables: per benchmark build one table of models × context lengths (token counts
written out, e.g. 4,096) with Avg, wAvg(inc) and wAvg(dec), each number with its 95% interval, a chart of
accuracy by context length (:mod:`ctxbench.report.plots`, plotly from the local ``plotly.min.js``: no CDN), a
link from each cell to its instances in that build's instance browser (where the build has a report), and every
missing cell with its reason.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ..analysis.compare import AVERAGES, discover_builds, leaderboard, length_text, relative_link
from ..storage import builds_catalogue, write_parquet
from . import plots
from .browser import PAGE, instances_link

CELL_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("build_hash", pa.string()), ("build", pa.string()), ("mode", pa.string()),
    ("matcher", pa.string()), ("model", pa.string()), ("context_length", pa.int64()),
    ("context_length_text", pa.string()), ("n", pa.int64()), ("score", pa.float64()), ("ci_low", pa.float64()),
    ("ci_high", pa.float64()), ("dropped", pa.int64()), ("reason", pa.string())])
AVG_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("build_hash", pa.string()), ("build", pa.string()), ("mode", pa.string()),
    ("matcher", pa.string()), ("model", pa.string()), ("lengths", pa.string())]
    + [(f"{c}{s}", pa.float64()) for _, c in AVERAGES for s in ("", "_ci_low", "_ci_high")]
    + [("reason", pa.string())])
GROUP_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("build_hash", pa.string()), ("label", pa.string()), ("build_dirs", pa.string()),
    ("run_roots", pa.string()), ("is_latest", pa.bool_()), ("lengths", pa.string()), ("models", pa.string()),
    ("instances", pa.int64())])
STYLE = ("body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}th{background:#f4f4f4}"
         "td.name,th.name{text-align:left;white-space:nowrap}.ci{color:#666;font-size:85%;display:block}"
         "td.missing{color:#999;background:#fafafa}td a{color:#0b57d0}.note{color:#555}"
         "td.reason{text-align:left}")


@dataclass
class CompareResult:
    """What :func:`compare_runs` wrote: the page, the catalogue, and counts."""

    page: Path
    catalogue: Path
    builds: int
    groups: int
    models: int
    cells: int
    missing: int


def compare_runs(dirs: list[str | Path], out: str | Path) -> CompareResult:
    """Find every build under ``dirs`` (:func:`ctxbench.analysis.compare.discover_builds`), make the catalogue
    ``out/catalogue.duckdb``, compute the leaderboard from it, store it in the catalogue and as Parquet, and render
    ``out/index.html`` from the catalogue's tables (module docstring). Raises InputError for a directory that holds
    no build, or an ``out`` inside a build directory (a build is immutable but for its evaluation tables)."""
    from ..errors import InputError

    out = Path(out).resolve()
    for d in (out, *out.parents):
        if (d / "manifest.json").exists() and (d / "instances.parquet").exists():
            raise InputError(f"--out {out} is inside the build {d}: write the leaderboard elsewhere")
    builds = discover_builds(dirs)
    out.mkdir(parents=True, exist_ok=True)
    cat = out / "catalogue.duckdb"
    con = builds_catalogue(builds, cat)
    try:
        lb = leaderboard(con, builds)
        groups = [{**g, "build_dirs": json.dumps(g["build_dirs"]), "run_roots": json.dumps(g["run_roots"]),
                   "lengths": json.dumps(g["lengths"]), "models": json.dumps(g["models"])} for g in lb.groups]
        for name, rows, sch in (("leaderboard", lb.cells, CELL_SCHEMA), ("averages", lb.averages, AVG_SCHEMA),
                                ("groups", groups, GROUP_SCHEMA)):
            tbl = pa.Table.from_pylist(rows, schema=sch)
            con.register("rows_in", tbl)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM rows_in")
            con.unregister("rows_in")
        con.execute("CREATE VIEW missing AS SELECT model, benchmark, build_hash, build, mode, matcher, "
                    "context_length, context_length_text, reason FROM leaderboard WHERE reason IS NOT NULL")
        for name in ("leaderboard", "averages", "missing", "builds"):
            write_parquet(con.execute(f"SELECT * FROM {name}").fetch_arrow_table(), out / f"{name}.parquet")
        page = out / "index.html"
        doc = render_page(con, out)
        tmp = page.with_name(".index.html.tmp")
        tmp.write_text(doc, encoding="utf-8")
        tmp.replace(page)
        n_missing = con.execute("SELECT count(*) FROM missing").fetchone()[0]
        n_cells = con.execute("SELECT count(*) FROM leaderboard").fetchone()[0]
        n_models = con.execute("SELECT count(DISTINCT model) FROM leaderboard").fetchone()[0]
    finally:
        con.close()
    return CompareResult(page, cat, len(builds), len(lb.groups), n_models, n_cells, n_missing)


def _q(con, sql: str, params: list | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _cell(score, lo, hi, title: str, href: str | None) -> str:
    body = f'{_num(score)}<span class="ci">[{_num(lo)}, {_num(hi)}]</span>'
    if href:
        body = f'<a href="{html.escape(href)}">{body}</a>'
    return f'<td title="{html.escape(title)}">{body}</td>'


def _overview(con, groups: list[dict], notes: dict[str, int]) -> str:
    """Models × benchmark builds: each model's Avg over the build's context lengths, with its 95% interval (one
    column per benchmark build and mode × matcher); ``notes`` numbers the reasons of missing cells."""
    cols = [(g, mode, matcher) for g in groups for mode, matcher in con.execute(
        "SELECT DISTINCT mode, matcher FROM averages WHERE build_hash = ? AND benchmark = ? ORDER BY 1, 2",
        [g["build_hash"], g["benchmark"]]).fetchall()]
    if not cols:
        return ""
    models = [m for (m,) in con.execute("SELECT DISTINCT model FROM averages ORDER BY 1").fetchall()]
    avgs = {(a["benchmark"], a["build_hash"], a["mode"], a["matcher"], a["model"]): a
            for a in _q(con, "SELECT * FROM averages")}
    head = '<tr><th class="name">model</th>' + "".join(
        f"<th>{html.escape(g['label'])}<br><small>{html.escape(mode)} · {html.escape(matcher or '–')} · Avg over "
        f"{html.escape(', '.join(length_text(L) for L in json.loads(g['lengths'])))}</small></th>"
        for g, mode, matcher in cols) + "</tr>"
    body = []
    for m in models:
        tds = [f'<td class="name">{html.escape(m)}</td>']
        for g, mode, matcher in cols:
            a = avgs.get((g["benchmark"], g["build_hash"], mode, matcher, m))
            if a is None or a["reason"] is not None:
                reason = a["reason"] if a else "no average"
                k = notes.setdefault(reason, len(notes) + 1)
                tds.append(f'<td class="missing" title="{html.escape(reason)}">missing<sup>{k}</sup></td>')
            else:
                tds.append(_cell(a["avg"], a["avg_ci_low"], a["avg_ci_high"], f"over {a['lengths']} tokens", None))
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (f"<h2>Overview: Avg per model and benchmark build</h2><table><thead>{head}</thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def render_page(con, out: Path) -> str:
    """The page's HTML, from the catalogue's ``groups``, ``leaderboard``, ``averages``, ``missing`` and ``builds``
    tables (``out``: the page's directory, for links to the builds' instance browsers)."""
    groups = _q(con, "SELECT * FROM groups ORDER BY benchmark, NOT is_latest, label")
    builds = _q(con, "SELECT * FROM builds ORDER BY run_root NULLS LAST, NOT is_latest, build_dir")
    missing = _q(con, "SELECT * FROM missing ORDER BY benchmark, build, model, mode, matcher, context_length")
    try:
        js = plots.write_plotly_js(out)
        head = plots.page_head("") if js else ""
    except ImportError:
        head = ""
    notes: dict[str, int] = {}
    sections = []
    for g in groups:
        dirs = json.loads(g["build_dirs"])
        lengths = json.loads(g["lengths"])
        browser = next((Path(d) / "report" / PAGE for d in dirs if (Path(d) / "report" / PAGE).exists()), None)
        cells = _q(con, "SELECT * FROM leaderboard WHERE build_hash = ? AND benchmark = ? "
                        "ORDER BY mode, matcher, model, context_length", [g["build_hash"], g["benchmark"]])
        avgs = {(a["mode"], a["matcher"], a["model"]): a for a in
                _q(con, "SELECT * FROM averages WHERE build_hash = ? AND benchmark = ?",
                   [g["build_hash"], g["benchmark"]])}
        by_row: dict[tuple, dict[int, dict]] = {}
        for c in cells:
            by_row.setdefault((c["mode"], c["matcher"], c["model"]), {})[c["context_length"]] = c
        head_row = ('<tr><th class="name">model</th><th class="name">mode</th><th class="name">matcher</th>'
                    + "".join(f"<th>{length_text(L)}</th>" for L in lengths)
                    + "".join(f"<th>{name}</th>" for name, _ in AVERAGES) + "</tr>")
        body = []
        for (mode, matcher, model), by_len in by_row.items():
            tds = [f'<td class="name">{html.escape(model)}</td><td class="name">{html.escape(mode)}</td>'
                   f'<td class="name">{html.escape(matcher or "–")}</td>']
            for L in lengths:
                c = by_len.get(L)
                if c is None or c["reason"] is not None:
                    reason = c["reason"] if c else "no cell"
                    k = notes.setdefault(reason, len(notes) + 1)
                    tds.append(f'<td class="missing" title="{html.escape(reason)}">missing<sup>{k}</sup></td>')
                    continue
                href = None
                if browser is not None:
                    href = relative_link(browser, out) + instances_link(
                        {"model": model, "mode": mode, "matcher": matcher, "length": L}, page="")
                title = f"{c['n']} instances" + (f"; {c['dropped']} more scored but not by every model (left out)"
                                                  if c["dropped"] else "")
                tds.append(_cell(c["score"], c["ci_low"], c["ci_high"], title, href))
            a = avgs.get((mode, matcher, model))
            for _, col in AVERAGES:
                if a is None or a["reason"] is not None:
                    reason = a["reason"] if a else "no average"
                    k = notes.setdefault(reason, len(notes) + 1)
                    tds.append(f'<td class="missing" title="{html.escape(reason)}">missing<sup>{k}</sup></td>')
                else:
                    tds.append(_cell(a[col], a[f"{col}_ci_low"], a[f"{col}_ci_high"],
                                     f"over {a['lengths']} tokens", None))
            body.append("<tr>" + "".join(tds) + "</tr>")
        present = [{"model": c["model"], "mode": c["mode"], "matcher": c["matcher"] or "",
                    "context_length": c["context_length"], "n": c["n"], "score": c["score"], "ci_low": c["ci_low"],
                    "ci_high": c["ci_high"]} for c in cells if c["reason"] is None]
        fig = ""
        if head and present:
            f = plots.accuracy_by_length(present)
            if f is not None:  # the legend also for one model: the chart names every model it draws
                f.update_layout(title={"text": html.escape(f"Accuracy by context length · {g['label']}",
                                                           quote=False)}, showlegend=True)
            fig = plots.figure_div(f)
        roots = json.loads(g["run_roots"])
        sections.append(
            f"<h2>{html.escape(g['label'])}</h2><p class=note>{g['instances']} instances; context lengths "
            f"{', '.join(length_text(L) for L in lengths)} tokens; models {html.escape(', '.join(json.loads(g['models'])))}"
            f"{'; run roots ' + html.escape(', '.join(roots)) if roots else ''}; build directories "
            f"{html.escape(', '.join(dirs))}.</p>"
            f"<table><thead>{head_row}</thead><tbody>{''.join(body)}</tbody></table>{fig}")
    overview = _overview(con, groups, notes)
    legend = "".join(f"<li><sup>{k}</sup> {html.escape(r)}</li>" for r, k in sorted(notes.items(),
                                                                                    key=lambda x: x[1]))
    miss = "".join(f"<tr><td class=name>{html.escape(m['model'])}</td><td class=name>{html.escape(m['build'])}</td>"
                   f"<td class=name>{html.escape(m['mode'])}</td><td class=name>{html.escape(m['matcher'] or '–')}"
                   f"</td><td>{m['context_length_text']}</td><td class=reason>{html.escape(m['reason'])}</td></tr>"
                   for m in missing)
    brow = "".join(f"<tr><td class=name>{html.escape(b['benchmark'])}</td><td class=name>{b['build_hash']}</td>"
                   f"<td class=name>{html.escape(b['run_root'] or '–')}</td>"
                   f"<td>{'latest' if b['is_latest'] else '–' if b['is_latest'] is None else 'older'}</td>"
                   f"<td class=name>{html.escape(b['build_dir'])}</td></tr>" for b in builds)
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>ctxbench leaderboard</title>'
            f"<style>{STYLE}</style>{head}</head><body><h1>ctxbench leaderboard</h1>"
            f"<p class=note>Mean score of each track's primary matcher (and LLM judges) per model and context length, "
            f"with 95% intervals clustered by question (in brackets); Avg, wAvg(inc) and wAvg(dec) over the "
            f"lengths as in HoloBench section 4.1. Only comparable instances: one build hash per table (builds of "
            f"other hashes hold other instances and are never pooled), and at each length only the instances every "
            f"model answered. A number links to its instances in the build's instance browser. The data: "
            f"<code>catalogue.duckdb</code> (tables leaderboard, averages, missing, groups, builds; views instances, "
            f"responses, scores over every build) and the Parquet files beside this page.</p>"
            f"{overview}{''.join(sections) or '<p>No build was found.</p>'}"
            f"<h2>Missing cells</h2>{'<ul>' + legend + '</ul>' if legend else '<p>None: every cell is present.</p>'}"
            f"{'<table><thead><tr><th class=name>model</th><th class=name>build</th><th class=name>mode</th><th class=name>matcher</th><th>context length</th><th class=name>why</th></tr></thead><tbody>' + miss + '</tbody></table>' if miss else ''}"
            f"<h2>Builds</h2><table><thead><tr><th class=name>benchmark</th><th class=name>build hash</th>"
            f"<th class=name>run root</th><th>version</th><th class=name>directory</th></tr></thead>"
            f"<tbody>{brow}</tbody></table></body></html>\n")
