#!/usr/bin/env bash
# validation on the GPU node: GPU tests of the batch runner, build throughput, a short search
set -u
T0=$SECONDS
mkdir -p /opt/new && tar -C /opt/new -xJf .bundle/after.txz && chmod -R a+rX /opt/new
A=/opt/new/anvil
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version,memory.total --format=csv > $OUT/gpu.txt
nproc >> $OUT/gpu.txt
echo "unpacked in $((SECONDS-T0)) s"
cd /tmp
timeout 240 $A/libexec/tests/batch_gpu_test > $OUT/batch_gpu_test.txt 2>&1; echo "batch_gpu_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]" $OUT/batch_gpu_test.txt | head -20
timeout 120 $A/libexec/tests/harness_gpu_test --gtest_filter=*Adversarial*:*GraphReplay*:*Seeds* > $OUT/harness_gpu_test.txt 2>&1; echo "harness rc=$?"
grep -E "OK \]|FAILED \]" $OUT/harness_gpu_test.txt | head
timeout 100 $A/libexec/bench/anvil-build-bench --configs 28 --jobs 8,14 > $OUT/build_bench.txt 2>&1; grep -v "\[info\]" $OUT/build_bench.txt | tail -6
echo "at $((SECONDS-T0)) s"
cd - > /dev/null
ANVIL_HOME=$A BUDGET=2 SLACK=60 timeout 260 bench/scripts/run_throughput.sh $OUT/search2 > $OUT/search2.txt 2>&1
tail -25 $OUT/search2.txt
cd $OUT && tar czf /tmp/r.tgz . && find $OUT -mindepth 1 -delete && mv /tmp/r.tgz $OUT/dev1.tgz
echo "total $((SECONDS-T0)) s"
