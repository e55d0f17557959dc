#!/bin/bash
# The committed build (one hash for a region's candidates): two-level suites
# with fresh seeds at both scales, the two-level grid with the limits, and
# the CUDA paged suites where the host looks up pages the GPU built.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
for b in gpuhash cc cp cx; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
tests() { # name timeout binary args...
  local n=$1 to=$2 b=$3; shift 3
  timeout $to $R/$b "$@" > $R/$n.log 2>&1; echo "== $n rc=$? $(el)s: $*" >> $A
  grep -hE "^test result|FAILED|panicked|past 0.9|first refused" $R/$n.log | head -12 >> $A
}
s=$RANDOM$RANDOM; echo "seed $s" >> $A
GPUHASH_TEST_SEED=$s tests tl-default 120 cc --test-threads 8 cuda_two_level --nocapture
B="--device cuda --no-peers --reps 3 --scheme two-level"
bench() { local n=$1; shift; timeout 100 $R/gpuhash bench $B "$@" --out $R/$n > $R/$n.log 2>&1; echo "== bench $n rc=$? $(el)s: $*" >> $A; }
bench ins32 --keys u32 --values u32 --ops insert,find_hit,find_miss50 --loads 0.5,0.8,0.9,0.95,0.97 --sizes 2^27
bench ins64 --no-limits --keys u64 --values u64 --ops insert,find_hit,find_miss50 --loads 0.5,0.9,0.95 --sizes 2^27
bench apply32 --no-limits --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5,0.9,0.95 --sizes 2^27
bench apply64 --no-limits --keys u64 --values u64 --ops apply_sum --loads 0.5,0.9 --sizes 2^27
bench agg --no-limits --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
s=$RANDOM$RANDOM; echo "full seed $s" >> $A
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s tests tl-full 140 cc --test-threads 4 cuda_two_level --nocapture
GPUHASH_TEST_SEED=$s tests conc 40 cx --test-threads 4
left=$(( 470 - $(el) )); [ $left -lt 20 ] && left=20
GPUHASH_TEST_SEED=$s tests paged $left cp --test-threads 12 cuda_beside_two_level cuda_zero_copy_two_level cuda_paged_two_level
grep -h "\.\.\. ok\|\.\.\. FAILED" $R/paged.log | sort | uniq -c | sort -rn | head -3 >> $A
grep -c "\.\.\. ok" $R/paged.log >> $A
cd $R && tar czf $OUT/logs.tgz *.log */results.csv 2>/dev/null
echo "done $(el)s" >> $A
