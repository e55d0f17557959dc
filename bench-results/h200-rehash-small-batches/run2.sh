#!/bin/bash
# main + rehash by insert + unlocked spilled update (new) against main (base):
# small two-level batches below the region rule, rehash rows, two-level suites at both scales,
# cuckoo growth/rehash tests at full scale, CUDA paged two-level/cuckoo suites.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
gunzip -c ../base/gpuhash.gz > base; for v in new cc cp; do gunzip -c $v.gz > $v; done; chmod +x base new cc cp
mkdir -p /tmp/cbase /tmp/cnew
GPUHASH_CACHE_DIR=/tmp/cnew timeout 100 ./new kernels --scheme two-level,cuckoo > /dev/null 2>&1; echo "kernels new rc=$? $(el)s" >> $A
GPUHASH_CACHE_DIR=/tmp/cbase timeout 100 ./base kernels --scheme two-level,cuckoo > /dev/null 2>&1; echo "kernels base rc=$? $(el)s" >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --keys u32 --values u32 --scheme two-level"
sb() { GPUHASH_CACHE_DIR=/tmp/c$1 timeout 60 ./$1 bench $B --ops $2 --batch $3 --loads $4 --out $R/s$1$2$3$4 > $R/s$1$2$3$4.log 2>&1; echo "$1 $2 $3 $4 rc=$? $(el)s" >> $A; grep "two-level   " $R/s$1$2$3$4.log | sed "s/^/$1 /" >> $A; }
for v in new base new base; do sb $v insert 2^18 0.9,0.95; sb $v apply_sum 2^18 0.9; done
for v in new base; do
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v bench --device cuda --no-peers --no-limits --sizes 2^27 --reps 3 --keys u32 --values u32 --ops rehash_reinsert --scheme cuckoo,two-level --loads 0.9 --out $R/rr$v > $R/rr$v.log 2>&1; echo "$v rehash rc=$? $(el)s" >> $A; grep "_reinsert" $R/rr$v.log | head -2 | sed "s/^/$v /" >> $A
done
export GPUHASH_CACHE_DIR=/tmp/cnew
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 100 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/c.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 170 ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/f.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "full cuckoo seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 110 ./cc --test-threads 4 cuda_cuckoo::growth cuda_cuckoo::clear_reserve_rehash --nocapture > $R/k.log 2>&1; rc=$?; cp $R/k.log $OUT/; echo "full cuckoo rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|\.\.\. ok" $R/k.log | head -12 >> $A
s=$RANDOM$RANDOM; left=$(( 430 - $(el) )); echo "paged seed $s, $left s" >> $A
GPUHASH_TEST_SEED=$s timeout $left ./cp --test-threads 12 cuda_paged_two_level cuda_paged_cuckoo > $R/p.log 2>&1; echo "paged rc=$? $(el)s" >> $A; cp $R/p.log $OUT/
grep -c "\.\.\. ok" $R/p.log >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head >> $A
