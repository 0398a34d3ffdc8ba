#!/usr/bin/env bash
# The fleet on a node with two GPUs, from the bundle: does one worker with two
# slots keep both GPUs busy, and does it measure nearly twice what a one-GPU
# worker measures in the same time? Two runs of the same job (three dev shapes,
# BUDGET minutes, a fresh store each), each with a build-only worker beside the
# GPU worker so the GPU slots only measure:
#   one  the GPU worker sees GPU 0 only (CUDA_VISIBLE_DEVICES=0)
#   two  the GPU worker sees both GPUs: two slots, each runner on its own GPU
# Then, with the two-slot worker registered, a job whose problems name a GPU
# model no worker has (`--gpu`) must be refused with UNAVAILABLE (exit 3).
#   bench/fleet_two_gpu.sh OUT [BUNDLE_TARBALL]   (default build/bundle/anvil-bundle.tar.gz)
# Writes OUT/summary.txt (per run: measure tasks done, per slot, per GPU
# busy share from nvidia-smi, measures per minute), the logs, util_*.csv.
# Runtime: about 2 x (BUDGET min + SLACK s); BUDGET=2 SLACK=90 fits 10 minutes.
set -uo pipefail
OUT=${1:?usage: fleet_two_gpu.sh OUT [BUNDLE_TARBALL]}
TARBALL=${2:-build/bundle/anvil-bundle.tar.gz}
BUDGET=${BUDGET:-2}
SLACK=${SLACK:-90}
mkdir -p "$OUT" /opt/anvil && tar -C /opt/anvil -xzf "$TARBALL"
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE
SHAPES=(--shape 256x128x128 --shape 512x2048x512 --shape 8192x128x16384 --layout nn)
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv > $OUT/gpu.txt
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "needs two GPUs" | tee $OUT/summary.txt; exit 2; }

run() {  # run NAME VISIBLE_DEVICES
  local name=$1 visible=$2 work; work=$(mktemp -d /var/tmp/anvil-fleet.XXXXXX); chmod 755 $work
  head -c 32 /dev/urandom | base64 > $work/token
  $B/bin/anvil-server --server-listen 127.0.0.1:0 --server-port-file $work/port --server-db $work/fleet.db \
    --auth-token-file $work/token --fleet-enabled true > $OUT/server_$name.log 2>&1 &
  local server=$!
  for _ in $(seq 100); do [ -s $work/port ] && break; sleep 0.1; done
  local addr=127.0.0.1:$(cat $work/port)
  $B/bin/anvil-worker --server $addr --token-file $work/token --build-only --build-slots 16 \
    --hostname builder --cache-dir $work/build-artifacts > $OUT/builder_$name.log 2>&1 &
  local builder=$!
  CUDA_VISIBLE_DEVICES=$visible $B/bin/anvil-worker --server $addr --token-file $work/token \
    --hostname gpu-node --cache-dir $work/artifacts > $OUT/worker_$name.log 2>&1 &
  local worker=$!
  sleep 3
  nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -lms 500 > $OUT/util_$name.csv &
  local smi=$!
  SECONDS=0
  timeout $((BUDGET * 60 + SLACK)) $B/bin/anvil --server $addr --token-file $work/token --json optimize \
    "${SHAPES[@]}" --budget-minutes $BUDGET > $OUT/optimize_$name.json 2> $OUT/optimize_$name.log
  echo "== $name (CUDA_VISIBLE_DEVICES=$visible): optimize rc=$? in ${SECONDS}s" >> $OUT/summary.txt
  kill $smi
  if [ "$name" = two ]; then
    $B/bin/anvil --server $addr --token-file $work/token optimize --shape 512x512x512 --gpu NO-SUCH-GPU \
      --budget-minutes 1 > $OUT/other_gpu.txt 2>&1
    echo "job for a GPU model no worker has: rc=$? (3 is UNAVAILABLE): $(tail -1 $OUT/other_gpu.txt)" >> $OUT/summary.txt
  fi
  kill -TERM $worker $builder; wait $worker $builder
  kill -TERM $server; wait $server; echo "server exit $?" >> $OUT/summary.txt
  python3 - "$work/fleet.db" "$OUT/util_$name.csv" "$BUDGET" >> $OUT/summary.txt <<'PY'
import collections, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = lambda s: db.execute(s).fetchall()
print("tasks by kind/state:", q("SELECT kind, state, count(*), sum(expired_leases) FROM tasks GROUP BY 1, 2"))
print("measure tasks done per (worker, slot):",
      q("SELECT result_worker, lease_slot, count(*) FROM tasks WHERE kind='measure' AND state='done' GROUP BY 1, 2"))
for row in q("SELECT hostname, state, builds, build_seconds, measures, measure_seconds FROM workers"):
    print("worker %s %s: builds %d (%.0f s), measures %d (%.0f s)" % row)
span = q("SELECT (max(updated_at) - min(created_at)) / 1e3 FROM tasks WHERE kind='measure'")[0][0] or 0
done = q("SELECT count(*) FROM tasks WHERE kind='measure' AND state='done'")[0][0]
print("measures done %d over %.0f s of measure tasks: %.1f per minute" % (done, span, 60 * done / span if span else 0))
busy = collections.defaultdict(list)
for line in open(sys.argv[2]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2 and parts[1].isdigit():
        busy[parts[0]].append(int(parts[1]))
for gpu, u in sorted(busy.items()):
    print("GPU %s: utilization > 0 in %.0f%% of %d samples, mean %.0f%%" %
          (gpu, 100 * sum(x > 0 for x in u) / len(u), len(u), sum(u) / len(u)))
print("integrity:", q("PRAGMA integrity_check")[0][0])
PY
  cp $work/fleet.db $OUT/fleet_$name.db 2>/dev/null
}

run one 0
run two 0,1
cat $OUT/summary.txt
