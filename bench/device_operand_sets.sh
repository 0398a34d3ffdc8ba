#!/usr/bin/env bash
# The runner's figures with one operand set against several (anvil eval
# --operand-sets), each configuration measured in PROCS separate processes per
# value, to see how far a figure moves from one process to the next. SETS_FILE
# lines: name|W|layout|shape|params (W = 03_wgmma_tma, M = 02_mma_sync).
# Writes $OUT/sets.csv (the harness CSV, rows named name_sN_pP) and prints, per
# configuration and value, the device ratio against the best baseline in each
# process.
#   SETS_FILE=bench/operand_sets_s19.txt PROCS=3 VALUES="1 4" bash bench/device_operand_sets.sh
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
PROCS=${PROCS:-3}
VALUES=${VALUES:-1 4}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
S=$B/share/anvil/seeds; W=$S/03_wgmma_tma/kernel.cu; M=$S/02_mma_sync/kernel.cu
mapfile -t LIST < <(sed -e "s#|W|#|$W|#" -e "s#|M|#|$M|#" $SETS_FILE | grep -v '^$')
SECONDS=0
for e in "${LIST[@]}"; do  # build each once, in parallel (the build cache serves the rest)
  IFS='|' read -r name file layout shape params <<< "$e"
  (cd /tmp && timeout 300 $B/bin/anvil eval $file --layout $layout --rounds 1 --shape $shape \
     $(for p in $params; do echo --param $p; done) > /dev/null 2>&1) &
done
wait
echo "prebuilt in ${SECONDS}s"
python3 bench/eval_csv.py --header > $OUT/sets.csv
for e in "${LIST[@]}"; do
  IFS='|' read -r name file layout shape params <<< "$e"
  for p in $(seq $PROCS); do
    for v in $VALUES; do
      (cd /tmp && timeout 300 $B/bin/anvil --json eval $file --layout $layout --shape $shape \
         --operand-sets $v $(for q in $params; do echo --param $q; done) 2>>$OUT/stderr.txt) |
        python3 bench/eval_csv.py ${name}_s${v}_p$p >> $OUT/sets.csv
    done
  done
done
echo "all in ${SECONDS}s"
python3 - $OUT/sets.csv <<'PY'
import csv, re, sys, collections
rows = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    name, v, p = re.match(r"(.*)_s(\d+)_p(\d+)$", r["kernel"]).groups()
    dev = float(r["device_us"])
    best = min(float(r[c]) for c in ("cublas_device_us", "lt_heur_device_us", "lt_auto_device_us"))
    rows[(name, int(v))].append((dev, best, r["verdict"]))
for (name, v), xs in rows.items():
    ratios = [b / d for d, b, _ in xs if d > 0]
    print("%-22s sets %d  device us %s  best baseline us %s  ratio %s  spread %.3f  %s" % (
        name, v, " ".join("%.2f" % d for d, _, _ in xs), " ".join("%.2f" % b for _, b, _ in xs),
        " ".join("%.3f" % x for x in ratios), max(ratios) - min(ratios) if ratios else 0,
        ",".join(sorted(set(s for _, _, s in xs)))))
PY
