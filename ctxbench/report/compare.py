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

from ctxbench.analysis.paired import CLUSTERING_NOTE
from ctxbench.analysis.compare import (AVERAGES, discover_builds, leaderboard, length_text, rank_with_estimates,
                                      relative_link)
from ctxbench.core.storage import builds_catalogue, schema, to_table, write_parquet
from ctxbench.report import plots
from ctxbench.report.browser import PAGE, instances_link
from ctxbench.analysis.paired import METHOD, MIN_CLUSTERS
from ctxbench.core.errors import InputError
from ctxbench.core.outdir import check_out_dir, mark_out_dir

CELL_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("build_hash", pa.string()), ("build", pa.string()), ("mode", pa.string()),
    ("matcher", pa.string()), ("model", pa.string()), ("context_length", pa.int64()),
    ("context_length_text", pa.string()), ("n", pa.int64()), ("score", pa.float64()), ("ci_low", pa.float64()),
    ("ci_high", pa.float64()), ("dropped", pa.int64()), ("reason", pa.string()), ("estimate", pa.bool_())])
AVG_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("build_hash", pa.string()), ("build", pa.string()), ("mode", pa.string()),
    ("matcher", pa.string()), ("model", pa.string()), ("lengths", pa.string())]
    + [(f"{c}{s}", pa.float64()) for _, c in AVERAGES for s in ("", "_ci_low", "_ci_high")]
    + [("reason", pa.string()), ("estimate", pa.bool_())])
GROUP_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("build_hash", pa.string()), ("label", pa.string()), ("build_dirs", pa.string()),
    ("run_roots", pa.string()), ("is_latest", pa.bool_()), ("lengths", pa.string()), ("models", pa.string()),
    ("instances", pa.int64())])
STYLE = ("body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}th{background:#f4f4f4}"
         "td.name,th.name{text-align:left;white-space:nowrap}.ci{color:#666;font-size:85%;display:block}"
         "td.missing{color:#999;background:#fafafa}td a{color:#0b57d0}.note{color:#555}"
         "td.reason{text-align:left}td.ns{color:#999;background:#f6f6f6}td.ns .tag{font-style:italic}"
         "td.sig{font-weight:bold}td.diag{background:#eee}")


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
    pairs: int = 0  # rows of pairs.parquet
    significant: int = 0  # of them significant after Holm's correction


def compare_runs(dirs: list[str | Path], out: str | Path, force: bool = False) -> CompareResult:
    """Find every build under ``dirs`` (:func:`ctxbench.analysis.compare.discover_builds`), make the catalogue
    ``out/catalogue.duckdb``, compute the leaderboard from it, store it in the catalogue and as Parquet, and render
    ``out/index.html`` from the catalogue's tables (module docstring). Raises InputError for a directory that holds
    no build, an ``out`` inside a build directory (a build is immutable but for its evaluation tables), or an
    ``out`` holding anything but an earlier leaderboard, unless ``force`` (:func:`ctxbench.core.outdir.check_out_dir`)."""
    out = Path(out).resolve()
    for d in (out, *out.parents):
        if (d / "manifest.json").exists() and (d / "instances.parquet").exists():
            raise InputError(f"--out {out} is inside the build {d}: write the leaderboard elsewhere")

    check_out_dir(out, "compare", force=force, what="leaderboard")
    builds = discover_builds(dirs)
    mark_out_dir(out, "compare")
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
        for name, rows in (("pairs", lb.pairs), ("effective_length", lb.effective)):
            con.register("rows_in", to_table(name, rows) if rows else schema(name).empty_table())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM rows_in")
            con.unregister("rows_in")
        con.execute("CREATE VIEW missing AS SELECT model, benchmark, build_hash, build, mode, matcher, "
                    "context_length, context_length_text, reason FROM leaderboard WHERE reason IS NOT NULL")
        for name in ("leaderboard", "averages", "missing", "builds", "pairs", "effective_length"):
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
    return CompareResult(page, cat, len(builds), len(lb.groups), n_models, n_cells, n_missing, len(lb.pairs),
                         sum(1 for p in lb.pairs if p.get("significant")))


