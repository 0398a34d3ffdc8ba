#!/usr/bin/env bash
# Programmatic dependent launch (PDL knob of 02_mma_sync and 03_wgmma_tma) on a
# GPU node: (1) correctness of PDL=1 through the harness on awkward shapes
# (tails, padding kernel -> GEMM, split-K GEMM -> reduce, pingpong), both
# layouts; (2) the same configurations with PDL=1 and PDL=0 on the developers'
# shapes they won, for the device, warm and call figures side by side.
#   bench/device_pdl.sh      (writes $OUT/check.csv and $OUT/ab.csv)
# EVAL_TIMEOUT: seconds per eval (300). CHECK_PDL: the PDL value checked for correctness (1; none: skip the checks);
# PDLS: the values compared, each measured twice in turn ("1 0"; 03 also has
# 2); AB_FILE / CHECK_FILE: compare / check these configurations instead (lines
# of name|W or M|layout|shapes|params, W = 03_wgmma_tma, M = 02_mma_sync; in
# CHECK_FILE, AWKWARD stands for the awkward shapes).
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
CHECK_PDL=${CHECK_PDL:-1}
PDLS=${PDLS:-1 0}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
S=$B/share/anvil/seeds; W=$S/03_wgmma_tma/kernel.cu; M=$S/02_mma_sync/kernel.cu
AWKWARD="77x3000x1234 1x1x1 130x200x65 33x17x1000 256x64x12288 4096x4096x128"

# name file layout "shapes" params...
CHECKS=(
  "wgmma_k16_64x64_nt|$W|nt|$AWKWARD 16x4096x4096|SPLIT_K=16 BM=64 BN=64 CONSUMERS=1 STAGES=8"
  "wgmma_k16_64x64_nn|$W|nn|$AWKWARD|SPLIT_K=16 BM=64 BN=64 CONSUMERS=1 STAGES=8"
  "wgmma_pp_e1_nt|$W|nt|$AWKWARD|PERSISTENT=1 SCHEDULE=1 BM=128 BN=128 STAGES=4 EPILOGUE=1"
  "wgmma_pp_e1_nn|$W|nn|$AWKWARD|PERSISTENT=1 SCHEDULE=1 BM=128 BN=128 STAGES=4 EPILOGUE=1"
  "mma_k4_nt|$M|nt|$AWKWARD|SPLIT_K=4 BM=32 BN=64 WARPS_M=1 WARPS_N=2 BK=64 STAGES=3"
  "mma_k4_nn|$M|nn|$AWKWARD|SPLIT_K=4 BM=32 BN=64 WARPS_M=1 WARPS_N=2 BK=64 STAGES=3"
)
# The developers' shapes' winners of the H200 search (bench/results/2026-11-21-search-dev.csv).
AB=(
  "mma_32x32|$M|nn|256x128x128|BM=32 BN=32 BK=32 WARPS_M=2 WARPS_N=2 STAGES=5 GROUP_M=4"
  "wgmma_64x64_e1|$W|nn|64x4096x256 8192x64x2048|BM=64 BN=64 CONSUMERS=1 EPILOGUE=1 GROUP_M=16 STAGES=8"
  "wgmma_64x128_k4|$W|nt|16x4096x4096|BM=64 BN=128 CONSUMERS=1 CONSUMER_REGS=240 GROUP_M=8 SPLIT_K=4 STAGES=8"
  "wgmma_64x64_k16|$W|nn|256x64x12288|BM=64 BN=64 CONSUMERS=1 CONSUMER_REGS=240 GROUP_M=4 SPLIT_K=16 STAGES=8"
  "wgmma_128x112_e1|$W|nt|1000x1000x1000|BM=128 BN=112 EPILOGUE=1 GROUP_M=4 STAGES=6"
  "wgmma_128x256_e1|$W|nt|4096x4096x4096|BM=128 BN=256 CONSUMER_REGS=224 EPILOGUE=1 GROUP_M=16 PRODUCER_REGS=32 STAGES=4"
  "wgmma_pp_e1|$W|nn|12288x8192x512 512x2048x512|PERSISTENT=1 SCHEDULE=1 BM=128 BN=128 EPILOGUE=1 PRODUCER_REGS=32 STAGES=4"
)
entries() {  # entries FILE: its lines with the seed paths and shapes filled in
  while IFS= read -r l; do
    [ -n "$l" ] && sed -e "s#|W|#|$W|#" -e "s#|M|#|$M|#" -e "s#AWKWARD#$AWKWARD#" <<< "$l"
  done < $1
}
if [ -n "${AB_FILE:-}" ]; then mapfile -t AB < <(entries $AB_FILE); fi
if [ -n "${CHECK_FILE:-}" ]; then mapfile -t CHECKS < <(entries $CHECK_FILE); fi
[ "$CHECK_PDL" = none ] && CHECKS=()
run_eval() {  # run_eval NAME FILE LAYOUT "SHAPES" "PARAMS" [ROUNDS]
  local args=() s p
  for s in $4; do args+=(--shape $s); done
  for p in $5; do args+=(--param $p); done
  (cd /tmp && timeout ${EVAL_TIMEOUT:-300} $B/bin/anvil --json eval $2 --layout $3 --rounds ${6:-3} "${args[@]}" \
     2>>$OUT/stderr.txt) | python3 bench/eval_csv.py $1
}
# Build everything first, in parallel (the build cache serves the measured runs).
SECONDS=0
for e in "${CHECKS[@]}" "${AB[@]}"; do
  IFS='|' read -r name file layout shapes params <<< "$e"
  for pdl in ${CHECK_PDL/none/} $PDLS; do
    [[ $file == $M && $pdl -ge 2 ]] && continue  # 02 has PDL 0 and 1
    (cd /tmp && timeout 300 $B/bin/anvil eval $file --layout $layout --rounds 1 --shape 64x64x64 \
       $(for p in $params PDL=$pdl; do echo --param $p; done) > /dev/null 2>&1) &
  done
done
wait
echo "prebuilt in ${SECONDS}s"
C=$OUT/check.csv; python3 bench/eval_csv.py --header > $C
for e in "${CHECKS[@]}"; do
  IFS='|' read -r name file layout shapes params <<< "$e"
  pdl=$CHECK_PDL; [[ $file == $M && $pdl == 2 ]] && pdl=1
  run_eval ${name}_pdl$pdl $file $layout "$shapes" "$params PDL=$pdl" 1 >> $C
  echo "${name}_pdl$pdl: $(grep -c "^${name}_pdl$pdl," $C) rows, $(grep "^${name}_pdl$pdl," $C | grep -vc VERDICT_PASSED) not passed"
done
A=$OUT/ab.csv; python3 bench/eval_csv.py --header > $A
for e in "${AB[@]}"; do
  IFS='|' read -r name file layout shapes params <<< "$e"
  for pdl in $PDLS $PDLS; do
    [[ $file == $M && $pdl -ge 2 ]] && continue
    run_eval ${name}_pdl$pdl $file $layout "$shapes" "$params PDL=$pdl" >> $A
  done
done
echo "all in ${SECONDS}s"
cut -d, -f1-5,8,10,11,13,14,15,16,17,18,20 $A
