"""Analysis of the planted-fact (needles) track: accuracy tables, decay regimes, the memorization probe and
failure-mode tags.

Source: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text"
(2026): section 4.1 (Test 1: real and altered needles; a model that recites memory scores high on real and low on
altered cells), 4.2 (Test 2: three decay regimes across 256K / 512K / 1M), 4.3 (five failure modes), 5 (the
real/altered asymmetry as the separator of reading from reciting). Settings: ``assets/analysis/needles.yaml``.

Cells
    A cell is one scored response (model × mode × sample) of one instance; an instance is sizing model × tier ×
    needle × variant × depth. Accuracy is the mean of the primary matcher's scores (``substring``, 0 or 1) over
    cells, with a 95% interval clustered by needle (:func:`ctxbench.scoring.metrics.clustered_mean_ci`). Depths are
    token depths (:func:`depth_label`): the fraction of the context's tokens before the needle as built
    (``achieved_depth``), shown under its requested label where it is within the build's tolerance of it, else
    under the depth reached (builds that placed needles by paragraph index put a "50%" needle at 39% or 85% of the
    tokens). Chains have no single depth (their statements sit at fixed depths): their depth label is ``chain``.

Decay regime (:func:`classify_regime`)
    From a model's accuracy per tier, tiers ascending, ``a[0..n-1]``, with step drops ``d[k] = a[k-1] - a[k]``:

    * ``insufficient_tiers``: n < 2;
    * ``stable``: every ``a[k] >= stable_floor``;
    * ``late_cliff``: some step k >= 1 with ``d[k] >= cliff_drop`` and ``d[k] >= cliff_ratio × d[j]`` for every other
      positive step j, every tier before it ``>= high`` and every tier from it ``< stable_floor``;
    * ``smooth_decline``: no step rises by more than ``rise_tolerance``, ``a[0] - a[-1] >= decline_min`` and no step
      carries more than ``max_step_share`` of that fall;
    * ``unclassified`` otherwise (non-monotone curves, low but flat curves, a single two-tier drop that is not a
      cliff), with the reason.

    The checks run in that order. Defaults (from the study's 5-cell tiers) are in the settings file; every threshold
    can be given per call (:class:`RegimeThresholds`).

Memorization probe (:func:`memorization_probe`)
    Per model: accuracy on real and on altered cells with counts and intervals, and the paired asymmetry
    ``real − altered`` over pairs (same needle, tier, requested depth, sample), with a 95% interval clustered by
    needle; also
    how many altered cells were answered with the *real* value (the memorised one). ``asymmetric`` is true when the
    asymmetry's interval lies above 0.

Failure-mode tags (:func:`tag_failures`, run by ``score`` for needles rows)
    Every wrong, non-empty reply of the primary matcher gets one of ``subject_substitution``, ``wrong_attribute``,
    ``truncated_chain``, ``fabrication``, ``refusal`` in ``scores.parquet`` ``tags``; ``detail`` says which tagger.
    With a judge model (``score --judge``) the judge picks the mode (structured output, through the gateway and the
    response cache); an unparseable verdict falls back to the rules and is counted. Without one, the rules decide,
    the first that applies winning (names and values matched like answers, :mod:`ctxbench.tracks.needles.scoring`):

    1. an altered cell answered with the needle's real value: ``fabrication`` plus ``memorized_value``;
    2. the reply states the expected value of another needle or chain of the build: ``wrong_attribute``;
    3. it names another needle's subject (or alias) or another chain's person, or uses a substitution phrase
       ("應是指", "probably refers to"): ``subject_substitution``;
    4. it contains a refusal phrase (zh or en, settings file) or LaRA's refusal detector fires
       (:func:`ctxbench.scoring.refusal.is_refusal`): ``refusal``;
    5. a chain reply names an intermediate person of its own chain but not the last one: ``truncated_chain``;
    6. otherwise: ``fabrication`` (an answer with no basis in the haystack).

    An empty reply keeps the matcher's ``null_answer``. Facts (subjects, aliases, real and altered values, chain
    names) come from the build's needle set (``manifest.json`` ``needle_set``, read from ``assets/needles/`` when
    its sha256 matches) and, without it, from the instances alone (the other variant's gold of the same needle;
    rules 3 and 5 then have no names to use).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

import pyarrow.parquet as pq

from ctxbench.core.config import assets_dir
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import canonical_json
from ctxbench.scoring.metrics import clustered_mean_ci
from ctxbench.scoring.normalize import fold
from ctxbench.scoring.refusal import is_refusal
from ctxbench.core.storage import read_table
from ctxbench.tracks.needles.scoring import expected_found, expected_values, prepare
from ctxbench.core.config import read_yaml
from ctxbench.models.runner import complete_all
from ctxbench.scoring.judge import judge_text, own_verdict
from ctxbench.scoring.judge_base import CANDIDATE_IS_DATA, fence_candidate

PRIMARY_MATCHER = "substring"
# data the failure tags depend on (refusal and substitution phrases): part of the scoring code's version
SCORING_DATA = ("analysis/needles.yaml",)
FAILURE_MODES = ("subject_substitution", "wrong_attribute", "truncated_chain", "fabrication", "refusal")
SINGLE_VARIANTS = ("real", "altered")


# -- settings --------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=4)
def _settings_file(path: str) -> dict:
    return read_yaml(path, "analysis settings") or {}


def settings(path: str | Path | None = None) -> dict:
    """The analysis settings (``assets/analysis/needles.yaml`` unless ``path``)."""
    return _settings_file(str(path or assets_dir() / "analysis" / "needles.yaml"))


@dataclass(frozen=True)
class RegimeThresholds:
    """Thresholds of :func:`classify_regime` (accuracies as fractions in [0, 1]); defaults from the settings file."""

    stable_floor: float = 0.6
    high: float = 0.8
    cliff_drop: float = 0.4
    cliff_ratio: float = 2.0
    decline_min: float = 0.3
    max_step_share: float = 0.75
    rise_tolerance: float = 0.1
    variants: tuple[str, ...] = ("real", "altered", "chain")

    @classmethod
    def from_settings(cls, overrides: dict | None = None, path: str | Path | None = None) -> RegimeThresholds:
        """Thresholds from the settings file, then ``overrides``; an unknown key is an InputError naming it."""
        d = dict(settings(path).get("regimes") or {})
        d.update(overrides or {})
        names = {f.name for f in fields(cls)}
        bad = sorted(set(d) - names)
        if bad:
            raise InputError(f"unknown regime threshold(s) {bad}; known: {sorted(names)}")
        if "variants" in d:
            d["variants"] = tuple(d["variants"])
        return cls(**d)


def parse_threshold_overrides(items: list[str] | None) -> dict:
    """``["stable_floor=0.5", "variants=chain"]`` (the report's ``--regime`` flags) → overrides for
    :meth:`RegimeThresholds.from_settings`: numbers as floats, ``variants`` as a comma-separated list. Raises
    InputError naming a malformed item."""
    out: dict = {}
    for item in items or []:
        key, sep, val = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--regime {item!r}: write KEY=VALUE, e.g. stable_floor=0.5")
        if key == "variants":
            out[key] = [v.strip() for v in val.split(",") if v.strip()]
            continue
        try:
            out[key] = float(val)
        except ValueError:
            raise InputError(f"--regime {item!r}: {val!r} is not a number") from None
    return out


def check_threshold_overrides(items: list[str] | None) -> RegimeThresholds:
    """The thresholds ``--regime`` items give (:func:`parse_threshold_overrides`, then
    :meth:`RegimeThresholds.from_settings`), checked before a report reads anything. Raises InputError naming a
    malformed item or an unknown key."""
    return RegimeThresholds.from_settings(parse_threshold_overrides(items))


# -- decay regimes ---------------------------------------------------------------------------------------------------

def classify_regime(accuracy_by_tier: dict[int, float] | list[float],
                    th: RegimeThresholds | None = None) -> tuple[str, str]:
    """Decay regime of one model's accuracy curve (a dict tier → accuracy, or accuracies in ascending tier order);
    returns ``(regime, reason)`` by the rule of the module docstring."""
    th = th or RegimeThresholds.from_settings()
    a = [accuracy_by_tier[k] for k in sorted(accuracy_by_tier)] if isinstance(accuracy_by_tier, dict) \
        else list(accuracy_by_tier)
    eps = 1e-9
    if len(a) < 2:
        return "insufficient_tiers", f"{len(a)} tier(s); at least 2 are needed"
    curve = " → ".join(f"{x:.2f}" for x in a)
    if min(a) >= th.stable_floor - eps:
        return "stable", f"{curve}: every tier ≥ {th.stable_floor:g}"
    d = [a[k - 1] - a[k] for k in range(1, len(a))]   # d[k-1] is the drop into tier k
    for k in range(1, len(a)):
        drop = d[k - 1]
        others = [x for j, x in enumerate(d) if j != k - 1 and x > 0]
        if (drop >= th.cliff_drop - eps and all(drop >= th.cliff_ratio * x - eps for x in others)
                and all(x >= th.high - eps for x in a[:k]) and all(x < th.stable_floor - eps for x in a[k:])):
            return "late_cliff", (f"{curve}: holds ≥ {th.high:g} up to tier {k}, then drops {drop:.2f} in one step "
                                  f"to below {th.stable_floor:g}")
    fall = a[0] - a[-1]
    if all(x >= -th.rise_tolerance - eps for x in d) and fall >= th.decline_min - eps and fall > 0:
        share = max(d) / fall
        if share <= th.max_step_share + eps:
            return "smooth_decline", (f"{curve}: falls {fall:.2f} overall, the largest step carrying "
                                      f"{share:.0%} of it")
        return "unclassified", (f"{curve}: falls {fall:.2f} but one step carries {share:.0%} of it, and it is "
                                f"not a cliff from ≥ {th.high:g}")
    if any(x < -th.rise_tolerance - eps for x in d):
        return "unclassified", f"{curve}: rises by more than {th.rise_tolerance:g} between tiers"
    return "unclassified", f"{curve}: below {th.stable_floor:g} without a fall of {th.decline_min:g}"


# -- needle facts ----------------------------------------------------------------------------------------------------

@dataclass
class NeedleFacts:
    """What the failure rules know of one needle or chain: ``names`` in hop order for a chain (A, B, …, last),
    ``[subject, *aliases]`` for a needle; ``real`` / ``altered`` value forms (needles); ``answers`` (chains);
    ``statements``: the planted sentences by variant (``real``, ``altered``, ``chain``), where the needle set has
    them."""

    needle_id: str
    kind: str                      # "needle" or "chain"
    names: list[str] = field(default_factory=list)
    real: list = field(default_factory=list)
    altered: list = field(default_factory=list)
    answers: list = field(default_factory=list)
    statements: dict[str, list[str]] = field(default_factory=dict)

    def values(self) -> list:
        return [*self.real, *self.altered, *self.answers]


def _forms(spec) -> list:
    if isinstance(spec, dict):
        return [spec.get("value"), *(spec.get("accepted") or [])]
    return [spec] if spec is not None else []


def facts_from_needle_set(data: dict) -> dict[str, NeedleFacts]:
    """Facts from a needle-set asset's parsed YAML (fields documented in ``assets/needles/zh-classical.yaml``)."""
    out: dict[str, NeedleFacts] = {}
    for n in data.get("needles") or []:
        st = n.get("statement")
        out[str(n["id"])] = NeedleFacts(
            str(n["id"]), "needle", [x for x in [n.get("subject"), *(n.get("subject_aliases") or [])] if x],
            _forms(n.get("real")), _forms(n.get("altered")),
            statements={v: [st.replace("{value}", str(_forms(n.get(v))[0]))] for v in SINGLE_VARIANTS
                        if st and _forms(n.get(v))})
    for c in data.get("chains") or []:
        out[str(c["id"])] = NeedleFacts(str(c["id"]), "chain", list(c.get("names") or []),
                                        answers=[c.get("answer"), *(c.get("accepted") or [])],
                                        statements={"chain": list(c.get("statements") or [])})
    return out


def facts_from_instances(instances: list[dict]) -> dict[str, NeedleFacts]:
    """Facts from instance rows alone (``gold`` / ``accepted_answers`` parsed): each needle's real and altered
    forms from its real and altered instances, each chain's answers; no names."""
    out: dict[str, NeedleFacts] = {}
    for r in instances:
        nid = r.get("needle_id")
        if not nid:
            continue
        f = out.setdefault(nid, NeedleFacts(nid, "chain" if r.get("variant") == "chain" else "needle"))
        target = {"real": f.real, "altered": f.altered}.get(r.get("variant"), f.answers)
        for v in expected_values(r):
            if v not in target:
                target.append(v)
    return out


def load_facts(build_dir: Path, instances: list[dict]) -> tuple[dict[str, NeedleFacts], str]:
    """Facts for a build: from its needle set (``manifest.json`` ``needle_set`` ``file`` under ``assets/needles/``,
    used only when its sha256 matches the manifest) merged over :func:`facts_from_instances`. Returns the facts and
    where they came from (``needle_set:<file>`` or ``instances``)."""
    facts = facts_from_instances(instances)
    source = "instances"
    mpath = Path(build_dir) / "manifest.json"
    ns = json.loads(mpath.read_text(encoding="utf-8")).get("needle_set") if mpath.exists() else None
    if isinstance(ns, dict) and ns.get("file"):
        p = Path(ns["file"]) if Path(ns["file"]).is_absolute() else assets_dir() / "needles" / ns["file"]
        if p.exists() and (not ns.get("sha256") or hashlib.sha256(p.read_bytes()).hexdigest() == ns["sha256"]):
            for nid, f in facts_from_needle_set(read_yaml(p, "needle set") or {}).items():
                if nid in facts:
                    g = facts[nid]
                    g.names, g.statements = f.names, f.statements
                    g.real = f.real + [v for v in g.real if v not in f.real]
                    g.altered = f.altered + [v for v in g.altered if v not in f.altered]
                    g.answers = f.answers + [v for v in g.answers if v not in f.answers]
                else:
                    facts[nid] = f
            source = f"needle_set:{p.name}"
    return facts, source


# -- rule tags -------------------------------------------------------------------------------------------------------

def _phrases(key: str, cfg: dict | None = None) -> tuple[str, ...]:
    return _fold_phrases(canonical_json((cfg or settings()).get(key) or {}))


@lru_cache(maxsize=16)
def _fold_phrases(spec: str) -> tuple[str, ...]:
    d = json.loads(spec)
    return tuple(fold(p) for lang in sorted(d) for p in d[lang])


def rule_tags(answer: str | None, instance: dict, facts: dict[str, NeedleFacts],
              cfg: dict | None = None) -> list[str]:
    """Failure tags of one wrong answer (the answer pipeline's output, as the matcher scored it) by the rules of the
    module docstring (``[]`` for an empty answer, which the matcher already tags ``null_answer``). ``instance``: the
    instance row with ``gold`` parsed."""
    text = (answer or "").strip()
    if not text:
        return []
    r = prepare(text)
    nid, variant = instance.get("needle_id"), instance.get("variant")
    own = facts.get(nid) or NeedleFacts(nid or "", "chain" if variant == "chain" else "needle")

    def states(vals) -> bool:
        return any(expected_found(v, r) for v in vals if v is not None)

    if variant == "altered" and states(own.real):
        return ["fabrication", "memorized_value"]
    expected = expected_values(instance)
    others = [v for k, f in sorted(facts.items()) if k != nid for v in f.values()
              if not any(str(v) == str(e) for e in expected)]
    if states(others):
        return ["wrong_attribute"]
    other_names = [n for k, f in sorted(facts.items()) if k != nid for n in f.names if n not in own.names]
    if states(other_names) or any(p in r.folded for p in _phrases("substitution_cues", cfg)):
        return ["subject_substitution"]
    if is_refusal(text) or any(p in r.folded for p in _phrases("refusal_phrases", cfg)):
        return ["refusal"]
    if own.kind == "chain" and len(own.names) >= 3 and states(own.names[1:-1]) and not states(own.names[-1:]):
        return ["truncated_chain"]
    return ["fabrication"]


# -- judge tags ------------------------------------------------------------------------------------------------------

JUDGE_FAILURE_SYSTEM = (
    "You classify why an answer to a question about a long document is wrong. The document had facts planted in "
    "it; the expected answer is what the planted facts say. Choose one mode: subject_substitution (the answer is "
    "about another person than the one asked about, e.g. a similarly named real figure), wrong_attribute (it reports "
    "an attribute of another person of the question, or another needle's fact), truncated_chain (for a chain "
    "question: it stops at an intermediate person instead of following the chain to its end), fabrication (an answer "
    "with no basis in the document, including a value remembered from training that the document contradicts), "
    "refusal (it declines, or says the document does not contain the answer). Reply with JSON only.")

JUDGE_FAILURE_FORMAT = {"type": "json_schema", "json_schema": {"name": "failure_mode", "strict": True, "schema": {
    "type": "object", "additionalProperties": False, "required": ["mode"],
    "properties": {"mode": {"type": "string", "enum": list(FAILURE_MODES)}}}}}


def judge_failure_messages(question: str, instance: dict, facts: dict[str, NeedleFacts], answer: str) -> list[dict]:
    """The failure-mode judge prompt for one wrong answer (question, expected answers, the needle's facts)."""
    own = facts.get(instance.get("needle_id"))
    lines = [f"Question: {question}", f"Expected answer (any of): {json.dumps(expected_values(instance), ensure_ascii=False)}"]
    if own and own.kind == "chain" and own.names:
        lines.append("The chain's people, in the order the question follows them: " + " → ".join(own.names))
    elif own:
        if own.names:
            lines.append("The person asked about: " + " / ".join(own.names))
        if instance.get("variant") == "altered" and own.real:
            lines.append(f"The document states an altered value; the historically known value is {own.real[0]}.")
    planted = (own.statements.get(instance.get("variant") or "") if own else None) or []
    if planted:
        lines.append("Planted in the document: " + " ".join(planted))
    other = sorted({n for k, f in facts.items() if own is None or k != own.needle_id for n in f.names})
    if other:
        lines.append("Other people with planted facts in the document: " + ", ".join(other))

    lines.append(f"\nAnswer to classify:\n{fence_candidate(answer)}\n{CANDIDATE_IS_DATA}\n\n"
                 f"Reply as JSON: {{\"mode\": one of {list(FAILURE_MODES)}}}")
    return [{"role": "system", "content": JUDGE_FAILURE_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def parse_failure_mode(text: str | None, reasoning: str | None = None) -> str | None:
    """The mode from a judge reply (JSON ``{"mode": ...}``, possibly inside other text), or None. The reply passes
    the answer pipeline's judge filters first (:func:`ctxbench.scoring.judge.judge_text`: a reasoning judge's
    ``<think>`` draft, chat tokens and code fences removed; the reasoning field read when the reply is empty); the
    mode is the judge's own (:func:`ctxbench.scoring.judge.own_verdict`: never one it quotes from the answer; None
    when its own objects disagree)."""
    def read(obj):
        if isinstance(obj, dict) and "mode" in obj:
            mode = str(obj["mode"]).strip().lower()
            return mode if mode in FAILURE_MODES else None
        return None

    return own_verdict(judge_text(text, reasoning), read)


@dataclass
class TagSummary:
    """What :func:`tag_failures` did: wrong replies tagged by rules and by the judge, unparseable judge verdicts."""

    tagged_by_rules: int = 0
    tagged_by_judge: int = 0
    unparseable_judge: int = 0


def tag_failures(rows: list[dict], instances: dict[str, dict], responses: dict[str, dict],
                 judge: dict | None = None, build_dir: str | Path | None = None) -> TagSummary:
    """The needles track's tagger (``Track.tagger``): sets ``tags`` (JSON) and ``detail`` of every wrong
    ``substring`` row with a non-empty answer, in place. ``rows``: score rows with the ``extracted_answer`` the
    matcher scored (the rules and the judge see that answer, never the reasoning); ``instances``: id → row (gold
    parsed); ``responses``: request key → responses row; ``judge``: ``{"model", "base_url", "api_key_env"}`` or
    None."""
    summary = TagSummary()
    cand = [x for x in rows if x["matcher"] == PRIMARY_MATCHER and x["score"] < 1.0
            and (x.get("extracted_answer") or "").strip()]
    if not cand:
        return summary
    needles = [i for i in instances.values() if i.get("benchmark") == "needles"]
    facts, source = load_facts(Path(build_dir), needles) if build_dir else (facts_from_instances(needles), "instances")
    cfg = settings()
    rule = {id(x): rule_tags(x["extracted_answer"], instances[x["instance_id"]], facts, cfg) for x in cand}
    judged: dict[int, str | None] = {}
    if judge and judge.get("model"):
        msgs = [judge_failure_messages(instances[x["instance_id"]]["question"], instances[x["instance_id"]], facts,
                                       x["extracted_answer"]) for x in cand]
        outs = complete_all(msgs, judge["model"], judge.get("base_url"), api_key_env=judge.get("api_key_env"),
                            sampling={"temperature": 0.0, "response_format": JUDGE_FAILURE_FORMAT}, max_tokens=64,
                            parse=lambda i, t: parse_failure_mode(t),
                            repair=lambda i, t: ('Your reply could not be read. Reply with JSON only: {"mode": M} '
                                                 f"with M one of {', '.join(FAILURE_MODES)}."))
        judged = {id(x): parse_failure_mode(c.text, getattr(c, "reasoning", None)) for x, c in zip(cand, outs)}
    for x in cand:
        detail = json.loads(x.get("detail") or "{}")
        detail["rule_tags"] = rule[id(x)]
        detail["facts"] = source
        mode = judged.get(id(x))
        if mode is not None:
            tags = [mode]
            detail["tagged_by"] = f"judge:{judge['model']}"
            summary.tagged_by_judge += 1
        else:
            if judge and judge.get("model"):
                summary.unparseable_judge += 1
                detail["judge_unparseable"] = True
            tags = rule[id(x)]
            detail["tagged_by"] = "rules"
            summary.tagged_by_rules += 1
        x["tags"] = canonical_json(tags)
        x["detail"] = canonical_json(detail)
    return summary


# -- tables from a scored build ---------------------------------------------------------------------------------------

# how far a token depth may be from its label when a build did not record its own tolerance (the build's default)
DEPTH_TOLERANCE = 0.02


def achieved_token_depth(row: dict) -> float | None:
    """Token depth an instance reached: ``achieved_depth``, else (builds before that column)
    ``achieved_depth_tokens / context_tokens``; None when neither is there."""
    if row.get("achieved_depth") is not None:
        return float(row["achieved_depth"])
    if row.get("achieved_depth_tokens") is not None and row.get("context_tokens"):
        return row["achieved_depth_tokens"] / row["context_tokens"]
    return None


def depth_label(depth: float | None, variant: str | None, achieved: float | None = None,
                tolerance: float | None = None) -> str:
    """The depth axis label of a needle: ``chain`` for a chain (no single depth); else the token depth, as the
    requested label (``25%`` for 0.25) when the depth reached (``achieved``, a fraction of the context's tokens)
    is within ``tolerance`` (the build's ``depth_tolerance``, default 0.02) of it or unknown, else the depth reached
    to a whole percent (``85%`` for a needle requested at 50% that sits at 85% of the tokens)."""
    if variant == "chain" or (depth is None and achieved is None):
        return "chain"
    if achieved is not None and (depth is None or abs(achieved - depth) > (tolerance or DEPTH_TOLERANCE) + 1e-9):
        return f"{round(achieved * 100):g}%"
    return f"{round(depth * 100, 1):g}%"


def needle_cells(build_dir: str | Path, matcher: str = PRIMARY_MATCHER) -> list[dict]:
    """One dict per scored cell of needles instances: model, mode, sample, instance_id, sizing_model, tier, depth
    (requested), achieved_depth (token depth reached), depth_label (:func:`depth_label`), variant, needle_id, score,
    tags (list). Empty when the build has no needles instances or no scores."""
    b = Path(build_dir)
    if not (b / "scores.parquet").exists():
        return []
    names = set(pq.read_schema(b / "instances.parquet").names)
    cols = [c for c in ("instance_id", "benchmark", "sizing_model", "target_tokens", "depth", "variant", "needle_id",
                        "achieved_depth", "depth_tolerance", "achieved_depth_tokens", "context_tokens")
            if c in names]
    inst = {r["instance_id"]: r for r in pq.read_table(b / "instances.parquet", columns=cols).to_pylist()
            if r.get("benchmark") == "needles"}
    if not inst:
        return []
    out = []
    for s in read_table(b / "scores.parquet", "scores").to_pylist():
        i = inst.get(s["instance_id"])
        if i is None or s["matcher"] != matcher:
            continue
        chain = i.get("variant") == "chain"
        ach = None if chain else achieved_token_depth(i)
        out.append({"model": s["model"], "mode": s["mode"], "sample": s["sample"], "instance_id": s["instance_id"],
                    "sizing_model": i.get("sizing_model"), "tier": i.get("target_tokens"), "depth": i.get("depth"),
                    "achieved_depth": ach,
                    "depth_label": depth_label(i.get("depth"), i.get("variant"), ach, i.get("depth_tolerance")),
                    "variant": i.get("variant"), "needle_id": i.get("needle_id"), "score": float(s["score"]),
                    "tags": json.loads(s["tags"] or "[]")})
    return sorted(out, key=lambda c: (c["model"], c["mode"], str(c["sizing_model"]), c["tier"] or 0,
                                      c["depth_label"], str(c["variant"]), str(c["needle_id"]), c["sample"]))


def _acc(cells: list[dict]) -> dict:
    mean, lo, hi = clustered_mean_ci([c["score"] for c in cells], [str(c["needle_id"]) for c in cells])
    return {"n": len(cells), "correct": int(sum(c["score"] >= 1.0 for c in cells)), "accuracy": mean,
            "ci_low": lo, "ci_high": hi}


def _model_key(c: dict) -> tuple:
    return (c["model"], c["mode"], c["sizing_model"])


def accuracy_table(cells: list[dict]) -> list[dict]:
    """Accuracy per model × mode × sizing model × tier × depth (label) × variant (n, correct, accuracy, 95% interval
    clustered by needle), with the range of token depths reached (``achieved_min``, ``achieved_max``; null for
    chains)."""
    g: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        g[(*_model_key(c), c["tier"], c["depth_label"], c["variant"])].append(c)
    return [{"model": k[0], "mode": k[1], "sizing_model": k[2], "tier": k[3], "depth": k[4], "variant": k[5],
             **_achieved_range(v), **_acc(v)} for k, v in sorted(g.items(), key=lambda kv: tuple(str(x) for x in kv[0][:3])
                                           + (kv[0][3] or 0, _depth_key(kv[0][4]), str(kv[0][5])))]


def _achieved_range(cells: list[dict]) -> dict:
    xs = [c["achieved_depth"] for c in cells if c.get("achieved_depth") is not None]
    return {"achieved_min": min(xs) if xs else None, "achieved_max": max(xs) if xs else None}


def _depth_key(label: str) -> tuple[int, float]:
    """Sort key of a depth label: numeric depths ascending (5% before 50%), then ``chain``."""
    return (1, 0.0) if label == "chain" else (0, float(label.rstrip("%")))


def regime_table(cells: list[dict], th: RegimeThresholds | None = None) -> list[dict]:
    """Decay regime per model × mode × sizing model from its accuracy per tier over the cells of ``th.variants``:
    regime, reason, and the curve as JSON ``[[tier, correct, n], ...]`` in ascending tier order."""
    th = th or RegimeThresholds.from_settings()
    g: dict[tuple, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if c["variant"] in th.variants:
            g[_model_key(c)][c["tier"]].append(c)
    out = []
    for k, tiers in sorted(g.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        acc = {t: sum(c["score"] for c in cs) / len(cs) for t, cs in tiers.items()}
        regime, reason = classify_regime(acc, th)
        out.append({"model": k[0], "mode": k[1], "sizing_model": k[2], "regime": regime, "reason": reason,
                    "curve": canonical_json([[t, int(sum(c["score"] >= 1 for c in cs)), len(cs)]
                                             for t, cs in sorted(tiers.items())])})
    return out


def memorization_probe(cells: list[dict]) -> list[dict]:
    """Real vs altered per model × mode × sizing model (module docstring), pooled over tiers (``tier`` ``"all"``)
    and, where there are several tiers, per tier (the study ran its probe at 1M only): counts and accuracies with
    intervals, the paired asymmetry with its interval, and altered cells answered with the real value."""
    g: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        if c["variant"] in SINGLE_VARIANTS:
            g[_model_key(c)].append(c)
    out = []
    for k, cs in sorted(g.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        tiers = sorted({c["tier"] for c in cs})
        groups = [("all", cs)] + ([(t, [c for c in cs if c["tier"] == t]) for t in tiers] if len(tiers) > 1 else [])
        for tier, part in groups:
            out.append({"model": k[0], "mode": k[1], "sizing_model": k[2], "tier": str(tier), **_probe(part)})
    return out


def _probe(cs: list[dict]) -> dict:
    real = [c for c in cs if c["variant"] == "real"]
    alt = [c for c in cs if c["variant"] == "altered"]
    ra, aa = _acc(real), _acc(alt)
    # pairs by requested depth: the two variants of one needle are one design cell wherever each landed
    by_pair = {(c["needle_id"], c["tier"], c["depth"], c["sample"]): c["score"] for c in real}
    diffs, clusters = [], []
    for c in alt:
        p = (c["needle_id"], c["tier"], c["depth"], c["sample"])
        if p in by_pair:
            diffs.append((by_pair[p] - c["score"] + 1) / 2)   # in [0, 1] for the bounded interval
            clusters.append(str(c["needle_id"]))
    m, lo, hi = clustered_mean_ci(diffs, clusters)
    asym = [2 * x - 1 for x in (m, lo, hi)] if diffs else [float("nan")] * 3
    return {"real_n": ra["n"], "real_correct": ra["correct"], "real_accuracy": ra["accuracy"],
            "real_ci_low": ra["ci_low"], "real_ci_high": ra["ci_high"],
            "altered_n": aa["n"], "altered_correct": aa["correct"], "altered_accuracy": aa["accuracy"],
            "altered_ci_low": aa["ci_low"], "altered_ci_high": aa["ci_high"],
            "pairs": len(diffs), "asymmetry": asym[0], "asymmetry_ci_low": asym[1], "asymmetry_ci_high": asym[2],
            "altered_answered_real": sum("memorized_value" in c["tags"] for c in alt),
            "asymmetric": bool(diffs) and asym[1] > 0}


def failure_counts(cells: list[dict]) -> list[dict]:
    """Per model × mode × sizing model × variant: cells, wrong cells, and the count of each failure mode (plus
    ``null_answer`` and ``memorized_value``)."""
    g: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        g[(*_model_key(c), c["variant"])].append(c)
    out = []
    for k, cs in sorted(g.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        row = {"model": k[0], "mode": k[1], "sizing_model": k[2], "variant": k[3], "cells": len(cs),
               "wrong": sum(c["score"] < 1 for c in cs)}
        for t in (*FAILURE_MODES, "null_answer", "memorized_value"):
            row[t] = sum(t in c["tags"] for c in cs if c["score"] < 1)
        out.append(row)
    return out


def heatmaps(cells: list[dict]) -> dict[tuple, dict]:
    """Per model × mode × sizing model: ``{"tiers": [...], "depths": [...], "cells": {(depth_label, tier):
    (correct, n)}}`` over all variants (real and altered pooled per depth; chains as depth ``chain``)."""
    out: dict[tuple, dict] = {}
    for c in cells:
        h = out.setdefault(_model_key(c), {"tiers": set(), "depths": set(), "cells": defaultdict(lambda: [0, 0])})
        h["tiers"].add(c["tier"])
        h["depths"].add(c["depth_label"])
        cell = h["cells"][(c["depth_label"], c["tier"])]
        cell[0] += int(c["score"] >= 1)
        cell[1] += 1

    return {k: {"tiers": sorted(h["tiers"]), "depths": sorted(h["depths"], key=_depth_key),
                "cells": {kk: tuple(v) for kk, v in h["cells"].items()}} for k, h in out.items()}


@dataclass
class NeedlesAnalysis:
    """Every needles table of a build (empty lists when it has no scored needles instances)."""

    accuracy: list[dict]
    regimes: list[dict]
    memorization: list[dict]
    failures: list[dict]
    heatmaps: dict[tuple, dict]
    thresholds: RegimeThresholds

    def tables(self) -> dict[str, list[dict]]:
        return {"needles_accuracy": self.accuracy, "needles_regimes": self.regimes,
                "needles_memorization": self.memorization, "needles_failures": self.failures}


def analyse(build_dir: str | Path, thresholds: RegimeThresholds | dict | None = None) -> NeedlesAnalysis:
    """All needles tables of a scored build. ``thresholds``: a :class:`RegimeThresholds` or overrides of the
    settings file's (a ValueError names an unknown key)."""
    th = thresholds if isinstance(thresholds, RegimeThresholds) else RegimeThresholds.from_settings(thresholds)
    cells = needle_cells(build_dir)
    return NeedlesAnalysis(accuracy_table(cells), regime_table(cells, th), memorization_probe(cells),
                           failure_counts(cells), heatmaps(cells), th)


__all__ = [
    "FAILURE_MODES",
    "NeedleFacts",
    "NeedlesAnalysis",
    "RegimeThresholds",
    "achieved_token_depth",
    "TagSummary",
    "accuracy_table",
    "analyse",
    "classify_regime",
    "depth_label",
    "facts_from_instances",
    "facts_from_needle_set",
    "failure_counts",
    "heatmaps",
    "judge_failure_messages",
    "load_facts",
    "memorization_probe",
    "needle_cells",
    "parse_failure_mode",
    "parse_threshold_overrides",
    "regime_table",
    "rule_tags",
    "settings",
    "tag_failures",
]
