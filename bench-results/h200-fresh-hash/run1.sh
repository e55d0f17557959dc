#!/bin/bash
# The index build holding each bin entry's hash instead of its key (walks
# read candidates without hashing), against the committed build (f9a7240,
# gpuhash-base), alternating in two rounds: issue 15's u64 insert rows.
# Then the two-level CUDA suites on the new build with fresh seeds (default
# scale; full scale for the 16-byte pairs, twice), cuda_concurrency, and
# memcheck on the large-batch tests. Also walks of 128 steps instead of 64
# (-DGH_EXP_FR_STEPS=128, a switch of this call's build only).
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
for b in gpuhash gpuhash-base cc cx; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3"
run() { local n=$1 g=$2; shift 2
  timeout 150 $R/$g bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s [$g]: $*" >> $A; grep -E "^cuda:0 +[a-z-]+ {2,}" $R/$n.log | awk '!s[$0]++' | head -4 >> $A; }
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | sort | uniq -c | head -8 | tr '\n' ' ')" >> $A; }
rows() { run $1 $2 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27; }
for round in 1 2; do
  rows r$round-base gpuhash-base
  rows r$round-hash gpuhash
  GPUHASH_NVRTC_FLAGS=-DGH_EXP_FR_STEPS=128 rows r$round-s128 gpuhash
done
suite cc-default cc 150 cuda_two_level
P16=u32:f64,u64:u64,u64:i64,u64:f32
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=$P16 suite cc-full1 cc 110 cuda_two_level
suite cx cx 60
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
s=$RANDOM$RANDOM; GPUHASH_TEST_SEED=$s GPUHASH_TEST_PAIRS=$P16 timeout 90 $CS --tool memcheck --print-limit 20 $R/cc --test-threads 4 cuda_two_level::large_batches > $R/memcheck.log 2>&1
echo "== memcheck seed $s rc=$? $(el)s ok=$(grep -c '\.\.\. ok' $R/memcheck.log) $(grep -E 'ERROR SUMMARY|test result|FAILED' $R/memcheck.log | sort | uniq -c | head -6 | tr '\n' ' ')" >> $A
left=$((560 - $(el)))
[ $left -gt 90 ] && GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=$P16 suite cc-full2 cc $left cuda_two_level
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
