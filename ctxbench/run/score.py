"""``score``: every stored response × matcher → ``scores.parquet`` (recomputed whole, deterministic).

Responses with status ``ok`` are scored, and those with status ``cut_off`` (the output budget ended the reply
before its answer), which earn 0 from every matcher and judge with the tag ``cut_off`` (counted apart:
``ScoreSummary.cut_off``); over-length, truncated, refused and failed calls are never scored as wrong answers (they
are counted in the report instead). ``--mode repl`` answers that ended without ``FINAL`` (``max_steps``,
``over_budget``, ``step_timeout``) earn 0 from every matcher, tagged with their status, as ``cut_off`` does. A reply the budget ended without a finished final answer (``finish_reason``
``length``…) is scored as ``cut_off`` too, whatever values it quoted on the way; a reply whose visible content is
empty and whose answer is in the reasoning field is scored from it (tag ``answer_from_reasoning``); a reply that
degenerates into repetition is tagged ``degenerate_repetition`` (:meth:`ctxbench.scoring.pipeline.AnswerChain.extract`).
Every row stores ``details``: for each gold row the credit it got and the reply text that earned it. Every reply goes through its benchmark's answer pipeline first
(:mod:`ctxbench.scoring.pipeline`: reasoning blocks and chat tokens removed, the final answer taken); every matcher,
the failure tagger and the judge prompt receive that answer, and each row stores it as ``extracted_answer``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from ctxbench.analysis.irt import adaptive_rows
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import canonical_json
from ctxbench.scoring.pipeline import score_reply
from ctxbench.scoring.registry import tagger
from ctxbench.core.storage import check_build_tables, read_table, reading, require_build, to_table, write_parquet
from ctxbench.scoring.judge import DEFAULT_JUDGE_PROMPT, judge_matcher, run_judge
from ctxbench.scoring.pipeline import no_credit
from ctxbench.scoring.registry import judge_prompt, judge_prompt_track, matchers_for
from ctxbench.run.repl import REPL_STATUSES


@dataclass
class ScoreSummary:
    rows: int = 0
    judged: int = 0
    unparseable_verdicts: int = 0   # still unparseable after one repair prompt: counted and reported, not scored
    repaired_verdicts: int = 0      # parsed only from the answer to the repair prompt
    judge_failed: int = 0           # judge calls that failed (not stored: a rerun asks again)
    no_answer: int = 0            # ok responses whose extracted answer is empty (and not cut off)
    cut_off: int = 0              # responses the output budget ended before their answer: 0, tag cut_off
    answer_from_reasoning: int = 0  # empty content, answer taken from the reasoning field
    degenerate_repetition: int = 0  # replies that degenerate into repetition (the repeated block earns nothing)
    tagging: dict | None = None   # benchmark → what its failure tagger did (registry.TAGGERS)
    adaptive: int = 0             # rows of adaptive.parquet (models evaluated with --adaptive-calls)
    judges: dict | None = None    # judge matcher (judge:<model>, judge-<prompt>:<model>) → its counts (the totals above)
    matcher_errors: list = field(default_factory=list)  # responses a matcher raised on: set aside (SCORE_ERRORS)
    repl_unfinished: int = 0      # --mode repl answers that ended without FINAL: 0 from every matcher, tag = status


def score_build(build_dir: str | Path, judge: str | None = None, judge_base_url: str | None = None,
                judge_api_key_env: str | None = None,
                judge_prompts: Sequence[str] | None = None) -> ScoreSummary:
    """Write ``scores.parquet`` for the build: every matcher of the instance's track (:mod:`ctxbench.scoring.registry`)
    on the extracted answer of every ok response (:func:`ctxbench.scoring.pipeline.score_reply`) and, when a judge
    model is given, one judge matcher per judge prompt (``judge_prompts``, default the row judge ``rows``: matcher
    ``judge:<model>``; another prompt ``p``: ``judge-p:<model>``; :mod:`ctxbench.scoring.judge`). Each judge grades
    the same extracted answer; an empty answer scores 0 with ``null_answer`` and no call; unparseable verdicts are
    counted, not scored. A matcher that raises on a response sets that response aside for that matcher
    (``summary.matcher_errors``, ``BUILD/score_errors.jsonl``) and scoring goes on. Raises InputError without a
    build, for instances of a benchmark no track registers, for an unknown or unloadable matcher, for an unknown
    judge prompt, and for a track's judge prompt on instances of another benchmark."""
    build_dir = require_build(build_dir)
    bhash = check_build_tables(build_dir) if (build_dir / "manifest.json").exists() else None
    ipath = build_dir / "instances.parquet"
    with reading(ipath):  # a damaged file is named (storage.UnreadableFile)
        cols = [c for c in pq.read_schema(ipath).names if c != "context"]  # contexts can be GBs in all
        inst = pq.read_table(ipath, columns=cols).to_pylist()
    by_id: dict[str, dict] = {}
    for r in inst:
        r = dict(r)
        r["gold"] = json.loads(r["gold"])
        if r.get("accepted_answers") is not None:
            r["accepted_answers"] = json.loads(r["accepted_answers"])
        by_id[r["instance_id"]] = r
    resp = read_table(build_dir / "responses.parquet", "responses").to_pylist()
    rows = []
    ok = [r for r in sorted(resp, key=lambda r: (r["model"], r["mode"], r["instance_id"], r["sample"],
                                                 r["request_key"]))
          if r["status"] in SCORED_STATUSES and r["instance_id"] in by_id]
    prompts = _judge_prompts(judge_prompts or (DEFAULT_JUDGE_PROMPT,), {str(by_id[r["instance_id"]].get("benchmark"))
                                                                         for r in ok}) if judge else []
    summary = ScoreSummary()
    answers: dict[str, str] = {}          # request key -> the answer the pipeline extracted
    cut: set[str] = set()                 # request keys of replies cut off before their answer
    how: dict[str, list[str]] = {}        # request key -> how its reply was read (the extraction's tags)
    for r in ok:
        row = by_id[r["instance_id"]]
        errs: list = []
        scored = score_reply(r["response"], row, r.get("reasoning"), errors=errs,
                             finish_reason=r.get("finish_reason"), status=r["status"])
        if scored:
            ex_tags = scored[0].extraction.tags
            how[r["request_key"]] = list(ex_tags)
            if "cut_off" in ex_tags:
                cut.add(r["request_key"])
            summary.cut_off += "cut_off" in ex_tags
            summary.answer_from_reasoning += "answer_from_reasoning" in ex_tags
            summary.degenerate_repetition += "degenerate_repetition" in ex_tags
        summary.matcher_errors += [{"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                                    "sample": r["sample"], "request_key": r["request_key"], "matcher": e.matcher,
                                    "error": str(e)} for e in errs]
        for sc in scored:
            answers[r["request_key"]] = sc.answer
            m = sc.result
            rows.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                         "sample": r["sample"], "matcher": sc.matcher, "score": float(m.score),
                         "tags": canonical_json(m.tags), "extracted_answer": sc.answer,
                         "request_key": r["request_key"], "build_hash": bhash,
                         "detail": canonical_json({"rows": m.rows}),
                         "details": None if m.details is None else canonical_json(m.details)})
    summary.no_answer = sum(1 for r in ok if not answers.get(r["request_key"]) and r["request_key"] not in cut)
    resp_by_key = {r["request_key"]: r for r in ok}
    judge_cfg = {"model": judge, "base_url": judge_base_url, "api_key_env": judge_api_key_env} if judge else None
    for bench in sorted({str(by_id[r["instance_id"]].get("benchmark")) for r in ok}):
        if (tag := tagger(bench)) is not None:   # failure tags that need the whole build (registry.TAGGERS)
            summary.tagging = summary.tagging or {}
            summary.tagging[bench] = tag([x for x in rows if str(by_id[x["instance_id"]].get("benchmark")) == bench], by_id, resp_by_key,
                judge=judge_cfg, build_dir=build_dir)
    unscored: list[dict] = []
    if judge:
        summary.judges = {}
        for prompt in prompts:
            rows += _judge_rows(prompt, judge, judge_base_url, judge_api_key_env, ok, by_id, answers, bhash,
                                summary, unscored, cut, how)
    rows += _no_final_rows(resp, by_id, bhash, summary)
    write_unscored_verdicts(build_dir, unscored)
    write_score_errors(build_dir, summary.matcher_errors)
    write_parquet(to_table("scores", rows), build_dir / "scores.parquet")
    summary.rows = len(rows)
    summary.adaptive = write_adaptive(build_dir)
    return summary


