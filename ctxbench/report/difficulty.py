"""The report's LURCH and judge-validation sections: instance difficulty (scope, dispersion, reasoning depth) and
its regression per evaluation mode — coefficients, Wald tests, interquartile contrasts and length × property
interactions, or why they are inestimable — the count of instances with null properties, the closed-book screen
per model, and Cohen's κ of every judge against human labels (``BUILD/kappa.parquet``, written by
``ctxbench kappa``). Numbers from :mod:`ctxbench.analysis.regression`, :mod:`ctxbench.analysis.closed_book` and
:mod:`ctxbench.analysis.agreement`; tables also as ``report/difficulty_*.parquet``."""

from __future__ import annotations

import html

import pyarrow as pa
import pyarrow.parquet as pq

from ctxbench.analysis.closed_book import screen_summary
from ctxbench.analysis.regression import difficulty_regression, difficulty_regression_modes, mode_labels
from ctxbench.core.storage import read_table, write_parquet
from ctxbench.report.context import ReportContext
from ctxbench.report.plots import contrasts, figure_div
from ctxbench.report.render import labelled_table


def _factors_block(res: dict) -> str:
    """Issue 25's factors (near-miss share, look-alike count, lexical overlap, reasoning effort) that varied in the
    fit: which matter (Holm-adjusted p < 0.05 over these factors), with β per SD and its clustered 95% interval."""
    fac = res.get("factors") or []
    if not fac:
        return ""
    said = [f"{f['factor']} ({'matters' if f['matters'] else 'no clear effect'}: β = {f['coef']:+.3f} per SD, "
            f"95% CI {f['ci_low']:+.3f} to {f['ci_high']:+.3f}, p (Holm) = {f['p_holm']:.3g})" for f in fac]
    return ("<p><strong>Harder axes</strong> (entered where they vary; linear z-scores, a missing value at the "
            "mean; Holm over these factors): " + html.escape("; ".join(said)) + ".</p>"
            + labelled_table(fac, [("factor", "factor"), ("coef", "β"), ("ci_low", "CI low"), ("ci_high", "CI high"),
                                   ("p", "p"), ("p_holm", "p (Holm)"), ("matters", "matters")]))


def _regression_block(res: dict) -> str:
    mode = html.escape(str(res["mode"]))
    head = (f"<h3>Mode {mode}</h3><p>{res['n_obs']} instance × model observations ({res['n_instances']} instances, "
            f"{res['n_questions']} questions, {res['n_tasks']} task(s), {res['n_models']} model(s)); "
            f"{res['null_properties']} scored observation(s) left out for a null property.</p>")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in res["notes"])
    notes = f"<ul>{notes}</ul>" if notes else ""
    if not res["estimable"]:
        return head + notes + (f"<p><strong>The difficulty regression is inestimable:</strong> "
                               f"{html.escape(str(res['reason']))}. No coefficients are reported.</p>")
    coefs = [c for c in res["coefficients"] if not c["term"].startswith(("task[", "model[", "intercept"))]
    inter = [i for i in res["interactions"]]
    return head + notes + (
        "<p>Fractional-logit GLM (logit scale, per SD of the log₂ predictor; task and model fixed effects; "
        "SEs clustered by question). Holm-adjusted p over the four RQ1 Wald tests.</p>"
        + labelled_table(coefs, [("term", "term"), ("coef", "β"), ("se", "SE"), ("ci_low", "CI low"),
                       ("ci_high", "CI high"), ("p", "p"), ("p_holm", "p (Holm)"), ("reason", "inestimable")])
        + labelled_table(res["wald"], [("test", "Wald test"), ("stat", "χ²"), ("df", "df"), ("p", "p"),
                             ("p_holm", "p (Holm)")])
        + _factors_block(res)
        + "<p>Within-task interquartile contrasts Δ25→75 (percentage points of score).</p>"
        + figure_div(contrasts(res["contrasts"], title=f"Difficulty contrasts Δ25→75, mode {res['mode']}"))
        + labelled_table(res["contrasts"], [("predictor", "predictor"), ("pp", "Δ pp"), ("ci_low_pp", "CI low"),
                                  ("ci_high_pp", "CI high"), ("reason", "inestimable")])
        + "<p>Length × property interactions: the length contrast (pp) at the property's within-task 25th (low) "
          "and 75th (high) percentile; Holm over the six tests.</p>"
        + labelled_table(inter, [("attribute", "property"), ("gamma", "γ_L·j"), ("se", "SE"), ("gamma_p_holm", "p (Holm)"),
                       ("low_pp", "length Δ at low"), ("high_pp", "length Δ at high"), ("diff_pp", "high − low"),
                       ("diff_se_pp", "SE"), ("diff_p_holm", "p (Holm)"), ("reason", "inestimable")])
        + ("<p>Interquartile contrasts (pp) from the GLM fitted to each model separately.</p>"
           + labelled_table(res.get("per_model", []), [("model", "model"), ("predictor", "predictor"), ("pp", "Δ pp"),
                                             ("ci_low_pp", "CI low"), ("ci_high_pp", "CI high"),
                                             ("reason", "inestimable")]) if res.get("per_model") else ""))


