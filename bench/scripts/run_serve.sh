#!/usr/bin/env bash
# `anvil serve` against local `anvil optimize` on a GPU node, from one store
# snapshot: (a) `anvil serve` with this node's GPU and `anvil --server
# optimize` on the developers' shapes (bench/configs/dev_shapes.txt) for
# BUDGET minutes; (b) local `anvil optimize`, same shapes, budget and
# snapshot (each run on its own copy of the store and its own empty build
# cache, so neither reuses the other's work). Then a table of both jobs'
# per-problem figures (graph-cold speedups over the best baseline) and the
# coordinator's overhead per candidate as each job measured it (the job's
# "coordinator overhead" line: its thread's time outside the evaluator and
# the proposers, over the candidates it sent), with the server's Prometheus
# counters beside it. Results under OUT_DIR: serve_optimize.log,
# local_optimize.log, server.log, metrics.txt, *_kernels.json (each job's
# verified winners), compare.txt (the table).
#   BUDGET=10 DB=bench/state/2026-11-22-dev-search-h100.db.xz bench/scripts/run_serve.sh OUT_DIR
# SLACK: seconds allowed beyond each budget for the verify stage (180: on the H100 the
# verify stage of 18 problems took about 90 s). The
# whole script takes about 2 x (BUDGET min + the verify stage) + a minute:
# BUDGET=3 SLACK=90 fits a 10-minute command. PART=serve, then PART=local
# with the same OUT_DIR, runs the halves as two commands (each BUDGET min +
# the verify stage; the second prints the table): BUDGET=7 fits 10 minutes each.
# Expect: both jobs SUCCEEDED; per-problem speedups of the served job equal
# to the local job's within run-to-run noise (a few %; geomeans within ~3%);
# coordinator overhead of a few ms per candidate, the same in both modes.
. "$(dirname "$0")/node.sh"
BUDGET=${BUDGET:-10}
SLACK=${SLACK:-180}
PART=${PART:-both}
DB=${DB:-}
SHAPES=$BENCH/configs/dev_shapes.txt
# Every user must reach it: the sandbox's jobs read the build caches below it.
WORK=$(mktemp -d /var/tmp/anvil-serve.XXXXXX) && chmod 755 "$WORK" || exit 1
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT

# snapshot DEST: the store snapshot DB (.xz unpacked), or an empty store.
snapshot() {
  if [[ $DB == *.xz ]]; then
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
      "$DB" "$1"
  elif [ -n "$DB" ]; then
    cp "$DB" "$1"
  fi
}

# (a) the server with this node's GPU, and the CLI as its client.
served() {
  snapshot "$WORK/serve.db" || exit 1
  local metrics_port job
  metrics_port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  mkdir -p "$WORK/cache-serve"
  # anvil-server: `anvil serve` under its own name, beside anvil in the bundle.
  ANVIL_CACHE=$WORK/cache-serve "$(dirname "$ANVIL")/anvil-server" --server-db "$WORK/serve.db" --server-listen 127.0.0.1:0 \
    --server-port-file "$WORK/port" --metrics-listen "127.0.0.1:$metrics_port" > "$OUT/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 300); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  [ -s "$WORK/port" ] || { echo "anvil serve did not start:"; tail -20 "$OUT/server.log"; exit 1; }
  local addr=127.0.0.1:$(cat "$WORK/port")
  # Jobs the snapshot left unfinished resume in a server; local mode does not
  # resume them, so they are cancelled before the comparison starts.
  for state in running queued; do
    for j in $("$ANVIL" --server "$addr" jobs --state "$state" | grep -oE "job-[0-9]+" | sort -u); do
      "$ANVIL" --server "$addr" cancel "$j" >> "$OUT/serve_rc.txt" 2>&1
    done
  done
  SECONDS=0
  timeout $((BUDGET * 60 + SLACK)) "$ANVIL" --server "$addr" optimize --shapes "$SHAPES" \
    --budget-minutes "$BUDGET" --request-id "run-serve-$(date +%s)" > "$OUT/serve_optimize.log" 2>&1
  echo "served optimize rc=$? in ${SECONDS}s" | tee -a "$OUT/serve_rc.txt"
  "$ANVIL" --server "$addr" jobs > "$OUT/serve_jobs.txt" 2>&1
  job=$(grep -oE "job-[0-9]+" "$OUT/serve_optimize.log" | head -1)
  "$ANVIL" --server "$addr" --json kernels --job "$job" > "$OUT/serve_kernels.json" 2>> "$OUT/serve_rc.txt"
  curl -s -m 10 "http://127.0.0.1:$metrics_port/metrics" > "$OUT/metrics.txt"  # last: the job's lines hold the figure too
  kill -TERM "$SERVER"; wait "$SERVER"; echo "anvil serve exit $? after SIGTERM" >> "$OUT/serve_rc.txt"
  SERVER=
}

# (b) local mode, the same budget from the same snapshot.
local_run() {
  snapshot "$WORK/local.db" || exit 1
  local job
  mkdir -p "$WORK/cache-local"
  SECONDS=0
  ANVIL_CACHE=$WORK/cache-local timeout $((BUDGET * 60 + SLACK)) "$ANVIL" --db "$WORK/local.db" optimize \
    --shapes "$SHAPES" --budget-minutes "$BUDGET" > "$OUT/local_optimize.log" 2>&1
  echo "local optimize rc=$? in ${SECONDS}s" | tee "$OUT/local_rc.txt"
  job=$(grep -oE "job-[0-9]+" "$OUT/local_optimize.log" | head -1)
  "$ANVIL" --db "$WORK/local.db" --json kernels --job "$job" > "$OUT/local_kernels.json" 2>> "$OUT/local_rc.txt"
}

case $PART in
  serve) served ;;
  local) local_run ;;
  both) served; local_run ;;
  *) echo "PART is serve, local or both" >&2; exit 2 ;;
esac
if [ -s "$OUT/serve_kernels.json" ] && [ -s "$OUT/local_kernels.json" ]; then
  cat "$OUT/serve_rc.txt" "$OUT/local_rc.txt" > "$OUT/compare.txt"
  python3 "$BENCH/scripts/serve_compare.py" "$OUT/serve_kernels.json" "$OUT/local_kernels.json" \
    "$OUT/serve_optimize.log" "$OUT/local_optimize.log" "$OUT/metrics.txt" | tee -a "$OUT/compare.txt"
fi
