#!/usr/bin/env bash
# The embedded search on a GPU node: `anvil optimize` on the developers' shapes
# (bench/configs/dev_shapes.txt) for BUDGET minutes against the store in DB
# (carried between runs: the search resumes from it; a .xz as this script
# returns it is unpacked first). Results under OUT_DIR: optimize.log, curve.csv,
# search-dev.csv (this job's winners, the harness CSV) and search.db.xz (the
# store, for the next run; xz folds the many near-identical kernel sources,
# ~13x smaller than gzip).
#   BUDGET=8 DB=bench/state/2026-11-26-dev-search-h200.db.xz bench/scripts/run_search.sh OUT_DIR
# SHAPES=FILE searches other shapes (default bench/configs/dev_shapes.txt).
# SLACK: seconds allowed beyond the budget (150) for the verify stage.
# TRANSFER=H100-80GB-HBM3 starts each problem from its fastest configurations
# measured on that GPU model (in the same store), re-measured here; FIGURE=warm
# ranks by warm time instead of device time; BUILD_JOBS=N sets the parallel nvcc
# jobs (default: every core but two). BUILD_BENCH=1 also measures build
# throughput against parallel nvcc jobs (anvil-build-bench, build_bench.txt).
# Write-ups: bench/results/*-dev-search-*.md.
. "$(dirname "$0")/node.sh"
BUDGET=${BUDGET:-8}
DB=${DB:-}
SHAPES=${SHAPES:-$BENCH/configs/dev_shapes.txt}
if [ "${BUILD_BENCH:-0}" = 1 ]; then
  timeout 400 "$BENCH_BIN/anvil-build-bench" --configs 16 --jobs 1,2,4,8,16 > "$OUT/build_bench.txt" 2>&1
  grep -v "\[info\]" "$OUT/build_bench.txt"
fi
STORE=$OUT/search.db
if [[ $DB == *.xz ]]; then
  python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
    "$DB" "$STORE" || exit 1
elif [ -n "$DB" ]; then
  cp "$DB" "$STORE" || exit 1
fi
SECONDS=0
timeout $((BUDGET * 60 + ${SLACK:-150})) "$ANVIL" --db "$STORE" optimize --shapes "$SHAPES" \
  --budget-minutes "$BUDGET" --curve "$OUT/curve.csv" ${TRANSFER:+--transfer-from "$TRANSFER"} \
  ${FIGURE:+--figure "$FIGURE"} ${BUILD_JOBS:+--build-jobs "$BUILD_JOBS"} > "$OUT/optimize.log" 2>&1
echo "optimize rc=$? in ${SECONDS}s"
grep -vE "^\s+\[(seeds|screen|widen|evolve-[0-9])\] [0-9]+x" "$OUT/optimize.log" | grep -v "\[info\]" | tail -45
# This run's winners (built from today's seed sources).
JOB=$(grep -oE "job job-[0-9]+" "$OUT/optimize.log" | head -1 | cut -d' ' -f2)
python3 "$BENCH/scripts/eval_csv.py" --header > "$OUT/search-dev.csv"
"$ANVIL" --db "$STORE" --json kernels --job "$JOB" | python3 "$BENCH/scripts/eval_csv.py" - >> "$OUT/search-dev.csv"
python3 "$BENCH/scripts/search_report.py" "$STORE" --markdown > "$OUT/search_report.md" 2>&1
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], 'rb'), lzma.open(sys.argv[2], 'wb'))" \
  "$STORE" "$OUT/search.db.xz" && rm -f "$STORE"
echo "job: $JOB"
cut -d, -f1-9,13,15,17,19 "$OUT/search-dev.csv"
