#!/usr/bin/env bash
# Verifies an exported kernel package on a GPU node and records the figures
# of issue 29 in the folder given as $1:
#   export.txt   which shape goes where (anvil export)
#   check.txt    examples/check_hgemm: every shape against cuBLAS, eager and in a graph
#   regimes.csv  per shape and regime (graph replay, hot / cold), the library against
#                cuBLAS and cuBLASLt; ratio = best baseline / library (expect >= 0.98
#                everywhere, kernel shapes near their manifest speedup)
#   host.csv     host ns per call: anvil_hgemm vs cublasGemmEx, and the dispatch query
#   load.csv     dlopen and first-init time of libanvil_hgemm.so
#   torch.csv    the Python module inside captured torch.cuda graphs (skipped without torch)
# Usage: bash bench/device_export.sh OUT
#   PKG=dir      an exported package (default: export one from DB with ANVIL)
#   DB=bench/state/s18.db.xz GPU=H100-80GB-HBM3 SHAPES=bench/dev_shapes.txt ANVIL=build/bin/anvil
#   CUTLASS=third_party/cutlass (for kernels that include CuTe)
set -euo pipefail
OUT=${1:?usage: device_export.sh OUT_DIR}
mkdir -p "$OUT"
DB=${DB:-bench/state/s18.db.xz}
GPU=${GPU:-H100-80GB-HBM3}
SHAPES=${SHAPES:-bench/dev_shapes.txt}
ANVIL=${ANVIL:-build/bin/anvil}
CUTLASS=${CUTLASS:-$PWD/third_party/cutlass}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" || true
if [ -z "${PKG:-}" ]; then
  PKG="$OUT/pkg"
  STORE="$DB"
  if [[ "$DB" == *.xz ]]; then STORE="$OUT/store.db"; xz -dc "$DB" > "$STORE"; fi
  "$ANVIL" --db "$STORE" export --gpu "$GPU" --problems "$SHAPES" --out "$PKG" | tee "$OUT/export.txt"
fi
cmake -S "$PKG" -B "$OUT/pkg-build" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DANVIL_HGEMM_CUTLASS_DIR="$CUTLASS" > "$OUT/configure.log"
cmake --build "$OUT/pkg-build" -j "$(nproc)" > "$OUT/build.log"
"$OUT/pkg-build/check_hgemm" "$PKG/manifest.csv" | tee "$OUT/check.txt"
"$NVCC" -O2 -std=c++17 -arch=sm_90a -I"$PKG/include" bench/export_bench.cu -lcublas -lcublasLt \
  -ldl -o "$OUT/export_bench"
"$OUT/export_bench" "$OUT/pkg-build/libanvil_hgemm.so" "$PKG/manifest.csv" "$OUT" | tee "$OUT/bench.txt"
python3 bench/export_torch.py "$PKG" "$OUT/pkg-build/libanvil_hgemm.so" "$OUT/torch.csv" \
  | tee "$OUT/torch.txt"