ADAPTIVE = "adaptive.parquet"
IRT_ITEMS = "irt_items.parquet"


def write_adaptive(build_dir: Path) -> int:
    """``BUILD/adaptive.parquet`` and ``BUILD/irt_items.parquet`` (:func:`ctxbench.analysis.irt.adaptive_rows`)
    for the models ``evaluate --adaptive-calls`` ran on the build: rewritten whole with every scoring; nothing
    written (and none left) where no model was evaluated adaptively. Returns the rows of adaptive.parquet."""
    rows, items = adaptive_rows(build_dir)
    for name, table, data in ((ADAPTIVE, "adaptive", rows), (IRT_ITEMS, "irt_items", items)):
        if data:
            write_parquet(to_table(table, data), build_dir / name)
        else:
            (build_dir / name).unlink(missing_ok=True)
    return len(rows)


# response statuses ``score`` scores: ok, and cut_off (0 from every matcher and judge, tag cut_off)
SCORED_STATUSES = ("ok", "cut_off")


def _no_final_rows(resp: list[dict], by_id: dict[str, dict], bhash: str | None, summary: ScoreSummary) -> list[dict]:
    """Score rows of ``--mode repl`` answers that ended without ``FINAL`` (``max_steps``, ``over_budget``,
    ``step_timeout``: :mod:`ctxbench.run.repl`): like ``cut_off``, the model's own result, so 0 from every matcher
    of the instance's track, tagged with the status (the mean counts them as wrong)."""
    out = []
    for r in sorted(resp, key=lambda r: (r["model"], r["mode"], r["instance_id"], r["sample"], r["request_key"])):
        if r["status"] not in REPL_STATUSES or r["instance_id"] not in by_id:
            continue
        row = by_id[r["instance_id"]]
        summary.repl_unfinished += 1
        for n in matchers_for(row.get("benchmark")):
            m = no_credit(row, [r["status"]])
            out.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                        "sample": r["sample"], "matcher": n, "score": 0.0, "tags": canonical_json(m.tags),
                        "extracted_answer": None, "request_key": r["request_key"], "build_hash": bhash,
                        "detail": canonical_json({"rows": m.rows}), "details": canonical_json(m.details)})
    return out

