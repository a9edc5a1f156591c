"""``report``: accuracy by context length per model (with Avg / wAvg), breakdowns by position, query type and
difficulty (each with a 95% interval clustered by question), and counts of over-length, failed and cached calls;
then the RAG-versus-LC section, the sections of the build's tracks (each track's ``report_sections``) and the
difficulty section. Writes ``report/index.html`` and the same numbers as ``report/*.parquet``, the instance browser
(``report/instances.html``, :mod:`ctxbench.report.browser`; every aggregate links to its instances) and the local
``plotly.min.js`` its figures use (:mod:`ctxbench.report.plots`).

Every section has one signature, ``fn(ctx: ReportContext) -> str`` (:class:`ctxbench.report.context.ReportContext`);
the page joins their HTML. Numbers come from :mod:`ctxbench.analysis.core` and the analysis modules."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctxbench.analysis import core
from ctxbench.analysis.paired import CLUSTERING_NOTE
from ctxbench.core.storage import require_build, write_parquet
from ctxbench.core.track import find_track, resolve
from ctxbench.report import plots
from ctxbench.report.browser import PAGE, instances_link, write_browser
from ctxbench.report.context import ReportContext
from ctxbench.report.render import table
from ctxbench.report.browser import BrowserData
from ctxbench.scoring.registry import is_fallback

STYLE = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f4f4f4}"
         "nav.browse{background:#eef4fb;border:1px solid #c9dcf0;border-radius:6px;padding:.6em 1em;margin:1em 0}"
         "nav.browse a{font-weight:bold}td a{color:#0b57d0}")
# the instance-browser filter of each breakdown of core.breakdowns (breakdown name -> instance column)
BREAKDOWN_COLUMNS = {"setting": "setting", "position": "position", "query_type": "query_types",
                     "difficulty": "difficulty"}


def results_table(build_dir: str | Path, primary_only: bool = False) -> list[dict]:
    """:func:`ctxbench.analysis.core.results_table` (kept here: the table ``ctxbench run`` prints)."""
    return core.results_table(build_dir, primary_only)


def _scoring_note(ctx: ReportContext, rows: list[dict], inst: dict[str, dict]) -> str:
    notes = [t.scoring_note for t in map(find_track, ctx.benchmarks) if t is not None and t.scoring_note]
    note = " ".join(notes) or "Scores use the matchers each track registers (<code>ctxbench tracks</code>)."
    if not rows:
        note += " No answer has been scored yet."
    fb = sorted({r["matcher"] for r in rows if is_fallback(r["matcher"], inst[r["instance_id"]].get("benchmark"))})
    if fb:  # e.g. LaRA without an LLM judge
        note += (f" Matchers {', '.join(fb)} are a deterministic <b>fallback</b> for free-text answers (token "
                 f"containment / F1 against the reference, refusal detection for unanswerable questions), "
                 f"not the benchmark's LLM judge (<code>score --judge MODEL</code>, with <code>--judge-prompt "
                 f"NAME</code> for a judging prompt of the track's own: <code>ctxbench tracks</code>).")
    return note


def _shared_html(rows: list[dict], link) -> str:
    """Where models side by side were scored on different instances: a warning naming each length's counts, then
    accuracy by context length over the instances every model has (:func:`core.shared_instance_rows`); "" when
    every model of a length was scored on the same instances."""
    diff = core.differing_samples(core.primary_rows(rows))
    if not diff:
        return ""
    where = "; ".join(f"{d['context_length']:,} tokens ({html.escape(str(d['mode']))}, "
                      f"{html.escape(str(d['matcher']))}): "
                      + ", ".join(f"{html.escape(m)} {n}" for m, n in d["per_model"].items()) + f", {d['shared']} shared"
                      for d in diff)
    shared = core.length_rows(core.shared_instance_rows(rows))
    return (f'<p class="warning"><b>The models were scored on different instances</b>, so side by side the table '
            f"above compares different questions: {where}. The table below compares them on the shared instances "
            f"only (as <code>ctxbench compare</code> does).</p><h3>Accuracy by context length, shared instances "
            f"only</h3>"
            + table(shared, ["model", "mode", "matcher", "context_length", "n", "score", "ci_low", "ci_high",
                             "cut_off"], link))


def core_section(ctx: ReportContext) -> str:
    """The header, accuracy by context length, averages, the breakdowns, calls and run-to-run variance."""
    rows, inst = core.instance_scores(ctx.build_dir)
    by_len = core.results_table(ctx.build_dir)
    avgs = core.length_average_rows(by_len)
    brk = core.breakdowns(rows)
    count_rows = core.call_counts(ctx.build_dir)
    var_rows = core.variance_rows(rows)
    for name, data in (("by_length", by_len), ("averages", avgs), ("counts", count_rows),
                       *((f"by_{k}", v) for k, v in brk.items())):
        if data:
            write_parquet(pa.Table.from_pylist(data), ctx.out / f"{name}.parquet")
    m = ctx.manifest
    cols = ["model", "mode", "n", "score", "ci_low", "ci_high"]

    def len_link(r: dict) -> str:
        return ctx.link(model=r["model"], mode=r["mode"], matcher=r["matcher"], length=r["context_length"],
                        score="scored")

    def breakdown(name: str, title: str) -> str:
        col = BREAKDOWN_COLUMNS[name]
        link = lambda r: ctx.link(model=r["model"], mode=r["mode"], **{col: r[name]}, score="scored")  # noqa: E731
        fig = plots.accuracy_by_category(brk[name], name, f"Accuracy by {title}", title, link=link)
        return (f"<h2>By {html.escape(title)}</h2>{ctx.figure(fig) if len({r[name] for r in brk[name]}) > 1 else ''}"
                f"{table(brk[name], [*cols[:2], name, *cols[2:]], link)}")

    return f"""<h1>ctxbench report</h1>
