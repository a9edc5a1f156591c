"""``evaluate --mode repl`` inside an evaluation (:mod:`ctxbench.run.evaluate`): the request of one instance
(:func:`repl_request`: its first messages and its request key) and the answers of the requests not yet stored
(:func:`evaluate_repl`: one :func:`~ctxbench.run.repl.loop.run_answer` each, ``concurrency`` at a time in threads,
each row appended to ``responses.parquet`` as it ends and its steps to ``steps.parquet``).

The request key of a REPL answer hashes the model, the endpoint, the first messages, the sampling parameters with
the REPL settings that change a trajectory (:meth:`~ctxbench.run.repl.loop.ReplConfig.spec`) and the SHA-256 of the
context (which the messages do not hold), the output budget and the sample: a rerun of the same command finds every
stored answer by its key and runs nothing; an answer not stored is run again, its calls replayed from the response
cache.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from ctxbench.core.progress import emit
from ctxbench.core.storage import append_rows
from ctxbench.models.cache import ResponseCache, request_key
from ctxbench.core.errors import InputError
from ctxbench.models.gateway import RetryPolicy
from ctxbench.models.pricing import model_prices
from ctxbench.models.registry import model_info
from ctxbench.models.runner import CallRunner
from ctxbench.run.repl.loop import Answer, Caller, ReplConfig, Spend, run_answer
from ctxbench.run.repl.protocol import root_messages
from ctxbench.run.repl.sandbox import require_sandbox
from ctxbench.run.spend import Ledger, cap_prices
from ctxbench.tokenizers import get_tokenizer

STEPS_FILE = "steps.parquet"


def repl_request(model: str, question: str, context: str, context_tokens: int | None, sampling: dict,
                 max_tokens: int, sample: int, endpoint: str | None, rcfg: ReplConfig) -> tuple[list[dict], str]:
    """The first messages of a REPL answer and its request key (module docstring). ``context_tokens``: the
    context's length in the instance's tokenizer (None: unknown)."""
    msgs = root_messages(question, len(context), context_tokens, rcfg.step_timeout_s, limit=rcfg.output_chars)
    spec = {**rcfg.spec(model), "context_sha256": hashlib.sha256(context.encode("utf-8")).hexdigest()}
    return msgs, request_key(model, msgs, {**sampling, "repl": spec}, max_tokens, sample, endpoint)


def sandbox_warning(rcfg: ReplConfig) -> str | None:
    """The warning every run with ``--sandbox none`` prints (None with a sandbox)."""
    if rcfg.sandbox != "none":
        return None
    return ("warning: --sandbox none: the model's code runs without a sandbox, with this user's access to the "
            "network and files (only CPU, memory and time are limited)")


def evaluate_repl(items: list[dict], *, model: str, base_url: str | None, key_base_url: str | None,
                  api_key_env: str | None, rcfg: ReplConfig, cache: ResponseCache, policy: RetryPolicy,
                  max_tokens: int, concurrency: int, build_dir: Path, store: Callable[[dict, bool], None],
                  max_cost: float | None = None, price: tuple[float, float] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run the REPL answers of ``items`` (requests planned by ``evaluate``: ``request_key``, the row's fields and
    ``_messages``, ``_sampling``, ``_context``). ``store(row, replaces_error)`` appends one response row;
    the steps go to ``steps.parquet`` of ``build_dir``. Checks the sandbox first (InputError naming the package
    when bubblewrap is missing). Returns counts: ``calls`` (made), ``replayed`` (answered by the cache),
    ``stored`` (rows), ``from_cache`` (rows whose every call the cache answered), ``unfinished`` and ``not_asked`` (answers left unstored), ``statuses`` (row status →
    count), ``notes`` (one line per answer that did not end with FINAL), ``spent_usd`` (with ``max_cost``)."""
    require_sandbox(rcfg.sandbox)
    if rcfg.max_answer_cost is not None:  # a cost nobody can count would never end an answer: said, not ignored
        for m in sorted({model, rcfg.sub_model or model}):
            if model_prices(m) is None:
                raise InputError(f"--repl-max-cost: {m} has no price in litellm's table, so an answer's cost cannot "
                                 f"be counted; budget the answers with --repl-max-tokens N instead")
    warning = sandbox_warning(rcfg)
    if warning:
        emit("warning", warning)
    sub_model = rcfg.sub_model or model
    spend = None
    if max_cost is not None:
        count = get_tokenizer("cl100k_base").count
        spend = Spend({m: Ledger(max_cost, cap_prices(m, price if m == model else None, False), count, True)
                       for m in {model, sub_model}}, max_cost)
    sub_tokens = max_tokens if sub_model == model else model_info(sub_model).max_output_tokens
    counts: dict[str, Any] = {"calls": 0, "replayed": 0, "stored": 0, "from_cache": 0, "unfinished": 0, "not_asked": 0,
                              "statuses": {}, "notes": [], "warning": warning}
    lock = threading.Lock()
    done = 0
    steps_path = Path(build_dir) / STEPS_FILE

    def runner(m: str) -> CallRunner:
        return CallRunner(m, base_url, key_base_url=key_base_url, cache=cache, concurrency=8, policy=policy,
                          api_key_env=api_key_env)

    def one(t: dict) -> None:
        nonlocal done
        root = Caller(runner(model), t["_sampling"], max_tokens, spend)
        sub = Caller(runner(sub_model), {"temperature": t["_sampling"].get("temperature", 0.0), "seed": t["sample"]},
                     sub_tokens, spend)
        base = {k: t[k] for k in ("request_key", "instance_id", "model", "mode", "sample")}
        a: Answer = run_answer(t["_messages"], t["_context"], t["sample"], root, sub, rcfg, base)
        with lock:
            counts["calls"] += a.calls
            counts["replayed"] += a.replayed
            done += 1
            if a.stop is not None:
                counts[a.stop] += 1
                counts["notes"].append(f"{t['instance_id']} (sample {t['sample']}): {a.reason}")
            else:
                row = {k: v for k, v in t.items() if not k.startswith("_")}
                store({**row, **a.row}, bool(t.get("_replaces_error")))
                append_rows(steps_path, "steps", a.steps, key="step_key",
                            replace={f"{t['request_key']}:{i}" for i in range(1, rcfg.max_steps + 1)})
                counts["stored"] += 1
                counts["from_cache"] += bool(a.row["cached"])  # every call of it replayed from the cache
                st = a.row["status"]
                counts["statuses"][st] = counts["statuses"].get(st, 0) + 1
                if st != "ok":
                    counts["notes"].append(f"{t['instance_id']} (sample {t['sample']}): {st}: {a.row['error']}")
            if progress:
                progress(done, len(items))

    if progress:
        progress(0, len(items))
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for f in [pool.submit(one, t) for t in items]:
            f.result()
    if spend is not None:
        counts["spent_usd"] = spend.spent
    return counts
