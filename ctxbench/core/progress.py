"""Progress events of a run, for whoever shows them (``ctxbench run`` prints one line or bar per stage).

Library code calls :func:`emit` at the points a person waits on: each build stage as it starts, the model server
starting and ready, each model call answered (with the count and the total, from which the listener derives an
ETA), scoring and the report. With no listener an event costs one list lookup. Listeners are process-wide (the
Prefect and luigi engines run their tasks in threads of this process), added for a block with :func:`listening`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from ctxbench.core.redact import redact


@dataclass(frozen=True)
class Event:
    """One progress event: ``stage`` is build, model, calls, score or report; ``detail`` says what (a stage name,
    a model); ``done``/``total`` count items (calls) where known."""

    stage: str
    detail: str = ""
    done: int | None = None
    total: int | None = None


_listeners: list[Callable[[Event], None]] = []
_lock = threading.Lock()


def emit(stage: str, detail: str = "", done: int | None = None, total: int | None = None) -> None:
    """Tell every listener (none: nothing happens). A listener's exception is not the run's: it is dropped."""
    if not _listeners:
        return

    ev = Event(stage, redact(detail), done, total)  # a retry's reason may quote a server echoing the key
    for fn in list(_listeners):
        try:
            fn(ev)
        except Exception:  # noqa: BLE001  a display error never stops a run
            pass


def has_listeners() -> bool:
    """Whether anyone listens (work done only to be shown, such as a speed probe, is skipped otherwise)."""
    return bool(_listeners)


@contextmanager
def listening(fn: Callable[[Event], None]) -> Iterator[None]:
    """Call ``fn`` with every event emitted in this process while the block runs."""
    with _lock:
        _listeners.append(fn)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(fn)


# --- calls in flight: what a heartbeat shows while no call has finished --------------------------------------------

@dataclass
class _Flight:
    model: str
    started: float
    attempt: int = 0


_flights: dict[int, _Flight] = {}
_flight_ids = iter(range(1, 1 << 62))
_server_status: dict[str, Callable[[], str | None]] = {}


@contextmanager
def in_flight(model: str, attempt: int = 0) -> Iterator[None]:
    """Mark one model call as in flight for the block (the gateway wraps each attempt): :func:`flights` lists it
    with its start time, so a listener can show a heartbeat (calls in flight, the oldest one's elapsed seconds)
    while nothing finishes. Costs a dict insert and delete."""
    import time

    with _lock:
        fid = next(_flight_ids)
        _flights[fid] = _Flight(model, time.monotonic(), attempt)
    try:
        yield
    finally:
        with _lock:
            _flights.pop(fid, None)


def flights(model: str | None = None) -> list[tuple[str, float, int]]:
    """The calls in flight now, oldest first: ``(model, seconds since it started, attempt)`` (attempt 0 is the
    first try)."""
    import time

    now = time.monotonic()
    with _lock:
        fl = [f for f in _flights.values() if model is None or f.model == model]
    return sorted(((f.model, now - f.started, f.attempt) for f in fl), key=lambda x: -x[1])


def set_server_status(model: str, fn: Callable[[], str | None] | None) -> None:
    """Register (or with None, remove) a function that says what the server of ``model`` is doing now, in a few
    words (e.g. ``"57 tokens generated"``), for the heartbeat; it must be quick and never raise."""
    with _lock:
        if fn is None:
            _server_status.pop(model, None)
        else:
            _server_status[model] = fn


def server_status(model: str) -> str | None:
    """What the registered status function of ``model``'s server says (None when there is none, or it fails)."""
    fn = _server_status.get(model)
    if fn is None:
        return None
    try:
        return fn()
    except Exception:  # noqa: BLE001  a status is a nicety: never the run's error
        return None


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour) of a duration in seconds."""
    s = max(0, int(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def eta_estimate(done: int, total: int, elapsed_s: float, since_done_s: float) -> float:
    """Seconds left for ``total`` calls of which ``done`` have finished, ``elapsed_s`` seconds after the first was
    sent and ``since_done_s`` seconds after the latest finished (wall-clock time per call, so concurrency is in
    it). The larger of two estimates, so that it moves while a call runs:

    * the countdown: the mean time per call when the latest call finished, times the calls left, minus the time
      since (it falls one second a second);
    * the in-flight bound: were the running call to finish now, the mean would be ``elapsed_s / (done + 1)``, and
      the calls after it would take that each (it grows while a call runs longer than the mean).

    The two meet when the running call has taken the mean, so the estimate has no step there, nor when a call
    slower than the mean finishes. Before any call has finished there is nothing to go by: ``nan``; none left: 0.
    Example: 3 calls, the first done at 60 s; at 80 s ``max(2 × 60 − 20, 1 × 80 / 2) = 100``; at 200 s
    ``max(2 × 60 − 140, 1 × 200 / 2) = 100``; at 260 s 130."""
    left = total - done
    if left <= 0:
        return 0.0
    if done <= 0:
        return float("nan")
    per_call = max(elapsed_s - since_done_s, 0.0) / done
    return max(left * per_call - since_done_s, (left - 1) * elapsed_s / (done + 1), 0.0)


def eta_step(previous: float | None, dt_s: float, estimate: float) -> float:
    """The ETA to show ``dt_s`` seconds after ``previous`` was shown, from a new :func:`eta_estimate`: the estimate,
    kept within ``dt_s`` of ``previous`` either way, so that the ETA never falls by more than the time that passed
    (a quick call does not make the finish look near at once) nor climbs by more than it (a slow call raises it a
    second a second, not 7:42 → 16:20 in one step). The first ETA (``previous`` None) is the estimate."""
    if previous is None or previous != previous:
        return estimate
    if estimate != estimate:
        return previous
    return min(max(estimate, previous - dt_s), previous + dt_s)


def retrying(model: str, error: BaseException | str, attempt: int, max_retries: int, delay_s: float,
             timeout_s: float | None = None) -> None:
    """Say that a call failed transiently and is retried (stage ``retry``): the reason in words (a timeout says
    it waited ``timeout_s`` for an answer), which retry of how many, and the wait before it."""
    import asyncio

    if isinstance(error, (asyncio.TimeoutError, TimeoutError)) or "Timeout" in type(error).__name__:
        why = f"no answer within {timeout_s:g} s (the per-call timeout)" if timeout_s else "timed out"
    else:
        why = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    emit("retry", f"{model}: {why}; retry {attempt} of {max_retries} in {delay_s:.1f} s")


def forecast_line(calls: int, prompt_tokens: int, max_tokens: int, lo_s: float, hi_s: float, prefill_tps: float,
                  decode_tps: float, typical_reply_tokens: int = 64, slower: str = "") -> str:
    """The run's forecast line from a measured probe (:func:`ctxbench.models.probe.forecast_seconds`): ``calls``
    calls reading ``prompt_tokens`` prompt tokens in all (a prefix the server keeps counted once), their seconds
    from replies of ``typical_reply_tokens`` (``lo_s``) to replies that use the whole budget ``max_tokens``
    (``hi_s``), the probe's speeds, and ``slower``: the speeds where the longest prompt ends, where the probe
    measured their fall (e.g. ``"; at 5,265 tokens of context 87 and 12"``). Example: ``"6 calls, 8,502 prompt
    tokens: about 1:57 to 3:16 on this machine (probe: prompt 153 tokens/s, generation 49 tokens/s; ...)"``."""
    return (f"{calls} calls, {prompt_tokens:,} prompt tokens: about {clock(lo_s)} to {clock(hi_s)} on this machine "
            f"(probe: prompt {prefill_tps:.0f} tokens/s, generation {decode_tps:.0f} tokens/s{slower}; replies of "
            f"{min(typical_reply_tokens, max_tokens)} to {max_tokens} tokens)")
