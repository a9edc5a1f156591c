"""The REPL loop of ``evaluate --mode repl`` (:mod:`ctxbench.run.repl.protocol`): one answer is a conversation of
root-model turns, each turn's code run in a :class:`~ctxbench.run.repl.sandbox.Sandbox`, its output the next user
message, until ``FINAL`` (status ``ok``), ``max_steps`` turns without one (``max_steps``), the answer's token or cost
budget (``over_budget``) or a step's time limit (``step_timeout``). Those three are the model's own result, like
``cut_off``: stored, never credited, not asked again by a rerun.

Every call, each root turn and each ``llm_query``, goes through a :class:`~ctxbench.models.runner.CallRunner` (the
gateway, the response cache and its request keys, claims, retries, statuses, prices): a rerun or resume replays the
conversation from the cache and pays nothing. ``--max-cost`` (:class:`~ctxbench.run.spend.Ledger`) reserves each
call's worst case, sub-calls included, before it is sent; a call that does not fit is not sent and the answer is
left unstored (a rerun with a larger cap resumes it from the cache).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from ctxbench.models.gateway import CallResult
from ctxbench.models.runner import STORED_STATUSES, CallRunner, Request
from ctxbench.run.repl.protocol import OUTPUT_CHARS, code_blocks, final_in_text, output_message, truncate
from ctxbench.run.repl.sandbox import Sandbox, StepLimits
from ctxbench.run.spend import Ledger

# the REPL's own outcomes (stored, never credited, not asked again: like cut_off)
REPL_STATUSES = ("max_steps", "over_budget", "step_timeout")
PROMPT_CHARS_STORED = 2000  # characters of an llm_query prompt kept in steps.parquet


class ReplConfig(BaseModel):
    """Settings of ``--mode repl`` (the CLI's ``--sub-model``, ``--max-steps``, ``--sandbox``, ``--step-timeout``,
    ``--step-memory``, ``--repl-max-tokens``, ``--repl-max-cost``)."""

    sub_model: str | None = Field(None, description="the model llm_query asks (default: the root model), served at "
                                                    "the same --base-url")
    max_steps: int = Field(20, ge=1, description="root-model turns before the answer ends as max_steps")
    sandbox: Literal["bwrap", "none"] = Field("bwrap", description="bwrap (bubblewrap) or none (no isolation)")
    step_timeout_s: float = Field(60.0, gt=0.0, description="wall-clock and CPU seconds of one step's code")
    step_memory_mb: int = Field(2048, ge=64, description="MiB of address space of the REPL process (besides the "
                                                         "context)")
    max_answer_tokens: int | None = Field(None, ge=1, description="tokens (prompt + completion, root and sub-calls) "
                                                                  "one answer may use: over_budget past it")
    max_answer_cost: float | None = Field(None, gt=0.0, description="USD one answer may cost: over_budget past it")
    output_chars: int = Field(OUTPUT_CHARS, ge=100, description="characters of a step's output shown to the model")

    def limits(self) -> StepLimits:
        """The sandbox's per-step limits."""
        return StepLimits(wall_s=self.step_timeout_s, cpu_s=self.step_timeout_s, memory_mb=self.step_memory_mb)

    def spec(self, model: str) -> dict:
        """What changes an answer's trajectory, hashed into its request key (the sandbox kind does not)."""
        return {"sub_model": self.sub_model or model, "max_steps": self.max_steps, "step_timeout_s":
                self.step_timeout_s, "step_memory_mb": self.step_memory_mb, "max_answer_tokens":
                self.max_answer_tokens, "max_answer_cost": self.max_answer_cost, "output_chars": self.output_chars}


class _Stop(Exception):
    """Ends an answer that is not stored: ``kind`` ``unfinished`` (a call failed past its retries, or the run
    paused: a rerun resumes it) or ``not_asked`` (the spend cap)."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


@dataclass
class Spend:
    """The ``--max-cost`` ledger of one invocation shared by every answer's calls (root and sub-model, each at its
    own prices): :meth:`reserve` before a call, :meth:`settle` after it. Thread-safe."""

    ledgers: dict[str, Ledger]
    cap: float
    spent: float = 0.0
    reserved: float = 0.0
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve(self, model: str, req: Request) -> float | None:
        """Reserve ``req``'s worst case (USD) when it fits in what is left, else None."""
        led = self.ledgers[model]
        w = led.worst_case(req)
        with self._lock:
            if self.spent + self.reserved + w > self.cap + 1e-12:
                return None
            self.reserved += w
        return w

    def settle(self, model: str, reserved: float, outcome) -> None:
        """Replace a reservation by what the call cost (:meth:`ctxbench.run.spend.Ledger.settle`)."""
        led = self.ledgers[model]
        with self._lock:
            before = led.spent
            led.settle(outcome)
            self.spent += led.spent - before
            self.calls = sum(x.calls for x in self.ledgers.values())
            self.reserved -= reserved


