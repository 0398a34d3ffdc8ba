#!/usr/bin/env bash
# Knob-set checks of the tensor-core seeds on a GPU node: each configuration
# goes through the harness (`anvil eval`: correctness against cuBLAS, timing
# with same-process baselines) on awkward shapes (tails, K < 64 * splits, odd
# M*N, one tile, many tiles per CTA) and on the developers' shapes the knobs
# are meant for, in both layouts.
#   SETS="pingpong splitk" bench/device_check.sh      (writes $OUT/check.csv)
# Sets: splitk, persistent, pingpong.
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
SETS=${SETS:-pingpong}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
S=$B/share/anvil/seeds; C=$OUT/check.csv; python3 bench/eval_csv.py --header > $C
AWKWARD=(77x3000x1234 1x1x1 130x200x65 33x17x1000 256x64x12288 1000x1000x1000 4096x4096x128)
check() {  # check NAME FILE LAYOUT "SHAPES" PARAMS...
  local name=$1 file=$2 layout=$3 shapes=() s; for s in $4; do shapes+=(--shape $s); done; shift 4
  (cd /tmp && timeout 300 $B/bin/anvil --json eval $file --layout $layout --rounds 1 "$@" "${shapes[@]}" \
     2>>$OUT/check_stderr.txt) | python3 bench/eval_csv.py $name >> $C
  echo "$name $layout: $(grep -c "^$name," $C) rows, $(grep "^$name," $C | grep -vc VERDICT_PASSED) not passed"
}
W=$S/03_wgmma_tma/kernel.cu; M=$S/02_mma_sync/kernel.cu
for set in $SETS; do
  for l in nt nn; do
    aw="${AWKWARD[*]}"; [ $l = nt ] && aw="$aw 16x4096x4096"
    case $set in
      splitk)
        check wgmma_k16_64x64_$l $W $l "$aw" --param SPLIT_K=16 --param BM=64 --param BN=64 --param CONSUMERS=1 --param STAGES=8
        check wgmma_k3_$l $W $l "$aw" --param SPLIT_K=3
        check mma_k4_32x64_$l $M $l "$aw" --param SPLIT_K=4 --param BM=32 --param BN=64 --param WARPS_M=1 --param WARPS_N=2 --param BK=64 --param STAGES=3
        check mma_k16_$l $M $l "$aw" --param SPLIT_K=16 ;;
      persistent)
        check wgmma_p1_128x256_$l $W $l "$aw" --param PERSISTENT=1
        check wgmma_p1_64x128_c1_$l $W $l "$aw" --param PERSISTENT=1 --param BM=64 --param BN=128 --param CONSUMERS=1 --param STAGES=6
        check wgmma_e1_$l $W $l "$aw" --param EPILOGUE=1 ;;
      pingpong)
        dev="12288x8192x512 512x2048x512 8192x64x2048"; [ $l = nt ] && dev="4096x4096x4096 8192x8192x8192 1024x6144x4096"
        check wgmma_pp_128x128_e0_$l $W $l "$aw $dev" --param PERSISTENT=1 --param SCHEDULE=1 --param BM=128 --param BN=128 --param STAGES=6
        check wgmma_pp_128x128_e1_$l $W $l "$aw $dev" --param PERSISTENT=1 --param SCHEDULE=1 --param BM=128 --param BN=128 --param STAGES=4 --param EPILOGUE=1
        check wgmma_pp_64x256_e0_$l $W $l "$aw" --param PERSISTENT=1 --param SCHEDULE=1 --param BM=64 --param BN=256 --param STAGES=5
        check wgmma_p1_e1_128x256_$l $W $l "$aw $dev" --param PERSISTENT=1 --param EPILOGUE=1 --param STAGES=3 ;;
    esac
  done
done
cut -d, -f1-8,13,15,17,20,21 $C
