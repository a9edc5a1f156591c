"""``evaluate --max-cost USD`` (a hard spend cap) and ``evaluate --target-ci W`` (sequential stopping): the calls of
an evaluation sent in waves.

Spend cap. Prices are ``--price IN,OUT`` (USD per million input and output tokens) where given, else the model's
prices from litellm's table (:func:`ctxbench.models.pricing.model_prices`, batch prices with ``--batch``); a model
without either is refused before any call. Before a wave is sent, each of its calls reserves its worst case: its
prompt tokens (counted in the model's tokenizer; where the model has none, in cl100k_base plus
:data:`ESTIMATE_MARGIN`) plus the whole output budget, at the input and output prices, no cache discount. A wave
holds the calls, in order, whose reservations fit in ``cap − spent``; a call that could pass the cap is never sent.
When a wave ends, the reservations are replaced by the spend: the server-reported usage (cached input at the
cached-input price where one is known) at these prices, or, where a server reports no usage, the prompt tokens
counted here plus the reply's tokens (the same tokenizer). Calls answered from the response cache cost nothing. The
cap is per invocation: a rerun starts at 0 and, as every answer is stored, asks only the calls not yet stored.

Sequential stopping (``--target-ci``): :class:`TargetCI` orders the calls by context in a seeded random order
(:func:`ctxbench.analysis.sequential.context_order`) per group — mode × retrieval budget × context length — and
after each wave scores the answers (the track's primary matcher, as ``score`` does) and computes each group's
anytime-valid confidence sequence over context means (:mod:`ctxbench.analysis.sequential`, Waudby-Smith & Ramdas
2024). A group whose half-width is at most ``W`` asks nothing more; answers stored by earlier runs count, so a later
run with a smaller ``W`` continues from where the last one stopped.

Adaptive evaluation (``--adaptive-calls N``): :class:`ctxbench.run.adaptive.AdaptiveSelector` takes the place of
:class:`TargetCI` (the same waves, spend cap and scoring of stored answers): the most informative instances first,
at most N calls, and with ``--target-ci`` a stop once the whole-build estimate is within ±W.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from ctxbench.core.errors import InputError
from ctxbench.core.values import parse_price  # noqa: F401 (defined there, light to import: the CLI checks --price)
from ctxbench.models.pricing import Prices, model_prices
from ctxbench.models.prompts import messages_text
from ctxbench.models.providers import caches_prefixes
from ctxbench.analysis.irt import record_adaptive
from ctxbench.analysis.sequential import context_order, half_width
from ctxbench.core.progress import emit
from ctxbench.core.storage import read_table
from ctxbench.models.batch import BatchStore
from ctxbench.run.adaptive import AdaptiveSelector
from ctxbench.scoring.pipeline import score_reply
from ctxbench.scoring.registry import matchers_for
from ctxbench.tokenizers import get_tokenizer

ESTIMATE_MARGIN = 1.10  # prompt counts in cl100k_base for a model without a tokenizer: reserve 10% more


def cap_prices(model: str, price: tuple[float, float] | None, batch: bool) -> Prices:
    """The prices the cap counts at (module docstring). Raises InputError for a model without a price and no
    ``--price``."""
    if price is not None:
        return Prices(price[0] / 1e6, price[1] / 1e6)
    p = model_prices(model, batch=batch)
    if p is None:
        raise InputError(f"--max-cost: {model} has no price in litellm's table"
                         f"{' (nor a batch price)' if batch else ''}: give its prices with --price IN,OUT (USD per "
                         f"million input and output tokens, e.g. --price 0.5,1.5)")
    return p


@dataclass
class Ledger:
    """The spend of one invocation under a cap (module docstring). ``cap``: USD; ``spent``: USD of the calls made;
    ``calls``: calls counted."""

    cap: float
    prices: Prices
    count: Callable[[str], int]
    estimated: bool = False
    spent: float = 0.0
    calls: int = 0

    def worst_case(self, req) -> float:
        """USD a request could cost at most: its prompt tokens (counted, with the margin when estimated) plus its
        whole output budget (``req.max_tokens``)."""
        n = req.expected_prompt_tokens
        if n is None or self.estimated:
            n = self.count(messages_text(req.messages))
            n = int(math.ceil(n * (ESTIMATE_MARGIN if self.estimated else 1.0)))
        return n * self.prices.input + req.max_tokens * self.prices.output

    def fit(self, reqs: list) -> tuple[list, float]:
        """The longest prefix of ``reqs`` whose worst cases fit in ``cap − spent``, and their reservation."""
        room, out, total = self.cap - self.spent, [], 0.0
        for r in reqs:
            w = self.worst_case(r)
            if total + w > room + 1e-12:
                break
            out.append(r)
            total += w
        return out, total

    def settle(self, o) -> None:
        """Count what an outcome cost (module docstring): a call's server-reported usage, else counted tokens."""
        if o.source != "call" or o.result is None:
            return
        res = o.result
        self.calls += 1
        if res.prompt_tokens is not None and res.completion_tokens is not None:
            cached = min(res.cached_prompt_tokens or 0, res.prompt_tokens)
            self.spent += self.prices.cost(res.prompt_tokens, res.completion_tokens, cached)
        elif res.status in ("ok", "truncated"):
            n = o.request.expected_prompt_tokens
            if n is None:
                n = self.count(messages_text(o.request.messages))
            reply = (res.response or "") + (res.reasoning or "")
            self.spent += self.prices.cost(n, self.count(reply) if reply else 0)


