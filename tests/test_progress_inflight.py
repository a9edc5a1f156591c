"""A slow model must not look like a hung one (issue 26 item 2): a heartbeat while a call is in flight, every
timeout and retry said, and a forecast from a measured probe before the first call."""

from __future__ import annotations

import asyncio
import random
import re
import time

from ctxbench.core import progress
from ctxbench.cli.progress import RunProgress
from ctxbench.models.gateway import Gateway, RetryPolicy
from ctxbench.core.progress import Event, clock, flights, forecast_line, in_flight, listening
from fakeserver import FakeOpenAIServer

MSG = [{"role": "user", "content": "How many?"}]


def test_in_flight_lists_calls_oldest_first():
    assert flights() == []
    with in_flight("m1"):
        time.sleep(0.05)
        with in_flight("m2", attempt=1):
            fl = flights()
            assert [f[0] for f in fl] == ["m1", "m2"]
            assert fl[0][1] >= 0.05 and fl[1][2] == 1
            assert [f[0] for f in flights("m2")] == ["m2"]
    assert flights() == []


def test_clock():
    assert [clock(s) for s in (0, 59.9, 61, 600, 3725)] == ["0:00", "0:59", "1:01", "10:00", "1:02:05"]


def test_forecast_line_worked_example():
    # 8 calls, 16,000 prompt tokens at 200 tokens/s = 80 s of prompt processing; replies of 64 tokens at 32/s add
    # 8 × 2 s = 16 s (1:36 in all), of the 1,024-token budget 8 × 32 s = 256 s (5:36 in all)
    from ctxbench.models.probe import Speed, forecast_seconds

    lo, hi = forecast_seconds(Speed(200.0, 32.0), [(0, 2000)] * 8, 1024)  # no fall with the context measured
    line = forecast_line(8, 16000, 1024, lo, hi, 200.0, 32.0)
    assert line.startswith("8 calls, 16,000 prompt tokens: about 1:36 to 5:36 on this machine")
    assert "prompt 200 tokens/s, generation 32 tokens/s" in line


def test_heartbeat_while_a_slow_call_is_in_flight():
    """One call that takes 3.5 s: the heartbeat (every second here) says a call is in flight and for how long,
    before the call's own line comes."""
    shown = RunProgress(every_s=1.0, heartbeat_s=1.0)
    lines: list[str] = []
    shown._line = lambda text, update=False: lines.append(text)  # what would be printed
    progress.set_server_status("openai/fake", lambda: "57 tokens generated")
    try:
        with FakeOpenAIServer(latency_s=3.5) as srv, shown, listening(shown):
            shown(Event("calls", "openai/fake", 0, 1))
            gw = Gateway("openai/fake", srv.base_url, concurrency=1, policy=RetryPolicy(timeout_s=30))
            res = asyncio.run(gw.complete(MSG, 16, {"temperature": 0}, random.Random(0)))
            assert res.status == "ok"
    finally:
        progress.set_server_status("openai/fake", None)
    beats = [ln for ln in lines if "in flight" in ln]
    assert beats, lines
    secs = []
    for b in beats:
        m = re.match(r"calls openai/fake: 0/1, 1 in flight, the oldest for (\d+):(\d\d); 57 tokens generated$", b)
        assert m, b
        secs.append(60 * int(m.group(1)) + int(m.group(2)))
    assert secs == sorted(secs), beats  # the age never goes back (how far it moves depends on the cores' load)


