#!/usr/bin/env bash
# Start a Prefect server (SQLite by default; set PREFECT_API_DATABASE_CONNECTION_URL for PostgreSQL) and serve
# ctxbench's deployments, with one command. Stop with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PREFECT_PORT:-4200}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
prefect server start --host 127.0.0.1 --port "$PORT" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
export PREFECT_API_URL="http://127.0.0.1:${PORT}/api"
for _ in $(seq 1 120); do curl -fs "$PREFECT_API_URL/health" >/dev/null && break; sleep 1; done
python infra/serve.py
