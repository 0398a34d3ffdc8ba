#!/usr/bin/env bash
# The LLM proposer on the GPU node: a job on three dev shapes (16x4096x4096,
# 1024x6144x4096, 8192x8192x8192, nt) whose model is a scripted endpoint
# serving real kernel variants (mma_sync and wgmma_tma seeds with other
# knobs, one that does not compile, one that leaves C unwritten, a refusal)
# through the real builder, sandbox and runner with counter profiles; then
# the trajectories exported by `anvil export-trajectories`, and the counter
# profiles of two seeds with different bottlenecks with the hint each gave.
#   bash bench/device_llm.sh OUT_DIR
# Writes OUT_DIR/{test.log, job.txt, profiles.md, trajectories.jsonl,
# trajectories_cli.jsonl, llm_verify.db}. Needs build/bundle/anvil-bundle.tar.gz.
set -uo pipefail
OUT=${1:?usage: device_llm.sh OUT_DIR}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
here=$B; . "$B/libexec/anvil-env.sh"
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
export ANVIL_PROMPTS_DIR=$B/share/anvil/prompts ANVIL_LLM_VERIFY_OUT=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/gpu.txt"
(cd /tmp && timeout 1500 "$B/libexec/tests/llm_gpu_test" 2>&1) | tee "$OUT/test.log"
job=$(awk '/^job /{print $2}' "$OUT/job.txt" 2>/dev/null)
if [ -n "$job" ]; then
  "$B/bin/anvil" --db "$OUT/llm_verify.db" export-trajectories --job "$job" --format jsonl \
    --out "$OUT/trajectories_cli.jsonl" 2>&1 | tee -a "$OUT/test.log"
  wc -l "$OUT"/trajectories*.jsonl | tee -a "$OUT/test.log"
fi
cat "$OUT/job.txt" "$OUT/profiles.md" 2>/dev/null
