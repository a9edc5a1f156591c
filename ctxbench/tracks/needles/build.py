"""The planted-fact track (needles in a real corpus): per-model haystacks, real/altered needles, multi-hop chains.

Method: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text"
(2026), sections 3.1-3.5. For each sizing model and tier:

* the haystack is the first whole paragraphs of the master haystack (the corpus's volumes in canonical order, some
  excluded) that fit in ``floor(fill × (1 − safety_margin) × min(tier, window)) − (prompt template + question +
  output budget)`` tokens of the model's own tokenizer, less the tokens of the needles planted into it; ``fill``
  defaults to 0.99 (the study's 99%) and the output budget to the model's registry ``max_output_tokens`` (what
  ``evaluate`` sends by default); the safety margin is non-zero only for models whose tokenizer is approximate;
* a tier larger than the window is sized to the window (the study's 1M tier is each model's own ceiling); a model
  whose window is below half the tier skips that tier, with the reason in ``quarantine.parquet``;
* construction is linear: every paragraph is tokenized once per tokenizer (one batched call, shared by all its
  models and tiers), the cut is a bisection in the prefix sums, and each instance's context is counted once more to
  store its exact length (paragraphs are dropped from the end in the rare case the tokenizer merges across a join).

Instances: each needle × variant (real, altered) × depth, and each chain at its fixed depths, for every model ×
tier. A depth is a fraction of the context's tokens in the sizing model's tokenizer: each statement goes to the
sentence boundary nearest it (:func:`ctxbench.tracks.needles.questions.plan_token_insertions`), and the build checks
that the token depth reached is within ``DEPTH_TOLERANCE`` (2 points) of the label, or within one sentence where the
sentence there is longer; an instance that misses is quarantined (stage ``assemble``), never stored under a label
it does not meet. Before anything is built, every planted fact and fictional name is checked absent from the
master haystack (:func:`ctxbench.tracks.needles.questions.verify_absent`), which contains every haystack.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

import pyarrow as pa

from ctxbench.tracks.needles.config import MAX_TIER, NeedlesConfig  # noqa: F401 (their home)
from ctxbench import __version__
from ctxbench.features.difficulty import difficulty_columns
from ctxbench.features.language import language_columns, prefetch_languages
from ctxbench.features.overlap import lexical_overlap
from ctxbench.core.config import assets_dir, ordered_map
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import canonical_json, file_sha256, stable_hash
from ctxbench.models.registry import sizing_tokenizer
from ctxbench.models.prompts import VARIANTS as PROMPT_VARIANTS
from ctxbench.models.prompts import messages_text, render_messages
from ctxbench.tracks.needles.questions import (
    NeedleSet,
    PlantItem,
    apply_insertions,
    corpus_language,
    default_needle_set,
    load_needle_set,
    plan_token_insertions,
    verify_absent,
)
from ctxbench.sources.corpus import Corpus, corpus_summary, load_corpus, volume_number
from ctxbench.core.storage import to_table
from ctxbench.tokenizers.calibrate import calibrate
from ctxbench.tokenizers.counts import counter_for, flush_all
from ctxbench.tracks.validate import validate_build
from ctxbench.core.manifest import BuildResult as _CommonResult
from ctxbench.tracks.common import BuildWriter
from ctxbench.core.config import read_yaml

# tokens a chat format adds around the messages (role markers, separators) beyond their text: a fixed allowance
CHAT_OVERHEAD_TOKENS = 16
# how far the token depth reached may be from the label (a fraction of the context's tokens), unless the sentence
# the target falls in is longer (issue 13: "within 2 points of the label, or one sentence where sentences are longer")
DEPTH_TOLERANCE = 0.02
# how statements are placed; part of the build hash, so a build placed another way is never taken for this one
PLACEMENT = "token depth, nearest sentence boundary (v1)"


@dataclass
class BuildResult(_CommonResult):
    """What a build wrote (:class:`ctxbench.core.manifest.BuildResult`) and the haystacks' sizing numbers."""

    haystacks: list[dict] = field(default_factory=list)


@dataclass
class Loaded:
    """Stage ``load``: corpus (exclusions applied), needle set, sizing models, build hash."""

    cfg: NeedlesConfig
    out: Path
    corpus: Corpus
    needle_set: NeedleSet
    language: str
    models: dict  # name -> (ModelInfo, Tokenizer)
    build_hash: str
    existing: BuildResult | None = None
    writer: BuildWriter | None = None


