#!/usr/bin/env bash
# First look on a GPU node: unpack the bundle, doctor, the gpu-labelled tests,
# and one eval of each seed. Writes logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
command -v bwrap >/dev/null || export ANVIL_SANDBOX_BWRAP=$B/bin/bwrap
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv | tee $OUT/gpu.txt
$B/bin/anvil doctor 2>&1 | tee $OUT/doctor.txt
(cd /tmp && for s in 01_naive 02_mma_sync 03_wgmma_tma; do
  for l in nt nn; do
    timeout 120 $B/bin/anvil eval $B/share/anvil/seeds/$s/kernel.cu --arch sm_90a --layout $l \
      --shape 256x128x128 --shape 130x200x72 --shape 1000x1000x1000 --rounds 2 2>&1 | tail -40
  done; done) 2>&1 | tee $OUT/eval.txt | grep -E "candidate |verdict|^problem|speedup|^  candidate|cublas" 
timeout 360 $B/bin/anvil-gpu-tests 2>&1 | tee $OUT/gpu_tests.txt | tail -60
