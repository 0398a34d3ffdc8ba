#!/usr/bin/env bash
# A fleet job on one GPU node through what operators do to it, from the bundle
# unpacked in /opt (as root):
#  1. `anvil serve` (fleet on, a bearer token, lease 10 s) and `anvil worker`;
#     a job of three shapes sent with --detach and followed with `anvil watch`;
#  2. once it has measured, the worker is SIGKILLed and kept down for 30 s
#     (three leases): the job must wait, say so, and go on when the worker
#     is back;
#  3. once it has measured more, the server is SIGKILLed, kept down for 15 s
#     (past the lease) and started again on the same store: the job resumes,
#     takes its earlier run's tasks over and ends;
#  4. the store: the job's state, tasks by kind and state, leases lost,
#     measure tasks done whose result nobody collected (GPU work done for
#     nothing), (candidate, problem) pairs measured twice outside re-checks,
#     measurements and verified rows, evidence against workers, integrity;
#     `anvil workers` and `anvil kernels`;
#  5. a second job cancelled while a measurement is leased: the worker
#     abandons it within a heartbeat (its runner killed), no task stays
#     queued or leased.
#   bench/fleet_outage_node.sh OUT [BUNDLE_TARBALL]
# Writes OUT/outage.txt (the run), OUT/watch.txt (the job's progress as
# streamed), the server's and worker's logs and the store (anvil.db.xz). Runtime: about 9 minutes.
set -uo pipefail
OUT=${1:?usage: fleet_outage_node.sh OUT [BUNDLE_TARBALL]}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
TARBALL=$(realpath "${2:-build/bundle/anvil-bundle.tar.gz}")
W=$(mktemp -d /var/tmp/anvil-outage.XXXXXX); chmod 755 "$W"
(cd /opt && tar xf "$TARBALL") || exit 2
B=/opt/anvil/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
cd "$W" && head -c 32 /dev/urandom | base64 > token
exec > >(tee "$OUT/outage.txt") 2>&1
A=(--server 127.0.0.1:50051 --token-file token)
printf '%s\n' "1 8192 8192 nt" "512 1024 4096 nn" "4096 2048 1024 nt" > shapes.txt

serve() {
  $B/anvil serve --fleet-enabled true --server-listen 127.0.0.1:50051 --auth-token-file token \
    --fleet-lease-seconds 10 --fleet-heartbeat-seconds 2 >> serve.log 2>&1 &
  S=$!
  sleep 3
}
worker() {
  $B/anvil worker --server 127.0.0.1:50051 --token-file token >> worker.log 2>&1 &
  WK=$!
}
# Reads the store without writing it (the server is its one writer).
q() { python3 -c "import sqlite3,sys; db=sqlite3.connect('file:anvil.db?mode=ro', uri=True); print(db.execute(sys.argv[1]).fetchone()[0])" "$1"; }
wait_measured() {  # until at least $1 measurements are stored (at most $2 s)
  for _ in $(seq "$2"); do [ "$(q 'SELECT count(*) FROM measurements')" -ge "$1" ] && return 0; sleep 1; done
  return 1
}
stamp() { echo "[$(date +%T)] $*"; }

stamp "== 1. server, worker, job"
serve; worker; sleep 6
$B/anvil "${A[@]}" optimize --shapes shapes.txt --budget-minutes 4 --detach > job.txt; echo "optimize rc=$?"
JOB=$(tail -1 job.txt); stamp "job $JOB"
$B/anvil "${A[@]}" watch -v "$JOB" > "$OUT/watch.txt" 2>&1 &
WATCH=$!
wait_measured 4 300 || stamp "no measurement after 300 s"

stamp "== 2. the worker SIGKILLed, down 30 s"
kill -9 $WK; wait $WK 2>/dev/null
sleep 30
stamp "job state while no worker is live: $(q "SELECT state FROM jobs WHERE id = '$JOB'")"
worker
N=$(q 'SELECT count(*) FROM measurements'); wait_measured $((N + 4)) 300 || stamp "no progress after the worker came back"
stamp "measurements: $N before the worker came back, $(q 'SELECT count(*) FROM measurements') now"

for _ in $(seq 600); do [ "$(q "SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'leased'")" -ge 1 ] && break; sleep 0.2; done
stamp "== 3. the server SIGKILLed with $(q "SELECT count(*) FROM tasks WHERE state = 'leased'") tasks leased ($(q "SELECT group_concat(id) FROM tasks WHERE kind = 'measure' AND state = 'leased'")), down 15 s"
kill -9 $S; wait $S 2>/dev/null
sleep 15
serve
stamp "job state after the restart: $(q "SELECT state FROM jobs WHERE id = '$JOB'")"
kill $WATCH 2>/dev/null
$B/anvil "${A[@]}" watch -v "$JOB" >> "$OUT/watch.txt" 2>&1
stamp "watch rc=$?"

stamp "== 4. the store"
for sql in "SELECT state || ' ' || error FROM jobs WHERE id = '$JOB'" \
           "SELECT group_concat(kind || ' ' || state || ' ' || n, '; ') FROM (SELECT kind, state, count(*) n FROM tasks GROUP BY 1, 2)" \
           "SELECT sum(expired_leases) FROM tasks" \
           "SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'done' AND NOT collected" \
           "SELECT count(*) FROM (SELECT candidate_id, problem_id, count(*) c FROM measurements WHERE NOT verified GROUP BY 1, 2 HAVING c > 1)" \
           "SELECT count(*) || ' measurements, ' || sum(verified) || ' verified' FROM measurements" \
           "SELECT count(*) FROM worker_evidence" \
           "PRAGMA integrity_check"; do
  echo "$sql"; echo "  -> $(q "$sql")"
done
$B/anvil "${A[@]}" workers
$B/anvil "${A[@]}" kernels

stamp "== 5. cancel a job mid-measurement"
$B/anvil "${A[@]}" optimize --shape 8192x8192x8192 --layout nt --budget-minutes 3 --detach > job2.txt
JOB2=$(tail -1 job2.txt)
for _ in $(seq 300); do [ "$(q "SELECT count(*) FROM tasks WHERE job_id = '$JOB2' AND kind = 'measure' AND state = 'leased'")" -ge 1 ] && break; sleep 0.2; done
stamp "a measure task of $JOB2 is leased; cancelling"
$B/anvil "${A[@]}" cancel "$JOB2"; echo "cancel rc=$?"
for _ in $(seq 100); do grep -q "abandoning" worker.log && break; sleep 0.1; done
stamp "worker: $(grep -c abandoning worker.log) task(s) abandoned"
sleep 3
stamp "tasks of $JOB2: $(q "SELECT group_concat(kind || ' ' || state, ', ') FROM tasks WHERE job_id = '$JOB2'")"

kill -TERM $WK; wait $WK; echo "worker exit $? on SIGTERM"
kill -TERM $S; wait $S; echo "serve exit $? on SIGTERM"
grep -h "waiting\|progressing again\|registering again\|abandon" "$OUT/watch.txt" worker.log | head -20
cp serve.log worker.log "$OUT/" 2>/dev/null
xz -c anvil.db > "$OUT/anvil.db.xz"
