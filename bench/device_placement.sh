#!/usr/bin/env bash
# Placement experiment on a GPU node (bench/placement.cu): one binary per
# configuration, built in parallel, each run in PROCS separate processes on its
# shape with SETS operand sets x ROUNDS rounds. PLACEMENT_FILE lines:
# name|layout|shape|params[|vary] (the seed's knobs without the ANVIL_ prefix;
# vary: the operands that change from set to set, "abc" if absent).
# Writes $OUT/placement.txt.
#   PLACEMENT_FILE=bench/placement_s19.txt bash bench/device_placement.sh
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
PROCS=${PROCS:-3}
mkdir -p /opt/anvil "$OUT" /tmp/placement && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
CUTLASS=/opt/anvil/anvil/share/anvil/cutlass/include
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
SECONDS=0
while IFS='|' read -r name layout shape params vary; do
  [ -z "$name" ] && continue
  defs="-DANVIL_LAYOUT_${layout^^}=1"
  for p in $params; do defs+=" -DANVIL_$p"; done
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I$CUTLASS -Ibench $defs \
    -o /tmp/placement/$name bench/placement.cu -lcublasLt 2> /tmp/placement/$name.log &
done < $PLACEMENT_FILE
wait
echo "built in ${SECONDS}s"
while IFS='|' read -r name layout shape params vary; do
  [ -z "$name" ] && continue
  [ -x /tmp/placement/$name ] || { echo "$name: build failed"; cat /tmp/placement/$name.log; continue; }
  echo "== $name ($layout; $params)" >> $OUT/placement.txt
  for p in $(seq $PROCS); do
    echo "-- process $p" >> $OUT/placement.txt
    timeout 120 /tmp/placement/$name $name ${shape//x/ } ${SETS:-6} ${ROUNDS:-15} ${vary:-abc} >> $OUT/placement.txt 2>&1
  done
done < $PLACEMENT_FILE
echo "all in ${SECONDS}s"
grep -E "^==|^--|ratio over" $OUT/placement.txt
