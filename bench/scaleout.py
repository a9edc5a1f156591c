"""Scale-out of the evaluate flow on existing engines, measured with processes (issue 16, target 4). Prints figures;
asserts nothing.

One build of ``--n`` instances is evaluated against a local OpenAI-compatible server answering after ``--latency``
seconds (tests/fakeserver.py), by two worker processes sharing one response cache (claims: each call made once),
``--concurrency`` calls in flight each, so the latency bound is 2 × concurrency / latency calls/s:

1. Dask: a ``dask scheduler`` and two ``dask worker`` processes (one thread each), and the ``evaluate`` flow with
   ``workers: 2`` run with ``CTXBENCH_DASK_ADDRESS`` pointing at the scheduler (prefect-dask's DaskTaskRunner): the
   flow's two evaluation tasks run in the two worker processes.
2. Prefect: a local Prefect server, a process work pool (``prefect work-pool create --type process``), the
   ``evaluate`` flow deployed to it from this checkout, two ``prefect worker start --limit 1`` processes pulling from
   it, and two flow runs of the deployment created at once (each ``workers: 1``): each worker runs one, in a
   process of its own.

Printed per engine: calls/s from the first call to the last answer (the server's clock) and from the moment the
work was handed over (flow started / flow runs created) to the end, each against the bound; the calls each worker
made; requests the server saw more than once (must be 0) and calls it saw in all (must be ``--n``).

First (issue 36), the figures of ``bench/scaleout_workers.py``: one process, N Dask workers sharded by context
(``evaluate --workers N``), the ``evaluate`` flow with ``workers: N`` on a local Dask cluster, and two replicas with
prefix sharding (prefix-cache hits over the most possible), on a latency-bound scripted server (options
``--sharded-*``; ``--skip-sharded`` leaves them out).

    python bench/scaleout.py [--n 960] [--concurrency 8] [--latency 0.2] [--skip-dask] [--skip-prefect]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]

import scaleout_workers  # noqa: E402  (bench/, on the path above)

MODEL = "openai/bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(root: Path, **extra: str) -> dict[str, str]:
    """The environment of every process of one engine: this checkout first on the path, the engine's own response
    cache, no Dask or Prefect settings from outside, Prefect's analytics off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXBENCH_DASK", "PREFECT_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                         if p]]),
               CTXBENCH_HOME=str(root / "home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_HOME=str(root / "prefect-home"), PREFECT_LOGGING_LEVEL="WARNING", **extra)
    return env


def spawn(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    f = open(log, "wb")
    try:
        return subprocess.Popen(args, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        f.close()


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()


def wait_until(cond, timeout: float, what: str, logs: list[Path] = ()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in logs if p.exists())
    raise SystemExit(f"{what}: not within {timeout:.0f} s\n{tails}")


def start_prefect_server(root: Path, procs: list) -> str:
    """A local Prefect server (SQLite under the engine's PREFECT_HOME); returns its API URL."""
    import urllib.request

    port = free_port()
    log = root / "prefect-server.log"
    procs.append(spawn(["prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                       env_for(root), log))
    api = f"http://127.0.0.1:{port}/api"

    def up() -> bool:
        try:
            return urllib.request.urlopen(api + "/health", timeout=2).status == 200
        except OSError:
            return False

    wait_until(up, 300, "the Prefect server did not answer", [log])
    return api


def result(srv, n: int, handed: float, end: float, per_worker: list[int], bound: float) -> dict:
    first, last = srv.call_window() or (handed, end)
    counts = srv.call_counts()
    calls = srv.count
    return {"calls": calls, "distinct": len(counts), "repeated": sum(c - 1 for c in counts.values() if c > 1),
            "window_s": last - first, "rate": calls / (last - first), "total_s": end - handed,
            "rate_total": calls / (end - handed), "bound": bound, "per_worker": per_worker, "n": n}


def show(name: str, r: dict) -> None:
    print(f"{name}: {r['calls']} calls ({r['distinct']} distinct of {r['n']}, repeated {r['repeated']}); "
          f"first call to last answer {r['window_s']:.2f} s = {r['rate']:.1f} calls/s = {r['rate'] / r['bound']:.2f} "
          f"of the bound {r['bound']:.0f}; handed over to done {r['total_s']:.2f} s = {r['rate_total']:.1f} calls/s "
          f"= {r['rate_total'] / r['bound']:.2f}; calls per worker {r['per_worker']}", flush=True)


FLOW = """
import json, sys, time
from ctxbench.run.evaluate import EvalConfig
from pipelines.flows import evaluate_flow
build, url, conc = sys.argv[1], sys.argv[2], int(sys.argv[3])
print('READY', time.time(), flush=True)
out = evaluate_flow(build, EvalConfig(model='%s', base_url=url, concurrency=conc), workers=2)
print('SUMMARY ' + json.dumps({'end': time.time(), 'workers': [p['calls'] for p in out['workers']],
                              'status': out['status']}), flush=True)
""" % MODEL


def run_dask(root: Path, n: int, conc: int, srv) -> dict:
    from eval_throughput import make_build

    root.mkdir(parents=True, exist_ok=True)
    build = make_build(root / "build", n)
    procs: list[subprocess.Popen] = []
    try:
        api = start_prefect_server(root, procs)
        sched_file = root / "scheduler.json"
        env = env_for(root, PREFECT_API_URL=api)
        procs.append(spawn(["dask", "scheduler", "--scheduler-file", str(sched_file), "--host", "127.0.0.1",
                            "--no-dashboard"], env, root / "dask-scheduler.log"))
        wait_until(sched_file.exists, 120, "the Dask scheduler did not start", [root / "dask-scheduler.log"])
        for i in range(2):
            procs.append(spawn(["dask", "worker", "--scheduler-file", str(sched_file), "--nworkers", "1",
                                "--nthreads", "1", "--no-dashboard", "--memory-limit", "0", "--name", f"w{i}"],
                               env, root / f"dask-worker-{i}.log"))
        from distributed import Client

        with Client(scheduler_file=str(sched_file), timeout=120) as c:
            c.wait_for_workers(2, timeout=300)
            addr = c.scheduler.address
        srv.reset_counts()
        log = root / "flow.log"
        flow = spawn([sys.executable, "-c", FLOW, str(build), srv.base_url, str(conc)],
                     env_for(root, PREFECT_API_URL=api, CTXBENCH_DASK_ADDRESS=addr), log)
        procs.append(flow)
        wait_until(lambda: "READY" in log.read_text(errors="replace") or flow.poll() is not None, 300,
                   "the flow process did not start", [log])
        handed = float(re.search(r"READY (\S+)", log.read_text()).group(1))
        rc = flow.wait(timeout=1800)
        text = log.read_text(errors="replace")
        m = re.search(r"^SUMMARY (.*)$", text, re.M)
        if rc != 0 or not m:
            raise SystemExit(f"the evaluate flow failed (rc {rc}):\n{text[-4000:]}")
        s = json.loads(m.group(1))
        return result(srv, n, handed, s["end"], s["workers"], 2 * conc / srv.latency_s)
    finally:
        stop(procs)


DEPLOY = """
import sys
from prefect import flow
src = flow.from_source(source=sys.argv[1], entrypoint='pipelines/flows.py:evaluate_flow')
# results persisted (to the local path the benchmark reads): each flow run's summary gives its worker's calls
src.deploy(name='scaleout', work_pool_name=sys.argv[2], job_variables={'env': {
    'CTXBENCH_HOME': sys.argv[3], 'PYTHONPATH': sys.argv[1], 'PREFECT_RESULTS_PERSIST_BY_DEFAULT': 'true',
    'PREFECT_LOCAL_STORAGE_PATH': sys.argv[4]}}, print_next_steps=False)
"""


def run_prefect(root: Path, n: int, conc: int, srv) -> dict:
    import asyncio

    from eval_throughput import make_build

    root.mkdir(parents=True, exist_ok=True)
    build = make_build(root / "build", n)
    procs: list[subprocess.Popen] = []
    try:
        api = start_prefect_server(root, procs)
        env = env_for(root, PREFECT_API_URL=api, PREFECT_WORKER_QUERY_SECONDS="1",
                      PREFECT_WORKER_PREFETCH_SECONDS="0")
        pool = "ctxbench-bench"
        subprocess.run(["prefect", "work-pool", "create", pool, "--type", "process", "--overwrite"], cwd=REPO,
                       env=env, check=True, capture_output=True)
        r = subprocess.run([sys.executable, "-c", DEPLOY, str(REPO), pool, str(root / "home"), str(root / "results")],
                           cwd=REPO, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"deploying the evaluate flow failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
        for i in range(2):
            procs.append(spawn(["prefect", "worker", "start", "--pool", pool, "--type", "process", "--limit", "1",
                                "--name", f"bench-worker-{i}"], env, root / f"prefect-worker-{i}.log"))
        os.environ["PREFECT_API_URL"] = api  # this process creates and watches the flow runs

        async def workers_online() -> int:
            from prefect.client.orchestration import get_client

            async with get_client() as client:
                return sum(1 for w in await client.read_workers_for_work_pool(pool) if w.status == "ONLINE")

        wait_until(lambda: asyncio.run(workers_online()) >= 2, 300, "the Prefect workers did not come online",
                   [root / f"prefect-worker-{i}.log" for i in range(2)])
        from prefect.deployments import run_deployment

        srv.reset_counts()
        params = {"build": str(build), "cfg": {"model": MODEL, "base_url": srv.base_url, "concurrency": conc},
                  "workers": 1}
        handed = time.time()
        runs = [run_deployment("evaluate/scaleout", parameters=params, timeout=0) for _ in range(2)]

        async def states() -> list:
            from prefect.client.orchestration import get_client

            async with get_client() as client:
                return [await client.read_flow_run(r.id) for r in runs]

        final: list = []

        def done() -> bool:
            final[:] = asyncio.run(states())
            return all(fr.state is not None and fr.state.is_final() for fr in final)

        wait_until(done, 1800, "the flow runs did not finish", [root / f"prefect-worker-{i}.log" for i in range(2)])
        end = max(fr.end_time.timestamp() for fr in final)
        bad = [fr.state.name for fr in final if not fr.state.is_completed()]
        if bad:
            raise SystemExit(f"flow runs ended {bad}:\n" + "\n".join(
                (root / f"prefect-worker-{i}.log").read_text(errors="replace")[-3000:] for i in range(2)))
        per = []
        for fr in final:
            res = asyncio.run(_result_of(fr))
            per.append(res["calls"] if isinstance(res, dict) else None)
        return result(srv, n, handed, end, per, 2 * conc / srv.latency_s)
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        stop(procs)


async def _result_of(fr):
    try:
        return await fr.state.aresult(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - a result that cannot be read: the count is then unknown
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=960)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--skip-prefect", action="store_true")
    ap.add_argument("--skip-sharded", action="store_true", help="leave out bench/scaleout_workers.py's figures")
    scaleout_workers.add_arguments(ap, "sharded-")
    a = ap.parse_args()
    from fakeserver import FakeOpenAIServer

    if not a.skip_sharded:
        scaleout_workers.measure_all(a.sharded_contexts, a.sharded_questions, a.sharded_concurrency,
                                     a.sharded_workers, a.sharded_latency, a.sharded_prefill, a.sharded_skip_flow)
        os.environ.pop("CTXBENCH_DASK_WORKERS", None)

    print(f"{a.n} instances, 2 worker processes x {a.concurrency} in flight, server latency {a.latency * 1000:.0f} ms; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="ctxbench-scaleout-"))
    try:
        with FakeOpenAIServer(latency_s=a.latency) as srv:
            if not a.skip_dask:
                show("Dask (scheduler + 2 `dask worker` processes, evaluate flow workers=2)",
                     run_dask(root / "dask", a.n, a.concurrency, srv))
            if not a.skip_prefect:
                show("Prefect (process work pool, 2 `prefect worker` processes, 2 flow runs of one deployment)",
                     run_prefect(root / "prefect", a.n, a.concurrency, srv))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
