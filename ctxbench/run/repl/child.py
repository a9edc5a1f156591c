"""The process that runs a REPL model's code (``evaluate --mode repl``), started by
:class:`ctxbench.run.repl.sandbox.Sandbox` (under bubblewrap, or bare with ``--sandbox none``).

Standard library only: it imports nothing of ctxbench, so the sandbox needs no package but Python's own. It talks
to its parent in JSON lines over the pipes it was started with (its stdin and stdout, kept on private descriptors;
descriptors 0, 1 and 2 then point at ``/dev/null``, so the model's code cannot write into the protocol by accident).

Messages from the parent: ``{"op": "init", "context": str, "memory_bytes": int, "file_bytes": int}`` (once, first),
``{"op": "exec", "code": str, "cpu_s": float}`` (run code in the one persistent namespace),
``{"op": "var", "name": str}`` (the value of a variable, for ``FINAL_VAR`` written outside code) and
``{"op": "replies", "texts": [str, ...]}`` (the answer to a query). To the parent: ``{"op": "ready"}``,
``{"op": "query", "prompts": [str, ...]}`` (the code called ``llm_query`` or ``llm_query_batched``; the code waits
for the replies), ``{"op": "done", "output": str, "final": str | None}`` (the code ended: its stdout and stderr,
and the answer when it called ``FINAL`` / ``FINAL_VAR``) and ``{"op": "value", "found": bool, "value": str}``.

Limits (POSIX rlimits, set here on this process and inherited by anything it starts): address space
(``memory_bytes``), the size of a file it writes (``file_bytes``) and, before each ``exec``, CPU time: the CPU used
so far plus ``cpu_s`` (past it the kernel sends SIGXCPU, which ends the process; the parent reports the step as
timed out). The parent also keeps a wall-clock limit per step.
"""

import contextlib
import io
import json
import os
import resource
import sys
import traceback


OUTPUT_CAP = 1_000_000  # characters of a step's output sent to the parent


class _Final(BaseException):
    """Raised by FINAL / FINAL_VAR to end the code (a BaseException: ``except Exception`` in the code does not
    swallow it)."""


def _text(value):
    """An answer as text: strings as they are, other values as JSON where they can be (lists, dicts, numbers),
    else their ``str``."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def main():
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8", newline="\n")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sys.stdin = io.StringIO("")

    def send(msg):
        proto_out.write(json.dumps(msg) + "\n")  # ASCII escapes: a lone surrogate the code printed travels too
        proto_out.flush()

    def receive():
        line = proto_in.readline()
        if not line:
            os._exit(0)  # the parent is gone
        return json.loads(line)

    init = receive()
    for lim, n in ((resource.RLIMIT_AS, init.get("memory_bytes")), (resource.RLIMIT_FSIZE, init.get("file_bytes"))):
        if n:
            resource.setrlimit(lim, (int(n), int(n)))
    state = {"final": None}

    def ask(prompts):
        send({"op": "query", "prompts": [str(p) for p in prompts]})
        msg = receive()
        return list(msg.get("texts") or [])

    def llm_query(prompt):
        """Ask the sub-model one prompt; returns its reply (text)."""
        return ask([prompt])[0]

    def llm_query_batched(prompts):
        """Ask the sub-model several prompts at once; returns their replies in order."""
        return ask(list(prompts))

    def FINAL(value):  # noqa: N802 - the protocol's name
        """End with ``value`` as the answer."""
        state["final"] = _text(value)
        raise _Final()

    def FINAL_VAR(name):  # noqa: N802 - the protocol's name
        """End with the variable ``name`` (its name as a string, or the value itself) as the answer; a name the
        REPL does not hold ends nothing (said in the output)."""
        if isinstance(name, str) and name.strip().isidentifier():
            if name.strip() not in namespace:
                print(f"FINAL_VAR({name!r}): no variable {name.strip()!r} in the REPL")
                return
            state["final"] = _text(namespace[name.strip()])
        else:
            state["final"] = _text(name)
        raise _Final()

    namespace = {"__name__": "__repl__", "context": init["context"], "llm_query": llm_query,
                 "llm_query_batched": llm_query_batched, "FINAL": FINAL, "FINAL_VAR": FINAL_VAR}
    send({"op": "ready"})
    while True:
        msg = receive()
        if msg["op"] == "var":
            name = msg["name"]
            found = name in namespace and not callable(namespace[name])
            send({"op": "value", "found": found, "value": _text(namespace[name]) if found else ""})
            continue
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = used.ru_utime + used.ru_stime
        limit = int(cpu + float(msg.get("cpu_s") or 60)) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
        state["final"] = None
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                exec(compile(msg["code"], "<repl>", "exec"), namespace)  # noqa: S102 - the sandbox's purpose
            except _Final:
                pass
            except BaseException:  # noqa: BLE001 - the model's error is its output (SystemExit included)
                traceback.print_exc(limit=-3)
        out = buf.getvalue()
        if len(out) > OUTPUT_CAP:  # the parent shows a few thousand characters; a huge print need not cross
            out = out[:OUTPUT_CAP] + f"\n[... {len(out) - OUTPUT_CAP:,} more characters printed]"
        send({"op": "done", "output": out, "final": state["final"]})


if __name__ == "__main__":
    main()