def _q(con, sql: str, params: list | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _cell(score, lo, hi, title: str, href: str | None, estimate: bool = False) -> str:
    body = f'{_num(score)}<span class="ci">[{_num(lo)}, {_num(hi)}]</span>'
    if estimate:  # an adaptive run's IRT estimate of the full grid (issue 34), never a measured score
        body = f'≈{body}<span class="ci">estimate</span>'
        title = f"adaptive estimate (item response theory) of the full-grid score; {title}"
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
                tds.append(_cell(a["avg"], a["avg_ci_low"], a["avg_ci_high"], f"over {a['lengths']} tokens", None,
                                 bool(a.get("estimate"))))
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (f"<h2>Overview: Avg per model and benchmark build</h2><table><thead>{head}</thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _estimates_html(g: dict, averages: list[dict]) -> str:
    """Where a table holds adaptive estimates (issue 34): its runs ranked together with the probability that the
    full grid ranks the row above the column (:func:`ctxbench.analysis.compare.rank_with_estimates`)."""
    out = []
    for mode, matcher in sorted({(a["mode"], a["matcher"] or "") for a in averages if a.get("estimate")}):
        ranked = rank_with_estimates([a for a in averages if (a["mode"], a["matcher"] or "") == (mode, matcher)])
        if len(ranked) < 2:
            continue
        names = [a["model"] for a, _ in ranked]
        head = '<tr><th class="name">rank · model</th><th>Avg</th>' + "".join(
            f"<th>{html.escape(n)}</th>" for n in names) + "</tr>"
        body = "".join(
            f'<tr><td class="name">{i} · {html.escape(a["model"])}{" (estimate)" if a.get("estimate") else ""}</td>'
            f'<td>{"≈" if a.get("estimate") else ""}{_num(a["avg"])}</td>'
            + "".join("<td>–</td>" if n == a["model"] else f"<td>{probs[n]:.2f}</td>" for n in names) + "</tr>"
            for i, (a, probs) in enumerate(ranked, 1))
        out.append(f"<h3>Adaptive and full runs ranked together · {html.escape(g['label'])} · {html.escape(mode)} · "
                   f"{html.escape(matcher or '–')}</h3><p class=note>Each cell: the probability that the full grid "
                   f"ranks the row's Avg above the column's (an adaptive run's Avg is its whole-build estimate, "
                   f"uncertain; a full run's is known).</p><table><thead>{head}</thead><tbody>{body}</tbody></table>")
    return "".join(out)


def _diff_cell(p: dict | None, flip: bool) -> str:
    """One cell of the pairwise matrix: the row model minus the column model (``flip``: the stored pair is the
    other way round), its 95% interval and Holm-adjusted p; not significant (or no interval) greyed, marked n.s."""
    if p is None:
        return '<td class="missing">–</td>'
    sign = -1.0 if flip else 1.0
    d = None if p["diff"] is None else sign * p["diff"]
    lo, hi = (p["ci_low"], p["ci_high"]) if not flip else (
        None if p["ci_high"] is None else -p["ci_high"], None if p["ci_low"] is None else -p["ci_low"])
    title = (f"{p['n']} shared instances, {p['clusters']} contexts; " +
             (p["reason"] if p["reason"] else f"p = {p['p_value']:.3g}, Holm-adjusted p = {p['p_holm']:.3g}"))
    if p["ci_low"] is None:
        return (f'<td class="ns" title="{html.escape(title)}">{"–" if d is None else f"{d:+.3f}"}'
                f'<span class="ci">no interval</span>'
                f'<span class="ci tag">{html.escape(p["reason"] or "")}</span></td>')
    sig = bool(p["significant"])
    tag = f"p<sub>Holm</sub> = {p['p_holm']:.3g}" + ("" if sig else " · n.s.")
    return (f'<td class="{"sig" if sig else "ns"}" title="{html.escape(title)}">{d:+.3f}'
            f'<span class="ci">[{lo:+.3f}, {hi:+.3f}]</span><span class="ci tag">{tag}</span></td>')


def pairs_html(con, g: dict) -> str:
    """The pairwise matrices of one benchmark build (one per mode × matcher × context length, and all lengths):
    row model minus column model, from the catalogue's ``pairs`` table."""
    rows = _q(con, "SELECT * FROM pairs WHERE build_hash = ? AND benchmark = ? ORDER BY mode, matcher, "
                   "context_length NULLS LAST", [g["build_hash"], g["benchmark"]])
    if not rows:
        return ""

    tables: dict[tuple, dict[tuple[str, str], dict]] = {}
    for r in rows:
        tables.setdefault((r["mode"], r["matcher"], r["context_length"]), {})[(r["model_a"], r["model_b"])] = r
    parts = [f"<h3>Paired differences · {html.escape(g['label'])}</h3><p class=note>Row model minus column model: "
             f"mean score difference over the instances both answered, 95% interval from {html.escape(METHOD)}; "
             f"under {MIN_CLUSTERS} contexts no interval is given. Bold: significant after Holm's correction over "
             f"the pairs of the matrix (adjusted p ≤ 0.05); grey and marked n.s.: not significant.</p>"]
    for (mode, matcher, L), pr in tables.items():
        models = sorted({m for k in pr for m in k})
        head = '<tr><th class="name">row − column</th>' + "".join(f"<th>{html.escape(m)}</th>" for m in models)
        body = []
        for a in models:
            tds = [f'<td class="name">{html.escape(a)}</td>']
            for b in models:
                if a == b:
                    tds.append('<td class="diag"></td>')
                else:
                    p = pr.get((a, b)) or pr.get((b, a))
                    tds.append(_diff_cell(p, (a, b) not in pr))
            body.append("<tr>" + "".join(tds) + "</tr>")
        what = "all context lengths" if L is None else f"{length_text(L)} tokens"
        parts.append(f"<p><b>{html.escape(mode)} · {html.escape(matcher or '–')} · {what}</b></p>"
                     f'<table class="pairs"><thead>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')
    return "".join(parts)


def effective_html(con, g: dict) -> str:
    """The effective context lengths of one benchmark build, from the catalogue's ``effective_length`` table."""
    rows = _q(con, "SELECT * FROM effective_length WHERE build_hash = ? AND benchmark = ? ORDER BY mode, matcher, "
                   "model, kind DESC", [g["build_hash"], g["benchmark"]])
    if not rows:
        return ""
    return effective_table(rows)


def effective_table(rows: list[dict]) -> str:
    """An HTML table of effective-length rows (:func:`ctxbench.analysis.decide.effective_rows`)."""
    def val(v):
        return "below the shortest tier" if v is None else length_text(v)

    body = []
    for r in rows:
        need = "–" if r["threshold"] is None else f"{r['threshold']:.3f}"
        eff = html.escape(r["reason"]) if r["reason"] is not None and not r["effective_length"] else \
            val(r["effective_length"])
        ci = "" if r["tiers"] is None else f"[{val(r['ci_low'])}, {val(r['ci_high'])}]"
        body.append(f"<tr><td class=name>{html.escape(r['model'])}</td><td class=name>{html.escape(r['mode'] or '')}"
                    f"</td><td class=name>{html.escape(r['matcher'] or '–')}</td><td class=name>{r['kind']}</td>"
                    f"<td>{need}</td><td>{eff}</td><td>{ci}</td><td class=name>{html.escape(r['tiers'] or '')}</td>"
                    f"</tr>")
    body = "".join(body)
    return ("<h3>Effective context length</h3><p class=note>The longest tier whose score, and every shorter tier's, "
            "is at or above the threshold: relative, 85% of the model's shortest-tier score (NoLiMa), or absolute, "
            "0.856 (RULER's 85.6%). 95% percentile bootstrap over instances, resampled within each tier.</p>"
            "<table><thead><tr><th class=name>model</th><th class=name>mode</th><th class=name>matcher</th>"
            "<th class=name>threshold</th><th>score needed</th><th>effective length (tokens)</th><th>95% interval"
            f"</th><th class=name>tiers</th></tr></thead><tbody>{body}</tbody></table>")


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
    decisions = []  # per build: its pairwise matrices and effective lengths, after every build's table
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
                title = f"{c['n']} instances" + (" asked" if c.get("estimate") else "") + (
                    f"; {c['dropped']} more scored but not by every model (left out)" if c["dropped"] else "")
                tds.append(_cell(c["score"], c["ci_low"], c["ci_high"], title, href, bool(c.get("estimate"))))
            a = avgs.get((mode, matcher, model))
            for _, col in AVERAGES:
                if a is None or a["reason"] is not None:
                    reason = a["reason"] if a else "no average"
                    k = notes.setdefault(reason, len(notes) + 1)
                    tds.append(f'<td class="missing" title="{html.escape(reason)}">missing<sup>{k}</sup></td>')
                else:
                    tds.append(_cell(a[col], a[f"{col}_ci_low"], a[f"{col}_ci_high"],
                                     f"over {a['lengths']} tokens", None, bool(a.get("estimate"))))
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
        decisions.append(pairs_html(con, g) + _estimates_html(g, list(avgs.values())) + effective_html(con, g))
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
            f"model answered. The paired differences further down are clustered by context. {CLUSTERING_NOTE} "
            f"A number links to its instances in the build's instance browser. The data: "
            f"<code>catalogue.duckdb</code> (tables leaderboard, averages, missing, groups, builds; views instances, "
            f"responses, scores over every build) and the Parquet files beside this page.</p>"
            f"{overview}{''.join(sections) or '<p>No build was found.</p>'}"
            f"{'<h2>Which model is better, and up to which length</h2>' + ''.join(decisions) if any(decisions) else ''}"
            f"<h2>Missing cells</h2>{'<ul>' + legend + '</ul>' if legend else '<p>None: every cell is present.</p>'}"
            f"{'<table><thead><tr><th class=name>model</th><th class=name>build</th><th class=name>mode</th><th class=name>matcher</th><th>context length</th><th class=name>why</th></tr></thead><tbody>' + miss + '</tbody></table>' if miss else ''}"
            f"<h2>Builds</h2><table><thead><tr><th class=name>benchmark</th><th class=name>build hash</th>"
            f"<th class=name>run root</th><th>version</th><th class=name>directory</th></tr></thead>"
            f"<tbody>{brow}</tbody></table></body></html>\n")