@dataclass
class Caller:
    """Makes one model's calls of one answer through its own :class:`CallRunner` (one per answer: answers run in
    threads). ``sampling`` and ``max_tokens`` as in ``evaluate``; ``spend``: the shared ``--max-cost`` ledger."""

    runner: CallRunner
    sampling: dict
    max_tokens: int
    spend: Spend | None = None
    made: int = 0       # calls this caller sent
    replayed: int = 0   # answered by the response cache

    def call(self, messages: list[dict], sample: int) -> tuple[CallResult, str]:
        """One call: (its result, ``call`` or ``cache``). Raises :class:`_Stop` when the cap leaves no room for it
        or it ends unstored (a transient failure past its retries, a configuration error, a paused run)."""
        key = self.runner.key(messages, self.sampling, self.max_tokens, sample)
        req = Request(key, messages, self.sampling, self.max_tokens)
        w = None
        if self.spend is not None and self.runner.cache.get(key) is None:
            w = self.spend.reserve(self.runner.model, req)
            if w is None:
                raise _Stop("not_asked", f"--max-cost ${self.spend.cap:g} leaves no room for the next call of "
                                         f"{self.runner.model}")
        o = self.runner.run([req])[0]
        if w is not None:
            self.spend.settle(self.runner.model, w, o)  # type: ignore[union-attr]
        if o.result is None:
            raise _Stop("unfinished", self.runner.pause_reason or "not attempted")
        res = o.result
        if res.status not in STORED_STATUSES and (res.transient_failure or res.status == "config_error"):
            raise _Stop("unfinished", f"{self.runner.model}: {res.error}")
        if o.source == "cache":
            self.replayed += 1
        else:
            self.made += 1
        return res, o.source


@dataclass
class Answer:
    """One REPL answer: ``row`` (the fields of its ``responses.parquet`` row beyond the request's: status,
    response, tokens, cost, latency, cached, retries, error), ``steps`` (its ``steps.parquet`` rows), ``stop``
    (``unfinished`` / ``not_asked`` when it is not stored, with ``reason``)."""

    row: dict = field(default_factory=dict)
    steps: list[dict] = field(default_factory=list)
    stop: str | None = None
    reason: str | None = None
    calls: int = 0
    replayed: int = 0


