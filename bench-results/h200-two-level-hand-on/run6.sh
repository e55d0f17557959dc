#!/bin/bash
# insert-or-apply batches keep the region search (hand_on only for plain inserts): apply 0.9, insert 0.95, two-level suite
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
for f in cc gpuhash; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
timeout 40 ./gpuhash kernels --scheme two-level > /dev/null 2>&1; echo "kernels rc=$? $(el)s" >> $A
B="--device cuda --no-peers --no-limits --sizes 2^27 --scheme two-level --keys u32 --values u32"
timeout 30 ./gpuhash bench $B --reps 1 --ops apply_sum --loads 0.9 --out $R/a > $R/a.log 2>&1; echo "apply rc=$? $(el)s" >> $A; grep "two-level   apply" $R/a.log >> $A
timeout 30 ./gpuhash bench $B --reps 3 --ops insert --loads 0.5,0.95 --out $R/n > $R/n.log 2>&1; echo "insert rc=$? $(el)s" >> $A; grep "two-level   insert" $R/n.log >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 95 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
