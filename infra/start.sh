#!/usr/bin/env bash
# One command: start a Prefect server and serve every ctxbench deployment (python infra/serve.py). Stop with Ctrl-C.
#   PREFECT_PORT (default 4200), PREFECT_HOST (default 127.0.0.1; 0.0.0.0 to reach the UI from elsewhere)
#   database: SQLite under PREFECT_HOME (default ~/.prefect) unless PREFECT_API_DATABASE_CONNECTION_URL (or
#   PREFECT_SERVER_DATABASE_CONNECTION_URL) is set, e.g. postgresql+asyncpg://user:pass@db:5432/prefect
#   nightly schedule: CTXBENCH_NIGHTLY_CRON (default "0 2 * * *"), CTXBENCH_TZ (default UTC)
#   scale-out: CTXBENCH_DASK_ADDRESS (a Dask scheduler) or CTXBENCH_DASK_WORKERS (a local Dask cluster)
set -euo pipefail
cd "$(dirname "$0")/.."
HOST="${PREFECT_HOST:-127.0.0.1}"
PORT="${PREFECT_PORT:-4200}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
# the server in a session of its own: a Ctrl-C in the terminal reaches this script and serve.py, never the server
# mid-request (its tracebacks); the trap stops it, and Ctrl-C exits 130 (128 + SIGINT) without a traceback
setsid prefect server start --host "$HOST" --port "$PORT" &
SERVER=$!
stop() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
trap stop EXIT
trap 'trap - INT; stop; echo "interrupted" >&2; exit 130' INT
trap 'stop; exit 143' TERM
export PREFECT_API_URL="http://127.0.0.1:${PORT}/api"
python - <<'PY'
import os, sys, time, urllib.request
url = os.environ["PREFECT_API_URL"] + "/health"
try:
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=2).read()
            sys.exit(0)
        except OSError:
            time.sleep(1)
except KeyboardInterrupt:  # Ctrl-C while waiting: the trap says it and exits 130
    sys.exit(130)
sys.exit(f"the Prefect server did not answer at {url} within 300 s")
PY
echo "Prefect UI: http://${HOST}:${PORT}  (serving ctxbench deployments; Ctrl-C stops both)"
python infra/serve.py