def _add(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def run_answer(messages: list[dict], context: str, sample: int, root: Caller, sub: Caller, cfg: ReplConfig,
               base: dict, sandbox_factory: Callable[[str], Sandbox] | None = None) -> Answer:
    """Run one REPL answer (module docstring) from the first ``messages``
    (:func:`~ctxbench.run.repl.protocol.root_messages`) with ``context`` in the sandbox's ``context`` variable.
    ``base``: the request's fields (``request_key``, ``instance_id``, ``model``, ``mode``, ``sample``) copied into
    each step row. Never raises for the model's or the code's faults; a call that ends unstored ends the answer
    unstored (``Answer.stop``)."""
    msgs = list(messages)
    ans = Answer()
    totals: dict[str, Any] = {"prompt_tokens": None, "completion_tokens": None, "cost_usd": None, "latency_s": None,
                              "retries": 0}
    status, response, error = "max_steps", None, None
    all_cached = True
    sb = (sandbox_factory or (lambda c: Sandbox(c, cfg.sandbox, cfg.limits())))(context)

    def count(res: CallResult, src: str, acc: dict) -> None:
        nonlocal all_cached
        for k in ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s"):
            v = getattr(res, k)
            acc[k] = _add(acc.get(k), v)
            totals[k] = _add(totals[k], v)
        totals["retries"] += res.retries
        all_cached = all_cached and src == "cache"
        acc["cached"] = acc.get("cached", True) and src == "cache"

    def over_budget() -> str | None:
        used = (totals["prompt_tokens"] or 0) + (totals["completion_tokens"] or 0)
        if cfg.max_answer_tokens is not None and used >= cfg.max_answer_tokens:
            return f"the answer used {used:,} tokens, its budget is {cfg.max_answer_tokens:,} (--repl-max-tokens)"
        if cfg.max_answer_cost is not None and (totals["cost_usd"] or 0) >= cfg.max_answer_cost:
            return (f"the answer cost ${totals['cost_usd']:.4f}, its budget is ${cfg.max_answer_cost:g} "
                    f"(--repl-max-cost)")
        return None

    try:
        for step in range(1, cfg.max_steps + 1):
            acc: dict[str, Any] = {}
            res, src = root.call(msgs, sample)
            count(res, src, acc)
            row = {**base, "step_key": f"{base['request_key']}:{step}", "step": step, "code": None, "output": None,
                   "sub_calls": None}
            if res.status != "ok":  # the root call's own outcome ends the answer (cut_off, over_length, error...)
                status, response, error = res.status, res.response, res.error
                ans.steps.append({**row, **_step_numbers(acc), "status": res.status})
                break
            reply = res.response or ""
            blocks = code_blocks(reply)
            outputs, subs, final, timed_out, budget = [], [], None, None, None

            def on_query(prompts: list[str]) -> list[str]:
                nonlocal budget
                out = []
                for p in prompts:
                    budget = budget or over_budget()
                    if budget:
                        out.append(f"[llm_query not sent: {budget}]")
                        continue
                    r, s = sub.call([{"role": "user", "content": p}], sample)
                    count(r, s, acc)
                    subs.append({"prompt": truncate(p, PROMPT_CHARS_STORED), "response": r.response,
                                 "status": r.status, "prompt_tokens": r.prompt_tokens,
                                 "completion_tokens": r.completion_tokens, "cost_usd": r.cost_usd,
                                 "cached": s == "cache"})
                    out.append(r.response if r.status in ("ok", "cut_off") and r.response is not None
                               else f"[llm_query failed: {r.status}: {r.error}]")
                return out

            for code in blocks:
                run = sb.run(code, on_query)
                if run.timed_out:
                    timed_out = run.reason
                    break
                outputs.append(run.output if not run.ended else f"{run.output}\n[{run.reason}; its variables are "
                                                                 f"lost]")
                if run.final is not None:
                    final = run.final
                    break
            if final is None and timed_out is None:
                said = final_in_text(reply)
                if said is not None:
                    if said[0] == "value":  # FINAL(ans) outside code, ans a variable of the REPL: its value
                        held = sb.variable(said[1]) if said[1].isidentifier() else None
                        final = said[1] if held is None else held
                    else:
                        final = sb.variable(said[1])
                    if final is None:
                        outputs.append(f"FINAL_VAR({said[1]}): no variable {said[1]!r} in the REPL")
            shown = [truncate(o, cfg.output_chars) for o in outputs]
            row.update(code="\n\n".join(blocks) if blocks else None, output="\n\n".join(shown) if outputs else None,
                       sub_calls=json.dumps(subs, ensure_ascii=False) if subs else None)
            budget = budget or over_budget()
            if timed_out is not None:
                status, error = "step_timeout", f"step {step}: {timed_out}"
            elif final is not None:
                status, response = "ok", final
            elif budget is not None:
                status, error = "over_budget", f"step {step}: {budget}"
            elif step == cfg.max_steps:
                status, error = "max_steps", f"no FINAL after {cfg.max_steps} steps (--max-steps)"
            else:
                ans.steps.append({**row, **_step_numbers(acc), "status": "continue" if blocks else "no_code"})
                msgs = msgs + [{"role": "assistant", "content": reply},
                               {"role": "user", "content": output_message(outputs, cfg.output_chars)}]
                continue
            ans.steps.append({**row, **_step_numbers(acc), "status": "final" if status == "ok" else status})
            break
    except _Stop as e:
        ans.stop, ans.reason = e.kind, e.reason
    finally:
        sb.close()
        ans.calls, ans.replayed = root.made + sub.made, root.replayed + sub.replayed
    # an answer given by FINAL is finished by the protocol's own marker: stored as a finished turn ("stop"), so the
    # answer pipeline never reads a FINAL value that ends on "is" or "at" as a reply the budget cut off
    ans.row = {"status": status, "response": response, "error": error, "cached": all_cached, **totals,
               "finish_reason": "stop" if status == "ok" else None}
    return ans


def _step_numbers(acc: dict) -> dict:
    return {"prompt_tokens": acc.get("prompt_tokens"), "completion_tokens": acc.get("completion_tokens"),
            "cost_usd": acc.get("cost_usd"), "latency_s": acc.get("latency_s"), "cached": acc.get("cached", True)}
