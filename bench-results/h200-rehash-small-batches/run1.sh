#!/bin/bash
# branch tl-rehash-by-regions: per-call example (compare bench-results/h200-small-batches-high-load/call4.txt), cuckoo and two-level suites at both scales, CUDA paged two-level/cuckoo suites
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash percall cc cp; do gunzip -kf $v.gz; chmod +x $v; done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash; mkdir -p /tmp/cgpuhash
timeout 150 ./gpuhash kernels --scheme two-level,cuckoo,linear > /dev/null 2>&1; echo "kernels rc=$? $(el)s" >> $A
timeout 100 ./percall > $R/percall.log 2>&1; echo "percall rc=$? $(el)s" >> $A; cat $R/percall.log >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --keys u32 --values u32 --ops rehash_reinsert,clean_reinsert"
timeout 120 ./gpuhash bench $B --scheme two-level,cuckoo --loads 0.9 --out $R/rr > $R/rr.log 2>&1; echo "rehash rows rc=$? $(el)s" >> $A; grep "_reinsert" $R/rr.log >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 150 ./cc --test-threads 8 cuda_two_level cuda_cuckoo --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/c.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 150 ./cc --test-threads 4 cuda_two_level cuda_cuckoo --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/f.log | head -12 >> $A
s=$RANDOM$RANDOM; left=$(( 575 - $(el) )); echo "paged seed $s, $left s" >> $A
GPUHASH_TEST_SEED=$s timeout $left ./cp --test-threads 12 cuda_paged_two_level cuda_paged_cuckoo > $R/p.log 2>&1; echo "paged rc=$? $(el)s" >> $A; cp $R/p.log $OUT/
grep -c "\.\.\. ok" $R/p.log >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head >> $A
