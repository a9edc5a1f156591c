"""One ETA rule for ``ctxbench run`` (issue 32 item 6): the ETA stayed at 7:42 for 3.5 minutes while a call ran,
then jumped to 16:20. The rule (:func:`ctxbench.core.progress.eta_estimate` moved by :func:`ctxbench.core.progress.eta_step`)
moves at every heartbeat, never falls by more than the time that passed nor climbs by more, and the calls line
and the heartbeat line show the same ETA. Tested as pure functions and on a scripted sequence of heartbeats."""

from __future__ import annotations

import math
import re

from ctxbench.cli.progress import RunProgress
from ctxbench.core.progress import Event, eta_estimate, eta_step, in_flight


def test_eta_estimate_by_hand():
    # 3 calls, the first done at 60 s: at 80 s max(2 × 60 − 20, 1 × 80 / 2) = 100; at 200 s max(−20, 200 / 2) = 100;
    # at 260 s 260 / 2 = 130
    assert eta_estimate(1, 3, 80.0, 20.0) == 100.0
    assert eta_estimate(1, 3, 200.0, 140.0) == 100.0
    assert eta_estimate(1, 3, 260.0, 200.0) == 130.0
    # 10 calls, 4 done by 8 s, the 4th just now: 6 × 2 = 12 (the in-flight bound 5 × 8 / 5 = 8 is lower)
    assert eta_estimate(4, 10, 8.0, 0.0) == 12.0
    assert eta_estimate(10, 10, 50.0, 0.0) == 0.0
    assert math.isnan(eta_estimate(0, 10, 50.0, 50.0))


def test_eta_step_keeps_within_the_elapsed_time():
    assert eta_step(None, 0.0, 42.0) == 42.0
    assert eta_step(100.0, 5.0, 50.0) == 95.0  # a quick call: falls 5 s in 5 s, not 50
    assert eta_step(100.0, 5.0, 200.0) == 105.0  # a slow one: climbs 5 s in 5 s, not 100
    assert eta_step(100.0, 5.0, 97.0) == 97.0
    assert eta_step(100.0, 5.0, float("nan")) == 100.0


def _eta(line: str) -> int:
    m, s = re.search(r"ETA (\d+):(\d\d)$", line).groups()
    return 60 * int(m) + int(s)


def _script(monkeypatch, durations, beat=5.0):
    """Drive RunProgress through calls of the given durations, one at a time, a heartbeat every ``beat`` seconds
    while a call runs; returns (time, ETA seconds) of every line showing an ETA (calls lines and heartbeats)."""
    now = [1000.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    shown = RunProgress(every_s=0.0, heartbeat_s=beat)
    lines: list[tuple[float, str]] = []
    shown._line = lambda text, update=False: lines.append((now[0], text))
    n = len(durations)
    shown(Event("calls", "m", 0, n))
    for i, d in enumerate(durations):
        with in_flight("m"):
            t_end = now[0] + d
            while now[0] + beat < t_end:
                now[0] += beat
                hb = shown.heartbeat()
                if i:
                    lines.append((now[0], hb))
            now[0] = t_end
        shown(Event("calls", "m", i + 1, n))
    return [(t, _eta(x)) for t, x in lines if "ETA" in x]


def test_a_long_call_moves_the_eta_every_heartbeat_and_no_step_follows(monkeypatch):
    """The issue's run: 20 calls, the first 10 at 46 s each (ETA at 460 s: 10 × 46 = 7:40), then one of 3.5 min.
    At every 5 s heartbeat the ETA moves, by at most the 5 s that passed; it bottoms at 9 × 46 = 414 s when the
    call has run the mean (46 s, where 460 − s = 9 × (460 + s) / 11), then grows by 9/11 s a second to
    9 × 670 / 11 = 548 s (9:08) when the call ends; the calls line that follows shows the same 9:08, not a jump."""
    seq = _script(monkeypatch, [46.0] * 10 + [210.0] + [46.0] * 9)
    after10 = [(t, e) for t, e in seq if 1460.0 <= t <= 1670.0]
    assert after10[0] == (1460.0, 460)
    for (t0, e0), (t1, e1) in zip(after10, after10[1:]):
        assert e1 != e0, (t0, e0, t1, e1)  # it moves
        assert abs(e1 - e0) <= (t1 - t0) + 1, (t0, e0, t1, e1)  # +1: whole seconds shown
    assert min(e for _, e in after10) in (414, 415)
    assert after10[-1] == (1670.0, 548)  # the calls line at the end of the long call: 9 × 670 / 11 = 548.2
    assert [e for t, e in after10 if t == 1665.0] == [544]  # the heartbeat 5 s before: 9 × 665 / 11 = 544.1


def test_every_eta_shown_moves_within_the_time_that_passed(monkeypatch):
    """Uneven calls (a quick one after slow ones, a slow one after quick ones): between any two ETAs shown, the
    change is at most the time between them (plus the display's rounding)."""
    seq = _script(monkeypatch, [30.0, 30.0, 2.0, 2.0, 90.0, 1.0, 60.0, 5.0, 5.0, 5.0])
    assert len(seq) > 20
    for (t0, e0), (t1, e1) in zip(seq, seq[1:]):
        assert abs(e1 - e0) <= (t1 - t0) + 1, (t0, e0, t1, e1)


def test_an_overdue_last_call_still_moves_the_line(monkeypatch):
    """3 calls of 10 s, then a last one of 60 s: 30 s in, the ETA has run down to 0 (the calls left after it: none),
    and the line says for how long it has been overdue, moving at every heartbeat instead of freezing at 0:00."""
    now = [0.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    shown = RunProgress(every_s=0.0, heartbeat_s=5.0)
    shown._line = lambda text, update=False: None
    shown(Event("calls", "m", 0, 4))
    for i in range(3):
        now[0] += 10.0
        shown(Event("calls", "m", i + 1, 4))
    lines = []
    with in_flight("m"):
        for _ in range(12):
            now[0] += 5.0
            lines.append(shown.heartbeat())
    tails = [x.split(", ETA ")[1] for x in lines]
    # the mean is 10 s: 5 s in, 0:05 left; at 10 s the ETA reaches 0 and from then the overdue time counts up
    assert tails[0] == "0:05"
    assert tails[1] == "0:00, overdue by 0:00" and tails[2] == "0:00, overdue by 0:05" and tails[-1].endswith("0:50")
    assert len(set(tails[1:])) == len(tails[1:])  # every heartbeat moves