<p>Build <code>{html.escape(str(m.get('build_hash', '')))}</code> · track {html.escape(str(m.get('track', '')))}
 · source {html.escape(str(m.get('db_id', '')))} · {len(inst)} instances · tokenizer
 {html.escape(str((m.get('tokenizer') or {}).get('name', '') if isinstance(m.get('tokenizer'), dict) else ''))}</p>
<p>{_scoring_note(ctx, rows, inst)} Intervals are 95% and clustered by question; the paired differences
 between models are clustered by context. {CLUSTERING_NOTE} Every count and score below links
 to the instances behind it (click a point of a figure, or a number of a table).</p>
<h2>Accuracy by context length</h2>
{ctx.figure(plots.accuracy_by_length(by_len, link=len_link)) if by_len else "<p>No scores yet.</p>"}
{table(by_len, ["model", "mode", "matcher", "context_length", "n", "score", "ci_low", "ci_high", "cut_off"], len_link)}
{_shared_html(rows, len_link)}
<h2>Averages over context lengths</h2>{table(avgs, ["model", "mode", "matcher", "Avg", "wAvg(inc)", "wAvg(dec)"])}
{breakdown("setting", "setting")}
{breakdown("position", "position")}
{breakdown("query_type", "query type")}
{breakdown("difficulty", "difficulty")}
<h2>Calls</h2>{table(count_rows, ["model", "mode", "calls", "ok", "over_length", "cut_off", "truncated", "failed", "refused",
                                    "empty_reply", "cached", "retries"],
                     lambda r: ctx.link(model=r["model"], mode=r["mode"]), ("calls",))}
<h2>Run-to-run variance</h2>{table(var_rows, ["model", "mean_sample_variance"])}"""


def browse_nav(data) -> str:
    """The report's pointer to the instance browser: counts and one link per model to its wrong answers."""
    assert isinstance(data, BrowserData)
    models = data.models
    per_model = " · ".join(f'<a href="{html.escape(instances_link({"model": m, "score": "wrong"}))}">'
                           f"{html.escape(m)}</a>" for m in models)
    return (f'<nav class="browse"><a href="{PAGE}">Browse every answer →</a> {data.instances:,} instances, '
            f"{data.answers:,} answers: question, gold answer, each model's reply (reasoning apart), extracted "
            f"answer, scores, failure tags and the context with its evidence highlighted; filters and sorting."
            + (f"<br>Wrong answers of {per_model}" if models else "") + "</nav>")


# the sections every report has, in order; the build's tracks' sections go before the last one
CORE_SECTIONS = ("ctxbench.report.html:core_section", "ctxbench.report.adaptive:adaptive_section",
                 "ctxbench.report.decide:decide_section",
                 "ctxbench.report.rag:rag_section", "ctxbench.report.modes:modes_section",
                 "ctxbench.report.call_issues:call_issues_section",
                 "ctxbench.report.certificates:certificates_section", "ctxbench.report.effort:effort_section",
                 "ctxbench.report.difficulty:difficulty_section")


def sections(ctx: ReportContext) -> list[Callable[[ReportContext], str]]:
    """The sections of a build's report: the core ones, with the report sections of every track whose instances
    the build holds (in registration order) before the difficulty section."""
    refs = list(CORE_SECTIONS[:-1])
    for t in filter(None, map(find_track, ctx.benchmarks)):
        refs += [r for r in t.report_sections if r not in refs]
    refs.append(CORE_SECTIONS[-1])
    return [resolve(r, "report section") for r in refs]


def build_report(build_dir: str | Path, options: Mapping[str, Any] | None = None) -> Path:
    """Write ``report/index.html`` and ``report/*.parquet`` for the build; returns the HTML path. ``options``:
    report options passed to every section (``{"regime": ["stable_floor=0.5"]}`` overrides the needles
    decay-regime thresholds of ``assets/analysis/needles.yaml``). Raises InputError for a build directory without
    instances, and what a section raises for a bad option (a damaged ``scores.parquet`` is named: the CLI's
    ``report`` and :func:`ctxbench.run.incremental.report_if_changed` score it again first,
    :func:`ctxbench.run.incremental.rescore_if_unreadable`)."""
    build_dir = require_build(build_dir)
    out = build_dir / "report"
    out.mkdir(exist_ok=True)
    ctx = ReportContext.of(build_dir, out, options)
    plots.write_plotly_js(out)
    data = write_browser(build_dir, out, str(ctx.manifest.get("build_hash", "") or ""))
    body = "\n".join(part for part in (fn(ctx) for fn in sections(ctx)) if part)
    doc = (f'<!doctype html><html><head><meta charset="utf-8"><title>ctxbench report</title><style>{STYLE}</style>'
           f"{plots.page_head()}</head><body>\n{browse_nav(data)}\n{body}\n</body></html>")
    p = out / "index.html"
    p.write_text(doc, encoding="utf-8")
    return p
