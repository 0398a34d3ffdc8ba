#!/usr/bin/env bash
# Before and after on one node with two GPUs: run_throughput.sh with the
# BEFORE bundle on GPU 0 and the first half of the cores, and with the AFTER
# bundle on GPU 1 and the second half, at the same time (each side a node of
# half the cores, each with its own empty build cache and store); then, once
# the before side is done, the AFTER bundle's batch runner GPU tests on GPU 0.
# Results: OUT_DIR/{before,after}/ (run_throughput.sh's files, the store
# included), OUT_DIR/{before,after}.txt (their output),
# OUT_DIR/batch-gpu-test.txt and OUT_DIR/gpu.txt.
#   BEFORE=/opt/before/anvil AFTER=/opt/after/anvil BUDGET=15 SLACK=300 AGREE=6 \
#     bench/scripts/run_throughput_ab.sh OUT_DIR
# BEFORE and AFTER are unpacked bundles' anvil/ folders. BUILD_JOBS_BEFORE and
# BUILD_JOBS_AFTER set each side's nvcc jobs (default: its cores less two);
# AGREE applies to the after side. Write-ups:
# bench/results/*-search-throughput-*.md. Changes no clocks and never resets
# a GPU.
set -uo pipefail
OUT=${1:?usage: BEFORE=DIR AFTER=DIR $0 OUT_DIR}
: "${BEFORE:?set BEFORE to the before bundle anvil folder}" "${AFTER:?set AFTER to the after bundle anvil folder}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
scripts=$(cd "$(dirname "$0")" && pwd)
cores=$(nproc)
half=$((cores / 2))
nvidia-smi --query-gpu=index,name,clocks.max.sm,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
echo "cores: $cores" >> "$OUT/gpu.txt"
cache=$(mktemp -d /var/tmp/anvil-ab-cache-XXXXXX)
chmod 755 "$cache"
taskset -c "0-$((half - 1))" env CUDA_VISIBLE_DEVICES=0 ANVIL_HOME="$BEFORE" ANVIL_CACHE="$cache/before" \
  BUILD_JOBS="${BUILD_JOBS_BEFORE:-$((half - 2))}" AGREE=0 \
  "$scripts/run_throughput.sh" "$OUT/before" > "$OUT/before.txt" 2>&1 &
before=$!
taskset -c "$half-$((cores - 1))" env CUDA_VISIBLE_DEVICES=1 ANVIL_HOME="$AFTER" ANVIL_CACHE="$cache/after" \
  BUILD_JOBS="${BUILD_JOBS_AFTER:-$((half - 2))}" \
  "$scripts/run_throughput.sh" "$OUT/after" > "$OUT/after.txt" 2>&1 &
after=$!
wait "$before"
taskset -c "0-$((half - 1))" env CUDA_VISIBLE_DEVICES=0 "$AFTER/libexec/tests/batch_gpu_test" \
  > "$OUT/batch-gpu-test.txt" 2>&1
echo "batch_gpu_test exit $?" >> "$OUT/batch-gpu-test.txt"
wait "$after"
rm -rf "$cache"
tail -n 12 "$OUT/before/throughput.txt" "$OUT/after/throughput.txt"
grep -E "PASSED|FAILED|exit" "$OUT/batch-gpu-test.txt"
