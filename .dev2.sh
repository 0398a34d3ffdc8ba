#!/usr/bin/env bash
# validation 2: unity builds on the node, a 2-minute search with the tuned batches
set -u
T0=$SECONDS
rm -rf /opt/new && mkdir -p /opt/new && tar -C /opt/new -xJf .bundle/after.txz && chmod -R a+rX /opt/new
A=/opt/new/anvil
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version,memory.total --format=csv > $OUT/gpu.txt
cd /tmp
timeout 150 $A/libexec/bench/anvil-build-bench --configs 42 --jobs 14 --unity 1,8 > $OUT/build_bench.txt 2>&1; grep -v "\[info\]" $OUT/build_bench.txt | tail -8
echo "at $((SECONDS-T0)) s"
cd - > /dev/null
rm -rf /var/tmp/anvil-0 /root/.cache/anvil 2>/dev/null  # an empty build cache
ANVIL_HOME=$A BUDGET=2 SLACK=200 timeout 330 bench/scripts/run_throughput.sh $OUT/search2 > $OUT/search2.txt 2>&1
tail -14 $OUT/search2.txt
grep -E "coordinator overhead|GPU busy" $OUT/search2/optimize.log | tail -3
(setsid nohup sleep 200 > /dev/null 2>&1 &) ; echo "marker started"
cd $OUT && tar czf /tmp/r.tgz . && find $OUT -mindepth 1 -delete && mv /tmp/r.tgz $OUT/dev2.tgz
echo "total $((SECONDS-T0)) s"
