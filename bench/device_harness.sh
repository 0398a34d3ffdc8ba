#!/usr/bin/env bash
# The harness run on a GPU node (issue: evaluation harness). Unpacks the
# bundle, runs the gpu-labelled tests (seeds, broken variants, adversarial
# candidates), evaluates the three seeds on the developers' shapes into the
# harness CSV, repeats a few measurements in separate runs, and times cuBLAS
# with a plain loop for comparison. Everything lands under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache ANVIL_TEST_CANARY=1; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
command -v bwrap >/dev/null || export ANVIL_SANDBOX_BWRAP=$B/bin/bwrap
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
$B/bin/anvil doctor > $OUT/doctor.txt 2>&1

echo "== gpu tests"; SECONDS=0
timeout 300 $B/bin/anvil-gpu-tests > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? in ${SECONDS}s"
grep -E "^\S+\.cu |FAILED|passed" $OUT/gpu_tests.txt | head -60

echo "== dev shapes"; SECONDS=0
CSV=$OUT/dev.csv; python3 bench/eval_csv.py --header > $CSV
for seed in 03_wgmma_tma 02_mma_sync 01_naive; do
  for layout in nt nn; do
    args=(); while read -r m n k l; do [ "$l" = "$layout" ] && args+=(--shape ${m}x${n}x${k}); done < <(grep -v '^#' bench/dev_shapes.txt)
    rounds=5; [ $seed = 01_naive ] && rounds=1
    (cd /tmp && timeout 240 $B/bin/anvil --json eval $B/share/anvil/seeds/$seed/kernel.cu --layout $layout \
       --rounds $rounds "${args[@]}" 2>>$OUT/eval_stderr.txt) | python3 bench/eval_csv.py $seed >> $CSV
  done
done
echo "dev shapes in ${SECONDS}s"; column -s, -t < $CSV | cut -c1-220

echo "== repeatability"; SECONDS=0
RC=$OUT/repeat.csv; python3 bench/eval_csv.py --header > $RC
for run in 1 2; do
  (cd /tmp && timeout 100 $B/bin/anvil --json eval $B/share/anvil/seeds/03_wgmma_tma/kernel.cu --layout nt \
     --shape 1000x1000x1000 --shape 4096x4096x4096 --shape 16x4096x4096 2>>$OUT/eval_stderr.txt) | python3 bench/eval_csv.py run$run >> $RC
done
echo "repeat in ${SECONDS}s"; column -s, -t < $RC | cut -c1-200

echo "== plain cuBLAS loop"
nvcc -O2 -o /tmp/plain_cublas bench/plain_cublas.cu -lcublas && \
  grep -v '^#' bench/dev_shapes.txt | while read -r m n k l; do /tmp/plain_cublas $m $n $k $l; done | tee $OUT/plain_cublas.txt
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt
