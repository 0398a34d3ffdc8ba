#!/usr/bin/env bash
# GPU-counter profiles (CUPTI range profiler, `anvil eval --profile`) of the
# configurations in $LIST next to the fastest baseline on their shapes: the
# evidence for why a shape is below the vendor's speed. Writes $OUT/profile.md
# (tables), $OUT/profile.jsonl (raw) and $OUT/profile.csv (the harness CSV).
#   LIST=bench/profile_losers_s5.txt bash bench/device_profile.sh
# LIST lines: name|W or M|layout|shapes|params (W = 03_wgmma_tma, M = 02_mma_sync).
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
LIST=${LIST:-bench/profile_losers_s5.txt}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
S=$B/share/anvil/seeds; W=$S/03_wgmma_tma/kernel.cu; M=$S/02_mma_sync/kernel.cu
python3 bench/eval_csv.py --header > $OUT/profile.csv
: > $OUT/profile.md
while IFS='|' read -r name fam layout shapes params; do
  [ -z "$name" ] && continue
  file=$W; [ "$fam" = M ] && file=$M
  args=(); for s in $shapes; do args+=(--shape $s); done
  for p in $params; do args+=(--param $p); done
  (cd /tmp && timeout ${EVAL_TIMEOUT:-300} $B/bin/anvil --json eval $file --layout $layout --rounds 2 \
     --profile "${args[@]}" < /dev/null 2>>$OUT/stderr.txt) > $OUT/one.jsonl
  cat $OUT/one.jsonl >> $OUT/profile.jsonl
  python3 bench/eval_csv.py $name < $OUT/one.jsonl >> $OUT/profile.csv
  python3 bench/profile_table.py $name < $OUT/one.jsonl | tee -a $OUT/profile.md
done < "$LIST"
rm -f $OUT/one.jsonl
