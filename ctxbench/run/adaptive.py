"""``evaluate --adaptive-calls N`` (issue 34): ask a new model the most informative instances first.

The items (instances × mode) of the build are calibrated on the answers the other models already gave
(:func:`ctxbench.analysis.irt.calibrate_builds`; ``--adaptive-runs`` adds other builds: with no other model anywhere
every item's difficulty is its feature prediction). :class:`AdaptiveSelector` then plays the part of
:class:`ctxbench.run.spend.TargetCI` in :func:`ctxbench.run.spend.run_waves`: each wave asks the item of maximum
Fisher information at the model's current ability estimate (EAP), first covering every group (mode × retrieval
budget × context length) once, while the calls stay within ``N``. Answers stored by earlier runs (and cache hits)
count as answered and stored calls count towards ``N``: a later run with a larger ``N`` continues. With
``--target-ci W`` it also stops once the 95% interval of the whole-build estimate of each mode is at most ±W and
the model has answered at least one instance of each context length (never on the calibration alone); with
``--max-cost`` the spend cap holds as for any evaluation. The run is recorded in ``BUILD/adaptive.json`` so that
``score`` writes ``adaptive.parquet`` (:func:`ctxbench.analysis.irt.adaptive_rows`).

Contexts (:func:`pick`). Several instances share one context. Among the candidate items (after the coverage rule)
whose information is at least :data:`INFO_TOLERANCE` (0.8) of the maximum, the selector prefers, where the model's
server keeps a prefix cache (:func:`ctxbench.models.providers.caches_prefixes`), an item on a context asked in the
previous wave or already chosen for this one: its prefix is warm, so the call saves the context's prompt tokens.
Where the server keeps none, it prefers an item on a context *other* than those (questions on one context are
locally dependent: a second answer on the same context tells less about the ability than the information function
says), and takes the maximum when no such item is within the tolerance. This is van der Linden's (2008) maximum
information per unit of cost, with the cost ratio of a warm to a cold call (the question's and answer's tokens over
the context's; well under 0.8 for any context worth caching) replaced by a floor on the information kept, because
``N`` counts calls, not tokens: each pick keeps at least 80% of the best item's information. The 0.8 is the
information ``a²p(1 − p)`` within about one logit of the best difficulty (``p`` in [0.28, 0.72] for one ``a``),
narrower than the EAP's own uncertainty in the first tens of answers; "randomesque" exposure control (Kingsbury &
Zara 1989) picks at random among near-best items at a similar small cost in precision. Ties keep SHA-256 of the
instance id, so the selection stays deterministic.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ctxbench.analysis.irt import (THRESHOLD, answers, calibrate_builds, eap, group_estimates, information, instances,
                                   length_of, mode_label, model_ids, model_scores, posterior, primary_score)


INFO_TOLERANCE = 0.8  # an item within this share of the maximum information may be taken for its context (module docstring)


def pick(info: Sequence[float], contexts: Sequence[str | None], recent: set, prefix_cache: bool,
         ties: Sequence[tuple]) -> int:
    """The index of the item to ask among candidates with Fisher information ``info`` (module docstring,
    "Contexts"): the most informative one (ties: ``ties[j]``, smallest first), unless another item within
    :data:`INFO_TOLERANCE` of that maximum is on a context of ``recent`` (``prefix_cache`` True: its prefix is warm)
    or on none of ``recent`` (``prefix_cache`` False: no two questions of one context back to back); then the most
    informative such item. ``contexts[j]``: item j's context id (None: unknown, never warm). Raises ValueError for
    no candidate."""
    if not len(info):
        raise ValueError("pick: no candidate item")
    order = lambda j: (-round(float(info[j]), 9), ties[j])  # noqa: E731
    best = min(range(len(info)), key=order)
    floor = INFO_TOLERANCE * float(info[best]) - 1e-12
    want = [j for j in range(len(info)) if float(info[j]) >= floor
            and (contexts[j] is not None and contexts[j] in recent) == prefix_cache]
    return min(want, key=order) if want else best


@dataclass
class AdaptiveSelector:
    """The wave controller of ``--adaptive-calls`` (module docstring). ``calls``: the budget N of calls of the
    model on this build; ``stored_calls``: calls already stored by earlier runs (counted towards N);
    ``width``: the ``--target-ci`` half-width, or None; ``prefix_cache``: whether the model's server keeps a
    prefix cache (:func:`ctxbench.models.providers.caches_prefixes`; it decides which contexts :func:`pick`
    prefers)."""

    build_dir: Path
    model: str
    calls: int
    stored_calls: int = 0
    width: float | None = None
    calibration_builds: list[str] = field(default_factory=list)
    prefix_cache: bool = False
    made: int = 0
    answers: dict = field(default_factory=lambda: defaultdict(list))  # (mode, iid) -> scores
    closed: dict = field(default_factory=dict)
    _cal: object = None
    _inst: dict = field(default_factory=dict)
    _items: set = field(default_factory=set)  # (mode, iid) of the requests seen (the candidates)
    _ids: list = field(default_factory=list)  # the instances the model answers (the estimate's items)
    _stored: dict = field(default_factory=dict)  # (mode, iid) -> mean score of the model's answers stored before
    _recent: set = field(default_factory=set)  # the contexts of the last wave sent

    def __post_init__(self) -> None:
        self._inst = instances(self.build_dir)
        self._ids = model_ids(self.build_dir, self._inst, self.model)

    def key(self, t: dict) -> tuple[str, str]:
        """A request's item: (mode label, instance_id)."""
        return mode_label(t["mode"], t.get("rag_tokens")), t["instance_id"]

    def group(self, key: tuple[str, str]) -> tuple:
        """An item's group: (mode label, context length)."""
        return key[0], length_of(self._inst.get(key[1]) or {})

    def score(self, t: dict, status: str, response: str | None, reasoning: str | None,
              finish_reason: str | None = None) -> None:
        """Record an answer (primary matcher, as ``score``); a reply that is no answer is left out."""
        s = primary_score(self._inst[t["instance_id"]], status, response, reasoning, finish_reason)
        if s is not None:
            self.answers[self.key(t)].append(s)

    def arrange(self, reqs: list) -> list:
        """Calibrate the items of the requests' modes (once) and note the candidates; returns ``reqs``."""
        for r in reqs:
            self._items.add(self.key(r.item))
        modes = sorted({k[0] for k in self._items} | {k[0] for k in self.answers})
        if self._cal is None and modes:
            ans = answers(self.build_dir, self._inst)
            self._stored = {k: v for md in modes for k, v in model_scores(ans, self.model, md).items()}
            self._cal = calibrate_builds([self.build_dir, *self.calibration_builds], modes, exclude_model=self.model,
                                         first=(self._inst, ans))
        return reqs

    def scores(self, mode: str) -> dict[tuple[str, str], float]:
        """``(mode, iid) → mean primary score`` of every answer of the model in ``mode``: those stored before this
        run (as ``score`` reads them) and this run's."""
        out = {k: v for k, v in self._stored.items() if k[0] == mode}
        out.update({k: float(np.mean(v)) for k, v in self.answers.items() if k[0] == mode and v})
        return out

    def _state(self, mode: str) -> tuple[np.ndarray, float, float]:
        cal = self._cal
        sc = self.scores(mode)
        asked = [k for k in sc if k in cal.index]
        a, b, sd = cal.arrays(asked)
        y = np.array([1.0 if sc[k] >= THRESHOLD else 0.0 for k in asked])
        w = posterior(a, b, y, sd, prior_var=cal.params.prior_var())
        th, se = eap(w)
        return w, th, se

    def estimate(self, mode: str) -> dict:
        """The whole-build estimate of ``mode``: :func:`ctxbench.analysis.irt.group_estimates` over every instance
        the model answers, exactly as ``score`` writes it to ``adaptive.parquet``."""
        return group_estimates(self._cal, [(mode, i) for i in self._ids if (mode, i) in self._cal.index],
                               self.scores(mode))

    def half_width(self, mode: str) -> float:
        """The 95% half-width of the whole-build estimate of ``mode`` (:meth:`estimate`)."""
        e = self.estimate(mode)
        return (e["ci_high"] - e["ci_low"]) / 2

    def uncovered(self, mode: str) -> list:
        """The context lengths of ``mode`` with no answer of the model yet: ``--target-ci`` is never reached before
        each has one (an interval from no answer of a length is the calibration's, not the model's)."""
        done = {length_of(self._inst[i]) for (_, i) in self.scores(mode) if i in self._inst}
        return sorted({length_of(self._inst[i]) for i in self._ids} - done, key=str)

    def left(self) -> int:
        """Calls the budget still allows."""
        return self.calls - self.stored_calls - self.made

    def next_wave(self, remaining: list, concurrency: int) -> list:
        """The requests (every sample) of the next items: the most informative item at the current EAP, among the
        groups not yet answered where some are (ties: the group asked least, then SHA-256 of the instance id; near
        the maximum, the context rule of :func:`pick`), the wave's calls sorted by context so that those sharing one
        run together; up to ``concurrency`` items per wave but at most a quarter of the calls left (at least one
        item); [] when the budget is spent, the target reached or nothing is left."""
        by_item: dict = defaultdict(list)
        for r in remaining:
            by_item[self.key(r.item)].append(r)
        wave: list = []
        modes = sorted({k[0] for k in by_item})
        if self.width is not None:
            for m in modes:
                if self.uncovered(m):
                    continue
                hw = self.half_width(m)
                if hw <= self.width:
                    self.closed[m] = hw
            modes = [m for m in modes if m not in self.closed]
        n_items = max(1, min(concurrency, self.left() // 4 // max(1, max(len(v) for v in by_item.values()))
                             if by_item else 1))
        chosen: list = []
        thetas = {m: self._state(m)[1] for m in modes}
        for _ in range(n_items):
            cands = [k for k in by_item if k[0] in thetas and k not in chosen and not self.answers.get(k)
                     and k in self._cal.index]
            if not cands:
                break
            covered = {self.group(k) for k in self.answers} | {self.group(k) for k in self._stored} | \
                {self.group(k) for k in chosen}
            open_ = [k for k in cands if self.group(k) not in covered]
            pool = open_ or cands
            # the mode with the fewest answers first, then maximum information at its EAP (ties: the first id)
            count = defaultdict(int)
            for k in list(self.answers) + chosen:
                count[k[0]] += 1
            m = min({k[0] for k in pool}, key=lambda md: (count[md], md))
            pool = sorted(k for k in pool if k[0] == m)
            a, b, _ = self._cal.arrays(pool)
            info = information(thetas[m], a, b)
            per_group = Counter(self.group(k) for k in list(self.answers) + chosen)
            # ties (e.g. items alike in every feature): the group asked least, then SHA-256 of the instance id;
            # near the maximum, the context rule of pick (module docstring)
            ties = [(per_group[self.group(k)], hashlib.sha256(k[1].encode()).hexdigest()) for k in pool]
            recent = self._recent | {by_item[k][0].item.get("_ctx") for k in chosen}
            best = pool[pick(info, [by_item[k][0].item.get("_ctx") for k in pool], recent, self.prefix_cache,
                             ties)]
            if sum(len(by_item[k]) for k in chosen) + len(by_item[best]) > self.left():
                break
            chosen.append(best)
        for k in chosen:
            wave += by_item[k]
        # a wave's calls on one context run together (a server's prefix cache reads the context once)
        return sorted(wave, key=lambda r: (r.item.get("_ctx") or "", r.item["sample"]))

    def sent(self, wave: list) -> None:
        """Count the calls of a wave as sent (after the spend cap has trimmed it); its contexts become the previous
        wave's (:func:`pick`)."""
        self.made += len(wave)
        if wave:
            self._recent = {r.item.get("_ctx") for r in wave} - {None}

    def unreachable(self) -> list[str]:
        """Nothing is unreachable for an adaptive run (its estimate covers every instance)."""
        return []

    def summary(self, remaining: list) -> list[str]:
        """One line per mode: the budget used, the EAP ability and the whole-build estimate's interval."""
        out = []
        items_left = {self.key(r.item) for r in remaining}
        for m in sorted({k[0] for k in set(self._items) | set(self.answers)}):
            _, th, se = self._state(m)
            e = self.estimate(m)
            hw = (e["ci_high"] - e["ci_low"]) / 2
            answered = len(self.scores(m))
            out.append(f"--adaptive-calls {self.calls}: {self.model} {m}: {answered} instances answered "
                       f"({self.stored_calls + self.made} calls counted of {self.calls}); ability θ = {th:.2f} ± "
                       f"{se:.2f}; whole-build estimate {e['estimate']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}] "
                       f"±{hw:.3f} (95%); "
                       f"{len([k for k in items_left if k[0] == m])} instances not asked"
                       + (f"; --target-ci {self.width} reached" if m in self.closed else ""))
        return out
