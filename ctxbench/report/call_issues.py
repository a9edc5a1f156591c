"""The report's section on answers that are stored but not scored because of the server or the judge (issues 13,
21): silently truncated prompts (status ``truncated``: the server read fewer prompt tokens than were sent), replies
the output budget cut off (``cut_off``: a length-like ``finish_reason``), 200 answers that were no answer (``error``
rows of an unrecognised reply shape or an empty reply), and judge verdicts left unscored (unparseable after one
repair prompt, or failed calls; ``BUILD/judge_unscored.parquet``). Empty for a build with none."""

from __future__ import annotations

import html
from collections import Counter

import pyarrow.parquet as pq

from ctxbench.models.effort import is_cut_off
from ctxbench.core.storage import read_table
from ctxbench.report.context import ReportContext


def _no_answer_reason(r: dict) -> str:
    """The reason a stored 200 was no answer, in words, for the report's table."""
    err = r["error"] or ""
    if r["status"] == "empty_reply":
        return "empty reply (tokens generated, no text returned: a server fault)"
    if err.startswith("unrec"):
        return "unrecognised reply shape"
    if err.startswith("in-band"):
        return "provider error inside a 200 (finish_reason error), after its retries"
    if err.startswith("not a finished answer"):
        return f"not a finished answer (finish_reason {r.get('finish_reason') or 'none sent'})"
    return "empty reply (the server dropped the prompt)"


def call_issues_section(ctx: ReportContext) -> str:
    """HTML of the section; "" when there is nothing to show."""
    build_dir, table = ctx.build_dir, ctx.table
    parts = []
    rt = read_table(build_dir / "responses.parquet", "responses")
    if rt.num_rows:
        cols = ["model", "mode", "status", "prompt_tokens", "error"] + \
            [c for c in ("finish_reason", "completion_tokens") if c in rt.column_names]
        resp = rt.select(cols).to_pylist()
        trunc = [r for r in resp if r["status"] == "truncated"]
        n = Counter((r["model"], r["mode"]) for r in resp)  # responses per model x mode, for both tables below
        if trunc:
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
        cut = [r for r in resp if is_cut_off(r)]  # the rule the calls and by-effort tables count by
        if cut:
            t = Counter((r["model"], r["mode"]) for r in cut)
            rows = [{"model": m, "mode": md, "responses": n[(m, md)], "cut off": c,
                     "finish reasons": ", ".join(sorted({str(r.get("finish_reason")) for r in cut
                                                         if (r["model"], r["mode"]) == (m, md)})),
                     "longest reply (tokens)": max(r.get("completion_tokens") or 0 for r in cut
                                                   if (r["model"], r["mode"]) == (m, md))}
                    for (m, md), c in sorted(t.items())]
            parts.append("<h3>Replies cut off by the output budget</h3><p>The server ended these replies at the "
                         "output budget (<code>finish_reason</code> <code>length</code>, <code>max_tokens</code>, "
                         "<code>MAX_TOKENS</code>, ...) before they finished: they are stored with status "
                         "<code>cut_off</code> and earn no credit from any matcher or judge (score 0, tag "
                         "<code>cut_off</code>: a value quoted on the way is not an answer). Raise the budget with <code>evaluate --max-tokens</code> and rerun.</p>"
                         + table(rows, ["model", "mode", "responses", "cut off", "finish reasons",
                                        "longest reply (tokens)"]))
        bad = [r for r in resp if r["status"] == "empty_reply" or r["status"] == "error" and (
            r["error"] or "").startswith(("unrecognised reply shape", "empty reply", "not a finished answer",
                                          "in-band provider error"))]
        if bad:
            c = Counter((r["model"], r["mode"], _no_answer_reason(r)) for r in bad)
            rows = [{"model": m, "mode": md, "reason": why, "responses": k} for (m, md, why), k in sorted(c.items())]
            parts.append("<h3>Answers that were no answer</h3><p>HTTP 200 bodies that held no reply ctxbench "
                         "recognises, an empty reply (asked once more), a provider error inside the 200 "
                         "(<code>finish_reason</code> <code>error</code>, retried), or a finish reason that does not "
                         "mean a finished answer: stored as <code>error</code> or <code>empty_reply</code> rows, "
                         "never scored; the same <code>evaluate</code> asks them again. Example: " + html.escape(bad[0]["error"][:300]) + "</p>"
                         + table(rows, ["model", "mode", "reason", "responses"]))
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
    return ("<h2>Answers not scored or scored 0 (server truncation; output budget: 0, cut off; judge)</h2>" + "".join(parts)) if parts \
        else ""