@dataclass
class Haystack:
    """The base haystack of one (model, tier): the first ``k`` paragraphs, their exact token count and the
    budget numbers of the sizing formula (module docstring)."""

    model: str
    tokenizer: str
    tier: int
    window: int
    effective: int
    prompt_limit: int
    overhead: int
    budget: int
    reserve: int
    k: int
    tokens: int
    chars: int
    approximate: bool
    safety_margin: float

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _models_yaml_entries(names: list[str]) -> dict:


    reg = (read_yaml(assets_dir() / "models.yaml", "model registry") or {}).get("models", {})
    low = {k.lower(): k for k in reg}
    return {n: reg.get(n) or reg.get(low.get(n.lower(), ""), None) for n in names}


def load_stage(cfg: NeedlesConfig, out: str | Path, force: bool = False, versioned: bool = False) -> Loaded:
    """Load the corpus (volumes in canonical order; the needle set's exclusions for this corpus and ``--exclude``
    applied), the needle set and every sizing model's tokenizer, and hash the inputs. Raises InputError for a bad
    corpus, needle set or model (a model whose tokenizer cannot be loaded is named, with what to install)."""
    out = Path(out)
    models = {m: sizing_tokenizer(m) for m in cfg.models}
    probe = load_corpus(cfg.corpus)
    language = corpus_language("".join(p + "\n" for v in probe.volumes[:5] for p in v.paragraphs))
    ns = load_needle_set(cfg.needles or default_needle_set(language))
    # the needle set's exclusions for this corpus, except those a fetched corpus already left out
    already = {volume_number(n) for n in probe.excluded} - {None}
    asset_words = [w for w in ns.exclusions_for(probe.corpus_id)
                   if w not in probe.excluded.values() and volume_number(w) not in already]
    corpus = load_corpus(cfg.corpus, exclude=[*asset_words, *cfg.exclude])
    inputs = {
        "corpus": {"id": corpus.corpus_id, "sha256": corpus.checksums(), "excluded": sorted(corpus.excluded)},
        "needles": ns.sha256,
        "prompts": file_sha256(_prompt_file()),
        "models": _models_yaml_entries(cfg.models),
        "tokenizers": {m: t.file_sha256 or t.name for m, (_, t) in models.items()},
    }
    cfgd = _config_dump(cfg)
    cfgd.pop("corpus")
    bhash = stable_hash("needles", cfgd, inputs, __version__, PLACEMENT, length=20)
    w = BuildWriter(out, bhash, force, versioned)
    ex = BuildResult(**w.existing.__dict__) if w.existing is not None else None
    return Loaded(cfg, w.dir, corpus, ns, language, models, bhash, ex, w)


def _config_dump(cfg: NeedlesConfig, **kw) -> dict:
    """``cfg.model_dump(**kw)`` without the issue-25 fields at their defaults (no look-alikes, no overlap cap): a
    build made before they existed keeps its build hash and instance ids."""
    d = cfg.model_dump(**kw)
    if d.get("distractor_needles") == 0:
        d.pop("distractor_needles")
    if d.get("max_overlap") is None:
        d.pop("max_overlap", None)
    return d


def lookalike_depths(k: int, needle_depth: float) -> list[float]:
    """Depths of ``k`` look-alike statements spread over the haystack: the midpoints ``(i + 0.5) / k``, each
    moved a quarter of the spacing away from the needle's depth where it falls within that of it (so a look-alike
    never sits on the needle)."""
    out = []
    gap = 1 / (4 * k) if k else 0
    for i in range(k):
        d = (i + 0.5) / k
        if abs(d - needle_depth) < gap:
            d = min(1.0, d + gap) if d >= needle_depth else max(0.0, d - gap)
        out.append(round(d, 6))
    return out


def verify_stage(loaded: Loaded) -> dict:
    """Exhaustive absence check of every planted fact and fictional name in the master haystack (raises
    InputError naming the fact)."""
    return verify_absent(loaded.corpus.text(), loaded.needle_set, where=f"corpus {loaded.corpus.corpus_id}")