def test_heartbeat_says_how_long_the_oldest_call_has_run(monkeypatch):
    """The heartbeat's age is the oldest flight's, read on the clock: worked out on a clock the test moves."""
    now = [1000.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    shown = RunProgress(every_s=1.0, heartbeat_s=1.0)
    assert shown.heartbeat() is None  # no calls event yet
    shown(Event("calls", "openai/fake", 0, 2))
    assert shown.heartbeat() is None  # nothing in flight
    with in_flight("openai/fake"):
        now[0] += 65.0
        with in_flight("openai/fake", attempt=1):
            now[0] += 2.0
            line = shown.heartbeat()
    assert line == "calls openai/fake: 0/2, 2 in flight, the oldest for 1:07"


def test_timeout_and_retry_are_said():
    """A call whose first attempt gets no answer within the 2 s timeout and whose second gets a 503 is retried,
    and each retry is an event saying why, which retry and the wait (on busy cores a later attempt may time out
    too: every retry is said, so the events count the call's retries)."""
    events: list[Event] = []
    with FakeOpenAIServer(delay_s=8.0) as srv, listening(events.append):
        srv.script(["delay", "503"])
        gw = Gateway("openai/fake", srv.base_url, concurrency=1,
                     policy=RetryPolicy(timeout_s=2.0, max_retries=4, base_delay_s=0.01, max_delay_s=0.02))
        res = asyncio.run(gw.complete(MSG, 16, {"temperature": 0}, random.Random(0)))
    assert res.status == "ok" and res.retries >= 2
    retries = [e.detail for e in events if e.stage == "retry"]
    assert len(retries) == res.retries, retries
    assert retries[0].startswith("openai/fake: no answer within 2 s (the per-call timeout); retry 1 of 4 in ")
    assert [int(re.search(r"; retry (\d+) of 4 in \d+\.\d s$", r).group(1)) for r in retries] == \
        list(range(1, len(retries) + 1))
    assert any("503" in r for r in retries[1:]), retries


def test_run_progress_prints_retries_and_the_estimate():
    shown = RunProgress()
    lines: list[str] = []
    shown._line = lambda text, update=False: lines.append(text)
    shown(Event("estimate", "8 calls, 16,000 prompt tokens: about 1:36 to 5:36 on this machine"))
    shown(Event("retry", "m: no answer within 600 s (the per-call timeout); retry 1 of 6 in 1.2 s"))
    shown(Event("retry", "m: no answer within 600 s (the per-call timeout); retry 2 of 6 in 3.0 s"))
    assert lines == ["estimate 8 calls, 16,000 prompt tokens: about 1:36 to 5:36 on this machine",
                     "retry m: no answer within 600 s (the per-call timeout); retry 1 of 6 in 1.2 s",
                     "retry m: no answer within 600 s (the per-call timeout); retry 2 of 6 in 3.0 s"]


def test_probe_speed_times_a_server_without_timings():
    from ctxbench.models.probe import probe_speed

    with FakeOpenAIServer(latency_s=0.2) as srv:
        sp = probe_speed(srv.base_url, "fake", "word " * 2000)
        assert srv.count == 3  # one try for timings, then a 1-token and a longer request timed from outside
    assert sp is not None and sp.prefill > 0 and sp.decode > 0
    assert probe_speed("http://127.0.0.1:9/v1", "fake", "x", timeout_s=2) is None  # nothing there: no forecast


def test_heartbeat_eta_counts_down_while_a_call_runs(monkeypatch):
    """The heartbeat's ETA is the finished calls' mean time per call counted down from the latest finish, and never
    less than the calls after the one in flight at the mean it would make finishing now: 3 calls, the first done
    in 60 s; 20 s into the second, max(2 × 60 − 20, 1 × 80 / 2) = 100 s (1:40); 140 s into it, max(−20,
    1 × 200 / 2) = 100 s (1:40), no longer frozen at the old mean's 1:00 (issue 32 item 6); worked out by hand."""
    now = [1000.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    shown = RunProgress(every_s=1.0, heartbeat_s=1.0)
    shown._line = lambda text, update=False: None
    shown(Event("calls", "m", 0, 3))
    now[0] = 1060.0
    shown(Event("calls", "m", 1, 3))
    with in_flight("m"):
        now[0] = 1080.0
        assert shown.heartbeat().endswith(", ETA 1:40")
        now[0] = 1200.0
        assert shown.heartbeat().endswith(", ETA 1:40")
        now[0] = 1260.0
        assert shown.heartbeat().endswith(", ETA 2:10")  # 260 / 2 = 130 s: it grows while the call runs on


def test_probe_measures_how_speed_falls_with_the_context():
    """A llama.cpp-shaped server whose time per prompt token is 5 ms + 2 µs per earlier token and per generated
    token 30 ms + 10 µs per token of context (a prompt token per 4 characters, the longest common prefix kept):
    the two probes recover both lines, so 5,000 prompt tokens forecast 5 × 5,000 + 0.002 × 5,000² / 2 = 50 s, not
    the 25.5 s a short probe's speed alone gives; 100 tokens after 5,000 of context 100 × (30 + 10 × 5.05) ms."""
    import json as _json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from ctxbench.models.probe import probe_speed

    kept = {"text": ""}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = _json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = body["messages"][-1]["content"]
            common = 0
            for x, y in zip(text, kept["text"]):
                if x != y:
                    break
                common += 1
            kept["text"] = text
            n, start = len(text) // 4, common // 4
            pms = sum(5.0 + 0.002 * p for p in range(start, n))
            dn = body["max_tokens"]
            dms = sum(30.0 + 0.010 * (n + k) for k in range(dn))
            out = {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"}],
                   "usage": {"prompt_tokens": n, "completion_tokens": dn},
                   "timings": {"prompt_n": n - start, "prompt_ms": pms, "prompt_per_second": 1000 * (n - start) / pms,
                               "predicted_n": dn, "predicted_ms": dms, "predicted_per_second": 1000 * dn / dms}}
            raw = _json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        sp = probe_speed(f"http://127.0.0.1:{srv.server_address[1]}/v1", "m", "abcd" * 5000, chars=12000)
    finally:
        srv.shutdown()
    assert sp is not None
    assert abs(sp.prefill_slope - 2e-6) < 1e-7 and abs(sp.decode_slope - 1e-5) < 1e-7
    assert abs(sp.prefill_seconds(0, 5000) - 50.0) < 0.1
    assert abs(sp.decode_seconds(5000, 100) - 100 * (0.030 + 0.00001 * 5050)) < 0.01
