#!/usr/bin/env bash
# The embedded search on a GPU node (issue: seeds and the embedded search).
# Unpacks the bundle and runs `anvil optimize` on the developers' shapes for
# BUDGET minutes against the store in $DB (carried between runs: the search
# resumes from it), then writes the winners as the harness CSV, the search
# curve and the log under $OUT, and the store back out as search.db.xz (xz
# folds the many near-identical kernel sources: ~13x smaller than gzip).
#   BUDGET=8 DB=bench/state/search.db bench/device_search.sh   (DB may be a .xz)
# SLACK: seconds allowed beyond the budget (150) for the verify stage.
# TRANSFER=H200 starts each problem from its fastest configurations measured
# on that GPU model (in the same store), re-measured here; FIGURE=warm ranks by
# warm time instead of device time.
# BUILD_BENCH=1 also measures build throughput against parallel nvcc jobs.
# Knob-set checks through the harness: bench/device_check.sh.
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
BUDGET=${BUDGET:-8}
DB=${DB:-bench/state/search.db}
mkdir -p /opt/anvil "$OUT" "$(dirname "$DB")" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
if [ "${BUILD_BENCH:-0}" = 1 ]; then
  timeout 400 $B/libexec/bench/anvil-build-bench --configs 16 --jobs 1,2,4,8,16 > $OUT/build_bench.txt 2>&1
  cat $OUT/build_bench.txt | grep -v "\[info\]"
fi
if [[ $DB == *.xz ]]; then  # as a previous run returned it
  python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('$DB'), open('/tmp/search.db', 'wb'))" || true
else
  cp "$DB" /tmp/search.db 2>/dev/null || true
fi
SECONDS=0
timeout $((BUDGET * 60 + ${SLACK:-150})) $B/bin/anvil --db /tmp/search.db optimize --shapes bench/dev_shapes.txt \
  --budget-minutes $BUDGET --curve $OUT/curve.csv ${TRANSFER:+--transfer-from $TRANSFER} \
  ${FIGURE:+--figure $FIGURE} \
  > $OUT/optimize.log 2>&1
echo "optimize rc=$? in ${SECONDS}s"
grep -vE "^\s+\[(seeds|screen|widen|evolve-[0-9])\] [0-9]+x" $OUT/optimize.log | grep -v "\[info\]" | tail -45
# This run's winners (built from today's seed sources).
JOB=$(grep -oE "job job-[0-9]+" $OUT/optimize.log | head -1 | cut -d' ' -f2)
python3 bench/eval_csv.py --header > $OUT/search-dev.csv
$B/bin/anvil --db /tmp/search.db --json kernels --job "$JOB" | python3 bench/eval_csv.py - >> $OUT/search-dev.csv
# The store, for the next run (unxz into $DB).
python3 -c "import lzma, shutil; shutil.copyfileobj(open('/tmp/search.db', 'rb'), lzma.open('$OUT/search.db.xz', 'wb'))"
echo "job: $JOB"
cut -d, -f1-9,13,15,17,19 $OUT/search-dev.csv