def count_stage(loaded: Loaded) -> dict[str, list[int]]:
    """Tokens of the leading paragraphs (each with its newline) for each sizing tokenizer, in batched calls sized
    from the mean paragraph length seen so far, until they cover the largest tier any of its models needs (the
    whole corpus at most): a paragraph is tokenized once per tokenizer, and a small tier does not pay for a large
    corpus."""
    paras = loaded.corpus.paragraphs()
    need: dict[str, int] = {}
    for _, (info, tok) in loaded.models.items():
        top = max(min(t, int(info.window)) for t in loaded.cfg.lengths)
        need[tok.name] = max(need.get(tok.name, 0), top)
    counts: dict[str, list[int]] = {}
    for _, (_, tok) in loaded.models.items():
        if tok.name in counts:
            continue
        # counts kept across tiers, builds and nightly runs (ctxbench.tokenizers.counts)
        counter = counter_for(tok, f"needles/{loaded.corpus.corpus_id}")
        c: list[int] = []
        total, step = 0, 1024
        while len(c) < len(paras) and total <= need[tok.name]:
            batch = counter.counts([p + "\n" for p in paras[len(c): len(c) + step]])
            c.extend(batch)
            total += sum(batch)
            # the next batch: the paragraphs still needed at the mean length so far, 5% over (at least 256)
            step = max(256, int((need[tok.name] - total) / max(total / len(c), 1e-9) * 1.05))
        counts[tok.name] = c
    flush_all()
    return counts


def _overhead(model: str, tok, questions: list[str], output_budget: int) -> int:
    """Prompt template + longest question + output budget + chat allowance, in tokens of ``tok``."""
    tmpl = max(tok.count(messages_text(render_messages("", q, v, model, benchmark="needles")))
               for q in set(questions) for v in PROMPT_VARIANTS)
    return tmpl + output_budget + CHAT_OVERHEAD_TOKENS


def size_haystack(model: str, info, tok, tier: int, prefix: list[int], fill: float, overhead: int,
                  reserve: int, total_chars: list[int], more_paragraphs: bool = False) -> Haystack | str:
    """The base haystack of ``model`` at ``tier`` (module docstring), or the reason it is skipped. ``prefix[k]``
    is the token count of the first ``k`` paragraphs (``more_paragraphs``: the corpus goes on beyond the counted
    ones); ``reserve`` the tokens kept for the planted statements."""
    window = int(info.window)
    if window < tier / 2:
        return f"window of {model} ({window:,} tokens) is below half the tier ({tier:,} tokens)"
    effective = min(tier, window)
    limit = math.floor(fill * (1 - info.safety_margin) * effective)
    budget = limit - overhead
    if budget - reserve <= 0:
        return (f"the prompt template, question and output budget ({overhead:,} tokens) leave no room for a haystack "
                f"in {limit:,} tokens")
    k = bisect_right(prefix, budget - reserve) - 1
    if k >= len(prefix) - 1 and not more_paragraphs and prefix[-1] < budget - reserve:
        return (f"the corpus holds only {prefix[-1]:,} tokens of {tok.name}, less than the haystack budget of "
                f"{budget - reserve:,} tokens for {model} at {tier:,}: use a larger corpus or a smaller tier")
    return Haystack(model, tok.name, tier, window, effective, limit, overhead, budget, reserve, k, prefix[k],
                    total_chars[k], bool(info.approximate), float(info.safety_margin))


