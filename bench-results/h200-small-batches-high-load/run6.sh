#!/bin/bash
# final rule (two-level small batches by regions from 0.75, u64 from 0.85): crossover rows; two-level suite; CUDA paged two-level and split cuckoo suites
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash gpuhash_new cc cp; do gunzip -kf $v.gz; chmod +x $v; done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash; mkdir -p /tmp/cgpuhash
timeout 100 ./gpuhash_new kernels --scheme two-level,cuckoo > /dev/null 2>&1; echo "kernels rc=$? $(el)s" >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --scheme two-level --batch 2^20 --ops insert"
run() { # binary keys loads
  timeout 100 ./$1 bench $B --keys $2 --values $2 --loads $3 --out $R/s$1$2 > $R/s$1$2.log 2>&1; echo "$1 $2 rc=$? $(el)s" >> $A; grep "two-level   insert" $R/s$1$2.log | sed "s/^/$1 /" >> $A
}
run gpuhash_new u64 0.8,0.85,0.9
run gpuhash u64 0.85
run gpuhash_new u32 0.75
run gpuhash u32 0.75
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 130 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/c.log | head -12 >> $A
s=$RANDOM$RANDOM; left=$(( 430 - $(el) )); echo "paged seed $s, $left s" >> $A
GPUHASH_TEST_SEED=$s timeout $left ./cp --test-threads 12 cuda_paged_two_level cuda_split_cuckoo cuda_paged_cuckoo > $R/p.log 2>&1; echo "paged rc=$? $(el)s" >> $A; cp $R/p.log $OUT/
grep -c "\.\.\. ok" $R/p.log >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head >> $A
