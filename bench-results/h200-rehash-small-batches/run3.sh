#!/bin/bash
# new = main + rehash by insert + smaller two-level region batches at 0.9/0.95 (u32); base = main.
# Small two-level batches both ways, the two-level suite at both scales, the CUDA paged suites not yet run.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
gunzip -c ../base/gpuhash.gz > base; for v in new cc cp; do gunzip -c $v.gz > $v; done; chmod +x base new cc cp
export GPUHASH_CACHE_DIR=/tmp/cgh; mkdir -p $GPUHASH_CACHE_DIR
timeout 100 ./new kernels --scheme two-level,cuckoo > /dev/null 2>&1; echo "kernels rc=$? $(el)s" >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --keys u32 --values u32 --scheme two-level"
sb() { timeout 60 ./$1 bench $B --ops $2 --batch $3 --loads $4 --out $R/s$1$2$3$4 > $R/s$1$2$3$4.log 2>&1; echo "$1 $2 $3 $4 rc=$? $(el)s" >> $A; grep "two-level   " $R/s$1$2$3$4.log | sed "s/^/$1 /" >> $A; }
for v in new base new base; do sb $v insert 2^16 0.9,0.95; sb $v insert 2^17 0.9,0.95; sb $v insert 2^18 0.9; sb $v apply_sum 2^17 0.9,0.95; sb $v apply_sum 2^18 0.9; done
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 100 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|past 0.9" $R/c.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 110 ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|past 0.9" $R/f.log | head -12 >> $A
s=$RANDOM$RANDOM; left=$(( 515 - $(el) )); echo "paged seed $s, $left s" >> $A
GPUHASH_TEST_SEED=$s timeout $left ./cp --test-threads 10 cuda_paged_two_level::growth cuda_paged_two_level::clear_reserve cuda_paged_two_level::erase_churn cuda_paged_two_level::if_absent cuda_paged_two_level::insert_erase cuda_paged_cuckoo::clear_reserve cuda_paged_cuckoo::erase_churn cuda_paged_cuckoo::insert_erase cuda_paged_cuckoo::sequential > $R/p.log 2>&1; echo "paged rc=$? $(el)s" >> $A; cp $R/p.log $OUT/
grep -h "\.\.\. ok\|test result\|FAILED\|panicked" $R/p.log | head -16 >> $A
