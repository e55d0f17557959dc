#!/bin/bash
# main (b74ee82) vs tl-lazy-cands vs tl-unlocked-spilled: inserts u32/u64 same call; two-level suites (new large-region apply phase)
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash gpuhash_lazy gpuhash_unl cc; do gunzip -kf $v.gz; chmod +x $v; done
for v in gpuhash gpuhash_lazy; do mkdir -p /tmp/c$v; GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v kernels --scheme two-level > /dev/null 2>&1; echo "$v kernels rc=$? $(el)s" >> $A; done
GPUHASH_CACHE_DIR=/tmp/cgpuhash timeout 90 ./gpuhash bench --device cuda --no-peers --no-limits --scheme two-level --sizes 2^27 --reps 3 --keys u32 --values u32 --ops find,find_miss50 --loads 0.9,0.95,0.97 --out $R/f32 > $R/f32.log 2>&1; echo "finds u32 rc=$? $(el)s" >> $A; grep "two-level   find" $R/f32.log >> $A
B="--device cuda --no-peers --no-limits --scheme two-level --sizes 2^27 --reps 5 --ops insert --loads 0.5,0.9,0.95"
for k in u32 u64; do for v in gpuhash gpuhash_lazy gpuhash gpuhash_lazy; do
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v bench $B --keys $k --values $k --out $R/$v$k > $R/$v$k.log 2>&1; echo "$v $k rc=$? $(el)s" >> $A; grep "two-level   insert" $R/$v$k.log | sed "s/^/$v /" >> $A
done; done
export GPUHASH_CACHE_DIR=/tmp/cgpuhash
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 110 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
left=$(( 570 - $(el) )); s=$RANDOM$RANDOM; echo "full seed $s, $left s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout $left ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/f.log | head -12 >> $A
