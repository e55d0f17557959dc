#!/bin/bash
# per-call cost breakdown of CUDA paged tables (diag build); small two-level batches through the region build (MIN_BATCH_SHARE 256) vs main; ncu of main's small batch at 0.9
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
B="--device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --keys u32 --values u32 --ops insert --batch 2^20"
for v in gpuhash gpuhash_diag; do for s in two-level linear; do
  l=0.5,0.9; [ $s = linear ] && l=0.5
  timeout 100 ./$v bench $B --scheme $s --loads $l --out $R/s$v$s > $R/s$v$s.log 2>&1; echo "$v $s small rc=$? $(el)s" >> $A; grep "   insert" $R/s$v$s.log | sed "s/^/$v /" >> $A
done; done
N=$(ls /opt/nvidia/nsight-compute/*/ncu | head -1)
left=$(( 560 - $(el) ))
timeout $left $N --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel ./gpuhash bench $B --scheme two-level --loads 0.9 --reps 1 --out $R/ncu > $R/ncu.log 2>&1; echo "ncu rc=$? $(el)s" >> $A; cp $R/ncu.log $OUT/
grep -E "^  gh_|^    gpu__time|invocations|Kernel|gh_" $R/ncu.log | head -60 >> $A
