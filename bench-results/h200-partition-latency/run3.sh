#!/bin/bash
# The committed build: issue 15's rows, then the linear and two-level CUDA
# suites with fresh seeds at the default and full scale, and memcheck on the
# region builds' large batches.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
for b in gpuhash cc cx; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done; G=$R/gpuhash
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3"
run() { local n=$1; shift
  timeout 120 $G bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s: $*" >> $A; grep -E "^cuda:0 +[a-z-]+ {2,}" $R/$n.log | awk '!s[$0]++' >> $A; }
run ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
run ins32 --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
run agg --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
run apply64 --scheme two-level --keys u64 --values u64 --ops apply_sum --loads 0.5 --sizes 2^27
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | sort | uniq -c | head -8 | tr '\n' ' ')" >> $A; }
suite cc-default cc 120 cuda_linear cuda_two_level
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 suite cc-full cc 150 cuda_linear cuda_two_level
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
left=$((450 - $(el)))
if [ $left -gt 30 ]; then
  s=$RANDOM$RANDOM; GPUHASH_TEST_SEED=$s timeout $left $CS --tool memcheck --print-limit 20 $R/cc --test-threads 4 cuda_two_level::large_batches cuda_linear::large_batches cuda_two_level::skewed_apply cuda_linear::skewed_apply > $R/memcheck.log 2>&1
  echo "== memcheck seed $s rc=$? $(el)s ok=$(grep -c '\.\.\. ok' $R/memcheck.log) $(grep -E 'ERROR SUMMARY|test result|FAILED' $R/memcheck.log | sort | uniq -c | head -6 | tr '\n' ' ')" >> $A
fi
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
