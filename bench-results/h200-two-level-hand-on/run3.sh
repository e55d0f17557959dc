#!/bin/bash
# final build (walks of 128/64 steps in fresh tables): suites at both scales, bench grid, build-floor variants
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
for f in cc cp gpuhash; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
timeout 60 ./gpuhash kernels --scheme two-level >> $A 2>&1; echo "kernels rc=$? $(el)s" >> $A
B="--device cuda --no-peers --no-limits --reps 3 --sizes 2^27 --scheme two-level"
for k in u32 u64; do
  timeout 80 ./gpuhash bench $B --keys $k --values $k --ops insert --loads 0.5,0.8,0.9,0.95,0.97 --out $R/n$k > $R/n$k.log 2>&1; echo "bench insert $k rc=$? $(el)s" >> $A
  grep "two-level   insert" $R/n$k.log >> $A
done
timeout 90 ./gpuhash bench $B --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5,0.9,0.95 --out $R/a > $R/a.log 2>&1; echo "bench apply rc=$? $(el)s" >> $A
grep "two-level   apply" $R/a.log >> $A
cat $R/n*.log $R/a.log > $OUT/bench.log
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 110 ./cc --test-threads 8 cuda_two_level --nocapture > $R/c.log 2>&1; rc=$?; cp $R/c.log $OUT/; echo "cc two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/c.log | head -12 >> $A
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout 130 ./cc --test-threads 4 cuda_two_level --nocapture > $R/f.log 2>&1; rc=$?; cp $R/f.log $OUT/; echo "full two-level rc=$rc $(el)s" >> $A; grep -h "test result\|FAILED\|panicked\|large_regions_at_high_load cuda\|fill_until_refused cuda" $R/f.log | head -12 >> $A
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
for v in gpuhash v1 v2; do
  [ -f $v.gz ] && { gunzip -kf $v.gz; chmod +x $v; }
  mkdir -p /tmp/c$v; GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 $N --clock-control none -k gh_region_build --metrics gpu__time_duration.sum --print-summary per-kernel ./$v bench --device cuda --no-peers --no-limits --reps 1 --sizes 2^27 --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5 --out $R/q > $R/ncu-$v.log 2>&1; echo "ncu $v rc=$? $(el)s" >> $A
  grep -A6 "^  gh_" $R/ncu-$v.log | grep -E "^  gh_|gpu__time" | paste - - | awk -v v=$v '{print v, $1, $(NF-3), $(NF-2), $(NF-1), $NF}' >> $A
done
s=$RANDOM$RANDOM; echo "paged seed $s" >> $A
GPUHASH_TEST_SEED=$s timeout 110 ./cp --test-threads 16 cuda_paged_two_level > $R/p.log 2>&1; echo "cp rc=$? $(el)s" >> $A; grep -h "test result\|FAILED\|panicked" $R/p.log | head -8 >> $A; echo "ok: $(grep -c '\.\.\. ok' $R/p.log)" >> $A
cp $R/p.log $OUT/
