#!/usr/bin/env bash
# CPU load test of `anvil serve`: starts the server with the evaluator test
# double (anvil_test_server: FakeEvaluator, no GPU) on a fresh store and runs
# serve_bench against it. Writes serve_bench.txt (the table, then the
# coordinator's overhead per candidate from the server's Prometheus counters)
# and the server's log to the folder $1.
#   bench/serve_bench.sh OUT_DIR [serve_bench args...]
set -euo pipefail
out=${1:?usage: bench/serve_bench.sh OUT_DIR [serve_bench args]}; shift
build=${ANVIL_BUILD_DIR:-build}
cmake --build "$build" --target anvil-serve-bench anvil_test_server > /dev/null  # not in `all`
mkdir -p "$out"
tmp=$(mktemp -d)
metrics=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
ANVIL_TEST_CANDIDATES=${ANVIL_TEST_CANDIDATES:-16} ANVIL_TEST_MEASURE_MS=${ANVIL_TEST_MEASURE_MS:-0} \
  "$build/bin/anvil_test_server" --server-listen 127.0.0.1:0 --server-db "$tmp/anvil.db" \
  --server-port-file "$tmp/port" --jobs-max-active-jobs 1024 --metrics-listen "127.0.0.1:$metrics" 2> "$out/serve_bench_server.log" &
pid=$!
for _ in $(seq 300); do [ -s "$tmp/port" ] && break; sleep 0.1; done
{
  echo "# serve_bench $(date -u +%Y-%m-%d) on $(nproc) CPU cores, $(uname -m); server: anvil_test_server"
  echo "# (FakeEvaluator, ANVIL_TEST_CANDIDATES=${ANVIL_TEST_CANDIDATES:-16} per problem, no measure delay)"
  "$build/bin/bench/anvil-serve-bench" --target "127.0.0.1:$(cat "$tmp/port")" "$@"
  curl -s "http://127.0.0.1:$metrics/metrics" | awk '
    $1 == "anvil_coordinator_overhead_seconds_total" { s = $2 }
    $1 == "anvil_coordinator_candidates_total" { n = $2 }
    END { if (n > 0) printf "coordinator overhead: %.3f ms per candidate over %d candidates (every job, all loads)\n", 1000 * s / n, n }'
} | tee "$out/serve_bench.txt"
kill -TERM "$pid"; wait "$pid"
