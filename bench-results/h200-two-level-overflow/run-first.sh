#!/bin/bash
# two-level overflow: suites first (default scale, then full), bench new vs old
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc /tmp/gho
for f in cc cp ck gpuhash gpuhash_old; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
timeout 60 ./gpuhash kernels >> $A 2>&1; echo "kernels rc=$? $(el)s" >> $A
GPUHASH_CACHE_DIR=/tmp/gho timeout 60 ./gpuhash_old kernels --scheme two-level >> $A 2>&1; echo "old kernels rc=$? $(el)s" >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 100 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; echo "cc two-level rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
B="--device cuda --no-peers --no-limits --reps 3 --sizes 2^27 --scheme two-level"
for k in u32 u64; do
  timeout 60 ./gpuhash bench $B --keys $k --values $k --ops insert --loads 0.5,0.8,0.9,0.95,0.97 --out $R/n$k > $R/n$k.log 2>&1; echo "bench new $k rc=$? $(el)s" >> $A
  GPUHASH_CACHE_DIR=/tmp/gho timeout 45 ./gpuhash_old bench $B --keys $k --values $k --ops insert --loads 0.5,0.9,0.95 --out $R/o$k > $R/o$k.log 2>&1; echo "bench old $k rc=$? $(el)s" >> $A
  timeout 60 ./gpuhash bench $B --keys $k --values $k --ops find_hit,find_miss50 --loads 0.9,0.95,0.97 --out $R/f$k > $R/f$k.log 2>&1; echo "bench finds $k rc=$? $(el)s" >> $A
done
cat $R/n*.log $R/o*.log $R/f*.log > $OUT/bench.log
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 150 ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; echo "full two-level rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/f.log | head -12 >> $A
GPUHASH_TEST_SEED=$s timeout 40 ./ck two_level > $R/k.log 2>&1; echo "ck rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/k.log | head -5 >> $A
GPUHASH_TEST_SEED=$s timeout 100 ./cp --test-threads 16 cuda_paged_two_level cuda_zero_copy_two_level cuda_beside_two_level > $R/p.log 2>&1; echo "cp rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head -8 >> $A; grep -c "\.\.\. ok" $R/p.log >> $A
cp $R/c.log $R/f.log $R/p.log $OUT/ 2>/dev/null
