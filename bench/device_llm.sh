#!/usr/bin/env bash
# The LLM proposer on the GPU node (tests/llm_gpu_test from the bundle):
#  - the counter profiles of three seed configurations and the hint each gave:
#    02_mma_sync's default tiles on 16x4096x4096 (32 CTAs: imbalance),
#    03_wgmma_tma's swap-AB 64x16 stream there (memory), 03_wgmma_tma on
#    8192^3 (compute);
#  - a job on three dev shapes (16x4096x4096, 1024x6144x4096, 8192^3, nt)
#    whose model is a scripted endpoint serving real kernel variants
#    (tests/scripted_kernels.h: seeds with other knobs, one that does not
#    compile, one storing C's column pairs swapped (incorrect), one that
#    launches nothing (cheat), a refusal) through the real builder, sandbox
#    and runner; then the trajectories exported by `anvil export-trajectories`.
#   bash bench/device_llm.sh OUT_DIR
# Writes OUT_DIR/{test.log, job.txt, profiles.md, trajectories.jsonl,
# trajectories_cli.jsonl, llm_verify.db, gpu.txt}. Needs build/bundle/anvil-bundle.tar.gz.
# The bundle's programs find their seeds and prompts themselves (deploy/layout.h).
set -uo pipefail
OUT=${1:?usage: device_llm.sh OUT_DIR}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
export ANVIL_LLM_VERIFY_OUT=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/gpu.txt"
(cd /tmp && timeout 1500 "$B/libexec/tests/llm_gpu_test" 2>&1) | tee "$OUT/test.log"
rc=${PIPESTATUS[0]}
job=$(awk '/^job /{print $2}' "$OUT/job.txt" 2>/dev/null)
if [ -n "$job" ]; then
  "$B/bin/anvil" --db "$OUT/llm_verify.db" export-trajectories --job "$job" --format jsonl \
    --out "$OUT/trajectories_cli.jsonl" 2>&1 | tee -a "$OUT/test.log"
  wc -l "$OUT"/trajectories*.jsonl | tee -a "$OUT/test.log"
fi
cat "$OUT/job.txt" "$OUT/profiles.md" 2>/dev/null
exit "$rc"
