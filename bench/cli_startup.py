"""Start-up time of the ``ctxbench`` command (issue 36, "CI stays quick"): wall and CPU seconds of
``python -m ctxbench.cli --help``, ``--version`` (a usage error: there is no such option), ``build holobench --help``
and ``evaluate --help``, and the cumulative import time of ``ctxbench.cli`` from ``python -X importtime``. CPU is the
child's user + system time (``resource.getrusage(RUSAGE_CHILDREN)``), which holds better than wall time on a loaded
machine. With several ``--tree`` (checkouts of ctxbench, e.g. one before a change, exported with ``git archive``)
the runs are interleaved, so each comparison is made in the same minutes. Prints figures; asserts nothing.

    python bench/cli_startup.py [--tree DIR ...] [--repeat 3]

Default tree: this checkout.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = [["--help"], ["--version"], ["build", "holobench", "--help"], ["evaluate", "--help"]]


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "100", "NO_COLOR": "1"}


def timed(tree: Path, args: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one ``python -m ctxbench.cli ARGS`` run in ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ctxbench.cli", *args], cwd=tree, env=_env(tree),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_time(tree: Path) -> float:
    """Cumulative seconds of ``import ctxbench.cli`` as ``-X importtime`` reports it."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import ctxbench.cli"], cwd=tree, env=_env(tree),
                       capture_output=True, text=True)
    line = next(ln for ln in reversed(r.stderr.splitlines()) if ln.rstrip().endswith("| ctxbench.cli"))
    return int(line.split("|")[1]) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", type=Path, help="a ctxbench checkout (repeatable)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    trees = [t.resolve() for t in (a.tree or [Path(__file__).resolve().parents[1]])]
    res: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(a.repeat):
        for args in CASES:
            for t in trees:  # interleaved: each tree's runs see the same load
                res.setdefault((str(t), " ".join(args)), []).append(timed(t, args))
        for t in trees:
            res.setdefault((str(t), "import ctxbench.cli (-X importtime)"), []).append((import_time(t), float("nan")))
    for (tree, what), xs in res.items():
        walls, cpus = [x[0] for x in xs], [x[1] for x in xs]
        cpu = "" if all(c != c for c in cpus) else (f"; CPU median {statistics.median(cpus):.2f} s ("
                                                     + ", ".join(f"{c:.2f}" for c in cpus) + ")")
        print(f"{tree}: {what}: wall median {statistics.median(walls):.2f} s ("
              + ", ".join(f"{w:.2f}" for w in walls) + ")" + cpu)


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
