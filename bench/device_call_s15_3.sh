OUT=${OUT:-/tmp/anvil-out}; mkdir -p $OUT
nvcc -O2 -Ibench -o /tmp/lt_heuristics bench/lt_heuristics.cu -lcublasLt && for p in 1 2 3; do
  /tmp/lt_heuristics 1000 1000 1000 nt 2 8; /tmp/lt_heuristics 1000 1000 1000 nt 1 32; done > $OUT/lt_heuristics.txt 2>&1
head -60 $OUT/lt_heuristics.txt
BUDGET=8 SLACK=80 DB=bench/state/fresh-s15.db.xz bash bench/device_search.sh 2>&1 | grep -v "^03_\|^02_" | tail -22
