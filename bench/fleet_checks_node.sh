#!/usr/bin/env bash
# The fleet's operator-facing checks on one GPU node, from the bundle unpacked
# in /opt as README.md says (as root):
#  1. README's fleet commands word for word (`coordinator` = 127.0.0.1): `anvil
#     serve` with a bearer token, `anvil worker`, `anvil workers` before and
#     after a one-minute OptimizeKernel job, `--clear-quarantine` on a worker
#     that is not quarantined and on an unknown id, both exits on SIGTERM;
#  2. a worker whose --cache-dir lies below a 0700 directory stops before
#     registering (exit 4, the fix in its log);
#  3. TLS: `anvil serve` with a certificate; a plaintext worker and a plaintext
#     client get nowhere; a worker with --tls-ca registers and a one-minute job
#     from a client with --tls-ca succeeds; the store's tasks and integrity;
#  4. bench/launch_gap.cu (anvil-launch-gap) on two short shapes.
#   bench/fleet_checks_node.sh OUT [CERT_DIR] [BUNDLE_TARBALL]
# CERT_DIR holds cert.pem and key.pem for CN=localhost with subjectAltName
# DNS:localhost,IP:127.0.0.1 (default: made here with openssl). Writes
# OUT/{fleet.txt,launch_gap.txt,gpu.txt} and the servers' and workers' logs.
# Expect: optimize rc=0 twice, worker rc=4 in 2, the plaintext worker still
# retrying at its 15 s timeout (rc=124) and the plaintext client rc=3 in 3,
# tasks all done, integrity ok. Runtime: about 4 minutes (cold build cache).
set -uo pipefail
OUT=${1:?usage: fleet_checks_node.sh OUT [CERT_DIR] [BUNDLE_TARBALL]}
REPO=$(pwd)
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
TARBALL=$(realpath "${3:-build/bundle/anvil-bundle.tar.gz}")
W=$(mktemp -d /var/tmp/anvil-fleet-checks.XXXXXX); chmod 755 "$W"
CERTS=${2:-}
if [ -z "$CERTS" ]; then
  CERTS=$W/certs; mkdir -p "$CERTS"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$CERTS/key.pem" -out "$CERTS/cert.pem" 2>/dev/null || { echo "openssl failed"; exit 2; }
fi
CERTS=$(cd "$CERTS" && pwd)
(cd /opt && tar xzf "$TARBALL") || exit 2
B=/opt/anvil/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
cd "$W" && head -c 32 /dev/urandom | base64 > token
exec > >(tee "$OUT/fleet.txt") 2>&1
A=(--token-file token)

echo "== 1. README fleet commands (plaintext), coordinator = 127.0.0.1"
$B/anvil serve --fleet-enabled true --server-listen 0.0.0.0:50051 --auth-token-file token > serve.log 2>&1 &
S=$!; sleep 3
$B/anvil worker --server 127.0.0.1:50051 --token-file token > worker.log 2>&1 &
WK=$!; sleep 4
$B/anvil --server 127.0.0.1:50051 "${A[@]}" workers; echo "workers rc=$?"
SECONDS=0
timeout 200 $B/anvil --server 127.0.0.1:50051 "${A[@]}" optimize --shape 256x128x128 --layout nn \
  --budget-minutes 1 > opt1.txt 2>&1; echo "optimize rc=$? ${SECONDS}s"; tail -8 opt1.txt
$B/anvil --server 127.0.0.1:50051 "${A[@]}" workers; echo "workers rc=$?"
ID=$($B/anvil --server 127.0.0.1:50051 "${A[@]}" workers | awk 'NR==2{print $1}')
$B/anvil --server 127.0.0.1:50051 "${A[@]}" workers --clear-quarantine "$ID"; echo "clear-quarantine (not quarantined) rc=$?"
$B/anvil --server 127.0.0.1:50051 "${A[@]}" workers --clear-quarantine no-such-worker; echo "clear-quarantine no-such rc=$?"
kill -TERM $WK; wait $WK; echo "worker exit $? on SIGTERM"
kill -TERM $S; wait $S; echo "serve exit $? on SIGTERM"

echo "== 2. cache dir below a 0700 directory"
P=$(mktemp -d /var/tmp/anvil-private.XXXXXX); chmod 700 "$P"
$B/anvil serve --fleet-enabled true --server-listen 127.0.0.1:50052 --auth-token-file token > serve2.log 2>&1 &
S=$!; sleep 3
timeout 60 $B/anvil worker --server 127.0.0.1:50052 --token-file token --cache-dir "$P/artifacts" > worker2.log 2>&1
echo "worker rc=$? (expect 4)"; tail -3 worker2.log
$B/anvil --server 127.0.0.1:50052 "${A[@]}" workers; echo "workers rc=$?"
kill -TERM $S; wait $S

echo "== 3. TLS"
$B/anvil serve --fleet-enabled true --server-listen 127.0.0.1:50053 --auth-token-file token \
  --tls-cert-file "$CERTS/cert.pem" --tls-key-file "$CERTS/key.pem" > serve3.log 2>&1 &
S=$!; sleep 3
timeout 15 $B/anvil worker --server localhost:50053 --token-file token --cache-dir "$W/plain" > worker3p.log 2>&1
echo "plaintext worker rc=$? (expect nonzero)"; tail -2 worker3p.log
$B/anvil worker --server localhost:50053 --token-file token --tls-ca "$CERTS/cert.pem" > worker3.log 2>&1 &
WK=$!; sleep 4
T=(--server localhost:50053 "${A[@]}" --tls-ca "$CERTS/cert.pem")
$B/anvil "${T[@]}" workers; echo "workers rc=$?"
$B/anvil --server localhost:50053 "${A[@]}" workers > plain_client.txt 2>&1
echo "plaintext client rc=$? (expect nonzero)"; tail -1 plain_client.txt
SECONDS=0
timeout 200 $B/anvil "${T[@]}" optimize --shape 512x2048x512 --layout nn --budget-minutes 1 > opt3.txt 2>&1
echo "optimize over TLS rc=$? ${SECONDS}s"; tail -8 opt3.txt
$B/anvil "${T[@]}" workers
kill -TERM $WK; wait $WK; kill -TERM $S; wait $S; echo "serve exit $?"
python3 -c "
import sqlite3; db = sqlite3.connect('anvil.db')
print('tasks', db.execute('SELECT kind, state, count(*), sum(expired_leases) FROM tasks GROUP BY 1, 2').fetchall())
print('integrity', db.execute('PRAGMA integrity_check').fetchone()[0])"
cp serve.log worker.log worker2.log serve3.log worker3.log worker3p.log "$OUT/" 2>/dev/null

exec > >(tee "$OUT/launch_gap.txt") 2>&1
cd "$REPO" && ANVIL_HOME=/opt/anvil . bench/scripts/node.sh "$OUT/node" > /dev/null
"$BENCH_BIN/anvil-launch-gap"; echo "rc=$?"
"$BENCH_BIN/anvil-launch-gap" --m 64 --n 4096 --k 256; echo "rc=$?"
rm -rf "$OUT/node"
