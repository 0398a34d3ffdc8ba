#!/usr/bin/env bash
# Per-CTA timelines of tile-per-CTA 03_wgmma_tma configurations on a GPU node
# (bench/cta_trace.cu): one binary per configuration, built in parallel, each
# run on its shapes. TRACE_FILE lines: name|layout|shapes|params (the seed's
# knobs without the ANVIL_ prefix). Writes $OUT/trace.txt.
#   TRACE_FILE=bench/trace_1000_s18.txt bash bench/device_trace.sh
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
mkdir -p /opt/anvil "$OUT" /tmp/trace && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
CUTLASS=/opt/anvil/anvil/share/anvil/cutlass/include
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
SECONDS=0
while IFS='|' read -r name layout shapes params; do
  [ -z "$name" ] && continue
  defs="-DANVIL_LAYOUT_${layout^^}=1"
  for p in $params; do defs+=" -DANVIL_$p"; done
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I$CUTLASS -Ibench -DANVIL_TRACE=1024 \
    $defs -o /tmp/trace/$name bench/cta_trace.cu 2> /tmp/trace/$name.log &
done < $TRACE_FILE
wait
echo "built in ${SECONDS}s"
while IFS='|' read -r name layout shapes params; do
  [ -z "$name" ] && continue
  [ -x /tmp/trace/$name ] || { echo "$name: build failed"; cat /tmp/trace/$name.log; continue; }
  echo "== $name ($layout; $params)" >> $OUT/trace.txt
  for s in $shapes; do
    timeout 60 /tmp/trace/$name $name ${s//x/ } ${REPS:-20} >> $OUT/trace.txt 2>&1
  done
done < $TRACE_FILE
echo "all in ${SECONDS}s"
