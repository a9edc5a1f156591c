"""The report's planted-fact (needles) section: accuracy per model × tier × depth × variant, a depth × tier heatmap
per model, decay regimes, the memorization probe, failure-mode counts, and a note for every haystack sized with an
approximate tokenizer (the model registry's ``approximate: true``). Numbers from :mod:`ctxbench.tracks.needles.analysis`;
heatmaps drawn by :mod:`ctxbench.report.plots` (offline); every heatmap cell links to its instances."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.tracks.needles.analysis import FAILURE_MODES, NeedlesAnalysis, analyse, parse_threshold_overrides
from ctxbench.report import plots
from ctxbench.report.context import ReportContext
from ctxbench.models.registry import model_info
from ctxbench.core.storage import write_parquet


def _sizing_models(build_dir: Path) -> tuple[list[str], set[str]]:
    """The needles instances' sizing models, and those whose instances say ``sizing_approximate`` (a build-side
    column, where present)."""
    names = set(pq.read_schema(build_dir / "instances.parquet").names)
    if not {"benchmark", "sizing_model"} <= names:
        return [], set()
    cols = ["benchmark", "sizing_model", *(["sizing_approximate"] if "sizing_approximate" in names else [])]
    t = [r for r in pq.read_table(build_dir / "instances.parquet", columns=cols).to_pylist()
         if r["benchmark"] == "needles" and r["sizing_model"]]
    return sorted({r["sizing_model"] for r in t}), {r["sizing_model"] for r in t if r.get("sizing_approximate")}


def approximate_notes(sizing_models: list[str], flagged: set[str] = frozenset()) -> list[str]:
    """One sentence per sizing model whose model-registry entry says its tokenizer is approximate (or whose
    instances were flagged ``sizing_approximate`` by the build)."""
    out = []
    for m in sizing_models:
        info = model_info(m)
        if info.approximate:
            out.append(f"Haystacks for {m} were sized with {info.tokenizer}, which only approximates {m}'s own "
                       f"tokenizer (sizing kept a {info.safety_margin:.0%} safety margin): their token counts, "
                       f"depths in tokens and tiers are approximate.")
        elif m in flagged:
            out.append(f"Haystacks for {m} were sized with an approximate tokenizer (the build marked them "
                       f"sizing_approximate): their token counts, depths in tokens and tiers are approximate.")
    return out


def heatmap_figure(title: str, h: dict, link=None):
    """A depth × tier heatmap (rows: depths, columns: tiers in tokens) of ``correct/n`` cells coloured by accuracy,
    missing cells blank (:func:`ctxbench.report.plots.heatmap`); ``link(depth_label, tier)``: the address of a
    cell's instances. None without cells."""
    return plots.heatmap(h["cells"], h["depths"], h["tiers"], title, "tier (tokens)", "depth (tokens)", link=link)


def depth_filter(label: str) -> dict:
    """The instance-browser filter of a heatmap row: ``variant=chain`` for chains, else the requested ``depth``
    (``25%`` → 0.25)."""
    if label == "chain":
        return {"variant": "chain"}
    try:
        return {"depth": float(label.rstrip("%")) / 100}
    except ValueError:
        return {}


def _achieved(r: dict) -> str:
    """The range of token depths reached in an accuracy row: ``49.6%`` or ``49.6–50.4%``; ``–`` for chains."""
    lo, hi = r.get("achieved_min"), r.get("achieved_max")
    if lo is None:
        return "–"
    return f"{lo:.1%}" if round(lo, 3) == round(hi, 3) else f"{lo * 100:.1f}–{hi:.1%}"


def _frac(c: int, n: int) -> str:
    return f"{c}/{n} = {c / n:.2f}" if n else "–"