def _instance(loaded: Loaded, hs: Haystack, tok, paras: list[str], counts: list[int], item: PlantItem
              ) -> tuple[dict | None, dict | None]:
    """One instance: plant ``item`` in the haystack at its token depths, count the context exactly, locate each
    statement, check the depths reached. Returns (instance row, None), or (None, quarantine row) when a statement's
    token depth is off its label by more than the tolerance (``DEPTH_TOLERANCE`` or the sentence it falls in)."""
    cfg = loaded.cfg
    base = paras[: hs.k]
    n_ev = len(item.statements)  # the evidence statements come first; look-alikes after them
    statements = [*item.statements, *item.lookalikes]
    depths = [*item.depths, *lookalike_depths(len(item.lookalikes), item.depths[0])]
    st_tokens = [tok.count(s + "\n") for s in statements]
    starts: dict[int, list[int]] = {}

    def token_offset(j: int, c: int) -> int:  # tokens of paragraph j before its character c
        if j not in starts:
            starts[j] = tok.char_starts(base[j] + "\n")[1]
        return bisect_left(starts[j], c)

    while True:
        ins = plan_token_insertions(base, counts[: len(base)], statements, st_tokens, depths,
                                    cfg.boundary, token_offset)
        result, where, origin = apply_insertions(base, ins)
        text = "".join(p + "\n" for p in result)
        n_tokens = tok.count(text)
        if n_tokens <= hs.budget or not base:
            break
        base = base[:-1]  # the tokenizer merged across a join: drop a paragraph from the end and recount
    if n_tokens > hs.budget:
        raise InputError(f"{item.needle_id}: the planted statements alone exceed the budget of {hs.budget} tokens")
    # token offsets: prefix sums of untouched paragraphs plus the modified paragraphs tokenized alone; exact when the
    # tokenizer does not merge across newlines (checked against the full count; else one full pass with offsets)
    res_counts = [counts[o] if o is not None else tok.count(p + "\n") for p, o in zip(result, origin)]
    pre = [0, *accumulate(res_counts)]
    spans, char_offsets = [], []
    char_pre = [0, *accumulate(len(p) + 1 for p in result)]
    for (r_idx, a, b) in where:
        p = result[r_idx]
        _, st = tok.char_starts(p + "\n")
        s, e = tok.token_span(st, a, b)
        spans.append([pre[r_idx] + s, pre[r_idx] + e])
        char_offsets.append((char_pre[r_idx] + a, char_pre[r_idx] + b))
    if pre[-1] != n_tokens:  # not additive for this tokenizer and text: locate with one full pass
        _ids, st = tok.char_starts(text)
        spans = [list(tok.token_span(st, a, b)) for a, b in char_offsets]
    n_par = len(base)
    lookalike_spans, spans = spans[n_ev:], spans[:n_ev]
    ins = ins[:n_ev]
    first = min(range(len(ins)), key=lambda i: spans[i][0])
    achieved = [round(s / n_tokens, 6) for s, _ in spans]
    allowed = [round(max(DEPTH_TOLERANCE, x.unit_tokens / n_tokens), 6) for x in ins]
    cfg_for_id = _config_dump(cfg, exclude={"corpus", "models", "lengths", "exclude"})
    iid = stable_hash(cfg_for_id, loaded.corpus.corpus_id, hs.model, hs.tier, item.needle_id, item.variant,
                      item.depths, item.question, stable_hash(text, length=64), length=24)
    off = [i for i, (d, a, t) in enumerate(zip(item.depths, achieved, allowed)) if abs(a - d) > t + 1e-9]
    if off:
        what = "; ".join(f"statement {i + 1} requested at {item.depths[i]:.1%} of the tokens, placed at "
                         f"{achieved[i]:.1%} (allowed ±{allowed[i]:.1%})" for i in off)
        at = ",".join(f"{d:g}" for d in item.depths)
        return None, {"input": f"{item.needle_id} {item.variant} depth {at} @ {hs.model}@{hs.tier}", "stage": "assemble",
                      "reason": f"needle depth off its label: {item.needle_id} ({item.variant}) for {hs.model} at "
                                f"{hs.tier:,}: {what}",
                      "detail": canonical_json({"needle_id": item.needle_id, "variant": item.variant,
                                                "model": hs.model, "tier": hs.tier, "depths": item.depths,
                                                "achieved": achieved, "allowed": allowed,
                                                "tokens": [s for s, _ in spans], "context_tokens": n_tokens})}
    needle_tokens = sum(e - s for s, e in spans)
    single = item.variant != "chain"
    row = {
        "instance_id": iid, "benchmark": "needles", "source_id": loaded.corpus.corpus_id,
        "question": item.question, "question_id": item.needle_id, "sql": None,
        "gold": canonical_json([[item.answer]]), "accepted_answers": canonical_json(item.accepted),
        "context": text, "tokenizer": hs.tokenizer, "target_tokens": hs.tier, "context_tokens": n_tokens,
        "setting": None, "achieved_density": round(needle_tokens / n_tokens, 8), "context_format": "full_text",
        "position": None, "depth": item.depths[0] if single else None,
        "achieved_depth_tokens": spans[first][0],
        "achieved_depth_paragraphs": round(ins[first].j / n_par, 6) if n_par else 0.0,
        "achieved_depth": achieved[first], "depth_tolerance": max(allowed),
        "sizing_model": hs.model, "needle_id": item.needle_id, "variant": item.variant,
        "query_types": "[]", "difficulty": None, "skill": None,
        "evidence_spans": canonical_json(spans), "included_rows": None, "hops": len(item.statements),
        "relevant_tokens": needle_tokens,
        "build_hash": loaded.build_hash, "attribute": item.attribute,
        "needle_depths": canonical_json(item.depths),
        "needle_depths_tokens": canonical_json([s for s, _ in spans]),
        "needle_depths_achieved": canonical_json(achieved),
        "needle_depths_paragraphs": canonical_json([round(x.j / n_par, 6) if n_par else 0.0 for x in ins]),
        "haystack_budget_tokens": hs.budget, "haystack_paragraphs": n_par,
        "sizing_approximate": hs.approximate,
        "distractor_needles": len(item.lookalikes),
        "distractor_spans": canonical_json(lookalike_spans) if item.lookalikes else None,
        "lexical_overlap": lexical_overlap(item.question, item.statements),
    }
    row.update(difficulty_columns(row))
    prefetch_languages([text, item.question])  # detected beside this process; the columns are added by the stage
    return row, None


