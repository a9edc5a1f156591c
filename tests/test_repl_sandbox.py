"""The REPL sandbox checked from inside (issue 35, ctxbench.run.repl.sandbox): code run in it under bubblewrap
probes the network (no interface but its own loopback; a listener on the host's 127.0.0.1 is unreachable), the
files (the root read-only, a private /tmp, the host's files readable but not writable), the processes (its own PID
namespace: no host process visible), the environment (no variable of the parent, e.g. an API key) and its limits
(memory, CPU time, wall clock); and the protocol: llm_query and llm_query_batched reach the parent, FINAL and
FINAL_VAR end the code, variables persist between steps."""

from __future__ import annotations

import errno
import json
import os
import socket
import time

import pytest

from ctxbench.core.errors import InputError
from ctxbench.run.repl import protocol
from ctxbench.run.repl import sandbox as sandbox_mod
from ctxbench.run.repl.sandbox import Sandbox, StepLimits, require_sandbox



@pytest.fixture
def bwrap():
    """Skip where bubblewrap cannot start a sandbox (not installed, or no user namespaces); fail under CI=true,
    where .ci/run installs it."""
    try:
        require_sandbox("bwrap")
    except InputError as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{e} (required under CI=true)")
        pytest.skip(str(e))


def _no_queries(prompts):
    raise AssertionError(f"unexpected llm_query {prompts}")


def _probe(sb: Sandbox, code: str) -> dict:
    """Run ``code`` (which fills a dict ``r``) and return ``r``."""
    run = sb.run("r = {}\n" + code + "\nprint(__import__('json').dumps(r))", _no_queries)
    assert not run.timed_out and not run.ended, run
    return json.loads(run.output.strip().splitlines()[-1])


