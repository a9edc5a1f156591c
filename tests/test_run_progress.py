"""`ctxbench run` shows progress per stage (issue 16 item 5): the build's stages, the calls with their count (and
ETA while they run), scoring and the report, in that order, each line stamped with the time since the start."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.cli.progress import RunProgress
from ctxbench.core.progress import Event, emit, listening
from fakeserver import FakeOpenAIServer


def test_run_prints_each_stage_in_order(spider_db, tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["run", "--engine", "luigi", "--db", str(spider_db("wine_1")), "--lengths", "1024",
                                     "--per-length", "3", "--model", "openai/fake", "--base-url", srv.base_url,
                                     "--out", str(tmp_path / "runs")])
        assert r.exit_code == 0, r.output
        assert srv.count == 3
    lines = [ln for ln in r.output.splitlines() if re.match(r"^\[\d+:\d\d\] ", ln)]
    text = [ln.split("] ", 1)[1] for ln in lines]
    want = ["build holobench: load", "calls openai/fake: 0/3", "calls openai/fake: 3/3", "score", "report"]
    at = [next(i for i, t in enumerate(text) if t.startswith(w)) for w in want]
    assert at == sorted(at), text
    assert "done" in text[at[2]]
    stages = [t.split(": ", 1)[1] for t in text if t.startswith("build holobench: ")]
    from ctxbench.core.track import get_track

    assert stages == [s.name for s in get_track("holobench").stages]  # every stage, once, in order


def test_calls_line_says_count_rate_and_eta(monkeypatch):
    """10 calls over 20 s, 4 done after 8 s: 30 calls/min, 6 left, ETA 12 s."""
    import ctxbench.cli.common as cli  # the console the progress lines are printed on

    clock = [100.0]
    monkeypatch.setattr("time.monotonic", lambda: clock[0])
    out: list[str] = []
    monkeypatch.setattr(cli.console, "print", lambda msg, **k: out.append(msg))
    show = RunProgress(every_s=0)
    with listening(show):
        emit("calls", "m", 0, 10)
        clock[0] = 108.0
        emit("calls", "m", 4, 10)
        clock[0] = 120.0
        emit("calls", "m", 10, 10)
    assert out[0] == "[0:00] calls m: 0/10"
    assert out[1] == "[0:08] calls m: 4/10 (30.0/min), ETA 0:12"
    assert out[2] == "[0:20] calls m: 10/10 (30.0/min), done"
    assert Event("x").done is None
