#!/usr/bin/env bash
# The sandbox checks on a GPU node (issue 4), from the bundle: sandbox_test and
# sandbox_bomb_test (cgroup v2 memory and real nvcc there), the per-job
# overhead bench, and anvil-soak: 1000 jobs on GPU 0 -- sandboxed nvcc builds,
# 8 at once, beside evaluations of passing and hostile candidates, one runner
# at a time -- with recovery after hangs and crashes, device memory and
# leftovers checked. Logs and soak.json land under $OUT. Changes no clocks and
# never resets the GPU. Expected: about 4.5 minutes (sandbox/SANDBOX.md, "Soak");
# the soak stops starting jobs at 420 s, so at most about 8.
#   BUNDLE=build-soak/bundle/anvil-bundle.tar.gz bash bench/device_sandbox.sh
set -uo pipefail
OUT=${OUT:-/tmp/anvil-out}
BUNDLE=${BUNDLE:-build/bundle/anvil-bundle.tar.gz}
rm -rf /opt/anvil/anvil && mkdir -p /opt/anvil "$OUT" && tar -C /opt/anvil -xzf "$BUNDLE" || exit 1
B=/opt/anvil/anvil
export ANVIL_CACHE=/var/tmp/anvil-cache ANVIL_TEST_CANARY=1; mkdir -p $ANVIL_CACHE; chmod 755 $ANVIL_CACHE
command -v bwrap >/dev/null || export ANVIL_SANDBOX_BWRAP=$B/bin/bwrap
GPU_QUERY=name,memory.used,memory.total,clocks.sm,power.draw,temperature.gpu,compute_mode
nvidia-smi --query-gpu=$GPU_QUERY --format=csv > "$OUT"/gpu.txt 2>&1
$B/bin/anvil doctor > "$OUT"/doctor.txt 2>&1
(uname -r; cat /sys/fs/cgroup/cgroup.controllers; nproc; free -g | head -2) > "$OUT"/node.txt 2>&1

SECONDS=0
$B/bin/anvil-node-checks "$OUT" --jobs 1000 --build-jobs 8 --max-seconds 420
rc=$?
echo "node checks rc=$rc in ${SECONDS}s"
nvidia-smi --query-gpu=$GPU_QUERY --format=csv,noheader >> "$OUT"/gpu.txt 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$OUT"/gpu_apps_after.txt 2>&1
exit $rc
