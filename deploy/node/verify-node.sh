#!/usr/bin/env bash
# The GPU node's first run, as README.md's "Workers on GPU nodes" says, from a
# fresh untar, as root, with a clean environment (env -i: PATH and HOME only),
# recorded under OUT_DIR:
#   doctor.txt, doctor.json          what the node offers, the isolation in force
#   gpu_tests.txt                    anvil-gpu-tests
#   optimize.log, curve.csv          anvil optimize, 2 minutes, three dev shapes
#   adversarial.csv, adversarial/    every tests/adversarial file through anvil eval:
#                                    exit code, verdict, reason, wall time, expected
#   canary.txt                       files the sandbox's uid left outside its scratch
#                                    directories, and the planted secret in any output
#   integrity.txt                    the store's PRAGMA integrity_check
#   summary.txt                      one line per step
#   deploy/node/verify-node.sh OUT_DIR [BUNDLE_TAR] [SHAPES_FILE]
# Defaults: build/bundle/anvil-bundle.tar.gz, the first three bench/configs/dev_shapes.txt
# shapes. Run from the source tree as root. Exit 1 if a step failed.
set -uo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root (the case this checks)" >&2; exit 2; }
OUT=$(realpath -m "${1:?usage: verify-node.sh OUT_DIR [BUNDLE_TAR] [SHAPES_FILE]}")
TAR=$(realpath "${2:-build/bundle/anvil-bundle.tar.gz}")
SHAPES=$(realpath "${3:-bench/configs/dev_shapes.txt}")
mkdir -p "$OUT/adversarial"
W=$(mktemp -d /opt/anvil-verify.XXXXXX) || exit 1
chmod 755 "$W"
failed=0
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
# A fresh root login's environment, nothing of Anvil's.
clean() { env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
: > "$OUT/summary.txt"
say "node: $(hostname) $(date -u +%FT%TZ); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# The README's steps, verbatim, in $W.
cd "$W" && cp "$TAR" . && grep -v '^#' "$SHAPES" | grep -v '^\s*$' | head -3 > shapes.txt
clean tar xzf anvil-bundle.tar.gz
clean anvil/bin/anvil doctor > "$OUT/doctor.txt" 2>&1; say "doctor: exit $?"
clean anvil/bin/anvil doctor --json > "$OUT/doctor.json" 2>/dev/null
say "isolation: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sandbox"]; print(s["isolation"], "-", s["bwrap"], "(" + s["bwrap_found_by"] + ")")' "$OUT/doctor.json" 2>&1)"
SECONDS=0
clean anvil/bin/anvil-gpu-tests > "$OUT/gpu_tests.txt" 2>&1; rc=$?
say "gpu tests: exit $rc in ${SECONDS}s: $(tail -1 "$OUT/gpu_tests.txt")"; [ $rc = 0 ] || failed=1

# Canary: a secret a hostile candidate would want, and a time mark for files
# the sandbox's uid may leave behind.
secret="anvil-canary-$RANDOM$RANDOM"
echo "$secret" > /root/anvil-canary.txt; chmod 600 /root/anvil-canary.txt
echo "$secret" > "$W/anvil-canary.txt"; chmod 644 "$W/anvil-canary.txt"
touch "$OUT/.mark"; sleep 1

SECONDS=0
clean anvil/bin/anvil optimize --shapes shapes.txt --db anvil.db --budget-minutes 2 --curve "$OUT/curve.csv" \
  > "$OUT/optimize.log" 2>&1; rc=$?
say "optimize: exit $rc in ${SECONDS}s ($(tr '\n' ';' < shapes.txt))"; [ $rc = 0 ] || failed=1

echo "file,exit,verdict,reason,wall_s,time_limit_s,expected" > "$OUT/adversarial.csv"
for f in anvil/share/anvil/tests/adversarial/*.cu; do
  name=$(basename "$f" .cu)
  expected=$(grep -m1 -o 'EXPECT: .*' "$f" | sed 's/EXPECT: //')
  grep -q 'POLICY:' "$f" && expected="REJECTED (policy); runtime: $expected"
  start=$(date +%s%N)
  clean anvil/bin/anvil --db anvil.db --json eval "$f" --shape 130x200x72 --layout nt \
    > "$OUT/adversarial/$name.json" 2> "$OUT/adversarial/$name.err"; rc=$?
  wall_ms=$(( ($(date +%s%N) - start) / 1000000 )); wall=$((wall_ms / 1000)).$(printf %03d $((wall_ms % 1000)))
  row=$(python3 - "$OUT/adversarial/$name.json" <<'PY'
import json, sys
try:
    k = json.loads(open(sys.argv[1]).readline())
except Exception:
    print(",,"); sys.exit()
m, b = k.get("measurement", {}), k.get("build", {})
verdict = m.get("verdict") or b.get("verdict", "")
reason = m.get("reason") or (b.get("error", "").splitlines() or [""])[0]
print(",".join(x.replace(",", ";").replace('"', "'") for x in
               (verdict.replace("VERDICT_", ""), reason[:160], str(m.get("time_limit_s", "")))))
PY
)
  IFS=, read -r verdict reason limit <<< "$row"
  echo "$name,$rc,$verdict,\"$reason\",$wall,$limit,\"$expected\"" >> "$OUT/adversarial.csv"
  say "adversarial $name: exit $rc, $verdict $reason, $wall s (limit ${limit:-?} s)"
  case $rc in 0|5) ;; *) failed=1;; esac
done

# Canary: files of uid 65534 (the jobs) newer than the mark, outside /proc, /sys, /dev;
# the secret in any output.
find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -uid 65534 -newer "$OUT/.mark" -print \
  > "$OUT/canary.txt" 2>/dev/null
leaks=$(grep -rl "$secret" "$OUT" "$W/anvil.db" 2>/dev/null | grep -v "canary.txt$" | wc -l)
echo "secret found in $leaks outputs" >> "$OUT/canary.txt"
say "canary: $(($(wc -l < "$OUT/canary.txt") - 1)) files left by uid 65534 outside scratch, secret in $leaks outputs"
[ "$(wc -l < "$OUT/canary.txt")" = 1 ] && [ "$leaks" = 0 ] || failed=1
rm -f /root/anvil-canary.txt

python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchall())' \
  anvil.db > "$OUT/integrity.txt" 2>&1
say "store integrity: $(cat "$OUT/integrity.txt")"
grep -q "\[('ok',)\]" "$OUT/integrity.txt" || failed=1
cp anvil.db "$OUT/anvil.db" 2>/dev/null
cd / && rm -rf "$W"
say "verify-node: $([ $failed = 0 ] && echo PASS || echo FAIL)"
exit $failed
