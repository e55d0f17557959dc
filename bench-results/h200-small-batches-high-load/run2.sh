#!/bin/bash
# finds on main (two-level, hand-off builds); per-call cost of small calls on CUDA paged tables; small batches main vs unl
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash gpuhash_unl diag; do gunzip -kf $v.gz; chmod +x $v; done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash; mkdir -p /tmp/cgpuhash /tmp/cunl
timeout 100 ./gpuhash kernels --scheme two-level,linear --keys u32 --values u32 > /dev/null 2>&1; echo "kernels rc=$? $(el)s" >> $A
timeout 100 ./diag > $R/diag.log 2>&1; echo "diag rc=$? $(el)s" >> $A; cat $R/diag.log >> $A
timeout 150 ./gpuhash bench --device cuda --no-peers --no-limits --scheme two-level --sizes 2^27 --reps 3 --keys u32 --values u32 --ops find_hit,find_miss50 --loads 0.9,0.95,0.97 --out $R/f32 > $R/f32.log 2>&1; echo "finds u32 rc=$? $(el)s" >> $A; grep "two-level   find\|rror" $R/f32.log >> $A
timeout 100 ./gpuhash kernels --scheme two-level --keys u64 --values u64 > /dev/null 2>&1; echo "kernels64 rc=$? $(el)s" >> $A
timeout 120 ./gpuhash bench --device cuda --no-peers --no-limits --scheme two-level --sizes 2^27 --reps 3 --keys u64 --values u64 --ops find_hit,find_miss50 --loads 0.95 --out $R/f64 > $R/f64.log 2>&1; echo "finds u64 rc=$? $(el)s" >> $A; grep "two-level   find\|rror" $R/f64.log >> $A
GPUHASH_CACHE_DIR=/tmp/cunl timeout 60 ./gpuhash_unl kernels --scheme two-level --keys u32 --values u32 > /dev/null 2>&1; echo "unl kernels rc=$? $(el)s" >> $A
for v in gpuhash gpuhash_unl; do
  c=/tmp/cgpuhash; [ $v = gpuhash_unl ] && c=/tmp/cunl
  left=$(( 560 - $(el) )); [ $left -lt 20 ] && break
  GPUHASH_CACHE_DIR=$c timeout $left ./$v bench --device cuda --no-peers --no-limits --scheme two-level --sizes 2^27 --reps 3 --keys u32 --values u32 --ops insert --batch 2^20 --loads 0.5,0.9 --out $R/s$v > $R/s$v.log 2>&1; echo "$v small rc=$? $(el)s" >> $A; grep "two-level   insert" $R/s$v.log | sed "s/^/$v /" >> $A
done
cp $R/f32.log $R/diag.log $OUT/ 2>/dev/null
