"""Helpers shared by the build benchmarks (bench/build_speed.py, needles_build.py, scitrek_build.py): each build runs
in a fresh Python process (imports, tokenizer loading and caches as a user's build meets them) and reports its own
wall time, the time of one tokenizer pass over every context it wrote (in the same process, after the build), its
peak memory and per-stage times. Cold = an empty ``CTXBENCH_HOME`` cache (token counts, prepared sources); warm = a
rebuild on the cache the cold build left (with another seed unless said otherwise)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mib() -> dict[str, float]:
    """Peak resident memory (MiB) of this process and of its child processes: the build's helper processes
    (ctxbench.core.sidecar: great-expectations and language detection beside the build) summed, each asked for its own
    peak, then stopped; ``children_cpu``: CPU seconds of the finished children (the helpers' work)."""
    helpers: dict[str, float] = {}
    others = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # finished children (not the helpers)
    try:
        from ctxbench.core import sidecar
        # each helper's own peak since its exec (getrusage would report the peak of the build process it was
        # forked from), summed: they run at once
        helpers = sidecar.peak_rss_mib()
        sidecar.stop()
    except ImportError:
        pass
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    kids = others + sum(helpers.values()) if helpers else ch.ru_maxrss / 1024
    return {"self": round(me), "children": round(kids), "sum": round(me + kids),
            "helpers": {k: round(v) for k, v in helpers.items()}, "children_cpu": round(ch.ru_utime + ch.ru_stime, 2)}


@contextmanager
def stage_times(module, names: list[str], out: dict[str, float]):
    """Time the module-level functions ``names`` of ``module`` while the block runs (``out[name]`` wall seconds,
    ``out[name + " cpu"]`` CPU seconds)."""
    orig = {n: getattr(module, n) for n in names if hasattr(module, n)}

    def wrap(n, f):
        def timed(*a, **k):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return f(*a, **k)
            finally:
                out[n] = out.get(n, 0.0) + time.perf_counter() - t0
                out[n + " cpu"] = out.get(n + " cpu", 0.0) + time.process_time() - c0
        return timed

    for n, f in orig.items():
        setattr(module, n, wrap(n, f))
    try:
        yield out
    finally:
        for n, f in orig.items():
            setattr(module, n, f)


class Clock:
    """Wall and CPU seconds (this process, all threads) of a block: ``with Clock() as c: ...; c.wall, c.cpu``."""

    def __enter__(self):
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self._w, time.process_time() - self._c


def tokenizer_pass(tok, texts: list[str]) -> Clock:
    """Wall and CPU seconds of one tokenizer pass (``tok.count``) over ``texts``."""
    with Clock() as c:
        for t in texts:
            tok.count(t)
    return c


def child(script: str, args: list[str], home: Path, extra_env: dict[str, str] | None = None) -> dict:
    """Run ``script ARGS`` in a fresh process with ``CTXBENCH_HOME=home``; returns the JSON object its last output
    line prints."""
    env = {**os.environ, "CTXBENCH_HOME": str(home), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]), **(extra_env or {})}
    r = subprocess.run([sys.executable, script, *args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"benchmark child failed ({' '.join(args)}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def share_conversions(home: Path) -> None:
    """Point ``home``'s PDF-conversion cache at the real one (conversion has its own cache and is not timed)."""
    from ctxbench.convert.pdf import convert_cache_dir

    real = convert_cache_dir()
    real.mkdir(parents=True, exist_ok=True)
    (home / "cache").mkdir(parents=True, exist_ok=True)
    if not (home / "cache" / "convert").exists():
        (home / "cache" / "convert").symlink_to(real, target_is_directory=True)


def line(label: str, r: dict) -> str:
    """One printed row: build time, tokenizer pass, ratio (wall; CPU of the build process, and with its helper
    process's CPU added), peak memory (build process + helper)."""
    helper = r["rss"].get("children_cpu", 0.0)
    return (f"{label:<30} build {r['build_s']:7.2f} s | one tokenizer pass over the {r['contexts']} context(s) "
            f"written ({r['tokens']:,} tokens) {r['pass_s']:6.2f} s | ratio {r['build_s'] / r['pass_s']:5.2f}x "
            f"(CPU time: {r['build_cpu']:.2f} / {r['pass_cpu']:.2f} s = {r['build_cpu'] / r['pass_cpu']:.2f}x; "
            f"with the helper processes' {helper:.2f} s {(r['build_cpu'] + helper) / r['pass_cpu']:.2f}x) | "
            f"peak memory {r['rss']['sum']:,} MiB")


def stages(r: dict) -> str:
    return "    stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.get("stages", {}).items())


def series(script: str, runs: list[tuple[str, list[str]]], describe: Callable[[dict], list[str]] | None = None,
           conversions: bool = False) -> None:
    """Run ``script`` once per ``(label, args)`` in order, each in a fresh process, all on one new (first empty)
    ``CTXBENCH_HOME``; ``{work}`` in an argument is a scratch directory. Prints :func:`line` per run, then the
    lines ``describe(result)`` gives. ``conversions``: share the machine's PDF-conversion cache."""
    home = Path(tempfile.mkdtemp(prefix="ctxbench-bench-"))
    work = Path(tempfile.mkdtemp(prefix="ctxbench-bench-out-"))
    if conversions:
        share_conversions(home)
    try:
        for label, args in runs:
            r = child(script, [x.replace("{work}", str(work)) for x in args], home)
            print(line(label, r))
            for extra in (describe(r) if describe else []):
                print(extra)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
