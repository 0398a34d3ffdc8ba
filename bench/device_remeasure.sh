#!/usr/bin/env bash
# Re-measures each winner of a search's winners file (the harness CSV that
# bench/device_search.sh writes) on a GPU node, each in its own `anvil eval`
# process, so its baselines are measured (and cuBLASLt tuned) afresh by the
# runner of this bundle. Writes $OUT/remeasured.csv, one row per winner named
# as in the winners file.
#   WINNERS=bench/results/2026-11-21-search-dev.csv bash bench/device_remeasure.sh
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
WINNERS=${WINNERS:-bench/results/2026-11-21-search-dev.csv}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
# name|seed file|layout|shape|params, from the knob values spelled in each winner's name.
mapfile -t WIN < <(python3 - "$WINNERS" "$B/share/anvil/seeds" <<'EOF'
import csv, json, os, re, sys
winners, seeds = sys.argv[1], sys.argv[2]
for r in csv.DictReader(open(winners)):
    name = r["kernel"]
    family = next(f for f in os.listdir(seeds) if name.startswith(f + "_"))
    meta = json.load(open(os.path.join(seeds, family, "seed.json")))
    knobs = sorted((k[len("ANVIL_"):].lower() for k in meta["knobs"]), key=len, reverse=True)
    rest = name[len(family) + 1:]
    params = [f"{k.upper()}={v}" for k, v in re.findall(r"(%s)(\d+)" % "|".join(knobs), rest)]
    print("|".join([name, os.path.join(seeds, family, meta["file"]), r["layout"],
                    f"{r['m']}x{r['n']}x{r['k']}", " ".join(params)]))
EOF
)
# Build them all first, in parallel (the build cache serves the measured runs).
SECONDS=0
for e in "${WIN[@]}"; do
  IFS='|' read -r name file layout shape params <<< "$e"
  (cd /tmp && timeout 300 $B/bin/anvil eval $file --layout $layout --rounds 1 --shape 64x64x64 \
     $(for p in $params; do echo --param $p; done) > /dev/null 2>&1) &
done
wait
echo "prebuilt in ${SECONDS}s"
python3 bench/eval_csv.py --header > $OUT/remeasured.csv
for e in "${WIN[@]}"; do
  IFS='|' read -r name file layout shape params <<< "$e"
  (cd /tmp && timeout ${EVAL_TIMEOUT:-300} $B/bin/anvil --json eval $file --layout $layout --rounds 3 \
     --shape $shape $(for p in $params; do echo --param $p; done) 2>>$OUT/stderr.txt) |
    python3 bench/eval_csv.py $name >> $OUT/remeasured.csv
done
echo "all in ${SECONDS}s"
cut -d, -f2-5,8,13,15,17,20 $OUT/remeasured.csv
