#!/bin/bash
# paged per-call cost with the driver probe cached; two-level/linear small batches: plain (main) vs region build (diag: MIN_BATCH_SHARE 256) by load; ncu of main's small two-level batch at 0.9
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash gpuhash_diag diag; do gunzip -kf $v.gz; chmod +x $v; done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash; mkdir -p /tmp/cgpuhash
timeout 100 ./gpuhash kernels --scheme two-level,linear --keys u32 --values u32 > /dev/null 2>&1; echo "kernels rc=$? $(el)s" >> $A
GH_DIAG=1 timeout 100 ./diag > $R/diag.log 2>&1; echo "diag rc=$? $(el)s" >> $A; cp $R/diag.log $OUT/
grep -v "^diag" $R/diag.log >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --keys u32 --values u32 --ops insert"
run() { # binary scheme batch loads
  timeout 120 ./$1 bench $B --scheme $2 --batch $3 --loads $4 --out $R/s$1$2$3 > $R/s$1$2$3.log 2>&1; echo "$1 $2 $3 rc=$? $(el)s" >> $A; grep "   insert" $R/s$1$2$3.log | sed "s/^/$1 /" >> $A
}
for v in gpuhash gpuhash_diag; do run $v two-level 2^20 0.6,0.7,0.8,0.95; done
for v in gpuhash gpuhash_diag; do run $v two-level 2^19 0.8,0.9; done
for v in gpuhash gpuhash_diag; do run $v linear 2^20 0.9,0.95; done
N=$(ls /opt/nvidia/nsight-compute/*/ncu | head -1)
left=$(( 560 - $(el) ))
timeout $left $N --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel ./gpuhash bench --device cuda --no-peers --no-limits --sizes 2^27 --keys u32 --values u32 --ops insert --batch 2^20 --scheme two-level --loads 0.9 --reps 1 --out $R/ncu > $R/ncu.log 2>&1; echo "ncu rc=$? $(el)s" >> $A; cp $R/ncu.log $OUT/
grep -E "gh_|gpu__time|invocations" $R/ncu.log | head -60 >> $A
