"""Report section: answerability certificates (``certificates.parquet``, :mod:`ctxbench.verify`): the share of
instances certified per track, with the counts per status and the most frequent reasons for the rest."""

from __future__ import annotations

import html
import json
from collections import Counter

import pyarrow.parquet as pq

from ctxbench.report.render import table


def certificates_section(ctx) -> str:
    """``<h2>Answerability certificates</h2>`` with one row per track (certified share, counts per status) and the
    commonest reasons of failed or uncertifiable instances; "" when the build has no certificates."""
    p = ctx.build_dir / "certificates.parquet"
    if not p.exists():
        return ""
    certs = pq.read_table(p).to_pylist()
    bench = dict(zip(*pq.read_table(ctx.build_dir / "instances.parquet", columns=["instance_id", "benchmark"])
                     .to_pydict().values()))
    qp = ctx.build_dir / "quarantine.parquet"
    for q in (pq.read_table(qp).to_pylist() if qp.exists() else []):
        if q["stage"] == "verify" and q["input"] not in bench:  # failed instances the build quarantined
            try:
                bench[q["input"]] = json.loads(q["detail"] or "{}").get("track") or "quarantined"
            except ValueError:
                bench[q["input"]] = "quarantined"
    by: dict[str, Counter] = {}
    reasons: Counter = Counter()
    for c in certs:
        t = bench.get(c["instance_id"], "quarantined")
        by.setdefault(t, Counter())[c["status"]] += 1
        if c["status"] != "certified":
            reasons[(t, c["status"], c["reason"][:160])] += 1
    rows = []
    for t, n in sorted(by.items()):
        total = sum(n.values())
        rows.append({"track": t, "instances": total, "certified": n["certified"], "failed": n["failed"],
                     "uncertifiable": n["uncertifiable"],
                     "certified share": f"{n['certified'] / total:.1%}" if total else "-"})
    out = ("<h2>Answerability certificates</h2><p>Each gold answer re-derived from the context alone "
           "(<code>ctxbench verify</code>); failed instances are quarantined by the build.</p>"
           + table(rows, ["track", "instances", "certified", "failed", "uncertifiable", "certified share"]))
    if reasons:
        out += "<ul>" + "".join(f"<li>{html.escape(t)} {s} ×{k}: {html.escape(r)}</li>"
                                for (t, s, r), k in reasons.most_common(5)) + "</ul>"
    return out
