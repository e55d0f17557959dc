#!/bin/bash
# call 11: modules as machine code (cubin): precompile, then the whole suites
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
for f in cc cp gpuhash; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $A
timeout 40 ./gpuhash kernels >> $A 2>&1; echo "kernels rc=$? $(el)s" >> $A; ls /tmp/ghc | sed 's/.*\.//' | sort | uniq -c >> $A
S="--device cuda --no-peers --no-limits --reps 5 --sizes 2^27 --loads 0.5 --keys u32 --values u32"
timeout 30 ./gpuhash bench $S --ops insert --batch 2^20 --scheme two-level,linear --out $R/s > $R/s.log 2>&1; echo "bench rc=$? $(el)s" >> $A; grep -h "^cuda:0" $R/s.log | awk 'NR%2==1' >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 100 ./cc --test-threads 8 > $R/c.log 2>&1; echo "cc rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/c.log | head -10 >> $A
GPUHASH_TEST_SEED=$s timeout 90 ./cp --test-threads 16 > $R/p.log 2>&1; echo "cp rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head -10 >> $A
grep -c "\.\.\. ok" $R/c.log $R/p.log >> $A