@dataclass
class Assembled:
    """Stage ``assemble``: instance rows, quarantine rows and the haystacks' sizing numbers."""

    instances: list[dict]
    quarantine: list[dict]
    haystacks: list[dict]
    calibration: list[dict]


def assemble_stage(loaded: Loaded, counts: dict[str, list[int]],
                   progress: Callable[[int, int], None] | None = None) -> Assembled:
    """Size every (model, tier) haystack and plant every item in it (module docstring)."""
    cfg = loaded.cfg
    paras = loaded.corpus.paragraphs()
    chars = [0, *accumulate(len(p) + 1 for p in paras)]
    items = loaded.needle_set.items(cfg.depths, cfg.chain_depths, tuple(cfg.variants), cfg.distractor_needles)
    if not cfg.chains:
        items = [i for i in items if i.variant != "chain"]
    if cfg.max_overlap is not None:
        kept = [i for i in items if lexical_overlap(i.question, i.statements) <= cfg.max_overlap + 1e-12]
        if not kept:
            lows = sorted({(round(lexical_overlap(i.question, i.statements), 3), i.needle_id) for i in items})[:5]
            raise InputError(f"--max-overlap {cfg.max_overlap}: no needle or chain of the set has a question whose "
                             f"lexical overlap with its statements is that low (lowest: "
                             f"{', '.join(f'{n} {o}' for o, n in lows)}): raise it, or use --needles "
                             f"zh-classical-low-overlap")
        items = kept
    if not items:
        raise InputError("nothing to plant: the needle set has no needles for these variants and chains are off")
    instances, quarantine, haystacks = [], [], []
    total = len(cfg.models) * len(cfg.lengths) * len(items)
    done = 0
    # tokens per character of the counted paragraphs, per sizing tokenizer (the full corpus: `ctxbench calibrate`)
    cal = {}
    for name, cn in counts.items():
        d = calibrate(paras[: len(cn)], [name], counts={name: cn})[0].as_dict()
        cal[name] = {**d, "paragraphs": len(cn)}
    for model in cfg.models:
        info, tok = loaded.models[model]
        c = counts[tok.name]
        prefix = [0, *accumulate(c)]
        out_budget = cfg.output_budget or info.max_output_tokens
        overhead = _overhead(model, tok, [i.question for i in items], out_budget)
        # the planted statements' tokens are reserved in the sizing (with a newline each, and a little slack for
        # a sentence glued into a paragraph)
        reserve = max(sum(tok.count(s + "\n") + 2 for s in [*i.statements, *i.lookalikes]) for i in items)
        for tier in cfg.lengths:
            hs = size_haystack(model, info, tok, tier, prefix, cfg.fill, overhead, reserve, chars,
                               more_paragraphs=len(c) < len(paras))
            if isinstance(hs, str):
                quarantine.append({"input": f"{model}@{tier}", "stage": "assemble", "reason": hs,
                                   "detail": canonical_json({"model": model, "tier": tier, "window": info.window})})
                done += len(items)
                if progress:
                    progress(done, total)
                continue
            hd = hs.as_dict()
            hd["calibration_tokens_per_char"] = cal[tok.name]["tokens_per_char"]
            haystacks.append(hd)
            # instances are independent and counting each context releases the GIL: planted on several threads,
            # kept in the order of the items
            planted = ordered_map(lambda item, hs=hs, tok=tok, c=c: _instance(loaded, hs, tok, paras, c, item), items)
            for row, q in planted:
                if row is not None:
                    instances.append(row)
                else:
                    quarantine.append(q)
                done += 1
                if progress:
                    progress(done, total)
    for row in instances:
        row.update(language_columns(row))
    return Assembled(instances, quarantine, haystacks, list(cal.values()))