SCORE_ERRORS = "score_errors.jsonl"


def write_score_errors(build_dir: Path, errors: list[dict]) -> None:
    """``BUILD/score_errors.jsonl``: one JSON line per (response, matcher) a matcher raised on (instance_id, model,
    mode, sample, request_key, matcher, error naming the line that raised), in scoring order; those responses
    have no score of that matcher, every other score is written. Removed when no matcher raised."""
    path = Path(build_dir) / SCORE_ERRORS
    if not errors:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in errors), encoding="utf-8")
    tmp.replace(path)


def tagging_text(summary: object) -> str:
    """What a track's failure tagger returned, as ``ctxbench score`` prints it: ``{what: count}`` (a mapping, or
    a dataclass or other object's attributes) as ``what count, ...`` (underscores read as spaces); anything else
    as its text."""
    from collections.abc import Mapping

    items = summary if isinstance(summary, Mapping) else getattr(summary, "__dict__", None)
    if not isinstance(items, Mapping):
        return str(summary)
    return ", ".join(f"{str(k).replace('_', ' ')} {v}" for k, v in items.items())


def _judge_prompts(names: Sequence[str], benchmarks: set[str]) -> list:
    """The judge prompts named (each once, in order). Raises InputError for an unknown name and for a track's
    prompt asked to judge instances of another benchmark."""
    out = []
    for name in dict.fromkeys(names):
        p = judge_prompt(name)
        owner = judge_prompt_track(name)
        other = sorted(b for b in benchmarks if b != owner) if owner is not None else []
        if other:
            raise InputError(f"judge prompt {name!r} belongs to track {owner} and judges its instances only; this "
                             f"build has responses to instances of {', '.join(other)}: use --judge-prompt rows (the "
                             f"row judge) or a prompt of that track (`ctxbench tracks` lists them)")
        out.append(p)
    return out


