#!/usr/bin/env bash
# The evaluation harness on a GPU node: doctor, the gpu-labelled tests (seeds,
# broken variants, adversarial candidates), the three seeds on the developers'
# shapes (bench/configs/dev_shapes.txt) into the harness CSV, a few repeated
# measurements in separate processes, cuBLAS timed by a plain loop for
# comparison, and the harness's own cost per candidate. Results under OUT_DIR:
#   dev.csv, repeat.csv, plain_cublas.txt, costs.txt, gpu_tests.txt, doctor.txt
#   bench/scripts/run_harness.sh OUT_DIR
# Write-up: bench/results/2026-11-21-harness-h200.md. About 6 minutes.
. "$(dirname "$0")/node.sh"
export ANVIL_TEST_CANARY=1
"$ANVIL" doctor > "$OUT/doctor.txt" 2>&1

echo "== gpu tests"; SECONDS=0
timeout 360 "${GPU_TESTS[@]}" > "$OUT/gpu_tests.txt" 2>&1; echo "gpu tests rc=$? in ${SECONDS}s"
grep -E "^\S+\.cu |FAILED|passed" "$OUT/gpu_tests.txt" | head -60

echo "== dev shapes"; SECONDS=0
CSV=$OUT/dev.csv; python3 "$BENCH/scripts/eval_csv.py" --header > "$CSV"
for seed in 03_wgmma_tma 02_mma_sync 01_naive; do
  for layout in nt nn; do
    shapes=$(awk -v l=$layout '!/^#/ && $4 == l {printf "%sx%sx%s ", $1, $2, $3}' "$BENCH/configs/dev_shapes.txt")
    rounds=5; [ $seed = 01_naive ] && rounds=1
    eval_rows $seed "$(seed_file $seed)" $layout "$shapes" "" --rounds $rounds >> "$CSV"
  done
done
echo "dev shapes in ${SECONDS}s"; column -s, -t < "$CSV" | cut -c1-220

echo "== repeatability"; SECONDS=0
RC=$OUT/repeat.csv; python3 "$BENCH/scripts/eval_csv.py" --header > "$RC"
for run in 1 2; do
  eval_rows run$run "$(seed_file W)" nt "1000x1000x1000 4096x4096x4096 16x4096x4096" "" >> "$RC"
done
echo "repeat in ${SECONDS}s"; column -s, -t < "$RC" | cut -c1-200

echo "== plain cuBLAS loop"
grep -v '^#' "$BENCH/configs/dev_shapes.txt" | while read -r m n k l; do
  "$BENCH_BIN/anvil-plain-cublas" --shape ${m}x${n}x${k} --layout $l
done | tee "$OUT/plain_cublas.txt"

echo "== harness cost per candidate"  # runner start-up to first measurement, wall per eval
K=$(seed_file W)
(cd /tmp && "$ANVIL" eval "$K" --shape 256x128x128 --rounds 1 > /dev/null 2>&1)  # warm the build cache
for _ in 1 2 3; do
  (cd /tmp && /usr/bin/time -f "wall %e s" "$ANVIL" --json eval "$K" --shape 256x128x128 --rounds 1 2>&1) |
    python3 -c "
import sys, json
for l in sys.stdin:
    if l.startswith('{'):
        m = json.loads(l)['measurement']; print('measurement seconds %.3f' % m['seconds'])
    elif l.startswith('wall'): print(l.strip())"
done | tee "$OUT/costs.txt"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv >> "$OUT/gpu.txt"