def test_sandbox_from_inside(tmp_path, monkeypatch, bwrap):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-visible")
    host_file = tmp_path / "host.txt"
    pyproject = open("pyproject.toml").read()
    host_file.write_text("host data")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    # wall_s 20: the steps are short, but a full suite's load (5-6 on 2 cores) once stretched one past 5 s
    with Sandbox("the context", "bwrap", StepLimits(wall_s=20, cpu_s=3, memory_mb=256)) as sb:
        r = _probe(sb, f"""
import os, socket, resource
r['interfaces'] = [n for _, n in socket.if_nameindex()]
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2); r['net'] = 'reached'
except OSError as e:
    r['net'] = type(e).__name__
try:
    socket.getaddrinfo('example.org', 443); r['dns'] = 'resolved'
except OSError as e:
    r['dns'] = type(e).__name__
r['host_tmp_visible'] = os.path.exists({str(host_file)!r})
try:  # the host's files outside the system and Python's installation are not there: no build, cache, home
    r['read_repo'] = open({os.path.abspath('pyproject.toml')!r}).read()[:200]
except OSError as e:
    r['read_repo'] = type(e).__name__
r['read_home'] = os.path.exists(os.path.expanduser('~root/.bashrc')) or os.path.exists('/home')
r['read_etc'] = os.path.exists('/etc/passwd')
r['python_stdlib'] = __import__('json').__name__
for name, p in [('write_host', {os.path.abspath('pyproject.toml')!r}), ('write_root', '/ctxbench-probe'), ('write_usr', '/usr/ctxbench-probe'),
                ('write_cwd_repo', {os.getcwd() + '/probe.txt'!r})]:
    try:
        open(p, 'a').write('x'); r[name] = 'written'
    except OSError as e:
        r[name] = 'OSError'
open('/tmp/private.txt', 'w').write('mine'); r['tmp'] = open('/tmp/private.txt').read()
try:  # 5 files of 60 MiB (each under the 64 MiB file limit) overfill the 256 MiB /tmp
    for k in range(5):
        with open(f'/tmp/big{{k}}', 'wb') as f:
            f.write(bytes(60 * 1024 * 1024))
    r['tmp_full'] = 'no'
except OSError as e:
    r['tmp_full'] = e.errno
for k in range(5):
    if os.path.exists(f'/tmp/big{{k}}'):
        os.remove(f'/tmp/big{{k}}')
try:
    with open('/tmp/huge', 'wb') as f:
        f.write(bytes(65 * 1024 * 1024))
    r['file_limit'] = 'no'
except OSError as e:
    r['file_limit'] = e.errno
r['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
r['env'] = sorted(os.environ)
r['as_limit'] = resource.getrlimit(resource.RLIMIT_AS)[0]
r['fsize_limit'] = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
r['context'] = context
""")
        assert r["interfaces"] == ["lo"]                           # its own network namespace
        assert r["net"] in ("ConnectionRefusedError", "OSError")   # the host's 127.0.0.1 is not its 127.0.0.1
        assert r["dns"] != "resolved"
        assert r["read_repo"] == "FileNotFoundError" and os.path.exists("pyproject.toml")  # the repo is not there
        assert r["read_home"] is False and r["read_etc"] is False and r["python_stdlib"] == "json"
        assert r["host_tmp_visible"] is False                            # its /tmp is its own
        assert r["write_root"] == r["write_usr"] == "OSError"
        # the checkout is not visible; under /tmp a write to its path lands in the sandbox's private /tmp, never
        # on the host (checked below: the host's files unchanged)
        in_tmp = "written" if os.getcwd().startswith("/tmp/") else "OSError"
        assert r["write_host"] == r["write_cwd_repo"] == in_tmp
        assert open("pyproject.toml").read() == pyproject
        assert r["tmp"] == "mine" and not (tmp_path / "private.txt").exists()
        assert r["tmp_full"] == errno.ENOSPC and r["file_limit"] == errno.EFBIG  # /tmp size, file size limits
        assert host_file.read_text() == "host data" and not os.path.exists(os.path.join(os.getcwd(), "probe.txt"))
        assert len(r["pids"]) <= 4 and os.getpid() not in r["pids"]  # its own PID namespace
        assert "OPENAI_API_KEY" not in r["env"] and set(r["env"]) <= {"PATH", "HOME", "PYTHONDONTWRITEBYTECODE",
                                                                       "PYTHONIOENCODING", "LC_CTYPE", "PWD"}
        assert r["as_limit"] == 256 * 1024 * 1024 + 4 * len("the context")
        assert r["fsize_limit"] == 64 * 1024 * 1024
        assert r["context"] == "the context"

        # memory: an allocation past the limit fails inside (MemoryError), the REPL lives on
        run = sb.run("try:\n    b = bytearray(600 * 1024 * 1024)\nexcept MemoryError:\n    print('MEM refused')",
                     _no_queries)
        assert run.output.strip() == "MEM refused", run
        assert _probe(sb, "r['alive'] = context")["alive"] == "the context"  # variables persist

        # CPU time: a busy loop ends past its CPU-time limit (or the wall clock), and the process with it
        t0 = time.monotonic()
        run = sb.run("while True:\n    pass", _no_queries)
        assert run.timed_out and run.ended and time.monotonic() - t0 < 15
        assert "limit" in run.reason
    listener.close()


def test_wall_clock_excludes_sub_calls_and_sleep_is_stopped(bwrap):
    with Sandbox("abc", "bwrap", StepLimits(wall_s=1.5, cpu_s=5)) as sb:
        def slow(prompts):
            time.sleep(2.0)  # longer than the step's wall clock: the sub-model's time does not count
            return [p.upper() for p in prompts]

        run = sb.run("print(llm_query('x'), llm_query_batched(['a', 'b']))", slow)
        assert run.output.strip() == "X ['A', 'B']" and run.wait_s >= 4.0 and not run.timed_out
        run = sb.run("import time\ntime.sleep(30)", _no_queries)  # no CPU used: the wall clock ends it
        assert run.timed_out and "wall-clock limit of 1.5 s" in run.reason


def test_final_and_final_var_and_errors(bwrap):
    with Sandbox("x" * 10, "bwrap", StepLimits(wall_s=10)) as sb:
        run = sb.run("items = ['b', 'a']\nFINAL(sorted(items))\nprint('not reached')", _no_queries)
        assert (run.final, run.output) == ('["a", "b"]', "")
        run = sb.run("n = len(context) * 3\ntry:\n    FINAL_VAR('n')\nexcept Exception:\n    print('caught')",
                     _no_queries)
        assert run.final == "30" and run.output == ""
        run = sb.run("FINAL_VAR('nowhere')\nprint('went on')", _no_queries)
        assert run.final is None and run.output == "FINAL_VAR('nowhere'): no variable 'nowhere' in the REPL\nwent on\n"
        run = sb.run("print('bad \\ud800 text', 'ü')", _no_queries)  # a lone surrogate: valid UTF-8 out
        assert run.output == "bad ? text ü\n"
        run = sb.run("1 / 0", _no_queries)
        assert "ZeroDivisionError" in run.output and run.final is None
        run = sb.run("import os\nos._exit(3)", _no_queries)  # the process ends: said, variables lost
        assert run.ended and not run.timed_out and "exit code 3" in run.reason
        assert sb.variable("n") is None  # a fresh process after that
        # the kernel's signal at the CPU-time limit (bubblewrap exits 128 + 24 for it): a timed-out step
        run = sb.run("import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)", _no_queries)
        assert run.timed_out and "CPU-time limit" in run.reason
        sb.run("n = 5", _no_queries)
        assert sb.variable("n") == "5" and sb.variable("missing") is None


def test_sandbox_none_runs_without_isolation_but_with_limits(tmp_path):
    with Sandbox("ctx", "none", StepLimits(wall_s=1.0, cpu_s=1.0)) as sb:
        run = sb.run(f"open({str(tmp_path / 'out.txt')!r}, 'w').write('x'); print(len(context))", _no_queries)
        assert run.output.strip() == "3" and (tmp_path / "out.txt").read_text() == "x"
        assert sb.run("while True: pass", _no_queries).timed_out


def test_missing_bwrap_is_refused_with_the_package_name(monkeypatch):
    monkeypatch.setattr(sandbox_mod.shutil, "which", lambda name: None)
    with pytest.raises(InputError) as e:
        require_sandbox("bwrap")
    assert "install the package bubblewrap" in str(e.value) and "--sandbox none" in str(e.value)
    require_sandbox("none")  # needs nothing
    with pytest.raises(InputError, match="--sandbox 'docker'"):
        require_sandbox("docker")


def test_protocol_parsing():
    reply = ("Let me look.\n```repl\nx = 1\n```\ntext\n```python\nprint(x)\n```\n```bash\nls\n```\n"
             "FINAL(42)")
    assert protocol.code_blocks(reply) == ["x = 1\n", "print(x)\n"]
    assert protocol.final_in_text(reply) == ("value", "42")
    assert protocol.final_in_text("```repl\nFINAL(1)\n```") is None  # in code: the sandbox's FINAL
    assert protocol.final_in_text("done\nFINAL_VAR(answer)") == ("var", "answer")
    assert protocol.final_in_text('FINAL("Paris")') == ("value", "Paris")
    assert protocol.final_in_text("FINAL(42)\nThat is all (done)") == ("value", "42")  # one line only
    assert protocol.truncate("a" * 10, 4) == "aaaa\n[... 6 more characters not shown]"
    msgs = protocol.root_messages("Who?", 1234567, 300000, 60.0)
    assert "1,234,567 characters (300,000 tokens)" in msgs[1]["content"] and "Question: Who?" in msgs[1]["content"]
    assert f"cut to {protocol.OUTPUT_CHARS} characters" in msgs[0]["content"]
    assert "llm_query_batched" in msgs[0]["content"] and "FINAL_VAR" in msgs[0]["content"]


def _running(argv: list[str]) -> bool:
    """Whether a host process runs exactly ``argv``."""
    want = ("\0".join(argv) + "\0").encode()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if f.read() == want:
                        return True
            except OSError:
                continue
    return False


def test_processes_the_code_starts_end_with_the_sandbox(bwrap):
    argv = ["sleep", "4321.5"]
    sb = Sandbox("x", "bwrap", StepLimits(wall_s=5))
    sb.start()
    run = sb.run(f"import subprocess\nsubprocess.Popen({argv!r}, start_new_session=True)\nprint('started')",
                 _no_queries)
    assert run.output.strip() == "started"
    deadline = time.monotonic() + 5
    while not _running(argv) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(argv)  # a detached process of its own session, still in the sandbox's PID namespace
    sb.close()
    deadline = time.monotonic() + 5
    while _running(argv) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(argv)


