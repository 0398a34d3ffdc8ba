#!/usr/bin/env bash
# The graph-replay regimes on a GPU node: a search ranked by graph-cold from
# the store in DB (rows measured before graph timing are re-measured by its
# carry stage first; each winner is verified in three runner processes), the
# winners' speedups in graph-cold, graph-hot and device with their spreads
# (regimes.md), and the independent cross-check (anvil-crosscheck: another
# timer, each shape in its own process) beside the runner's ratios
# (crosscheck.csv: agree_3pct per shape and regime).
#   BUDGET=4 DB=bench/state/2026-11-22-dev-search-h100.db.xz bench/scripts/run_regimes.sh OUT_DIR
# SKIP_SEARCH=1 with DB a store that already holds the job reuses it (JOB=id);
# NO_CROSSCHECK=1 stops after the regimes table.
# Write-up: bench/results/*-graph-regimes-*.md.
. "$(dirname "$0")/node.sh"
BUDGET=${BUDGET:-4}
STORE=$OUT/regimes.db
if [[ ${DB:-} == *.xz ]]; then
  python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
    "$DB" "$STORE" || exit 1
elif [ -n "${DB:-}" ]; then
  cp "$DB" "$STORE" || exit 1
fi
if [ -z "${SKIP_SEARCH:-}" ]; then
  SECONDS=0
  timeout $((BUDGET * 60 + ${SLACK:-240})) "$ANVIL" --db "$STORE" optimize \
    --shapes "$BENCH/configs/dev_shapes.txt" --budget-minutes "$BUDGET" --figure graph-cold \
    --curve "$OUT/curve.csv" > "$OUT/optimize.log" 2>&1
  echo "optimize rc=$? in ${SECONDS}s"
  grep -E "verify|job|geomean|measured|built" "$OUT/optimize.log" | grep -v "\[info\]" | tail -40
  JOB=$(grep -oE "job job-[0-9]+" "$OUT/optimize.log" | head -1 | cut -d' ' -f2)
fi
echo "job: ${JOB:?no job}"
"$ANVIL" --db "$STORE" --json kernels --figure graph-cold --job "$JOB" > "$OUT/kernels.json"
python3 "$BENCH/scripts/regimes.py" < "$OUT/kernels.json" > "$OUT/regimes.md"
cat "$OUT/regimes.md"
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], 'rb'), lzma.open(sys.argv[2], 'wb'))" \
  "$STORE" "$OUT/regimes.db.xz"
[ -n "${NO_CROSSCHECK:-}" ] && exit 0
python3 "$BENCH/scripts/regimes.py" --plan < "$OUT/kernels.json" > "$OUT/plan.csv"
rows=$(($(wc -l < "$OUT/plan.csv") - 1))
echo "m,n,k,layout,regime,candidate_us,cublas_us,lt_heuristic_us,lt_auto_us,ratio,runner_ratio,agree_3pct" \
  > "$OUT/crosscheck.csv"
for ((i = 0; i < rows; i++)); do
  timeout 120 "$BENCH_BIN/anvil-crosscheck" --plan "$OUT/plan.csv" --row "$i" >> "$OUT/crosscheck.csv" \
    2>> "$OUT/crosscheck.err" || echo "row $i: crosscheck rc=$?" >> "$OUT/crosscheck.err"
done
sed "s/,/  /g" "$OUT/crosscheck.csv"  # (the node may lack column)
rm -f "$STORE"
