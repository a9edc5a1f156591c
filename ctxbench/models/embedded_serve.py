"""Serve a GGUF model with llama.cpp's own HTTP server (the C++ ``llama-server`` inside the prebuilt ``xllamacpp``
wheel) until SIGTERM/SIGINT: ``python -m ctxbench.models.embedded_serve --model F.gguf --port N ...``.

:class:`ctxbench.models.local_server.LocalServer` starts it as a child process for the embedded default model (a
process of its own, so a stuck server is killed without touching ctxbench, and it dies with its parent). The
endpoints are llama.cpp's: ``/v1/chat/completions``, ``/v1/models``, ``/props`` (its ``n_ctx`` is the window the
gateway reads), ``/tokenize``, ``/health``.
"""

from __future__ import annotations

import argparse
import signal
import threading


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m ctxbench.models.embedded_serve", description=__doc__)
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--alias", required=True, help="model name the server answers to")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n-ctx", type=int, required=True, help="context window per slot, tokens")
    ap.add_argument("--parallel", type=int, default=1, help="slots (requests decoded together)")
    ap.add_argument("--threads", type=int, required=True, help="threads generating tokens")
    ap.add_argument("--threads-batch", type=int, default=None, help="threads processing the prompt (default: --threads)")
    ap.add_argument("--poll", type=int, default=50, help="busy-wait of idle threads, 0-100 (llama.cpp's --poll)")
    ap.add_argument("--n-batch", type=int, default=512, help="prompt tokens per forward pass")
    ap.add_argument("--flash-attn", choices=("on", "off"), default="off")
    a = ap.parse_args(argv)

    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = a.model
    p.model_alias = {a.alias}
    p.hostnames = [a.host]
    p.port = a.port
    p.n_parallel = a.parallel
    p.n_ctx = a.n_ctx * a.parallel  # split evenly: every slot holds the model's whole window
    p.kv_unified = False
    p.n_batch = p.n_ubatch = a.n_batch
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads_batch or a.threads
    p.cpuparams.poll = p.cpuparams_batch.poll = a.poll
    p.flash_attn_type = (xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED if a.flash_attn == "on"
                         else xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    # the reply exactly as the model wrote it (ctxbench's answer pipeline reads reasoning blocks itself); the window
    # as asked, never shrunk to fit memory; no context shift (a prompt over the window is an error, not truncated)
    p.reasoning_format = xlc.common_reasoning_format.COMMON_REASONING_FORMAT_NONE
    p.fit_params = False
    p.ctx_shift = False
    p.ui = False
    p.endpoint_props = True
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xlc.Server(p)  # loads the model and starts serving on background threads
    print(f"serving {a.alias} on {server.listening_address}", flush=True)
    stop.wait()
    del server


if __name__ == "__main__":
    main()