def difficulty_section(ctx: ReportContext) -> str:
    """HTML of the difficulty, closed-book and judge-agreement sections; writes their tables under ``ctx.out``."""
    build_dir, out = ctx.build_dir, ctx.out
    names = set(pq.read_schema(build_dir / "instances.parquet").names)
    parts = ["<h2>Instance difficulty (LURCH)</h2>"]
    if {"scope", "dispersion", "reasoning_depth"} <= names:
        t = pq.read_table(build_dir / "instances.parquet",
                          columns=["benchmark", "scope", "dispersion", "reasoning_depth"]).to_pylist()
        by: dict[str, list[int]] = {}
        for r in t:
            c = by.setdefault(r["benchmark"], [0, 0])
            c[0] += 1
            c[1] += any(r[k] is None for k in ("scope", "dispersion", "reasoning_depth"))
        prop = [{"benchmark": b, "instances": n, "null_properties": k} for b, (n, k) in sorted(by.items())]
        parts.append("<p>Instances whose scope, dispersion or reasoning depth is null (no evidence spans or no "
                     "known derivation) are left out of the regression.</p>"
                     + labelled_table(prop, [("benchmark", "benchmark"), ("instances", "instances"),
                                   ("null_properties", "with null properties")]))
        labels = mode_labels(build_dir)
        modes = sorted({labels.get(s.get("request_key"), s["mode"])
                        for s in read_table(build_dir / "scores.parquet", "scores").to_pylist()})
        summary = []
        for mode in modes:
            res = difficulty_regression(build_dir, mode)
            parts.append(_regression_block(res))
            summary += [{"mode": mode, "kind": "coefficient", "term": c["term"], "value": c["coef"], "se": c["se"],
                         "p_holm": c.get("p_holm"), "reason": c["reason"] or res["reason"]}
                        for c in res["coefficients"]]
            summary += [{"mode": mode, "kind": "contrast_pp", "term": c["predictor"], "value": c["pp"],
                         "se": c["se_pp"], "p_holm": None, "reason": c.get("reason")} for c in res["contrasts"]]
        if len(modes) > 1:  # the modes pooled, the mode as a factor: at equal scope, dispersion, depth
            res = difficulty_regression_modes(build_dir, modes)
            parts.append(f"<h3>All modes pooled, the mode as a factor (against {modes[0]})</h3>"
                         + _regression_block(res))
            summary += [{"mode": res["mode"], "kind": "coefficient", "term": c["term"], "value": c["coef"],
                         "se": c["se"], "p_holm": c.get("p_holm"), "reason": c["reason"] or res["reason"]}
                        for c in res["coefficients"]]
        if summary:
            write_parquet(pa.Table.from_pylist(summary), out / "difficulty_regression.parquet")
        if not modes:
            parts.append("<p>No scores yet.</p>")
    else:
        parts.append("<p>This build has no scope, dispersion and reasoning depth columns (built before they "
                     "existed): rebuild it to analyse difficulty.</p>")
    screen = screen_summary(build_dir)
    if screen:
        write_parquet(pa.Table.from_pylist(screen), out / "difficulty_closed_book.parquet")
        parts.append("<h2>Closed-book screen</h2><p>Instances each model answers correctly without the context "
                     "(parametric knowledge or question-only cues; `evaluate --exclude-closed-book` leaves them "
                     "out).</p>" + labelled_table(screen, [("model", "model"), ("instances", "instances"),
                                                 ("flagged", "flagged"), ("failed", "failed calls"),
                                                 ("flagged_share", "flagged share")]))
    kp = build_dir / "kappa.parquet"
    if kp.exists():
        rows = pq.read_table(kp).to_pylist()
        parts.append("<h2>Judge agreement with human labels</h2><p>Cohen's κ (LaRA appendix C) of every judge "
                     "against the labels file, with a 95% interval (asymptotic SE); an answer counts as correct "
                     "at or above the threshold score.</p>"
                     + labelled_table(rows, [("matcher", "judge"), ("n", "n"), ("threshold", "threshold"), ("po", "P_o"),
                                   ("pe", "P_e"), ("kappa", "κ"), ("ci_low", "CI low"), ("ci_high", "CI high"),
                                   ("kind", "kind")]))
    return "".join(parts)
