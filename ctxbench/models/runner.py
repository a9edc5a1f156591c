"""One model-call runner: every model call ctxbench makes (evaluation, LLM judges, question round trips, closed-book
screens, the needles failure-mode judge) goes through a :class:`CallRunner`, which owns the gateway, the response
cache, the claims that let several workers share one cache, retries, the silent-truncation check and the outage
pause (the practice of lm-eval's ``CachingLM``, which wraps any LM with the cache, and of inspect_ai's model-graded
scorers, which call the same ``Model.generate`` with the same cache and retries as the solver).

A request is answered from the cache when its key (:func:`ctxbench.models.cache.request_key`) is stored, else
claimed and called. ``over_length`` and ``truncated`` outcomes of a server at a ``--base-url`` depend on that
server's context window, which its operator can change: they are replayed only while the server reports the window
they were recorded under (:meth:`ctxbench.models.gateway.Gateway.server_window`), else called again (and, in
``evaluate``, their stored rows replaced). A provider's
default endpoint serves a named model with a fixed window, so its outcomes are always replayed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from ctxbench.core.errors import InputError
from ctxbench.core.heap import frozen_heap
from ctxbench.models.batch import batch_client, line_result
from ctxbench.models.cache import DirectCommit, GroupCommit, ResponseCache, claim_owner, endpoint_id, key_endpoint, request_key
from ctxbench.models.deployment import ROUTE, is_deployment
from ctxbench.models.gateway import (NOT_ATTEMPTED, CallResult, Gateway, PermanentError, RetryPolicy, TransientError,
                                     cost_usd, missing_credentials, require_credentials, setting_to_change)
from ctxbench.models.providers import batch_protocol
from ctxbench.models.truncation import (  # noqa: F401 - re-exported: the check's names, as before the split
    TOLERANCE_APPROXIMATE, TOLERANCE_ESTIMATE, TOLERANCE_EXACT, TruncationCheck, truncation_check,
    truncation_check_soon)

# cached answers; the rest are retried (an ``error`` row is never an answer: the same command asks it again)
STORED_STATUSES = ("ok", "over_length", "truncated", "cut_off", "refused_by_provider",
                   "max_steps", "over_budget", "step_timeout")  # the last three: --mode repl's own (run.repl)
CONFIG_STOP_AFTER = 3  # the first calls of a run failing alike with a permanent 4xx (or a config_error): stop


async def _all_or_none(coros: list) -> list:
    """``asyncio.gather`` of ``coros``; when one raises (a full disk while its row is stored, a Ctrl-C), the others
    are cancelled and awaited before the error goes on, so no call is left half-made in a closing event loop (no
    ``coroutine ... was never awaited`` warning, no connection torn down under a running request)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def asked_again(status: str | None) -> bool:
    """Whether a stored row of this ``status`` is a failed call that the same command asks again (its new row
    replaces it): every status but the answers of :data:`STORED_STATUSES` (``error`` and any server-fault status).
    The one predicate for planning the calls and for the exit status of a run that leaves such rows
    (docs/reference/exit-codes.md)."""
    return status not in STORED_STATUSES


WINDOW_DEPENDENT = ("over_length", "truncated")  # outcomes that change with the server's context window
CLAIM_LEASE_S = 60.0  # a worker's claim on a request key lapses this long after its last heartbeat
BATCH_ROUNDS = 3  # batches a request is sent in at most (the first, then its transient errors and expiries)


@dataclass
class Request:
    """One call to make: its request key, messages, sampling parameters and output budget. ``expected_prompt_tokens``
    (the prompt's count in the model's tokenizer, where the caller counted it already) spares the truncation check
    a count; ``item`` is the caller's own record, handed back in the :class:`Outcome`; ``prefix`` names the prompt
    prefix the request shares with others (its context, :func:`ctxbench.models.prompts.shared_prefix`): the first request
    of a prefix runs before the others start, so they find it in the provider's prompt cache."""

    key: str
    messages: list[dict]
    sampling: dict[str, Any]
    max_tokens: int
    expected_prompt_tokens: int | None = None
    item: Any = None
    prefix: str | None = None
    prefix_tokens: int | None = None  # tokens of that shared prefix (an estimate is fine: the check has a tolerance)


@dataclass
class Outcome:
    """What became of a request. ``source``: ``call`` (this runner called the model; ``result`` may be a failure),
    ``cache`` (the answer was stored, by an earlier run or by another worker while this one waited) or
    ``not_attempted`` (the run paused before the call; ``result`` is None)."""

    request: Request
    result: CallResult | None
    source: str


