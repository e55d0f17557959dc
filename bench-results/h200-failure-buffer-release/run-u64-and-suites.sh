#!/bin/bash
# call 10: u64 small batches; the cuckoo-scheme suites with a warmer cache; conformance_paged
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
tar xzf ghc.tgz -C /tmp
for f in cc cp gpuhash; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
S="--device cuda --no-peers --no-limits --reps 5 --sizes 2^27 --loads 0.5 --keys u64 --values u64"
timeout 45 ./gpuhash bench $S --ops insert --batch 2^20 --scheme two-level,cuckoo,linear --out $R/s > $R/s.log 2>&1; echo "u64 small rc=$? $(el)s" >> $A; grep -h "^cuda:0" $R/s.log | sort -u >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 200 ./cc --test-threads 16 cuda_cuckoo:: cuda_two_level:: cuda_robin_hood:: > $R/c.log 2>&1; echo "cc modules rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/c.log | head -20 >> $A
GPUHASH_TEST_SEED=$s timeout 290 ./cp --test-threads 16 > $R/p.log 2>&1; echo "paged rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head -20 >> $A
grep -c "\.\.\. ok" $R/c.log $R/p.log >> $A
grep -h "FAILED\|failed" $R/c.log $R/p.log | head >> $A
