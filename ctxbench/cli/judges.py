"""Closed-book screening and judge validation: ``screen``, ``label`` and ``kappa``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ctxbench.analysis.agreement import append_label, judge_agreement, label_sample, labelled_keys, write_kappa
from ctxbench.analysis.closed_book import screen_build
from ctxbench.cli.common import console, out_console, print_table, say_concurrency, say_failed
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.core.errors import CtxbenchError
from ctxbench.models.backends import server_for
from ctxbench.scoring.numbers import display_number


def screen_cmd(*, build: Path, model: str, base_url: Optional[str], api_key_env: Optional[str],
               concurrency: int, concurrency_given: bool = False) -> None:
    """The work of :func:`ctxbench.cli.commands.judges.screen_cmd` (its options and help)."""
    try:
        say_concurrency(model, base_url, concurrency, concurrency_given)
        s = screen_build(build, model, base_url, api_key_env, concurrency,
                         server=server_for(model, base_url))
    except USER_ERRORS as e:
        fail(e)
    out_console.print(f"{model}: {s.questions} questions asked without context ({s.from_cache} from cache, "
                      f"{s.failed} failed); {s.flagged} of {s.instances} instances answered correctly closed-book "
                      f"(flagged) → {build / 'closed_book.parquet'}")
    for n in s.notes:
        console.print(f"  {n}", markup=False)
    if s.failed:  # failed calls: exit 1 as evaluate does (docs/reference/exit-codes.md); a rerun asks them again
        raise typer.Exit(say_failed(s.failed, [], build / "closed_book.parquet"))


def label_cmd(*, build: Path, n: int, out: Path, model: Optional[str], seed: int) -> None:
    """The work of :func:`ctxbench.cli.commands.judges.label_cmd` (its options and help)."""
    try:
        done = labelled_keys(out)
        items = label_sample(build, n - len(done), seed, model, exclude=done) if n > len(done) else []
    except USER_ERRORS as e:
        fail(e)
    out_console.print(f"{len(done)} already labelled in {out}; {len(items)} to go. Compare the answer with the "
                      f"gold answer: c = correct, p = partial, i = incorrect, s = skip, q = quit.")
    labelled = 0
    for k, it in enumerate(items, 1):
        gold = "\n".join("  " + " | ".join("NULL" if v is None else display_number(v) if isinstance(v, float)
                                            else str(v) for v in row) for row in it["gold"])
        out_console.print(f"\n[{k}/{len(items)}] {it['instance_id']} ({it['model']}, {it['mode']})\n"
                          f"Question: {it['question']}\nGold answer:\n{gold}\nAnswer:\n{it['response']}")
        v = ""
        while v not in ("c", "p", "i", "s", "q"):
            v = typer.prompt("verdict [c/p/i/s/q]").strip().lower()[:1]
        if v == "q":
            break
        if v == "s":
            continue
        append_label(out, it, {"c": "correct", "p": "partial", "i": "incorrect"}[v])
        labelled += 1
    out_console.print(f"{labelled} labels added → {out}")


def kappa_cmd(*, build: Path, labels: Path, threshold: float) -> None:
    """The work of :func:`ctxbench.cli.commands.judges.kappa_cmd` (its options and help)."""
    try:
        rows, counts = judge_agreement(build, labels, threshold)
    except USER_ERRORS as e:
        fail(e)
    t = Table(title=f"judge agreement with {counts['labels']} human labels ({counts['unmatched']} unmatched)")
    for c in ("judge", "kind", "n", "P_o", "P_e", "kappa", "95% CI"):
        t.add_column(c, justify="left" if c in ("judge", "kind") else "right")
    for r in rows:
        ci = "undefined" if r["kappa"] is None else f"{r['ci_low']:.3f}–{r['ci_high']:.3f}"
        t.add_row(r["matcher"], r["kind"], str(r["n"]), f"{r['po']:.3f}", f"{r['pe']:.3f}",
                  "undefined" if r["kappa"] is None else f"{r['kappa']:.3f}", ci)
    if not rows:
        fail(CtxbenchError(f"no judge in {build / 'scores.parquet'} scored a labelled answer: run `ctxbench score` "
                            f"(with --judge) on the build the labels come from"))
    print_table(t)
    write_kappa(build, rows, labels)
