#!/usr/bin/env bash
# GPU tests from the bundle plus the harness's own costs: runner start-up to
# first measurement, and time per candidate per problem. Logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf build/bundle/anvil-bundle.tar.gz
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache ANVIL_TEST_CANARY=1; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
command -v bwrap >/dev/null || export ANVIL_SANDBOX_BWRAP=$B/bin/bwrap
SECONDS=0; timeout 300 $B/bin/anvil-gpu-tests > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? in ${SECONDS}s"
grep -E "^\S+\.cu |FAILED|OK \]|passed" $OUT/gpu_tests.txt | head -60
K=$B/share/anvil/seeds/03_wgmma_tma/kernel.cu
cd /tmp && $B/bin/anvil eval $K --shape 256x128x128 --rounds 1 > /dev/null 2>&1   # warm the build cache
for i in 1 2 3; do
  /usr/bin/time -f "wall %e s" $B/bin/anvil --json eval $K --shape 256x128x128 --rounds 1 2>&1 | python3 -c "
import sys, json
for l in sys.stdin:
    if l.startswith('{'):
        m = json.loads(l)['measurement']; print('measurement seconds %.3f' % m['seconds'])
    elif l.startswith('wall'): print(l.strip())"
done | tee $OUT/costs.txt