@dataclass
class TargetCI:
    """The sequential-stopping controller of ``--target-ci`` (module docstring). ``width``: the target half-width W;
    ``alpha``: 1 − the confidence level."""

    build_dir: Path
    width: float
    seed: int | str
    alpha: float = 0.05
    scores: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))  # group -> ctx -> scores
    order: dict = field(default_factory=dict)  # group -> contexts in the seeded order
    closed: dict = field(default_factory=dict)  # group -> (half-width, contexts) when reached
    _inst: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        ip = self.build_dir / "instances.parquet"
        cols = [c for c in pq.read_schema(ip).names if c != "context"]
        for r in pq.read_table(ip, columns=cols).to_pylist():
            r["gold"] = json.loads(r["gold"]) if r.get("gold") is not None else None
            if r.get("accepted_answers") is not None:
                r["accepted_answers"] = json.loads(r["accepted_answers"])
            self._inst[r["instance_id"]] = r

    def group(self, t: dict) -> tuple:
        """An item's group: (mode, retrieval budget, context length)."""
        i = self._inst.get(t["instance_id"]) or {}
        return (t["mode"], t.get("rag_tokens"), i.get("source_tier") or i.get("target_tokens"))

    def score(self, t: dict, status: str, response: str | None, reasoning: str | None,
              finish_reason: str | None = None) -> None:
        """Record an answer: its primary-matcher score under its group and context, as ``score`` scores it. An
        ``ok`` answer and a reply cut off by the output budget (status ``cut_off``, or an ``ok`` one whose
        ``finish_reason`` the answer chain reads as cut) both count, the cut one as 0 (scoring gives it no credit);
        a failed call (``error``, ``refused``, ``truncated``...) is no answer and is left out."""
        if status not in ("ok", "cut_off"):
            return

        inst = self._inst[t["instance_id"]]
        try:
            [sc] = score_reply(response, inst, reasoning, names=matchers_for(inst.get("benchmark"))[:1],
                               finish_reason=finish_reason, status=status)
        except InputError:
            return  # a matcher that raises: set aside here as score does
        self.scores[self.group(t)][t["_ctx"]].append(float(sc.result.score))

    def half_width(self, g) -> tuple[float, int]:
        """The group's confidence-sequence half-width and the contexts it is over, in the seeded order."""
        obs = [sum(v) / len(v) for c in self.order.get(g, []) if (v := self.scores[g].get(c))]
        return half_width(obs, self.alpha)[2], len(obs)

    def arrange(self, reqs: list) -> list:
        """``reqs`` sorted by group, then context in the seeded order, then sample."""
        by_g: dict = defaultdict(set)
        for r in reqs:
            by_g[self.group(r.item)].add(r.item["_ctx"])
        for g, ctxs in by_g.items():
            known = set(self.order.get(g, []))
            self.order[g] = context_order(known | ctxs | set(self.scores[g]), self.seed)
        rank = {g: {c: i for i, c in enumerate(o)} for g, o in self.order.items()}
        return sorted(reqs, key=lambda r: (str(self.group(r.item)), rank[self.group(r.item)][r.item["_ctx"]],
                                           r.item["sample"]))

    def next_wave(self, remaining: list, concurrency: int) -> list:
        """The requests of the next contexts of each group still above the target (at least ``concurrency`` calls
        per group where it has them, and at least a tenth more contexts than it has answered): [] when every group
        has reached it or has nothing left."""
        by_g: dict = defaultdict(list)
        for r in remaining:
            by_g[self.group(r.item)].append(r)
        wave = []
        for g, rs in by_g.items():
            hw, n = self.half_width(g)
            if hw <= self.width:
                self.closed[g] = (hw, n)
                continue
            want = max(1, math.ceil(0.1 * n))
            taken, ctxs = [], []
            for r in rs:
                c = r.item["_ctx"]
                if c not in ctxs:
                    if len(ctxs) >= want and len(taken) >= concurrency:
                        break
                    ctxs.append(c)
                taken.append(r)
            wave += taken
        return wave

    @staticmethod
    def _where(g) -> str:
        mode, budget, L = g
        return f"{mode}{'' if budget is None else f'@{budget}'} at {L:,} tokens" if isinstance(L, int) else \
            f"{mode} at {L}"

    def unreachable(self) -> list[str]:
        """One line per group (after :meth:`arrange`) whose contexts are too few for the target: even if every one
        of its ``n`` contexts scored alike (all right or all wrong, the narrowest a confidence sequence gets:
        :func:`ctxbench.analysis.sequential.half_width` of ``n`` ones), the half-width after all of them would be
        above ``W``. Said before any call, so the user can lower the target or build more contexts."""
        out = []
        for g in sorted(self.order, key=str):
            n = len(self.order[g])
            best = half_width([1.0] * n, self.alpha)[2]
            if best > self.width:
                out.append(f"--target-ci {self.width}: {self._where(g)}: the build has {n} context(s); even if all "
                           f"scored alike the half-width after every one would be {best:.3f} > {self.width}, so "
                           f"the target cannot be reached: every instance will be asked (build more contexts, or "
                           f"ask for a half-width of at least {best:.3f})")
        return out

    def summary(self, remaining: list) -> list[str]:
        """One line per group: where its half-width stands against the target."""
        left: dict = defaultdict(int)
        for r in remaining:
            left[self.group(r.item)] += 1
        out = []
        for g in sorted(set(self.order) | set(self.scores), key=str):
            hw, n = self.half_width(g)
            where = self._where(g)
            state = "target reached" if hw <= self.width else (
                "every instance asked, target not reached" if not left[g] else "stopped before the target")
            out.append(f"--target-ci {self.width}: {where}: half-width {hw:.4f} over {n} contexts ({state}); "
                       f"{left[g]} calls not asked")
        return out


