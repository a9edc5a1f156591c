"""Single commands around a build: ``sql-info``, ``tracks``, ``calibrate``, ``plan`` and ``export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Optional

from rich.table import Table

from ctxbench.cli.common import out_console, print_table
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.core.track import tracks
from ctxbench.questions.sqlinfo import sql_info, sql_info_on_db
from ctxbench.run.calibration import calibrate_corpus
from ctxbench.run.export import export_build
from ctxbench.run.planning import make_plan


def sql_info_cmd(*, sql: str, db: Path) -> None:
    """The work of :func:`ctxbench.cli.commands.tools.sql_info_cmd` (its options and help)."""
    try:
        out_console.print_json(json.dumps(sql_info_on_db(sql, db) if db is not None else sql_info(sql)))
    except USER_ERRORS as e:
        fail(e)


def tracks_cmd(*, as_json: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.tools.tracks_cmd` (its options and help)."""
    try:
        ds = [t.describe() for t in tracks()]
    except USER_ERRORS as e:
        fail(e)
    if as_json:
        out_console.print_json(json.dumps(ds))
        return
    for d in ds:
        lines = [f"{d['name']}: {d['title']}",
                 "  commands: " + ", ".join(f"ctxbench {v} {d['name']}" for v in d["verbs"]),
                 "  stages:   " + " → ".join(d["stages"]),
                 "  matchers: " + (", ".join(f"{m} (fallback)" if m in d["fallback_matchers"] else m
                                             for m in d["matchers"]) or "none") + " (primary first)"]
        if d["tagger"]:
            lines.append(f"  tagger:   {d['tagger']}")
        if d["answer_filters"]:
            lines.append("  answer filters: " + ", ".join(d["answer_filters"]))
        if d["judge_prompts"]:
            lines.append("  judge prompts: " + ", ".join(d["judge_prompts"]) + " (score --judge MODEL --judge-prompt "
                         "NAME)")
        if d["report_sections"]:
            lines.append("  report:   " + ", ".join(d["report_sections"]))
        lines.append(f"  defined in {d['module']}")
        out_console.print("\n".join(lines))


def calibrate_cmd(*, corpus: Path, tokenizers: Optional[str], exclude: str, out: Optional[Path]) -> None:
    """The work of :func:`ctxbench.cli.commands.tools.calibrate_cmd` (its options and help)."""
    try:
        r = calibrate_corpus(corpus, [x.strip() for x in tokenizers.split(",")] if tokenizers else None,
                             [x for x in exclude.split(",") if x.strip()], out)
    except USER_ERRORS as e:
        fail(e)
    cals = r.calibrations
    t = Table(title=f"{r.corpus_id}: tokens per character ({cals[0].chars_nonspace:,} non-space characters)")
    for col in ("tokenizer", "tokens", "tokens/char", "seconds"):
        t.add_column(col, justify="left" if col == "tokenizer" else "right")
    for x in sorted(cals, key=lambda x: x.tokens_per_char):
        t.add_row(x.tokenizer, f"{x.tokens:,}", f"{x.tokens_per_char:.3f}", f"{x.seconds or 0:.1f}")
    print_table(t)
    out_console.print(f"spread (largest / smallest): {r.spread:.2f}x" + (f"; written to {r.written}" if r.written else ""))


def plan_cmd(*, accuracy: Optional[float], mde: float, power: float, alpha: float, pilot: Optional[Path],
             models: Optional[str], build: Optional[Path], as_json: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.tools.plan_cmd` (its options and help)."""
    try:
        p = make_plan(accuracy, mde, power, alpha, pilot, models.split(",") if models else None, build)
    except USER_ERRORS as e:
        fail(e)
    if as_json:
        print(json.dumps(p, indent=1, default=str))
        return
    out_console.print(f"instances per model and context length: {p['instances']:,} ({p['design']} design; "
                      f"power {p['power']}, two-sided alpha {p['alpha']}, difference {p['mde']})")
    if "independent_instances" in p and p["design"] == "paired":
        out_console.print(f"without pairing (two independent proportions {p['accuracy']} vs "
                          f"{p['accuracy'] - p['mde']:.4g}): {p['independent_instances']:,}")
    elif p["design"] == "independent":
        out_console.print(f"two independent proportions {p['accuracy']} vs {p['accuracy'] - p['mde']:.4g}, normal "
                          f"approximation, no continuity correction (the conservative bound; --pilot plans the "
                          f"paired design)")
    if "pilot" in p:
        e = p["pilot"]
        out_console.print(f"pilot {e['build']}: {e['n']} shared instances in {e['clusters']} contexts; the models "
                          f"disagree on {e['discordance']:.3f} (mean squared difference), observed difference "
                          f"{e['diff']:+.3f}, design effect of the contexts {e['deff']:.2f}; planned at a "
                          f"discordance of {e['discordance_at_mde']:.3f} (the pilot's spread at a difference "
                          f"{p['mde']})")
    for t in p.get("tiers", []):
        out_console.print(f"tier {t['context_length']:,} tokens: {t['instances_in_build']:,} instances in the build"
                          + (f", {t['short_by']:,} short" if t["short_by"] else ", enough"))
    if p.get("tiers_pooled") is not None:
        have, held = len(p.get("tiers", [])), sum(t["instances_in_build"] for t in p.get("tiers", []))
        if p["tiers_pooled"] <= have:
            out_console.print(f"pooled over lengths: {p['tiers_pooled']} of this build's {have} tier(s) hold that "
                              f"many instances")
        else:  # never "18 tier(s)" of a 2-tier build: say how short the whole build is
            out_console.print(f"pooled over lengths: this build's {have} tier(s) hold {held:,} instances, "
                              f"{p['instances'] - held:,} short of {p['instances']:,}; it would take "
                              f"{p['tiers_pooled']} tiers of this size")
    for m, c in (p.get("costs") or {}).items():
        tot = c["total"]

        def usd(v):
            return "unknown (no price)" if v is None else f"${v:,.4f}"

        out_console.print(f"{m}: {p['instances']:,} instances x {len(c['tiers'])} tiers x {c['samples']} sample(s), "
                          f"output budget {c['output_budget']:,} tokens ({c['tokenizer']}): {usd(tot['cost'])}, "
                          f"with cached input {usd(tot['cost_cached'])}; batch API {usd(tot['cost_batch'])}, "
                          f"with cached input {usd(tot['cost_batch_cached'])}")


def export_cmd(*, build: list[Path], format: str, out: Path, test_fraction: Optional[float], seed: int,
               prompt_variant: Literal['cot', 'direct'], model: str, force: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.tools.export_cmd` (its options and help)."""
    try:
        r = export_build(build, format, out, test_fraction=test_fraction, seed=seed, prompt_variant=prompt_variant,
                         model=model, force=force)
    except USER_ERRORS as e:
        fail(e)
    out_console.print(f"exported {r.n_instances} instances as {format} → {r.out} ({', '.join(r.files[:6])}"
                      f"{', ...' if len(r.files) > 6 else ''})")
    if r.split:
        s = r.split
        out_console.print(f"split: {s['train']} train / {s['test']} test instances; sources train {s['train_sources']}"
                          f" / test {s['test_sources']}; shared sources {s['shared_sources']}, shared templates "
                          f"{s['shared_templates']}")
