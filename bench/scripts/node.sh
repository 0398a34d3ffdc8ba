# shellcheck shell=bash disable=SC2034
# The shared preamble of bench/scripts/run_*.sh, sourced with the output folder
# as $1. Finds the Anvil to measure and exports:
#   ANVIL      the anvil command          SEEDS   the seed families' folder
#   BENCH_BIN  the benchmark programs     BENCH   bench/ (scripts, configs)
#   OUT        the output folder ($1, created; the GPU's state lands in gpu.txt)
# The Anvil it finds, first match wins:
#   1. ANVIL_HOME=DIR: an unpacked bundle's anvil/ folder;
#   2. this script inside an unpacked bundle (anvil/share/anvil/bench/scripts/);
#   3. ANVIL_BUNDLE=FILE, default build/bundle/anvil-bundle.tar.gz if present:
#      unpacked into ANVIL_UNPACK (default /opt/anvil);
#   4. a build tree: ANVIL_BUILD, default build/ (then the bench programs are
#      build/bin/bench/, built by `cmake --build build --target anvil-bench`,
#      and the seeds this checkout's).
# Candidate builds are cached where Anvil's default puts them (ANVIL_CACHE overrides).
# Changes no clocks and never resets the GPU.
set -uo pipefail
OUT=${1:?usage: $0 OUT_DIR (results land there)}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
in_bundle=$(cd "$BENCH/../../.." && pwd)
if [ -n "${ANVIL_HOME:-}" ]; then
  here=$ANVIL_HOME
elif [ -x "$in_bundle/bin/anvil" ] && [ -d "$in_bundle/libexec" ]; then
  here=$in_bundle
elif bundle=${ANVIL_BUNDLE:-build/bundle/anvil-bundle.tar.gz}; [ -z "${ANVIL_BUILD:-}" ] && [ -f "$bundle" ]; then
  unpack=${ANVIL_UNPACK:-/opt/anvil}
  rm -rf "$unpack/anvil" && mkdir -p "$unpack" && tar -C "$unpack" -xzf "$bundle" || exit 1
  here=$unpack/anvil
else
  here=
fi
if [ -n "$here" ]; then
  here=$(cd "$here" && pwd)
  # The bundle's programs find its bwrap, runner, CUTLASS headers and seeds
  # from their own location: no environment is needed.
  ANVIL=$here/bin/anvil BENCH_BIN=$here/libexec/bench SEEDS=$here/share/anvil/seeds
  GPU_TESTS=("$here/bin/anvil-gpu-tests")
else
  build=$(cd "${ANVIL_BUILD:-build}" 2>/dev/null && pwd) ||
    { echo "no Anvil found: set ANVIL_HOME, ANVIL_BUNDLE or ANVIL_BUILD" >&2; exit 2; }
  ANVIL=$build/bin/anvil BENCH_BIN=$build/bin/bench SEEDS=$(cd "$BENCH/../seeds" && pwd)
  GPU_TESTS=(ctest --test-dir "$build" -L gpu --output-on-failure)
fi
export ANVIL BENCH_BIN SEEDS BENCH OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,memory.used \
  --format=csv > "$OUT/gpu.txt" 2>&1

# seed_file W|M|NAME: a seed family's kernel (W 03_wgmma_tma, M 02_mma_sync, or a family folder).
seed_file() {
  case $1 in W) echo "$SEEDS/03_wgmma_tma/kernel.cu" ;; M) echo "$SEEDS/02_mma_sync/kernel.cu" ;;
    *) echo "$SEEDS/$1/kernel.cu" ;; esac
}
# eval_rows NAME FILE LAYOUT "SHAPES" "PARAMS" [anvil eval options...]: the harness CSV rows
# of one `anvil eval`, named NAME (stderr appended to $OUT/stderr.txt).
eval_rows() {
  local name=$1 file=$2 layout=$3 args=() s p; shift 3
  for s in $1; do args+=(--shape "$s"); done
  for p in $2; do args+=(--param "$p"); done
  shift 2
  (cd /tmp && timeout "${EVAL_TIMEOUT:-300}" "$ANVIL" --json eval "$file" --layout "$layout" "${args[@]}" "$@" \
     < /dev/null 2>> "$OUT/stderr.txt") | python3 "$BENCH/scripts/eval_csv.py" "$name"
}
