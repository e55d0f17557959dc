#!/bin/bash
# overflow build: paged two-level suites on CUDA, concurrency suite
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
for f in cp ck gpuhash; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
timeout 60 ./gpuhash kernels >> $A 2>&1; echo "kernels rc=$? $(el)s" >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 45 ./ck > $R/k.log 2>&1; echo "ck rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/k.log | head -5 >> $A
GPUHASH_TEST_SEED=$s timeout 420 ./cp --test-threads 6 cuda_paged_two_level cuda_zero_copy_two_level cuda_beside_two_level > $R/p.log 2>&1; echo "cp rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head -8 >> $A; grep -c "\.\.\. ok" $R/p.log >> $A; grep -c "FAILED" $R/p.log >> $A
cp $R/p.log $R/k.log $OUT/ 2>/dev/null
