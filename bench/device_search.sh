#!/usr/bin/env bash
# The embedded search on a GPU node (issue: seeds and the embedded search).
# Unpacks the bundle and runs `anvil optimize` on the developers' shapes for
# BUDGET minutes against the store in $DB (carried between runs: the search
# resumes from it), then writes the winners as the harness CSV, the search
# curve and the log under $OUT, and the store back out as search.db.gz.
#   BUDGET=8 DB=bench/state/search.db bench/device_search.sh
# BUILD_BENCH=1 also measures build throughput against parallel nvcc jobs;
# CHECK=splitk|persistent first runs those configurations of the tensor-core
# seeds through the harness on awkward shapes (tails, K < 64*splits, odd M*N,
# many tiles per CTA).
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
BUDGET=${BUDGET:-8}
DB=${DB:-bench/state/search.db}
mkdir -p /opt/anvil "$OUT" "$(dirname "$DB")" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
here=$B; source $B/libexec/anvil-env.sh   # bundle paths for the programs under libexec/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
if [ "${BUILD_BENCH:-0}" = 1 ]; then
  timeout 120 $B/libexec/bench/anvil-build-bench --configs 16 --jobs 1,4,16 > $OUT/build_bench.txt 2>&1
  cat $OUT/build_bench.txt | grep -v "\[info\]"
fi
if [ -n "${CHECK:-}" ]; then
  S=$B/share/anvil/seeds; C=$OUT/check.csv; python3 bench/eval_csv.py --header > $C
  check() {  # check NAME FILE LAYOUT PARAMS...
    local name=$1 file=$2 layout=$3; shift 3
    local shapes=(--shape 77x3000x1234 --shape 1x1x1 --shape 130x200x65 --shape 33x17x1000 --shape 256x64x12288
                  --shape 1000x1000x1000 --shape 4096x4096x128)
    [ $layout = nt ] && shapes+=(--shape 16x4096x4096)
    (cd /tmp && timeout 200 $B/bin/anvil --json eval $file --layout $layout --rounds 1 "$@" "${shapes[@]}" \
       2>>$OUT/check_stderr.txt) | python3 bench/eval_csv.py $name >> $C
  }
  W=$S/03_wgmma_tma/kernel.cu; M=$S/02_mma_sync/kernel.cu
  for l in nt nn; do
    case $CHECK in
      splitk)
        check wgmma_k16_64x64_$l $W $l --param SPLIT_K=16 --param BM=64 --param BN=64 --param CONSUMERS=1 --param STAGES=8
        check wgmma_k3_$l $W $l --param SPLIT_K=3
        check mma_k4_32x64_$l $M $l --param SPLIT_K=4 --param BM=32 --param BN=64 --param WARPS_M=1 --param WARPS_N=2 --param BK=64 --param STAGES=3
        check mma_k16_$l $M $l --param SPLIT_K=16 ;;
      persistent)
        check wgmma_p1_128x256_$l $W $l --param PERSISTENT=1
        check wgmma_p1_64x128_c1_$l $W $l --param PERSISTENT=1 --param BM=64 --param BN=128 --param CONSUMERS=1 --param STAGES=6
        check wgmma_e1_$l $W $l --param EPILOGUE=1 ;;
    esac
  done
  cut -d, -f1-8,20,21 $C
fi
cp "$DB" /tmp/search.db 2>/dev/null || true
SECONDS=0
timeout $((BUDGET * 60 + 150)) $B/bin/anvil --db /tmp/search.db optimize --shapes bench/dev_shapes.txt \
  --budget-minutes $BUDGET --curve $OUT/curve.csv > $OUT/optimize.log 2>&1
echo "optimize rc=$? in ${SECONDS}s"
grep -vE "^\s+\[(seeds|screen|widen|evolve-[0-9])\] [0-9]+x" $OUT/optimize.log | grep -v "\[info\]" | tail -45
python3 bench/eval_csv.py --header > $OUT/search-dev.csv
$B/bin/anvil --db /tmp/search.db --json kernels | python3 bench/eval_csv.py - >> $OUT/search-dev.csv
gzip -c /tmp/search.db > $OUT/search.db.gz   # the store, for the next run (gunzip into $DB)
cut -d, -f1-9,13,15,17,19 $OUT/search-dev.csv
