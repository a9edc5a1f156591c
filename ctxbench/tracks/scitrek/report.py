"""Report section of the scientific-article track (SciTrek section 4, tables 7 and 13; appendix D tables 14-17):
exact match and F1 per model × context format (F-* full text, D-* tables) × tier, per skill, and the share of
responses carrying each failure tag. Also written as ``report/scitrek_*.parquet``."""

from __future__ import annotations

import json
from collections import defaultdict
import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.scoring.metrics import clustered_mean_ci
from ctxbench.report import plots
from ctxbench.report.context import ReportContext
from ctxbench.core.storage import read_table, write_parquet

TAGS = ("null_answer", "wrong_format", "partial_list", "negation")


def _label(fmt: str, tier: int) -> str:
    """SciTrek's column names: F-64 / D-64 for 64K (1,024-token K), F-1024 for 1M."""
    return f"{'F' if fmt == 'full_text' else 'D'}-{tier // 1024}"


def scitrek_section(ctx: ReportContext) -> str:
    """HTML for the builds' scitrek instances ("" when there are none or nothing is scored): a report section
    (:class:`ctxbench.report.context.ReportContext`)."""
    build_dir, out, table = ctx.build_dir, ctx.out, ctx.table
    ip = build_dir / "instances.parquet"
    names = pq.read_schema(ip).names
    if "context_format" not in names or "skill" not in names:
        return ""
    inst = {r["instance_id"]: r for r in pq.read_table(
        ip, columns=["instance_id", "benchmark", "question_id", "context_format", "target_tokens", "skill"])
        .to_pylist() if r["benchmark"] == "scitrek"}
    sc = [r for r in read_table(build_dir / "scores.parquet", "scores").to_pylist() if r["instance_id"] in inst]
    if not sc:
        return ""
    by_fmt: dict[tuple, list] = defaultdict(list)
    by_skill: dict[tuple, list] = defaultdict(list)
    tags: dict[tuple, list[int]] = defaultdict(lambda: [0] * (len(TAGS) + 1))
    for r in sc:
        i = inst[r["instance_id"]]
        item = (r["score"], i["question_id"])
        by_fmt[(r["model"], r["mode"], r["matcher"], _label(i["context_format"], i["target_tokens"]))].append(item)
        by_skill[(r["model"], r["mode"], r["matcher"], i["skill"])].append(item)
        if r["matcher"] == "exact_match":
            t = tags[(r["model"], r["mode"], i["skill"])]
            t[0] += 1
            for k, name in enumerate(TAGS):
                t[k + 1] += name in json.loads(r["tags"] or "[]")

    def rows(groups: dict, key: str) -> list[dict]:
        res = []
        for (m, mode, matcher, k), items in sorted(groups.items()):
            mean, lo, hi = clustered_mean_ci([s for s, _ in items], [q for _, q in items])
            res.append({"model": m, "mode": mode, "matcher": matcher, key: k, "n": len(items), "score": mean,
                        "ci_low": lo, "ci_high": hi})
        return res

    fmt_rows, skill_rows = rows(by_fmt, "setting"), rows(by_skill, "skill")
    fmt_of = {_label(i["context_format"], i["target_tokens"]): (i["context_format"], i["target_tokens"])
              for i in inst.values()}

    def fmt_link(r: dict) -> str:
        f, t = fmt_of[r["setting"]]
        return ctx.link(model=r["model"], mode=r["mode"], matcher=r["matcher"], context_format=f, length=t,
                        score="scored")

    def skill_link(r: dict) -> str:
        return ctx.link(model=r["model"], mode=r["mode"], matcher=r["matcher"], skill=r["skill"], score="scored")

    primary = [r for r in skill_rows if r["matcher"] == "exact_match"] or skill_rows
    skill_fig = ctx.figure(plots.accuracy_by_category(primary, "skill", "Accuracy by skill", "skill",
                                                      link=skill_link))
    tag_rows = [{"model": m, "mode": mode, "skill": s, "responses": t[0],
                 **{name: round(t[k + 1] / t[0], 4) if t[0] else 0.0 for k, name in enumerate(TAGS)}}
                for (m, mode, s), t in sorted(tags.items())]
    for name, data in (("scitrek_by_setting", fmt_rows), ("scitrek_by_skill", skill_rows),
                       ("scitrek_failure_tags", tag_rows)):
        write_parquet(pa.Table.from_pylist(data), out / f"{name}.parquet")
    cols = ["model", "mode", "matcher"]
    return (f"<h2>Scientific articles (SciTrek)</h2><p>F-*: full-text articles as context, D-*: the metadata tables "
            f"as context (SciTrek table 7); the number is the tier in K tokens. Exact match and F1 over the answer's "
            f"items.</p>{table(fmt_rows, [*cols, 'setting', 'n', 'score', 'ci_low', 'ci_high'], fmt_link)}"
            f"<h3>By skill</h3>{skill_fig}{table(skill_rows, [*cols, 'skill', 'n', 'score', 'ci_low', 'ci_high'], skill_link)}"
            f"<h3>Failure tags (share of exact-match responses, SciTrek appendix D)</h3>"
            f"{table(tag_rows, ['model', 'mode', 'skill', 'responses', *TAGS])}")
