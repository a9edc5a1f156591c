"""What ``ctxbench run`` shows while it works: stage lines, calls with rate and ETA, heartbeats."""

from __future__ import annotations

import threading
import time

from ctxbench.cli.common import console
from ctxbench.core.progress import clock, eta_estimate, eta_step, flights, server_status


class RunProgress:
    """What ``ctxbench run`` shows while it works (:mod:`ctxbench.core.progress` events): one line per stage as it
    starts (build stages, model start, calls, score, report), prefixed by the time since the run began; calls with
    their count, rate and ETA, at most every few seconds (in a terminal: one line updated in place); the forecast
    of the calls' time from a measured probe (stage ``estimate``); every timeout and retry (stage ``retry``); and,
    while calls are in flight and none finishes, a heartbeat every ``every_s`` seconds in a terminal
    (``heartbeat_s`` in a log): the calls in flight, how long the oldest has run, and what the server says it is
    doing where it says (the embedded server: tokens generated so far). Used as a context manager, which runs the
    heartbeat thread."""

    def __init__(self, every_s: float = 5.0, heartbeat_s: float = 30.0):
        self.t0 = self._last = time.monotonic()
        self.every_s = every_s
        self.calls_t0: float | None = None
        self._live = console.is_terminal
        self.heartbeat_s = every_s if self._live else heartbeat_s
        self._seen: set[tuple[str, str]] = set()
        self._calls: tuple[str, int, int] | None = None  # (model, done, total) of the latest calls event
        self._done_at = self.t0  # when the latest call ended
        self._eta: tuple[float, float] | None = None  # (the ETA last shown, when): progress.eta_step's previous
        self._due_at: float | None = None  # when the ETA ran down to 0 with calls left (the overdue time counts up)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "RunProgress":
        self._thread = threading.Thread(target=self._beat, name="ctxbench-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def heartbeat(self) -> str | None:
        """The heartbeat line now, or None when no call of the current model is in flight."""


        if self._calls is None:
            return None
        model, done, total = self._calls
        fl = flights()  # the gateway's model name may carry a provider prefix: every call in flight
        if not fl:
            return None
        _, oldest, attempt = fl[0]
        status = server_status(model)
        tail = f"; {status}" if status else ""
        tail += f" (retry {attempt})" if attempt else ""
        eta = ""
        if done and self.calls_t0 is not None:
            eta = f", {self._eta_text(time.monotonic())}"
        return (f"calls {model}: {done}/{total}, {len(fl)} in flight, the oldest for {clock(oldest)}{tail}{eta}")

    def _eta_now(self, now: float) -> float:
        """The ETA to show now, by the one rule of every line (calls and heartbeat): :func:`progress.eta_estimate`
        moved by :func:`progress.eta_step` from the ETA last shown."""
        _, done, total = self._calls
        est = eta_estimate(done, total, now - self.calls_t0, now - self._done_at)
        prev = self._eta
        shown = eta_step(None if prev is None else prev[0], 0.0 if prev is None else now - prev[1], est)
        self._eta = (shown, now)
        return shown

    def _eta_text(self, now: float) -> str:
        """``ETA m:ss``; once the ETA has run down to 0 with calls left (the last calls running longer than the
        others took), ``ETA 0:00, overdue by m:ss`` counting up, so the line still moves at every heartbeat."""
        left = self._eta_now(now)
        if left >= 0.5:
            self._due_at = None
            return f"ETA {clock(left)}"
        if self._due_at is None:
            self._due_at = now
        return f"ETA 0:00, overdue by {clock(now - self._due_at)}"

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            if time.monotonic() - self._last < self.heartbeat_s:
                continue
            line = self.heartbeat()
            if line:
                self._last = time.monotonic()
                self._line(line, update=True)

    def _line(self, text: str, update: bool = False) -> None:
        el = int(time.monotonic() - self.t0)
        msg = f"[{el // 60}:{el % 60:02d}] {text}"
        if self._live and update:
            console.print(msg, end="\r", markup=False, highlight=False)
        else:
            console.print(msg, markup=False, highlight=False)

    def __call__(self, ev) -> None:
        if ev.stage in ("retry", "estimate"):  # every one is said, and stays on screen
            self._line(f"{ev.stage} {ev.detail}", update=False)
            self._last = time.monotonic()
            return
        if ev.stage != "calls":
            if (ev.stage, ev.detail) not in self._seen:
                self._seen.add((ev.stage, ev.detail))
                self._line(f"{ev.stage} {ev.detail}".rstrip())
            return
        now = time.monotonic()
        if not ev.total:
            self._line(f"calls {ev.detail}")
            return
        if self._calls is None or (ev.done or 0) != self._calls[1]:
            self._done_at = now  # when the latest call ended: the heartbeat's ETA counts down from it
        self._calls = (ev.detail, ev.done or 0, ev.total)
        if ev.done == 0 or self.calls_t0 is None:
            self.calls_t0, self._eta = now, None
            self._line(f"calls {ev.detail}: 0/{ev.total}")
            self._last = now
            return
        if ev.done < ev.total and now - self._last < self.every_s:
            return
        self._last = now
        rate = ev.done / max(now - self.calls_t0, 1e-9)
        tail = self._eta_text(now) if ev.done < ev.total else "done"
        self._line(f"calls {ev.detail}: {ev.done}/{ev.total} ({60 * rate:.1f}/min), {tail}",
                   update=ev.done < ev.total)
