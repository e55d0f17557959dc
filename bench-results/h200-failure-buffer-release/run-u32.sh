#!/bin/bash
# call 8: small batches after the failure buffer is given back within its call; cuckoo-scheme suites
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
tar xzf ghc.tgz -C /tmp
for f in gpuhash cc; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $A
S="--device cuda --no-peers --no-limits --reps 5 --sizes 2^27 --loads 0.5 --keys u32 --values u32"
timeout 150 ./gpuhash bench $S --ops insert,apply_sum --batch 2^12,2^16,2^20,2^22 --scheme two-level,cuckoo,linear --out $R/s > $R/s.log 2>&1; echo "small rc=$? $(el)s" >> $A; grep -h "^cuda:0" $R/s.log | sort -u >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
timeout 200 ./cc --test-threads 8 cuda_cuckoo:: cuda_two_level:: cuda_robin_hood:: > $R/c.log 2>&1; echo "cc modules rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/c.log | head -20 >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 240 ./cc --test-threads 4 oversubscribed_batches overfull_apply_every_key_twice refill_after_erase_with_growth_off fill_until_refused skewed_apply > $R/f.log 2>&1; echo "full-scale rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/f.log | head -20 >> $A
tar czf $OUT/ghc.tgz -C /tmp ghc
cp $R/c.log $OUT/c.log; cp $R/f.log $OUT/f.log