def run_waves(reqs: list, send: Callable[[list, Callable], None], on_outcome: Callable, s, *, ledger: Ledger | None,
              target: TargetCI | None, concurrency: int, stopped: Callable[[], bool]) -> None:
    """Send ``reqs`` in waves through ``send(wave, on_outcome)`` (the runner's direct or batch path), under the
    spend cap ``ledger`` and the stopping rule ``target`` (module docstring); ``stopped()``: whether the runner
    paused (no further wave). Sets ``s.status`` to ``budget`` when the cap stops the run, ``s.not_asked`` to the
    calls not sent, ``s.spent_usd`` to the spend, and adds the messages to ``s.notes``."""
    remaining = target.arrange(reqs) if target is not None else list(reqs)

    def counted(o) -> None:
        if ledger is not None:
            ledger.settle(o)
        if target is not None and o.result is not None and o.source in ("call", "cache"):
            target.score(o.request.item, o.result.status, o.result.response, o.result.reasoning,
                         getattr(o.result, "finish_reason", None))
        on_outcome(o)

    budget_stop = None
    while remaining and not stopped():
        wave = target.next_wave(remaining, concurrency) if target is not None else remaining
        if target is not None:
            # stored error rows (contexts already in the asked prefix of the seeded order) are asked again whether or
            # not their group has reached the target: the same command replaces them, as without --target-ci
            again = [r for r in remaining if r.item.get("_replaces_error")]
            if again:
                wave = again
        if not wave:
            break
        if ledger is not None:
            fitting, _ = ledger.fit(wave)
            if not fitting:
                budget_stop = ledger.worst_case(wave[0])
                break
            wave = fitting
        sent = {id(r) for r in wave}
        remaining = [r for r in remaining if id(r) not in sent]
        if hasattr(target, "sent"):  # the adaptive selector counts its budget of calls (ctxbench.run.adaptive)
            target.sent(wave)
        send(wave, counted)
    s.not_asked = len(remaining)
    if ledger is not None:
        s.spent_usd = ledger.spent
    if target is not None:
        s.notes[:0] = target.summary(remaining)
    if budget_stop is not None:
        rest = sum(ledger.worst_case(r) for r in remaining)
        s.status = "budget"
        s.notes.insert(0, f"spend cap reached: spent ${ledger.spent:.4f} of --max-cost ${ledger.cap:.4f} on "
                          f"{ledger.calls} calls; {len(remaining)} calls not sent (the next could cost up to "
                          f"${budget_stop:.4f}, all of them up to ${rest:.4f}); every answer is stored: rerun the "
                          f"same command with a larger --max-cost to ask only those")


