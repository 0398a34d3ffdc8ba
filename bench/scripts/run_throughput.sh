#!/usr/bin/env bash
# The search's measurement throughput on a GPU node: `anvil optimize` on the
# GEMMs of real models (bench/configs/model_shapes.txt, none of them a
# developers' shape) from an empty store for BUDGET minutes (run_search.sh),
# with nvidia-smi's utilization sampled once a second, then throughput.py on
# the job: screens and full measurements per minute, builds per minute, the
# GPU busy fraction, seconds to each problem's first measurement, and the
# geomean of the best so far at 2, 5, 10, 13 and 15 minutes, and where the
# runners' time went. CUDA_VISIBLE_DEVICES=N measures on that GPU alone (its
# utilization only); BUILD_JOBS as run_search.sh. AGREE=N also
# measures the top five screens of N problems again at full fidelity
# (screen_vs_full.py). Results under OUT_DIR: throughput.txt, agreement.md,
# util.csv and run_search.sh's files.
#   ANVIL_HOME=/opt/anvil BUDGET=10 AGREE=8 bench/scripts/run_throughput.sh OUT_DIR
# Write-ups: bench/results/*-search-throughput-*.md.
. "$(dirname "$0")/node.sh"
export SHAPES=${SHAPES:-$BENCH/configs/model_shapes.txt}
nvidia-smi ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} --query-gpu=utilization.gpu \
  --format=csv,noheader,nounits -l 1 > "$OUT/util.csv" 2>&1 &
util=$!
"$BENCH/scripts/run_search.sh" "$OUT"
kill "$util" 2> /dev/null
db=$(mktemp /tmp/throughput-XXXXXX.db)
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
  "$OUT/search.db.xz" "$db" || exit 1
python3 "$BENCH/scripts/throughput.py" "$db" --curve "$OUT/curve.csv" --util "$OUT/util.csv" | tee "$OUT/throughput.txt"
if [ "${AGREE:-0}" -gt 0 ]; then
  python3 "$BENCH/scripts/screen_vs_full.py" "$db" --problems "$AGREE" --anvil "$ANVIL" > "$OUT/agreement.md" 2>&1
  tail -4 "$OUT/agreement.md"
fi
rm -f "$db"
