#!/usr/bin/env bash
# `anvil report` and the live progress display on a GPU node (issue: see it).
# Unpacks the bundle, runs a short `anvil optimize` on the developers' shapes
# twice into a fresh store: once piped (plain lines, as in CI logs) and once
# under `script` (a terminal: the live display, recorded with its escape
# codes), then writes the job's report and a store-wide report under $1.
#   bench/device_report.sh OUT   (BUDGET=3 minutes per run by default)
# Expect: optimize-plain.log without escape codes; optimize-tty.log with the
# redrawn block; report-job.html and report-gpu.html that open offline.
set -uo pipefail
OUT=${1:-/tmp/anvil-report}
BUDGET=${BUDGET:-3}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
here=$B; source $B/libexec/anvil-env.sh
DB=/tmp/report.db; rm -f $DB $DB-wal $DB-shm
timeout $((BUDGET * 60 + 150)) $B/bin/anvil --db $DB optimize --shapes bench/dev_shapes.txt \
  --budget-minutes $BUDGET > $OUT/optimize-plain.log 2>&1
echo "plain run rc=$?; escape codes in its log: $(grep -c $'\x1b' $OUT/optimize-plain.log)"
TERM=xterm-256color timeout $((BUDGET * 60 + 150)) script -qfec \
  "$B/bin/anvil --db $DB optimize --shapes bench/dev_shapes.txt --budget-minutes $BUDGET" \
  $OUT/optimize-tty.log > /dev/null 2>&1
echo "terminal run rc=$?; redraws recorded: $(grep -c $'\x1b\\[[0-9]*F' $OUT/optimize-tty.log)"
JOB=$(grep -aoE "job job-[0-9]+" $OUT/optimize-tty.log | head -1 | cut -d' ' -f2)
$B/bin/anvil --db $DB report --job "$JOB" --out $OUT/report-job.html
$B/bin/anvil --db $DB report --out $OUT/report-gpu.html
ls -la $OUT
