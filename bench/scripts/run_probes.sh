#!/usr/bin/env bash
# The harness's standalone CUDA probes on a GPU node, as CMake built them
# (bench/CMakeLists.txt; the bundle ships them in libexec/bench/). Results
# under OUT_DIR, one file per probe. PROBES picks some (default: all):
#   dram_read tma_read     read ceilings of the streaming shapes' operands
#   cluster_cost           what a cluster costs a near-empty kernel
#   cluster_occupancy      clusters the GPU holds at once for 03's CTA shapes
#   lt_heuristics          cuBLASLt's heuristic answers on the developers' shapes
#   plain_cublas           cuBLAS in a plain loop on the developers' shapes
#   placement              each bench/configs/placement.txt configuration in PROCS
#                          processes (SETS operand sets x ROUNDS rounds)
#   cta_trace              each bench/configs/cta_trace.txt configuration on its shapes
#   bench/scripts/run_probes.sh OUT_DIR          PROBES="placement" PROCS=3 ...
. "$(dirname "$0")/node.sh"
PROBES=${PROBES:-dram_read tma_read cluster_cost cluster_occupancy lt_heuristics plain_cublas placement cta_trace}
dev_shapes() { grep -v '^#' "$BENCH/configs/dev_shapes.txt"; }
configs() { grep -vE '^\s*(#|$)' "$BENCH/configs/$1.txt"; }
for probe in $PROBES; do
  SECONDS=0
  exe=$BENCH_BIN/anvil-${probe//_/-}
  case $probe in
    dram_read | tma_read | cluster_cost) timeout 300 "$exe" > "$OUT/$probe.txt" 2>&1 ;;
    cluster_occupancy)  # 03's CTA: 384 threads (2 consumers) or 256 (1); rings of several sizes
      timeout 60 "$exe" --threads 256 --smem 230512 --threads 256 --smem 132224 --threads 256 --smem 197760 \
        --threads 384 --smem 148528 --threads 384 --smem 197760 > "$OUT/$probe.txt" 2>&1 ;;
    lt_heuristics | plain_cublas)
      dev_shapes | while read -r m n k l; do
        timeout 120 "$exe" --shape "${m}x${n}x${k}" --layout "$l"
      done > "$OUT/$probe.txt" 2>&1 ;;
    placement)
      configs placement | while IFS='|' read -r name layout shape params vary; do
        echo "== $name ($layout; $params)"
        for p in $(seq "${PROCS:-3}"); do
          echo "-- process $p"
          timeout 120 "$BENCH_BIN/anvil-placement-$name" --name "$name" --shape "$shape" \
            --sets "${SETS:-6}" --rounds "${ROUNDS:-15}" --vary "${vary:-abc}" 2>&1
        done
      done > "$OUT/$probe.txt" ;;
    cta_trace)
      configs cta_trace | while IFS='|' read -r name layout shapes params; do
        echo "== $name ($layout; $params)"
        for s in $shapes; do
          timeout 60 "$BENCH_BIN/anvil-cta-trace-$name" --name "$name" --shape "$s" --reps "${REPS:-20}" 2>&1
        done
      done > "$OUT/$probe.txt" ;;
    *) echo "unknown probe $probe" >&2; continue ;;
  esac
  echo "$probe: ${SECONDS}s, $OUT/$probe.txt"
done
grep -hE "^==|^--|ratio over" "$OUT/placement.txt" 2> /dev/null
exit 0
