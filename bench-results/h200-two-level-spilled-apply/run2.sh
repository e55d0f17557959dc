#!/bin/bash
# spilled regions' present keys updated in the build; hand-off for every mode. apply grid new vs old, aggregation, inserts, suites
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash gpuhash_old cc; do gunzip -kf $v.gz; chmod +x $v; done
for v in gpuhash gpuhash_old; do mkdir -p /tmp/c$v; GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v kernels --scheme two-level > /dev/null 2>&1; echo "$v kernels rc=$? $(el)s" >> $A; done
B="--device cuda --no-peers --no-limits --scheme two-level"
for v in gpuhash_old gpuhash; do
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 40 ./$v bench $B --sizes 2^27 --reps 3 --keys u32 --values u32 --ops apply_sum --loads 0.5,0.9 --out $R/o$v > $R/o$v.log 2>&1; echo "apply_sum $v rc=$? $(el)s" >> $A; grep "two-level   apply" $R/o$v.log | sed "s/^/$v /" >> $A
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 30 ./$v bench $B --sizes 2^23 --reps 5 --keys u32 --values u32 --ops apply_sum --loads 0.5 --out $R/x$v > $R/x$v.log 2>&1; echo "aggregation $v rc=$? $(el)s" >> $A; grep "two-level   apply" $R/x$v.log | sed "s/^/$v /" >> $A
done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash
timeout 90 ./gpuhash bench $B --sizes 2^27 --reps 3 --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.95 --out $R/g > $R/g.log 2>&1; echo "apply u32 0.95 rc=$? $(el)s" >> $A; grep "two-level   apply" $R/g.log >> $A
timeout 60 ./gpuhash bench $B --sizes 2^27 --reps 3 --keys u64 --values u64 --ops apply_sum --loads 0.5,0.9,0.95 --out $R/h > $R/h.log 2>&1; echo "apply u64 rc=$? $(el)s" >> $A; grep "two-level   apply" $R/h.log >> $A
timeout 60 ./gpuhash bench $B --sizes 2^27 --reps 3 --keys u32 --values u32 --ops apply_zipf,apply_hot --loads 0.5,0.9 --out $R/z > $R/z.log 2>&1; echo "apply skew u32 rc=$? $(el)s" >> $A; grep "two-level   apply" $R/z.log >> $A
for k in u32 u64; do
  timeout 60 ./gpuhash bench $B --sizes 2^27 --reps 3 --keys $k --values $k --ops insert --loads 0.5,0.9,0.95 --out $R/n$k > $R/n$k.log 2>&1; echo "insert $k rc=$? $(el)s" >> $A; grep "two-level   insert" $R/n$k.log >> $A
done
cat $R/*.log > $OUT/bench.log
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 110 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
left=$(( 570 - $(el) )); s=$RANDOM$RANDOM; echo "full seed $s, $left s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout $left ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/f.log | head -12 >> $A
