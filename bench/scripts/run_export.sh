#!/usr/bin/env bash
# The exported kernel package on a GPU node (issue 29's figures), into OUT:
#   export.txt   which shape goes where (anvil export of the store's winners)
#   check.txt    the package's examples/check_hgemm: every shape and a few others against
#                cuBLAS, random and exact 0/1 inputs, eager and replayed from a CUDA graph,
#                dispatch as the manifest says
#   regimes.csv  per shape, CUDA-graph replay in both regimes (hot: one operand set; cold:
#                sets rotated past twice the L2), the library through anvil_hgemm against
#                cuBLAS and cuBLASLt; ratio = best baseline / library (expect >= 0.98 on
#                every shape, kernel shapes near their manifest speedup)
#   host.csv     host ns per call: anvil_hgemm against cublasGemmEx, and the dispatch query
#   load.csv     dlopen and first anvil_hgemm_init of libanvil_hgemm.so
#   torch.csv    the Python module inside captured torch.cuda graphs (skipped without torch)
# Usage: bench/scripts/run_export.sh OUT
#   DB=STORE (required unless PKG): a store whose winners have graph-replay figures, e.g.
#      the regimes.db that bench/scripts/run_regimes.sh leaves in its OUT (stores from before
#      graph timing have none: every shape would go to the vendor, and export says so)
#   GPU=H100-80GB-HBM3 SHAPES=bench/configs/dev_shapes.txt
#   PKG=DIR: an exported package instead of exporting from DB
# Needs CMake >= 3.24 and nvcc on the node (the package is built there).
. "$(dirname "${BASH_SOURCE[0]}")/node.sh" "$1" || exit 2
set -e
GPU=${GPU:-H100-80GB-HBM3}
SHAPES=${SHAPES:-$BENCH/configs/dev_shapes.txt}
# CUTLASS: the Anvil's own (a bundle's share/anvil/cutlass), else this checkout's third_party/.
CUTLASS=${ANVIL_CUTLASS_DIR:-$(dirname "$ANVIL")/../share/anvil/cutlass}
[ -d "$CUTLASS/include" ] || CUTLASS=$BENCH/../third_party/cutlass
NVCC=${ANVIL_TEST_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ -z "${PKG:-}" ]; then
  PKG=$OUT/pkg STORE=${DB:?set DB to a store with graph-regime winners, or PKG to a package}
  if [[ "$DB" == *.xz ]]; then STORE=$OUT/store.db; xz -dc "$DB" > "$STORE"; fi
  "$ANVIL" --db "$STORE" doctor --migrate || exit 1  # a store of an older schema
  "$ANVIL" --db "$STORE" export --gpu "$GPU" --problems "$SHAPES" --out "$PKG" | tee "$OUT/export.txt"
fi
cmake -S "$PKG" -B "$OUT/pkg-build" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DANVIL_HGEMM_CUTLASS_DIR="$CUTLASS" > "$OUT/configure.log"
cmake --build "$OUT/pkg-build" -j "$(nproc)" > "$OUT/build.log"
"$OUT/pkg-build/check_hgemm" "$PKG/manifest.csv" | tee "$OUT/check.txt"
"$BENCH_BIN/anvil-export-bench" --lib "$OUT/pkg-build/libanvil_hgemm.so" \
  --manifest "$PKG/manifest.csv" --out "$OUT" | tee "$OUT/bench.txt"
python3 "$BENCH/scripts/export_torch.py" "$PKG" "$OUT/pkg-build/libanvil_hgemm.so" \
  "$OUT/torch.csv" | tee "$OUT/torch.txt"
