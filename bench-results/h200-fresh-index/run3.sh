#!/bin/bash
# The committed index build (three blocks an SM): issue 15's u64 insert
# rows, then the two-level CUDA suites with fresh seeds (default scale;
# full scale for the 16-byte pairs), cuda_concurrency, and memcheck on the
# large-batch tests.
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
  timeout 150 $G bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s: $*" >> $A; grep -E "^cuda:0 +[a-z-]+ {2,}" $R/$n.log | awk '!s[$0]++' | head -4 >> $A; }
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | sort | uniq -c | head -8 | tr '\n' ' ')" >> $A; }
run ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
suite cc-default cc 110 cuda_two_level
P16=u32:f64,u64:u64,u64:i64,u64:f32
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=$P16 suite cc-full cc 100 cuda_two_level
suite cx cx 60
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
left=$((380 - $(el)))
if [ $left -gt 30 ]; then
  s=$RANDOM$RANDOM; GPUHASH_TEST_SEED=$s GPUHASH_TEST_PAIRS=$P16 timeout $left $CS --tool memcheck --print-limit 20 $R/cc --test-threads 4 cuda_two_level::large_batches > $R/memcheck.log 2>&1
  echo "== memcheck seed $s rc=$? $(el)s ok=$(grep -c '\.\.\. ok' $R/memcheck.log) $(grep -E 'ERROR SUMMARY|test result|FAILED' $R/memcheck.log | sort | uniq -c | head -6 | tr '\n' ' ')" >> $A
fi
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