def evaluate_in_waves(cfg, plan, build_dir: Path, reqs: list, runner, on_outcome: Callable, s, count_tokens,
                      concurrency: int) -> None:
    """``evaluate``'s calls (:class:`~ctxbench.models.runner.Request` list ``reqs``) in waves under ``cfg.max_cost``
    and ``cfg.target_ci`` (module docstring), each wave through ``runner`` directly or, with ``cfg.batch``, through
    the provider's batch API. Answers already stored (``plan.stored``) and served from the cache (``plan.hits``)
    count towards the target first. Raises InputError for ``--max-cost`` on a model without a price and no
    ``--price``, before any call."""
    ledger = target = None
    if cfg.max_cost is not None:
        estimated = count_tokens is None
        if estimated:
            count_tokens = get_tokenizer("cl100k_base").count
        ledger = Ledger(cfg.max_cost, cap_prices(cfg.model, cfg.price, cfg.batch), count_tokens, estimated)
    if getattr(cfg, "adaptive_calls", None) is not None:  # issue 34: most informative first (ctxbench.run.adaptive)
        target = AdaptiveSelector(build_dir, cfg.model, cfg.adaptive_calls, len(plan.stored), cfg.target_ci,
                                  list(cfg.adaptive_runs or []), caches_prefixes(cfg.model, cfg.base_url))
        record_adaptive(build_dir, cfg.model, cfg.adaptive_calls, list(cfg.adaptive_runs or []))
    elif cfg.target_ci is not None:
        target = TargetCI(build_dir, cfg.target_ci, cfg.seed)
    if target is not None:
        keys = {t["request_key"]: t for t in plan.stored}
        if keys:
            resp = read_table(build_dir / "responses.parquet", "responses")
            cols = [c for c in ("request_key", "status", "response", "reasoning", "finish_reason")
                    if c in resp.column_names]
            for r in resp.select(cols).to_pylist():
                if (t := keys.get(r["request_key"])) is not None:
                    target.score(t, r["status"], r.get("response"), r.get("reasoning"), r.get("finish_reason"))
        by_key = {t["request_key"]: t for t in plan.todo}
        for h in plan.hits:
            if (t := by_key.get(h["request_key"])) is not None:
                target.score(t, h.get("status") or "ok", h.get("response"), h.get("reasoning"),
                             h.get("finish_reason"))
        target.arrange(reqs)  # the seeded order over every context of each group, answered or not

        for line in target.unreachable():  # said now, before any call (issue 32 item 9)
            s.notes.append(line)
            emit("target", line)

    if cfg.batch:
        store = BatchStore(build_dir / "batches.json")

        def send(wave: list, cb: Callable) -> None:
            runner.run_batch(wave, store, cb, cfg.batch_poll_s, cfg.batch_wait_s)
    else:
        def send(wave: list, cb: Callable) -> None:
            runner.run(wave, cb)

    run_waves(reqs, send, on_outcome, s, ledger=ledger, target=target, concurrency=concurrency,
              stopped=lambda: runner.paused or runner.status == "waiting")