class CallRunner:
    """Runs model calls for one model at one endpoint (module docstring).

    ``base_url`` is where calls go; ``key_base_url`` the endpoint keyed in the request keys (they differ for a
    local server started for this run, whose port changes: the embedded model's keys name no port); ``window``
    the server's context window where the caller knows it (else asked of the server when an outcome depends on
    it). ``pause_after`` consecutive calls past their retry budget, or one Retry-After over the policy's cap,
    pause the run: no new call starts, ``status`` becomes ``paused`` and ``pause_reason`` says why.

    Methods: :meth:`claim` (take a request key for this worker), :meth:`heartbeat` (renew this worker's claims),
    :meth:`finish` (a result: truncation check, store or release, outage accounting), :meth:`pause`, and
    :meth:`run` / :meth:`arun` (all of it for a list of requests, ``concurrency`` at a time)."""

    def __init__(self, model: str, base_url: str | None = None, *, key_base_url: Any = "same",
                 cache: ResponseCache | None = None, concurrency: int = 8, policy: RetryPolicy | None = None,
                 api_key_env: str | None = None, pause_after: int = 3, lease_s: float = CLAIM_LEASE_S,
                 truncation: (TruncationCheck | None | str | concurrent.futures.Future
                              | Callable[[], concurrent.futures.Future]) = "auto",
                 window: int | None = None,
                 backend: str = "auto"):
        self.model, self.base_url = model, base_url
        keyed = base_url if key_base_url == "same" else key_base_url
        self.endpoint = endpoint_id(model, keyed)  # a server at a base URL (its window may change), else None
        self.key_endpoint = key_endpoint(model, keyed)  # what the request keys name (the embedded runtime too)
        self.cache = cache if cache is not None else ResponseCache()
        self.concurrency, self.api_key_env, self.backend = concurrency, api_key_env, backend
        self.policy = policy or RetryPolicy()
        self.pause_after, self.lease_s = pause_after, lease_s
        self._truncation = truncation
        self._window, self._window_known = window, window is not None
        self.owner = claim_owner()
        self.status = "running"
        self.pause_reason: str | None = None
        self._streak = 0
        self._stop: asyncio.Event | None = None
        self._window_lock: asyncio.Lock | None = None
        self._counts: dict[int, int] = {}
        self._read_whole: dict[str, int] = {}  # prefix -> the longest prompt of it this run's server read whole
        self._gw: Gateway | None = None
        # claims and stores: each its own transaction, here; in arun, group commits by a writer thread
        self._commits: GroupCommit | DirectCommit = DirectCommit(self.cache)
        self._opened: asyncio.Event | None = None  # set once a call of this run got an answer (the start gate)
        self._probe: asyncio.Lock | None = None
        self._start_failures: list[tuple] = []     # (kind, status, text) of the first calls, while they all fail
        self._config_streak = 0
        self.batches_submitted: list[str] = []  # batch ids sent by arun_batch
        self.batches_resumed: list[str] = []    # batch ids of earlier runs that arun_batch polled

    # -- keys -------------------------------------------------------------------------------------------------
    def key(self, messages: list[dict], sampling: dict[str, Any], max_tokens: int, sample: int = 0) -> str:
        """The request key of a call of this runner's model at its endpoint."""
        return request_key(self.model, messages, sampling, max_tokens, sample, self.key_endpoint)

    # -- the protocol -------------------------------------------------------------------------------------------
    def claim(self, key: str) -> str:
        """``claimed`` (make the call), ``cached`` (read the answer) or ``taken`` (another worker holds it)."""
        return self.cache.claim(key, self.owner, self.lease_s)

    def heartbeat(self) -> int:
        """Renew this worker's claims; returns how many it holds."""
        return self.cache.renew(self.owner, self.lease_s)

    def pause(self, reason: str) -> None:
        """Start no new call (calls in flight end; their backoff is cut short)."""
        if self.status != "paused":
            self.status, self.pause_reason = "paused", reason
        if self._stop is not None:
            self._stop.set()

    async def _heartbeats(self) -> None:
        """Renew this worker's claims every third of the lease, until cancelled."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            await self._commits.renew(self.owner, self.lease_s)

    @property
    def replicas_down(self) -> dict[str, str]:
        """Replicas of a deployment (:mod:`ctxbench.models.deployment`) this run took out of service, each with
        the last error it gave; empty for a single endpoint."""
        health = getattr(self._gw._backend if self._gw is not None else None, "health", None)
        return dict(health.down) if health is not None else {}

    @property
    def paused(self) -> bool:
        """True once no new call starts: a provider outage (``status`` ``paused``) or a configuration error
        (``config_error``: every call would fail alike)."""
        return self.status in ("paused", "config_error")

    def stop_for_config(self, reason: str) -> None:
        """Start no new call because the run's configuration is refused (``status`` ``config_error``)."""
        if self.status != "config_error":
            self.status, self.pause_reason = "config_error", reason
        if self._stop is not None:
            self._stop.set()

    @staticmethod
    def _failure_kind(res: CallResult) -> tuple | None:
        """What a permanent refusal of the request looks like, for comparing the run's first calls: a
        ``config_error``, or an ``error`` the server answered with a 4xx status (its text with digits masked);
        None for anything else (an answer, a transient failure, an error without a 4xx status)."""
        if res.transient_failure:
            return None
        if res.status == "config_error":
            return ("config_error",)
        if res.status == "error" and res.http_status is not None and 400 <= res.http_status < 500:
            return ("error", res.http_status, re.sub(r"\d+", "#", res.error or "")[:300])
        return None

    def _starting(self, res: CallResult) -> None:
        """The start gate: the run's calls go one at a time until one is answered. When the first
        :data:`CONFIG_STOP_AFTER` calls all fail with the same permanent refusal (:meth:`_failure_kind`), the
        run's configuration is wrong (a parameter, the model name, the credentials, a server setting): the run
        stops (:meth:`stop_for_config`) naming the setting to change. A transient failure past its retry budget
        keeps the gate shut (the outage pause decides); a different failure or any answer opens it."""
        kind = self._failure_kind(res)
        if kind is None:
            if not res.transient_failure:
                self._opened.set()  # type: ignore[union-attr]
            return
        if self._start_failures and self._start_failures[0] != kind:
            self._opened.set()  # type: ignore[union-attr]  # different refusals: per-request errors
            return
        self._start_failures.append(kind)
        if len(self._start_failures) >= CONFIG_STOP_AFTER:
            self.stop_for_config(self._config_reason(f"the first {len(self._start_failures)} calls", res))

    @staticmethod
    def _config_reason(which: str, res: CallResult) -> str:
        err = res.error or ""
        advice = err if err.startswith("configuration error") else f"{setting_to_change(err)}: {err}"
        status = f"HTTP {res.http_status}" if res.http_status else "the same error"
        return (f"stopped: {which} all failed alike ({status}), so every call would: {advice[:700]} "
                f"-- nothing else was called; fix the setting and rerun the same command (the failed calls are "
                f"asked again, their error rows replaced)")

    async def window_now(self) -> int | None:
        """The server's context window now (asked once per run), or None when unknown."""
        if self._window_known:
            return self._window
        if self._window_lock is None:
            self._window_lock = asyncio.Lock()
        async with self._window_lock:
            if not self._window_known:
                gw = self._gw or Gateway(self.model, self.base_url, api_key_env=self.api_key_env)
                self._window = await gw.server_window() if self.base_url else None
                self._window_known = True
        return self._window

    async def replayable(self, payload: dict[str, Any]) -> bool:
        """Whether a stored outcome may be served without a call: always, except an ``over_length`` or
        ``truncated`` outcome of a server at a base URL, which is replayed only while the server reports the
        window it was recorded under (a server that reports none, then or now, counts as unchanged: nothing
        observable changed, and a rerun makes no call)."""
        if payload.get("status") not in WINDOW_DEPENDENT or self.endpoint is None:
            return True
        return payload.get("server_window") == await self.window_now()

    def _prefix_hit(self, req: Request, reported: int, expected: int, check: TruncationCheck) -> tuple[bool, bool]:
        """``(hit, unclear)`` for a prompt count ``reported`` below ``expected``: ``hit`` when the count falls by
        about the size of ``req``'s shared prefix (``reported + prefix_tokens`` within the check's tolerance of
        ``expected``) and a request of this run on this endpoint sent that prefix and was read whole (so the
        server's window holds it, and this prompt is no longer than that one beyond the tolerance): a prompt-cache
        hit, not truncation. ``unclear`` when the fall matches the prefix but no request of this run read it whole
        (the prefix may be cached from an earlier run): truncation could not be told apart."""
        if req.prefix is None or not req.prefix_tokens:
            return False, False
        floor = expected * (1.0 - check.tolerance) - check.slack
        if not floor <= reported + req.prefix_tokens <= expected * (1.0 + check.tolerance) + check.slack:
            return False, False
        whole = self._read_whole.get(req.prefix)
        if whole is not None and expected <= whole / max(1.0 - check.tolerance, 1e-6) + check.slack:
            return True, False
        return False, True

    def _start_check(self) -> None:
        """Start a deferred truncation check (``truncation`` a function returning a :func:`truncation_check_soon`
        future) as the first call goes out: its tokenizer loads in the round trip, not in the start-up before."""
        if callable(self._truncation) and not isinstance(self._truncation, TruncationCheck):
            self._truncation = self._truncation()

    async def _check(self) -> TruncationCheck | None:
        """The truncation check, its tokenizer loaded off the event loop: in a thread on first use (``auto``),
        or awaited where the caller started loading it (a future of :func:`truncation_check_soon`, or a function
        returning one, called when the first call goes out: :meth:`_start_check`)."""
        if self._truncation == "auto":
            self._truncation = truncation_check_soon(self.model)
        self._start_check()
        if isinstance(self._truncation, concurrent.futures.Future):
            self._truncation = await asyncio.wrap_future(self._truncation)
        return self._truncation  # type: ignore[return-value]

    async def finish(self, req: Request, res: CallResult, counted: bool = False) -> CallResult:
        """Complete a call's result: the truncation check (status ``truncated``), the server's window for
        window-dependent outcomes, storing answers in the cache (else releasing the claim), and the outage
        accounting that may :meth:`pause` the run (skipped with ``counted``: :meth:`_answered` did it when the
        answer came). Returns the result."""
        check = await self._check() if res.status == "ok" and res.prompt_tokens is not None else None
        if check is not None:
            exp = req.expected_prompt_tokens
            if exp is None:
                exp = self._counts.get(id(req.messages))
                if exp is None:
                    exp = await asyncio.to_thread(check.expected, req.messages)
                    self._counts[id(req.messages)] = exp
            res.expected_prompt_tokens = exp
            short = check.is_truncated(res.prompt_tokens, exp, res.cached_prompt_tokens)
            if short and self.endpoint is not None:  # the server's own window may rule it out (asked once)
                res.server_window = await self.window_now()
                short = check.is_truncated(res.prompt_tokens, exp, res.cached_prompt_tokens, res.server_window)
            if short and not res.cached_prompt_tokens and not res.server_window:
                # a server that reports neither its window nor cached tokens (Ollama's /v1) but served a prefix
                # from its prompt cache: its count falls by about the size of a prefix this run already sent
                hit, unclear = self._prefix_hit(req, res.prompt_tokens, exp, check)
                if hit:
                    short, res.prefix_cache_hit = False, True
                res.truncation_unclear = unclear
            if not short and req.prefix is not None and not res.prefix_cache_hit:
                self._read_whole[req.prefix] = max(self._read_whole.get(req.prefix, 0), exp)
            if short:
                res.status = "truncated"
                res.error = (f"the server read {res.prompt_tokens} prompt tokens"
                             f"{f' (+{res.cached_prompt_tokens} cached)' if res.cached_prompt_tokens else ''} of "
                             f"the {exp} sent (counted in "
                             f"{check.tokenizer}{'' if check.exact else ', an estimate'}"
                             f"{f'; its window: {res.server_window}' if res.server_window else ''}): it cut the "
                             f"prompt to "
                             f"fit its context window (e.g. Ollama's num_ctx, a llama.cpp server's -c); the reply "
                             f"is kept but not scored. Start the server with a larger window and rerun."
                             + (" (The server reports neither its window nor cached tokens, and the count fell by "
                                "about the size of the shared prefix: a prompt-cache hit of a prefix sent before "
                                "this run could not be told apart.)" if res.truncation_unclear else ""))
        if res.status in WINDOW_DEPENDENT and self.endpoint is not None:
            res.server_window = await self.window_now()
        if res.status in STORED_STATUSES:
            await self._commits.put(req.key, self.model, res.payload())
        else:
            await self._commits.release(req.key, self.owner)
        if counted:
            return res
        if res.retry_after_s is not None:
            self.pause(f"paused: {res.error}; nothing was marked wrong, rerun the same evaluation later to resume "
                       f"(only the missing calls are made).")
        elif res.transient_failure:
            if not self.paused:
                self._streak += 1
                if self._streak >= self.pause_after:
                    self.pause(f"paused: {self._streak} calls in a row failed past their retry budget "
                               f"({self.policy.max_retries} retries), the provider looks down; nothing was marked "
                               f"wrong, rerun the same evaluation to resume (only the missing calls are made). "
                               f"Last error: {res.error}")
        elif res.status != "config_error":
            self._streak = 0  # an answer (over_length, truncated and permanent errors included): the server is up
        if res.status == "config_error" and not res.transient_failure and self._opened is not None:
            self._config_streak += 1  # direct calls only: a batch refused whole already stops with its reason
            if self._config_streak >= CONFIG_STOP_AFTER and not self.paused:
                first = self._opened is not None and not self._opened.is_set()
                self.stop_for_config(self._config_reason(
                    f"the first {self._config_streak} calls" if first else f"{self._config_streak} calls in a row",
                    res))
        elif not (res.error or "").startswith(NOT_ATTEMPTED):
            self._config_streak = 0
        return res

    def _answered(self, res: CallResult) -> bool:
        """Whether the gateway's result ``res`` is a plain answer, which :meth:`finish` may complete after the
        call's concurrency slot is freed; its outage accounting is done here, at once (an answer ends both
        failure streaks, as :meth:`finish` would; a later truncation check changes that in no way). Anything else
        is finished inside the slot, so that with ``--concurrency 1`` no call starts before the run has judged
        the one before (three config errors in a row stop it, a Retry-After pauses it)."""
        if res.status != "ok" or res.transient_failure or res.retry_after_s is not None or res.error:
            return False
        self._streak = 0
        self._config_streak = 0
        return True

    # -- running ------------------------------------------------------------------------------------------------
    async def _one(self, req: Request, slots: asyncio.Semaphore, ahead: asyncio.Semaphore, wait: bool
                   ) -> Outcome | None:
        """One request: served from the cache, called, or (``wait`` False and another worker holds it) deferred
        (None). Its key is claimed before it waits for a concurrency slot (``slots``), while the calls before it
        run, so the claim's commit is not between a call's end and the next call's start; ``ahead`` bounds the
        requests claimed or called at once (twice the concurrency), so other workers find few keys held before
        their calls. A cached answer or a key another worker holds takes no slot. Its calls carry its route (its
        shared prefix, else its key): a deployment of several replicas sends every request of one prefix to one
        replica (:mod:`ctxbench.models.deployment`)."""
        ROUTE.set(req.prefix or req.key)  # this request's own task: the context ends with it
        while True:
            if self.paused:
                return Outcome(req, None, "not_attempted")
            res = None
            held = False  # whether the key may be claimed: from the claim's submission until finish settles it
            try:
                async with ahead:  # claimed while the calls before it run: at most `ahead` keys before their calls
                    held = True
                    state = await self._commits.claim(req.key, self.owner, self.lease_s)
                    held = state == "claimed"
                    if state == "claimed":
                        async with slots:
                            if self._opened is not None and not self._opened.is_set():
                                async with self._probe:  # type: ignore[union-attr]  # the start gate: one at a time
                                    if not self._opened.is_set():
                                        self._start_check()
                                        res = await self._gw.complete(req.messages, req.max_tokens,  # type: ignore
                                                                      req.sampling, random.Random(req.key))
                                        if res.transient_failure or self._failure_kind(res) is not None:
                                            res = await self.finish(req, res)  # a failure: the gate judges it finished
                                            self._starting(res)
                                            return Outcome(req, res, "call")
                                        self._opened.set()  # an answer opens the gate (as _starting would after finish)
                            if res is None:
                                self._start_check()
                                res = await self._gw.complete(  # type: ignore
                                    req.messages, req.max_tokens, req.sampling, random.Random(req.key))
                            if not self._answered(res):  # a failure: judged before the next call starts
                                return Outcome(req, await self.finish(req, res), "call")
                if state == "claimed":  # an answer, checked and stored outside the slot: the next call starts meanwhile
                    return Outcome(req, await self.finish(req, res, counted=True), "call")
            except BaseException:  # cancelled (Ctrl-C, a sibling's error) or failed before the key was settled
                if held:  # else another process or this one's resume waits for the lease to lapse
                    self._commits.release_soon(req.key, self.owner)
                raise
            if state == "cached":
                payload = self.cache.get(req.key)
                if payload is None:  # removed meanwhile (a stale outcome dropped by another worker): claim again
                    continue
                if await self.replayable(payload):
                    return Outcome(req, CallResult.from_payload(payload), "cache")
                self.cache.drop(req.key, payload)  # recorded under another window: ask the server again
                continue
            if not wait:  # taken by another worker: do the free calls first, come back at the end
                return None
            await asyncio.sleep(min(0.25, self.lease_s / 4))  # wait for its answer or for its lease to lapse

    async def arun(self, requests: list[Request], on_outcome: Callable[[Outcome], None] | None = None
                   ) -> list[Outcome]:
        """Every request, ``concurrency`` at a time, keys claimed so several workers sharing the cache never make a
        call twice (keys another worker holds are done last, waiting for its answer or for its lease to lapse);
        requests sharing a ``prefix`` start once the first of them has ended (any outcome), so providers' prompt
        caches serve the shared context to the rest.
        ``on_outcome`` is called as each one ends. Returns the outcomes in request order."""
        self._stop = asyncio.Event()
        self._counts.clear()  # prompt counts by id(messages): ids are reused once a run's requests are gone
        self._opened, self._probe, self._start_failures = asyncio.Event(), asyncio.Lock(), []
        if self.paused:
            self._stop.set()
        self._gw = Gateway(self.model, self.base_url, self.concurrency, self.policy, api_key_env=self.api_key_env,
                           stop=self._stop, backend=self.backend)
        self._commits = GroupCommit(self.cache)  # claims and stores committed by a writer thread, in groups
        slots = asyncio.Semaphore(self.concurrency)
        ahead = asyncio.Semaphore(2 * self.concurrency)  # requests claimed (committed) or called at once
        out: list[Outcome | None] = [None] * len(requests)
        leaders: dict[str, int] = {}  # prefix -> the request that runs first; the others wait for its outcome
        primed: dict[str, asyncio.Event] = {}
        for i, r in enumerate(requests):
            if r.prefix is not None and r.prefix not in leaders:
                leaders[r.prefix], primed[r.prefix] = i, asyncio.Event()

        async def go(i: int, wait: bool) -> bool:
            prefix = requests[i].prefix
            lead = prefix is not None and leaders[prefix] == i
            if prefix is not None and not lead:
                await primed[prefix].wait()
            try:
                o = await self._one(requests[i], slots, ahead, wait)
            finally:
                if lead:
                    primed[prefix].set()  # type: ignore[index]
            if o is None:
                return False
            out[i] = o
            if on_outcome is not None:
                on_outcome(o)
            return True

        hb = asyncio.create_task(self._heartbeats())
        try:
            done = await _all_or_none([go(i, False) for i in range(len(requests))])
            deferred = [i for i, d in enumerate(done) if not d]
            if deferred:
                await _all_or_none([go(i, True) for i in deferred])
        finally:
            hb.cancel()
            try:
                await self._gw.aclose()
            finally:
                commits, self._commits = self._commits, DirectCommit(self.cache)
                commits.close()  # what cancelled tasks queued is committed; the thread ends
        return out  # type: ignore[return-value]

    def run(self, requests: list[Request], on_outcome: Callable[[Outcome], None] | None = None) -> list[Outcome]:
        """:meth:`arun` in a new event loop (from synchronous code). Raises InputError before any call when a
        request must be sent and the provider's key is not set (:meth:`check_credentials`)."""
        self.check_credentials(requests)
        cost_usd(self.model, 0, 0)  # loads litellm's price table now, not inside the event loop at the first answer
        with frozen_heap():  # no full garbage collection of the imported modules stalls the calls in flight
            return asyncio.run(self.arun(requests, on_outcome))

    def check_credentials(self, requests: list[Request]) -> None:
        """Raise InputError naming the variable to set (:func:`~ctxbench.models.gateway.require_credentials`)
        when the provider's key of a model called through litellm (no base URL) is not in the environment and
        some request is not answered by the cache; a fully cached rerun needs no key."""
        if self.base_url or not requests or not missing_credentials(self.model):
            return
        if any(self.cache.get(r.key) is None for r in requests):
            require_credentials(self.model)

    # -- through the provider's batch API ----------------------------------------------------------------------
    def run_batch(self, requests: list[Request], store: Any, on_outcome: Callable[[Outcome], None] | None = None,
                  poll_s: float = 30.0, wait_s: float | None = None) -> list[Outcome]:
        """:meth:`arun_batch` in a new event loop (from synchronous code). A provider with no batch API is refused
        first (InputError: no key makes a batch possible), then the key is checked, as by :meth:`run`."""
        if is_deployment(self.base_url):
            raise InputError("--batch sends one batch to one server: give --batch a single --base-url, not "
                             "several replicas")
        batch_protocol(self.model, self.base_url, self.backend)
        self.check_credentials(requests)
        cost_usd(self.model, 0, 0)
        return asyncio.run(self.arun_batch(requests, store, on_outcome, poll_s, wait_s))

    async def _settle(self, req: Request) -> tuple[str, Outcome | None]:
        """Claim ``req``'s key as :meth:`_one` does, without calling: ``("claimed", None)``, ``("taken", None)``,
        or ``("done", outcome)`` for an answer in the cache that may be replayed."""
        while True:
            state = self.claim(req.key)
            if state != "cached":
                return state, None
            payload = self.cache.get(req.key)
            if payload is None:
                continue
            if await self.replayable(payload):
                return "done", Outcome(req, CallResult.from_payload(payload), "cache")
            self.cache.drop(req.key, payload)

    async def _retrying(self, op: Callable[[], Any]) -> Any:
        """``await op()``, retried on TransientError as a call is (the policy's budget, delays and Retry-After);
        raises the last TransientError, or a PermanentError at once."""
        rng = random.Random(0)
        for attempt in range(self.policy.max_retries + 1):
            try:
                return await op()
            except TransientError as e:
                if attempt >= self.policy.max_retries or (e.retry_after or 0) > self.policy.max_retry_after_s:
                    raise
                await asyncio.sleep(self.policy.delay(attempt, e.retry_after, rng))

    async def arun_batch(self, requests: list[Request], store: Any,
                         on_outcome: Callable[[Outcome], None] | None = None, poll_s: float = 30.0,
                         wait_s: float | None = None, rounds: int = BATCH_ROUNDS) -> list[Outcome]:
        """Every request through the provider's batch API (:mod:`ctxbench.models.batch`), with the claims, cache,
        truncation check and outcomes of :meth:`arun`: answers in the cache are served from it; the keys this
        worker claims go into batches (split at the provider's limits), recorded in ``store``
        (:class:`~ctxbench.models.batch.BatchStore`) before and after each is created; batches the store names
        for this model and endpoint that have not been collected (a run killed while they ran) are polled, not
        sent again. Every ``poll_s`` seconds each open batch is polled; an ended batch's lines become results
        (:func:`~ctxbench.models.batch.line_result`) finished by :meth:`finish` (stored in the cache under the
        same request key as a direct call, the batch id in ``batch_id``; answers to keys this run did not ask
        for are stored too, unchecked for truncation). Requests with a transient error, expired or cancelled
        ones go into a new batch, ``rounds`` batches at most. A batch that fails as a whole (e.g. validation)
        leaves its requests unanswered (``config_error``, not stored, with its message). With ``wait_s``, batches
        still running after that many seconds are left to a rerun: their requests end ``not_attempted`` and
        ``status`` is ``waiting``. Raises InputError where the model's provider has no batch API."""
        client = batch_client(self.model, self.base_url, self.api_key_env, self.backend, self.policy.timeout_s)
        self._stop = asyncio.Event()
        self._opened = None  # no start gate: the batch's own validation refuses a bad configuration whole
        self._counts.clear()
        out: list[Outcome | None] = [None] * len(requests)
        index = {r.key: i for i, r in enumerate(requests)}
        last_error: dict[int, str] = {}
        open_recs: list[dict] = []
        started = time.monotonic()

        def emit(i: int, o: Outcome) -> None:
            out[i] = o
            if on_outcome is not None:
                on_outcome(o)

        async def finish_at(i: int | None, key: str, res: CallResult) -> None:
            if i is None or out[i] is not None:  # not asked for by this run (or answered meanwhile): store it
                if res.status in STORED_STATUSES:
                    self.cache.put(key, self.model, res.payload())
                return
            emit(i, Outcome(requests[i], await self.finish(requests[i], res), "call"))

        async def submit(idx: list[int]) -> None:
            lines = [client.encode(requests[i].key, requests[i].messages, requests[i].max_tokens,
                                   requests[i].sampling) for i in idx]
            chunk: list[int] = []
            size = 0
            chunks = []
            for i, ln in zip(idx, lines):
                if chunk and (len(chunk) >= client.max_requests or size + len(ln) > client.max_bytes):
                    chunks.append(chunk)
                    chunk, size = [], 0
                chunk.append(i)
                size += len(ln) + 1
            chunks += [chunk] if chunk else []
            by_i = dict(zip(idx, lines))
            for ch in chunks:
                rec = store.add(self.model, self.endpoint, client.protocol, [requests[i].key for i in ch])
                body = [by_i[i] for i in ch]
                try:
                    fid = await self._retrying(lambda: client.upload(body))
                    if fid:
                        store.update(rec, input_file_id=fid)
                    bid = await self._retrying(lambda: client.create(fid, body, {"ctxbench_record": rec["id"]}))
                except TransientError as e:
                    self.pause(f"paused: the batch API did not take the batch ({e}); nothing was marked wrong, "
                               f"rerun the same evaluation later to resume")
                    for i in ch:
                        self.cache.release(requests[i].key, self.owner)
                    return
                except PermanentError as e:
                    store.update(rec, status="failed", error=str(e))
                    for i in ch:
                        await finish_at(i, requests[i].key, CallResult(
                            "config_error", error=f"the batch API refused the batch: {e}"))
                    continue
                store.update(rec, batch_id=bid, status="submitted")
                self.batches_submitted.append(bid)
                open_recs.append(rec)

        async def collect(rec: dict) -> bool:
            """Poll one batch; on its end, its results. True when it is done with."""
            try:
                st = await self._retrying(lambda: client.poll(rec["batch_id"]))
            except TransientError:
                return False  # the provider is slow to answer a poll: poll again later
            except PermanentError as e:
                st = None
                err = f"batch {rec['batch_id']} cannot be polled: {e}"
            if st is not None and not st.done:
                if st.status != rec["status"]:
                    store.update(rec, status=st.status)
                return False
            if st is not None and st.status != "failed":
                try:
                    lines = await self._retrying(lambda: client.results(st))
                except TransientError:
                    return False
                for k in rec["keys"]:
                    i = index.get(k)
                    r = line_result(self.model, client.protocol, lines.get(k))
                    if isinstance(r, TransientError):
                        if i is not None and out[i] is None:
                            pending.add(i)
                            last_error[i] = str(r)
                        continue
                    r.batch_id = rec["batch_id"]
                    await finish_at(i, k, r)
                store.update(rec, status="collected", provider_status=st.status)
                return True
            if st is not None:
                err = f"batch {rec['batch_id']} failed: {st.message or 'no reason given'}"
            store.update(rec, status="failed", error=err)
            for k in rec["keys"]:
                i = index.get(k)
                if i is not None and out[i] is None:
                    await finish_at(i, k, CallResult("config_error", error=err))
            return True

        async def settle(idx: list[int]) -> list[int]:
            """Serve cached answers, add the keys claimed to ``pending``; returns those another worker holds."""
            held = []
            for i in idx:
                state, o = await self._settle(requests[i])
                if o is not None:
                    emit(i, o)
                elif state == "claimed":
                    pending.add(i)
                else:
                    held.append(i)
            return held

        hb = asyncio.create_task(self._heartbeats())
        pending: set[int] = set()
        try:
            taken = await settle(list(range(len(requests))))
            for rec in store.records(self.model, self.endpoint):  # batches of an earlier run: poll, never resend
                if rec["status"] in ("collected", "failed"):
                    continue
                if not rec.get("batch_id"):
                    bid = await self._retrying(lambda: client.find(rec["input_file_id"])) \
                        if rec.get("input_file_id") else None
                    if bid is None:  # killed before the batch was created: its requests are sent anew
                        store.remove(rec)
                        continue
                    store.update(rec, batch_id=bid, status="submitted")
                self.batches_resumed.append(rec["batch_id"])
                open_recs.append(rec)
                pending -= {index[k] for k in rec["keys"] if k in index}
            sent = 0
            while True:
                if pending and not self.paused:
                    if sent >= rounds:
                        for i in sorted(pending):
                            await finish_at(i, requests[i].key, CallResult(
                                "error", transient_failure=True,
                                error=f"retry budget exhausted: sent in {rounds} batches without an answer: "
                                      f"{last_error.get(i, '')}"))
                    else:
                        sent += 1
                        await submit(sorted(pending))
                    pending.clear()
                for rec in list(open_recs):
                    if await collect(rec):
                        open_recs.remove(rec)
                taken = await settle(taken)  # keys another worker held: its answer, or the key once it lapses
                if pending and not self.paused:
                    continue
                if not open_recs and (not taken or self.paused):
                    break
                if wait_s is not None and time.monotonic() - started >= wait_s:
                    break
                await asyncio.sleep(poll_s)
            if open_recs and not self.paused:
                ids = ", ".join(r["batch_id"] for r in open_recs)
                self.status = "waiting"
                self.pause_reason = (f"batch {ids} still running after {time.monotonic() - started:.0f} s: rerun "
                                     f"the same command to collect it (it is polled, not sent again)")
        finally:
            hb.cancel()
            await client.aclose()
        for i, o in enumerate(out):
            if o is None:
                self.cache.release(requests[i].key, self.owner)
                emit(i, Outcome(requests[i], None, "not_attempted"))
        return out  # type: ignore[return-value]


