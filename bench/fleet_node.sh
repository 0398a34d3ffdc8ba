#!/usr/bin/env bash
# The fleet on one GPU node, from the bundle: `anvil serve --fleet-enabled`
# and one `anvil worker` on loopback with a bearer token, then OptimizeKernel
# from the CLI (`anvil --server`) for three dev shapes; the same three shapes
# by a local `anvil optimize` for comparison; the fleet's task and worker
# tables; the server's /metrics and /status a minute into the job, and its exit
# on SIGTERM; the load program. Everything lands in the folder given as $1.
#   bench/fleet_node.sh OUT [BUNDLE_TARBALL]   (default build/bundle/anvil-bundle.tar.gz)
# Expect: the job SUCCEEDED, every task done (no queued/leased left), the
# worker alive (not quarantined) with measures > 0, and the fleet's best times
# within run-to-run noise (a few %) of the local run's for each shape. The jobs
# run the proposers local `anvil optimize` runs (server/proposers/factory.h).
# Runtime: about 2 x (BUDGET min + SLACK s) plus the load program (FLEET_BENCH=0
# skips it): BUDGET=2 SLACK=90 FLEET_BENCH=0 fits a 10-minute command.
set -uo pipefail
OUT=${1:?usage: fleet_node.sh OUT [BUNDLE_TARBALL]}
TARBALL=${2:-build/bundle/anvil-bundle.tar.gz}
BUDGET=${BUDGET:-3}
SLACK=${SLACK:-150}   # seconds beyond each budget for the verify stage
mkdir -p "$OUT" /opt/anvil && tar -C /opt/anvil -xzf "$TARBALL"
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE
WORK=$(mktemp -d /var/tmp/anvil-fleet.XXXXXX); chmod 755 $WORK  # the sandboxed runner (another uid) reads artifacts below it
head -c 32 /dev/urandom | base64 > $WORK/token
SHAPES=(--shape 256x128x128 --shape 512x2048x512 --shape 8192x128x16384 --layout nn)
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm --format=csv > $OUT/gpu.txt

$B/bin/anvil-server --server-listen 127.0.0.1:0 --server-port-file $WORK/port --server-db $WORK/fleet.db \
  --auth-token-file $WORK/token --fleet-enabled true --fleet-lease-seconds 60 \
  --metrics-listen 127.0.0.1:19464 > $OUT/server.log 2>&1 &
SERVER=$!
for _ in $(seq 100); do [ -s $WORK/port ] && break; sleep 0.1; done
ADDR=127.0.0.1:$(cat $WORK/port)
$B/bin/anvil-worker --server $ADDR --token-file $WORK/token --cache-dir $WORK/artifacts > $OUT/worker.log 2>&1 &
WORKER=$!
sleep 3
(sleep 60; python3 - $WORK/token $OUT <<'PY'
import sys, urllib.parse, urllib.request
token = urllib.parse.quote(open(sys.argv[1]).read().strip())
for path, name in (("/metrics", "metrics.txt"), ("/status.json?token=" + token, "status.json"),
                   ("/status?token=" + token, "status.html")):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:19464" + path, timeout=10).read()
        open(f"{sys.argv[2]}/{name}", "wb").write(body)
    except Exception as e:
        print(f"GET {path.split('?')[0]}: {e}", file=open(f"{sys.argv[2]}/{name}.error", "w"))
PY
) &
SECONDS=0
timeout $((BUDGET * 60 + SLACK)) $B/bin/anvil --server $ADDR --token-file $WORK/token --json optimize \
  "${SHAPES[@]}" --budget-minutes $BUDGET > $OUT/fleet_optimize.json 2> $OUT/fleet_optimize.log
echo "fleet optimize rc=$? in ${SECONDS}s" | tee $OUT/summary.txt
kill -TERM $WORKER; wait $WORKER
kill -TERM $SERVER; wait $SERVER; echo "server exit $? on SIGTERM" | tee -a $OUT/summary.txt
python3 - "$WORK/fleet.db" >> $OUT/summary.txt <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print("tasks by kind/state:", db.execute("SELECT kind, state, count(*), sum(expired_leases) FROM tasks GROUP BY 1, 2").fetchall())
print("workers:", db.execute("SELECT hostname, gpus, versions, state, quarantine_reason, builds, build_seconds, measures, measure_seconds FROM workers").fetchall())
print("integrity:", db.execute("PRAGMA integrity_check").fetchone()[0])
PY
SECONDS=0
timeout $((BUDGET * 60 + SLACK)) $B/bin/anvil --db $WORK/local.db --json optimize "${SHAPES[@]}" \
  --budget-minutes $BUDGET > $OUT/local_optimize.json 2> $OUT/local_optimize.log
echo "local optimize rc=$? in ${SECONDS}s" | tee -a $OUT/summary.txt
$B/bin/anvil --db $WORK/fleet.db kernels > $OUT/fleet_kernels.txt 2>&1
$B/bin/anvil --db $WORK/local.db kernels > $OUT/local_kernels.txt 2>&1
[ "${FLEET_BENCH:-1}" = 1 ] && [ -x $B/libexec/bench/anvil-fleet-bench ] && timeout 240 $B/libexec/bench/anvil-fleet-bench --dir $WORK/bench > $OUT/fleet_bench.txt 2>&1
cp $WORK/fleet.db $WORK/local.db $OUT/ 2>/dev/null
cat $OUT/summary.txt $OUT/fleet_kernels.txt $OUT/local_kernels.txt
