"""The report's section on answers that are stored but not scored because of the server or the judge (issue 13):
silently truncated prompts (status ``truncated``: the server read fewer prompt tokens than were sent) and judge
verdicts left unscored (unparseable after one repair prompt, or failed calls; ``BUILD/judge_unscored.parquet``).
Empty for a build with neither."""

from __future__ import annotations

import html
from collections import Counter

import pyarrow.parquet as pq

from ..storage import read_table
from .context import ReportContext


def call_issues_section(ctx: ReportContext) -> str:
    """HTML of the section; "" when there is nothing to show."""
    build_dir, table = ctx.build_dir, ctx.table
    parts = []
    rt = read_table(build_dir / "responses.parquet", "responses")
    if rt.num_rows:
        resp = rt.select(["model", "mode", "status", "prompt_tokens", "error"]).to_pylist()
        trunc = [r for r in resp if r["status"] == "truncated"]
        if trunc:
            n = Counter((r["model"], r["mode"]) for r in resp)
            t = Counter((r["model"], r["mode"]) for r in trunc)
            rows = [{"model": m, "mode": md, "responses": n[(m, md)], "truncated": c,
                     "server read at most": max(r["prompt_tokens"] or 0 for r in trunc
                                                if (r["model"], r["mode"]) == (m, md))}
                    for (m, md), c in sorted(t.items())]
            parts.append("<h3>Truncated prompts</h3><p>The server read fewer prompt tokens than were sent (its "
                         "<code>usage.prompt_tokens</code> below the prompt's count): it cut the context to fit its "
                         "window, so these replies answer another question and are left out of every score. Start "
                         "the server with a larger context window and rerun <code>evaluate</code>. Example: "
                         f"{html.escape(trunc[0]['error'] or '')}</p>"
                         + table(rows, ["model", "mode", "responses", "truncated", "server read at most"]))
    up = build_dir / "judge_unscored.parquet"
    if up.exists():
        un = pq.read_table(up).to_pylist()
        if un:
            c = Counter((r.get("matcher") or f"judge:{r['judge']}", r["model"], r["reason"]) for r in un)
            rows = [{"judge": j, "model": m, "reason": why, "responses": k} for (j, m, why), k in sorted(c.items())]
            parts.append("<h3>Judge verdicts not scored</h3><p>Replies of the judge that could not be read as a "
                         "verdict, also after one repair prompt, or calls that failed: these responses have no "
                         "judge score (they are not counted as wrong).</p>"
                         + table(rows, ["judge", "model", "reason", "responses"]))
    return ("<h2>Answers not scored (server truncation, judge)</h2>" + "".join(parts)) if parts else ""