def validate_stage(asm: Assembled) -> None:
    """The instances data-quality suite over the assembled instances (raises ValidationError naming failed
    expectations)."""
    validate_build(to_table("instances", asm.instances))


def write_stage(loaded: Loaded, asm: Assembled, checked: dict) -> BuildResult:
    """Write quarantine, instances (atomically) and, last, the manifest that marks the build complete."""
    cfg = loaded.cfg
    approx = sorted({h["model"] for h in asm.haystacks if h["approximate"]})
    return loaded.writer.write(
        "needles", cfg.model_dump(exclude={"corpus"}), asm.instances, asm.quarantine,
        tokenizers={m: t for m, (_, t) in loaded.models.items()}, counts={"haystacks": len(asm.haystacks)},
        details={"corpus": corpus_summary(loaded.corpus), "language": loaded.language,
                 "needle_set": {"file": _asset_name(loaded.needle_set.path), "sha256": loaded.needle_set.sha256,
                                "language": loaded.needle_set.language},
                 "absence_check": checked, "haystacks": asm.haystacks, "calibration": asm.calibration,
                 "approximate_tokenizers": {
                     m: f"{loaded.models[m][1].name} approximates {m}'s tokenizer; sizing keeps a "
                        f"{loaded.models[m][0].safety_margin:.0%} safety margin" for m in approx}},
        result=BuildResult, haystacks=asm.haystacks)


def build_needles(cfg: NeedlesConfig, out: str | Path, progress: Callable[[int, int], None] | None = None,
                  force: bool = False, versioned: bool = False) -> BuildResult:
    """Build a planted-fact benchmark into the build directory ``out`` (SCHEMA.md layout): load → verify → count
    → assemble → validate → write (the Prefect flow ``build_needles`` runs each as a task).

    An existing complete build with the same build hash is left as it is; a directory holding a different build is
    an error unless ``force``. Raises InputError for bad input or a planted fact found in the corpus."""
    loaded = load_stage(cfg, out, force, versioned)
    if loaded.existing is not None:
        return loaded.existing
    checked = verify_stage(loaded)
    counts = count_stage(loaded)
    asm = assemble_stage(loaded, counts, progress)
    validate_stage(asm)
    return write_stage(loaded, asm, checked)


def own_haystacks(tbl: pa.Table, model: str) -> pa.Table:
    """The rows of an instances table ``model`` answers: one of the build's sizing models answers its own
    haystacks only (sized with its tokenizer and window; names compared without case and without a provider prefix
    such as ``openai/``); rows without ``sizing_model`` and models that sized nothing keep every row."""
    if "sizing_model" not in tbl.column_names:
        return tbl
    key = model.split("/")[-1].lower()
    sizing = [None if v is None else v.split("/")[-1].lower() for v in tbl.column("sizing_model").to_pylist()]
    if key not in set(sizing):
        return tbl
    return tbl.take([i for i, v in enumerate(sizing) if v is None or v == key])


def _prompt_file() -> Path:
    """The prompt file evaluation uses for needles instances (``assets/prompts/needles.yaml``, else the default)."""
    p = assets_dir() / "prompts" / "needles.yaml"
    return p if p.exists() else assets_dir() / "prompts" / "default.yaml"


def _asset_name(p: Path) -> str:
    """A needle set's file name when it is under ``assets/needles/``, else its absolute path."""
    p = p.resolve()
    return p.name if p.parent == (assets_dir() / "needles").resolve() else str(p)
