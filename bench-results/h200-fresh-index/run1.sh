#!/bin/bash
# The two-level build of fresh 16-byte tables from slot indices against the
# slot-wide build (GH_EXP_NO_FRESH=1, a host switch of this call's binary
# only), alternating in two rounds; then the CUDA suites with fresh seeds
# (default scale; full scale twice for the 16-byte pairs) and memcheck on
# the large-batch tests.
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
  echo "== $n rc=$? $(el)s [${GH_EXP_NO_FRESH:+slot-wide}]: $*" >> $A; grep -E "^cuda:0 +[a-z-]+ {2,}" $R/$n.log | awk '!s[$0]++' >> $A; }
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | sort | uniq -c | head -8 | tr '\n' ' ')" >> $A; }
# A quick check first: the u64 large batches.
GPUHASH_TEST_PAIRS=u64:u64 suite smoke cc 60 cuda_two_level::large_batches
for round in 1 2; do
  run r$round-fresh --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
  GH_EXP_NO_FRESH=1 run r$round-wide --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
done
suite cc-default cc 120 cuda_linear cuda_two_level
P16=u32:f64,u64:u64,u64:i64,u64:f32
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=$P16 suite cc-full1 cc 130 cuda_two_level
[ $(el) -lt 400 ] && GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=$P16 suite cc-full2 cc 100 cuda_two_level
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
left=$((560 - $(el)))
if [ $left -gt 30 ]; then
  s=$RANDOM$RANDOM; GPUHASH_TEST_SEED=$s GPUHASH_TEST_PAIRS=$P16 timeout $left $CS --tool memcheck --print-limit 20 $R/cc --test-threads 4 cuda_two_level::large_batches > $R/memcheck.log 2>&1
  echo "== memcheck seed $s rc=$? $(el)s ok=$(grep -c '\.\.\. ok' $R/memcheck.log) $(grep -E 'ERROR SUMMARY|test result|FAILED' $R/memcheck.log | sort | uniq -c | head -6 | tr '\n' ' ')" >> $A
fi
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
