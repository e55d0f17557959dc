#!/bin/bash
# fresh-table build: a walk's leftover to the overflow; one walk in the locked insert
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc /tmp/gho
for f in cc ck gpuhash gpuhash_old; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
timeout 60 ./gpuhash kernels --scheme two-level >> $A 2>&1; echo "kernels rc=$? $(el)s" >> $A
GPUHASH_CACHE_DIR=/tmp/gho timeout 60 ./gpuhash_old kernels --scheme two-level >> $A 2>&1; echo "old kernels rc=$? $(el)s" >> $A
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 110 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
B="--device cuda --no-peers --no-limits --reps 3 --sizes 2^27 --scheme two-level"
for k in u32 u64; do
  timeout 80 ./gpuhash bench $B --keys $k --values $k --ops insert --loads 0.5,0.8,0.9,0.95,0.97 --out $R/n$k > $R/n$k.log 2>&1; echo "bench new $k rc=$? $(el)s" >> $A
  GPUHASH_CACHE_DIR=/tmp/gho timeout 80 ./gpuhash_old bench $B --keys $k --values $k --ops insert --loads 0.5,0.9,0.95 --out $R/o$k > $R/o$k.log 2>&1; echo "bench old $k rc=$? $(el)s" >> $A
done
cat $R/n*.log $R/o*.log > $OUT/bench.log
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 130 ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/f.log | head -12 >> $A
GPUHASH_TEST_SEED=$s timeout 60 ./ck --test-threads 4 > $R/k.log 2>&1; echo "ck rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/k.log | head -6 >> $A
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
for c in "u64 0.5" "u32 0.95"; do set -- $c
  timeout 75 $N --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel ./gpuhash bench --device cuda --no-peers --no-limits --reps 1 --sizes 2^27 --scheme two-level --keys $1 --values $1 --ops insert --loads $2 --out $R/q > $OUT/ncu-$1-$2.log 2>&1; echo "ncu $c rc=$? $(el)s" >> $A
done
