"""Closed-book screening and judge validation: ``screen``, ``label`` and ``kappa``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ctxbench.analysis.agreement import append_label, judge_agreement, label_sample, labelled_keys, write_kappa
from ctxbench.analysis.closed_book import screen_build
from ctxbench.cli.common import USER_ERRORS, console, fail, out_console, print_table, say_failed
from ctxbench.cli.options import check_env, check_text, check_url
from ctxbench.core.errors import CtxbenchError
from ctxbench.models.backends import server_for
from ctxbench.scoring.numbers import display_number


def screen_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
               model: str = typer.Option(..., callback=check_text,
                                         help="model asked each question without its context"),
               base_url: Optional[str] = typer.Option(None, callback=check_url, help="OpenAI-compatible endpoint"),
               api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                                         help="environment variable holding the key"),
               concurrency: int = typer.Option(8, min=1, help="calls in flight")) -> None:
    """Closed-book screen (LURCH): flag instances a model answers correctly without the context;
    writes BUILD/closed_book.parquet (evaluate --exclude-closed-book leaves them out)."""
    try:
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


def label_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
              n: int = typer.Option(30, min=1, help="answers to label"),
              out: Path = typer.Option(Path("labels.jsonl"), dir_okay=False,
                                       help="labels file (JSON Lines; appended, resumable)"),
              model: Optional[str] = typer.Option(None, callback=check_text, help="only this model's answers"),
              seed: int = typer.Option(0, min=0, help="sample seed")) -> None:
    """Label a sample of answers by hand (correct / partial / incorrect) for judge validation (`ctxbench kappa`)."""
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


def kappa_cmd(build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory (scored)"),
              labels: Path = typer.Option(..., exists=True, dir_okay=False,
                                          help="human labels (JSON Lines; `ctxbench label` writes them)"),
              threshold: float = typer.Option(1.0, min=0.0, max=1.0,
                                              help="score at or above which an answer counts as correct")) -> None:
    """Cohen's κ (95% CI) of every judge in BUILD/scores.parquet against human labels (LaRA appendix C): LLM
    judges of every prompt, matchers and fallbacks; writes BUILD/kappa.parquet for the report."""


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
