#!/bin/bash
# small two-level batches: region build from load 0.75 (new) vs main; two-level suites at both scales; cuda_concurrency; CUDA paged suites as far as time allows
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash gpuhash_new cc cp conc; do gunzip -kf $v.gz; chmod +x $v; done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash; mkdir -p /tmp/cgpuhash
timeout 100 ./gpuhash_new kernels --scheme two-level,linear > /dev/null 2>&1; echo "kernels rc=$? $(el)s" >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --scheme two-level --batch 2^20"
run() { # binary keys ops loads
  timeout 120 ./$1 bench $B --keys $2 --values $2 --ops $3 --loads $4 --out $R/s$1$2$3 > $R/s$1$2$3.log 2>&1; echo "$1 $2 $3 rc=$? $(el)s" >> $A; grep "two-level " $R/s$1$2$3.log | sed "s/^/$1 /" >> $A
}
run gpuhash_new u32 insert 0.5,0.7,0.8,0.9,0.95
run gpuhash_new u64 insert 0.8,0.9
run gpuhash u64 insert 0.8,0.9
run gpuhash_new u32 apply_sum 0.9
run gpuhash u32 apply_sum 0.9
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 130 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 130 ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/f.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "conc seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 60 ./conc --test-threads 4 > $R/k.log 2>&1; echo "cuda_concurrency rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/k.log >> $A
s=$RANDOM$RANDOM; left=$(( 575 - $(el) )); echo "paged seed $s, $left s" >> $A
GPUHASH_TEST_SEED=$s timeout $left ./cp --test-threads 8 cuda_ > $R/p.log 2>&1; echo "paged rc=$? $(el)s" >> $A; cp $R/p.log $OUT/
grep -c "\.\.\. ok" $R/p.log >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head >> $A
