#!/bin/bash
# f1 = s1 + deferred copies walk first when most were unsearched; apply 0.9: 83d70fc vs s1 vs f1; grid and suites on f1
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --scheme two-level"
for v in gpuhash gpuhash_old s1; do gunzip -kf $v.gz; chmod +x $v; mkdir -p /tmp/c$v
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v kernels --scheme two-level > /dev/null 2>&1; echo "$v kernels rc=$? $(el)s" >> $A; done
for v in gpuhash_old s1 gpuhash; do
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 45 ./$v bench $B --reps 1 --keys u32 --values u32 --ops apply_sum --loads 0.9 --out $R/a$v > $R/a$v.log 2>&1; echo "apply $v rc=$? $(el)s" >> $A
  grep "two-level   apply" $R/a$v.log | sed "s/^/$v /" >> $A
done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash
for k in u32 u64; do
  timeout 60 ./gpuhash bench $B --reps 3 --keys $k --values $k --ops insert --loads 0.5,0.8,0.9,0.95,0.97 --out $R/n$k > $R/n$k.log 2>&1; echo "bench insert $k rc=$? $(el)s" >> $A
  grep "two-level   insert" $R/n$k.log >> $A
done
timeout 90 ./gpuhash bench $B --reps 3 --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5,0.9,0.95 --out $R/g > $R/g.log 2>&1; echo "bench apply grid rc=$? $(el)s" >> $A
grep "two-level   apply" $R/g.log >> $A
cat $R/a*.log $R/n*.log $R/g.log > $OUT/bench.log
gunzip -kf cc.gz; chmod +x cc
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 110 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 120 ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/f.log | head -12 >> $A