def test_no_key_in_the_sandbox_not_even_in_bubblewraps_own_environment(monkeypatch, bwrap):
    """bubblewrap is PID 1 in the sandbox and its /proc/1/environ is readable by the code: it gets no variable of
    ours either, so an API key never crosses into the sandbox."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-sandbox")
    with Sandbox("c", "bwrap", StepLimits(wall_s=10, cpu_s=5, memory_mb=256)) as sb:
        r = _probe(sb, """
import os
r['env1'] = [open(f'/proc/{p}/environ').read() for p in os.listdir('/proc') if p.isdigit()]
""")
    assert r["env1"] and not any("sk-never-in-the-sandbox" in e for e in r["env1"])


def test_code_writing_into_the_protocol_pipe_ends_its_step_only(bwrap):
    """The protocol's descriptors are reachable through /proc/self/fd: garbage or a forged message written there
    ends that step (the process with it), never the evaluation; the next step starts a fresh process."""
    forge = """
import os
for fd in os.listdir('/proc/self/fd'):
    try:
        os.write(int(fd), PAYLOAD)
    except OSError:
        pass
"""
    with Sandbox("ctx", "bwrap", StepLimits(wall_s=10, cpu_s=5, memory_mb=256)) as sb:
        for payload in ("b'\\xff\\xfe\\n'", "b'{}\\n'", "b'[1, 2]\\n'"):
            run = sb.run(forge.replace("PAYLOAD", payload), _no_queries)
            assert run.ended and "protocol pipe" in run.reason, run
            assert sb.run("print(len(context))", _no_queries).output.strip() == "3"  # a fresh process


def test_a_huge_print_comes_back_cut_and_quickly(bwrap):
    """Printing 50 million characters ends the step normally with its output cut (not a wall-clock timeout)."""
    with Sandbox("ctx", "bwrap", StepLimits(wall_s=30, cpu_s=30, memory_mb=1024)) as sb:
        run = sb.run("print('x' * 50_000_000)", _no_queries)
    assert not run.timed_out and not run.ended
    assert len(run.output) < 1_100_000 and "more characters printed" in run.output


def test_a_checkout_under_tmp_stays_visible_in_the_sandbox():
    """The private /tmp is mounted before the read-only binds, so the REPL program and interpreter of a checkout or
    virtual environment under /tmp are bound over it (not hidden by it)."""
    argv = sandbox_mod.bwrap_argv("bwrap")
    tmpfs = argv.index("--tmpfs")
    binds = [i for i, a in enumerate(argv) if a == "--ro-bind"]
    assert binds and min(binds) > tmpfs
    assert str(sandbox_mod.CHILD.parent) in {argv[i + 1] for i in binds} or any(
        str(sandbox_mod.CHILD).startswith(argv[i + 1] + "/") for i in binds)


def test_protocol_parsing_of_sloppy_replies():
    """Replies as models write them: CRLF line ends, a block left open (cut short), a fence inside a string of the
    code, and FINAL written before the code (the protocol restated) or naming a variable."""
    assert protocol.code_blocks("```repl\r\nx = 1\r\nFINAL(x)\r\n```\r\n") == ["x = 1\nFINAL(x)\n"]
    assert protocol.final_in_text("done\r\nFINAL(42)\r\n") == ("value", "42")
    assert protocol.code_blocks("```repl\nans = 6*7\nFINAL(ans)\n") == ["ans = 6*7\nFINAL(ans)\n"]
    assert protocol.final_in_text("```repl\nans = 6*7\nFINAL(ans)\n") is None  # the code's FINAL, not the text's
    code = 's = """a ``` inside FINAL(oops)"""\nFINAL(len(s))\n'
    assert protocol.code_blocks(f"```repl\n{code}```") == [code]
    assert protocol.final_in_text(f"```repl\n{code}```") is None
    restated = "I will end with\n    FINAL(answer)\nonce I know it.\n```repl\nprint(context[:10])\n```\n"
    assert protocol.final_in_text(restated) is None
    assert protocol.final_in_text("```repl\nx = 2\n```\nFINAL(x)") == ("value", "x")  # the loop reads x's value