def needles_section(ctx: ReportContext) -> str:
    """HTML of the needles section ("" for a build without needles instances), a report section
    (:class:`ctxbench.report.context.ReportContext`): the haystacks' sizing (from the manifest), accuracy by depth
    and tier, decay regimes, the memorization probe and failure modes; writes ``needles_*.parquet`` into
    ``ctx.out`` for the tables that have rows. ``ctx.options["regime"]``: ``KEY=VALUE`` overrides of the
    decay-regime thresholds (:func:`parse_threshold_overrides`; InputError for a malformed item or unknown key)."""
    build_dir, out_dir, _table = ctx.build_dir, ctx.out, ctx.table
    regime_thresholds = parse_threshold_overrides(ctx.options.get("regime")) or None
    sizing, flagged = _sizing_models(build_dir)
    if not sizing:
        return ""
    a: NeedlesAnalysis = analyse(build_dir, regime_thresholds)
    for name, rows in a.tables().items():
        if rows:
            write_parquet(pa.Table.from_pylist(rows), out_dir / f"{name}.parquet")
    notes = "".join(f'<p class="note"><b>Approximate tokenizer.</b> {html.escape(n)}</p>'
                    for n in approximate_notes(sizing, flagged))
    th = a.thresholds
    haystacks = ctx.manifest.get("haystacks")
    parts = [
        "<h2>Planted facts (needles)</h2>", notes,
        ("<h3>Haystacks (tokens of each sizing model's tokenizer; k = whole paragraphs)</h3>"
         + _table(haystacks, ["model", "tier", "tokenizer", "window", "budget", "tokens", "chars", "k",
                              "approximate"])) if haystacks else "",
        ("<p>A reply is correct when the expected value (gold or an accepted answer) appears in its visible answer "
         "(matcher <code>substring</code>): numerals match across Arabic, Chinese and English forms, never inside "
         "a longer number, with traditional/simplified and width folding. Exposed reasoning is stored apart and not "
         "scored. Intervals are 95% and clustered by needle.</p>"),
    ]
    if not a.accuracy:
        parts.append("<p>No scores yet.</p>")
        return "\n".join(parts)
    parts.append("<h3>Accuracy by depth and tier</h3><p>Depth is the fraction of the context's tokens (sizing "
                 "model's tokenizer) before the needle, as built. A row carries the requested depth where the needle "
                 "was placed within the build's tolerance of it (2 points, or one sentence where sentences are "
                 "longer), else the depth it reached; <i>achieved</i> gives the range reached.</p>")
    for (m, mode, s), h in sorted(a.heatmaps.items(), key=lambda kv: tuple(map(str, kv[0]))):
        def cell_link(d: str, t: int, m=m, mode=mode, s=s) -> str:
            return ctx.link(model=m, mode=mode, sizing_model=s, length=t, **depth_filter(d), score="scored")

        parts.append(ctx.figure(heatmap_figure(f"{m} ({mode}) on haystacks sized for {s}", h, cell_link)))
    acc = [{**r, "achieved": _achieved(r)} for r in a.accuracy]
    parts.append(_table(acc, ["model", "mode", "sizing_model", "tier", "depth", "achieved", "variant", "n", "correct",
                              "accuracy", "ci_low", "ci_high"],
                        lambda r: ctx.link(model=r["model"], mode=r["mode"], sizing_model=r["sizing_model"],
                                           length=r["tier"], **{**depth_filter(r["depth"]), "variant": r["variant"]},
                                           score="scored"), ("n", "correct", "accuracy")))
    parts.append(
        f"<h3>Decay regime across tiers</h3><p>From accuracy per tier over variants {', '.join(th.variants)}: "
        f"<i>stable</i> when every tier ≥ {th.stable_floor:g}; <i>late cliff</i> when tiers hold ≥ {th.high:g} and "
        f"then one step drops ≥ {th.cliff_drop:g} (and ≥ {th.cliff_ratio:g}× any other step) to below "
        f"{th.stable_floor:g}; <i>smooth decline</i> when accuracy falls ≥ {th.decline_min:g} overall, never rising "
        f"more than {th.rise_tolerance:g}, with no step carrying over {th.max_step_share:.0%} of the fall.</p>")
    regimes = [{**r, "curve": " · ".join(f"{t:,}: {c}/{n}" for t, c, n in json.loads(r["curve"]))}
               for r in a.regimes]
    parts.append(_table(regimes, ["model", "mode", "sizing_model", "regime", "curve", "reason"]))
    parts.append("<h3>Memorization probe (real vs altered)</h3><p>Asymmetry = real − altered accuracy over paired "
                 "cells (same needle, tier, depth, sample); a model that recites memory scores high on real and low "
                 "on altered cells, and answers altered cells with the real value.</p>")
    mem = [{"model": r["model"], "mode": r["mode"], "sizing_model": r["sizing_model"],
            "tier": r["tier"] if r["tier"] == "all" else f"{int(r['tier']):,}",
            "real": _frac(r["real_correct"], r["real_n"]), "altered": _frac(r["altered_correct"], r["altered_n"]),
            "pairs": r["pairs"],
            "asymmetry [95% CI]": (f"{r['asymmetry']:+.3f} [{r['asymmetry_ci_low']:+.3f}, "
                                   f"{r['asymmetry_ci_high']:+.3f}]") if r["pairs"] else "–",
            "altered answered with the real value": r["altered_answered_real"],
            "asymmetric": "yes" if r["asymmetric"] else "no"} for r in a.memorization]
    parts.append(_table(mem, list(mem[0]) if mem else []))
    parts.append("<h3>Failure modes</h3><p>Counts over wrong replies (by the judge model where one scored them, "
                 "else by rules; see <code>ctxbench/tracks/needles/analysis.py</code>).</p>")
    tags = [*FAILURE_MODES, "null_answer", "memorized_value"]   # headers with spaces, so that they wrap
    failures = [{**{k: r[k] for k in ("model", "mode", "sizing_model", "variant", "cells", "wrong")},
                 **{t.replace("_", " "): r[t] for t in tags}} for r in a.failures]
    parts.append(_table(failures, list(failures[0]) if failures else []))
    return "\n".join(parts)
