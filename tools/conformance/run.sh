#!/usr/bin/env bash
# Schemathesis against the local stack: every operation of openapi.yaml, bounded by
# tools/conformance/schemathesis.toml. Fails on a 5xx or on any response the spec does not allow.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
venv="$root/.venv/bin"

cargo build -q -p gridline-local
# Where cargo put the binary: target/, or CARGO_TARGET_DIR when that is set.
target="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
log="$target/conformance-server.log"
# One tenant sends everything here: a per-tenant limit far above the run's rate, so the
# handlers are what is exercised (429 is documented on every operation all the same).
GRIDLINE_TENANT_RATE_LIMIT=100000 GRIDLINE_TENANT_BURST_LIMIT=100000 \
  PORT="$port" ENGINE_PORT=0 RUST_LOG=warn "$target/debug/gridline-local" serve --in-memory >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  kill -0 "$server" 2>/dev/null || { echo "the local stack did not start:"; cat "$log"; exit 1; }
  sleep 0.1
done

GRIDLINE_TOKEN="$("$target/debug/gridline-local" token --user conformance --tenant conformance --hours 1)" \
  "$venv/st" --config-file tools/conformance/schemathesis.toml \
  run openapi.yaml --url "http://127.0.0.1:$port" "$@"