# -- many independent completions (judges, round trips, screens) ---------------------------------------------------

@dataclass
class Completion:
    """One completion of :func:`complete_all`: the reply text (None when the call failed, which is not stored),
    whether it came from the cache, its status (a stored status, or ``failed``), and whether the reply is the
    answer to a repair prompt."""

    text: str | None
    cached: bool
    status: str
    repaired: bool = False
    error: str | None = None
    reasoning: str | None = None   # the reply's separate reasoning field, where the server returns one


def complete_all(messages: list[list[dict]], model: str, base_url: str | None = None, concurrency: int = 8,
                 cache: ResponseCache | None = None, api_key_env: str | None = None,
                 sampling: dict | None = None, max_tokens: int = 256, *,
                 parse: Callable[[int, str | None], Any] | None = None,
                 repair: Callable[[int, str | None], str] | None = None,
                 call_base_url: str | None = None, policy: RetryPolicy | None = None,
                 pause_after: int = 3) -> list[Completion]:
    """One completion per message list through a :class:`CallRunner` (cache, claims, retries, outage pause; keyed
    by model, endpoint, messages, sampling and max tokens, so a rerun pays nothing). Returns one
    :class:`Completion` per message list, in order. A reply the output budget cut (``cut_off``) is not a
    completion: status ``failed`` with its reason (a judge counts it unscored, never as a verdict). Raises
    InputError naming the setting to change when the runner stops for a configuration error (the first calls all
    refused alike: a parameter, the model name, the credentials).

    With ``parse(i, text)`` (None for an unreadable reply) and ``repair(i, text)`` (the follow-up user message), a
    reply that does not parse is asked for once more, the bad reply and the repair prompt appended to the
    conversation (cached like any call); the repaired reply replaces it, parsed or not. ``call_base_url``: where
    calls go when it is not ``base_url`` (a local server started for this run; keys keep ``base_url``)."""
    sampling = sampling or {"temperature": 0.0}
    runner = CallRunner(model, call_base_url or base_url, key_base_url=base_url, cache=cache,
                        concurrency=concurrency, policy=policy, api_key_env=api_key_env, pause_after=pause_after)

    def run_round(msgs: list[list[dict]]) -> list[Completion]:
        reqs: dict[str, Request] = {}
        keys = []
        for m in msgs:
            k = runner.key(m, sampling, max_tokens, 0)
            keys.append(k)
            reqs.setdefault(k, Request(k, m, sampling, max_tokens))
        by_key = {o.request.key: o for o in runner.run(list(reqs.values()))}
        res = []
        for k in keys:
            o = by_key[k]
            r = o.result
            if r is None or r.status not in STORED_STATUSES:
                res.append(Completion(None, False, "failed", error=r.error if r else runner.pause_reason))
            elif r.status == "cut_off":  # the budget ended the reply: not a verdict, not an answer
                res.append(Completion(None, o.source == "cache", "failed", error=r.error))
            else:
                res.append(Completion(r.response, o.source == "cache", r.status, error=r.error,
                                      reasoning=getattr(r, "reasoning", None)))
        return res

    out = run_round(messages)
    if runner.status == "config_error":
        raise InputError(f"{model}{f' at {base_url}' if base_url else ''}: {runner.pause_reason}")
    if parse is not None and repair is not None and not runner.paused:
        bad = [i for i, c in enumerate(out) if c.status == "ok" and parse(i, c.text) is None]
        if bad:
            fixed = run_round([messages[i] + [{"role": "assistant", "content": out[i].text or ""},
                                              {"role": "user", "content": repair(i, out[i].text)}] for i in bad])
            for i, c in zip(bad, fixed):
                if c.status != "failed":
                    c.repaired = True
                    out[i] = c
    return out
