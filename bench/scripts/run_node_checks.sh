#!/usr/bin/env bash
# The sandbox checks of a GPU node, from the bundle (bin/anvil-node-checks):
# sandbox_test and sandbox_bomb_test (cgroup v2 memory and the node's nvcc),
# the sandbox's cost per job (anvil-sandbox-bench), and anvil-soak: JOBS jobs
# on GPU 0 (default 1000) -- sandboxed nvcc builds, 8 at once, beside
# evaluations of passing and hostile candidates, one runner at a time -- with
# recovery after hangs and crashes, device memory and leftovers checked.
# Results under OUT_DIR (soak.json, soak.md, sandbox_bench.md, the tests'
# logs). About 4.5 minutes (sandbox/SANDBOX.md, "Soak"); the soak stops
# starting jobs at 420 s. Needs the bundle (ANVIL_HOME or ANVIL_BUNDLE).
#   bench/scripts/run_node_checks.sh OUT_DIR
# Write-up: bench/results/2026-11-21-sandbox-h200.md.
. "$(dirname "$0")/node.sh"
[ -n "$here" ] || { echo "run_node_checks.sh needs the bundle: set ANVIL_HOME or ANVIL_BUNDLE" >&2; exit 2; }
export ANVIL_TEST_CANARY=1
"$ANVIL" doctor > "$OUT/doctor.txt" 2>&1
(uname -r; cat /sys/fs/cgroup/cgroup.controllers; nproc; free -g | head -2) > "$OUT/node.txt" 2>&1
SECONDS=0
"$here/bin/anvil-node-checks" "$OUT" --jobs "${JOBS:-1000}" --build-jobs 8 --max-seconds 420
rc=$?
echo "node checks rc=$rc in ${SECONDS}s"
nvidia-smi --query-gpu=name,memory.used,memory.total,compute_mode --format=csv,noheader >> "$OUT/gpu.txt" 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$OUT/gpu_apps_after.txt" 2>&1
exit $rc