def _judge_rows(prompt, judge: str, base_url: str | None, api_key_env: str | None, ok: list[dict],
                by_id: dict[str, dict], answers: dict[str, str], bhash: str | None, summary: ScoreSummary,
                unscored: list[dict], cut: set[str] = frozenset(),
                how: dict[str, list[str]] | None = None) -> list[dict]:
    """Score rows of one judge prompt over the scored responses (the judge grades the extracted answer: no
    reasoning, no draft; an empty answer scores 0 without a call, tag ``null_answer``, or ``cut_off`` for a reply
    cut off before its answer, request keys ``cut``); adds its counts to ``summary`` and its unscored responses to
    ``unscored``. ``how``: request key → the extraction's tags (``answer_from_reasoning``…), added to its rows."""
    name = judge_matcher(prompt.name, judge)
    counts = {"judged": 0, "unparseable_verdicts": 0, "repaired_verdicts": 0, "judge_failed": 0}
    rows = []
    for r in ok:
        if not answers.get(r["request_key"]):
            tag = "cut_off" if r["request_key"] in cut else "null_answer"
            rows.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                         "sample": r["sample"], "matcher": name, "score": 0.0,
                         "tags": canonical_json([tag]), "extracted_answer": "",
                         "request_key": r["request_key"], "build_hash": bhash,
                         "detail": canonical_json({**prompt.detail(None), "repaired": False}),
                         "details": canonical_json(no_credit(by_id[r["instance_id"]], [tag]).details)})
    to_judge = [r for r in ok if answers.get(r["request_key"])]
    outs = run_judge(prompt, [(by_id[r["instance_id"]], answers[r["request_key"]]) for r in to_judge], judge,
                     base_url, api_key_env=api_key_env)
    for r, o in zip(to_judge, outs):
        counts["judged"] += 1
        counts["repaired_verdicts"] += bool(o.repaired and o.score is not None)
        if o.score is None:
            counts["judge_failed" if o.failed else "unparseable_verdicts"] += 1
            unscored.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                             "sample": r["sample"], "request_key": r["request_key"], "judge": judge,
                             "reason": "call failed" if o.failed else "unparseable verdict",
                             "reply": None if o.raw is None else o.raw[:2000], "matcher": name})
            continue
        rows.append({"instance_id": r["instance_id"], "model": r["model"], "mode": r["mode"],
                     "sample": r["sample"], "matcher": name, "score": float(o.score),
                     "tags": canonical_json((how or {}).get(r["request_key"], [])),
                     "extracted_answer": answers[r["request_key"]],
                     "request_key": r["request_key"], "build_hash": bhash,
                     "detail": canonical_json({**prompt.detail(o.verdict), "repaired": o.repaired}),
                     "details": _judge_details(prompt, o.verdict, by_id[r["instance_id"]],
                                               answers[r["request_key"]])})
    for k, v in counts.items():
        setattr(summary, k, getattr(summary, k) + v)
    summary.judges[name] = counts  # type: ignore[index]
    return rows


def _judge_details(prompt, verdict, instance: dict, answer: str) -> str | None:
    """``scores.details`` of a judge row (:meth:`ctxbench.scoring.judge.JudgePrompt.details`; a prompt of a track
    written before it existed gives none)."""
    fn = getattr(prompt, "details", None)
    d = fn(verdict, instance, answer) if fn is not None else None
    return None if d is None else canonical_json(d)


UNSCORED_VERDICTS = "judge_unscored.parquet"


def write_unscored_verdicts(build_dir: Path, rows: list[dict]) -> None:
    """``BUILD/judge_unscored.parquet``: one row per response a judge of this scoring left unscored (a verdict
    unparseable after the repair prompt, or a failed call), with the judge's model, its matcher (``judge:<model>``,
    ``judge-<prompt>:<model>``) and its reply; the report shows their counts. Rewritten whole with every scoring,
    as ``scores.parquet`` is (removed when no judge left a response unscored)."""
    import pyarrow as pa

    path = build_dir / UNSCORED_VERDICTS
    sch = pa.schema([("instance_id", pa.string()), ("model", pa.string()), ("mode", pa.string()),
                     ("sample", pa.int64()), ("request_key", pa.string()), ("judge", pa.string()),
                     ("reason", pa.string()), ("reply", pa.string()), ("matcher", pa.string())])
    if rows:
        write_parquet(pa.Table.from_pylist(rows, schema=sch), path)
    else:
        path.unlink(missing_ok=True)
