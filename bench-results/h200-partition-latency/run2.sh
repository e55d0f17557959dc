#!/bin/bash
# The committed candidate (cursor atomics read late, the 2^15-region
# histogram 1024 threads wide): against 8 u64 keys in flight per histogram
# thread (-DGH_EXP_HIST_U8), the build reading only the key words of
# 16-byte slots in shared memory (-DGH_EXP_KEYS_ONLY) and prefetching its
# bin's first words before it fills the region (-DGH_EXP_PREFETCH_BIN),
# alternating; issue 15's grid rows; the CUDA
# suites with fresh seeds at the default and full scale; memcheck.
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
  echo "== $n rc=$? $(el)s [${GPUHASH_NVRTC_FLAGS:-}]: $*" >> $A; grep -E "^cuda:0 " $R/$n.log | awk '!s[$0]++' | grep -E "^cuda:0 +[a-z-]+ {2,}" >> $A; }
rows() { local v=$1
  run $v-ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9 --sizes 2^27
  run $v-ins32 --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5 --sizes 2^27; }
for round in 1 2; do
  (unset GPUHASH_NVRTC_FLAGS; rows r$round-now)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_HIST_U8; rows r$round-u8)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_KEYS_ONLY; rows r$round-keys)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_PREFETCH_BIN; rows r$round-pref)
  (export GPUHASH_NVRTC_FLAGS="-DGH_EXP_KEYS_ONLY -DGH_EXP_PREFETCH_BIN"; rows r$round-kp)
done
run grid32 --scheme two-level --keys u32 --values u32 --ops insert,find_hit,find_miss50,apply_sum --loads 0.5,0.9,0.95 --sizes 2^27
run grid64 --scheme two-level --keys u64 --values u64 --ops insert,apply_sum --loads 0.5,0.9,0.95 --sizes 2^27
run agg --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked|skipped' $R/$n.log | sort | uniq -c | head -8 | tr '\n' ' ')" >> $A; }
suite cc-default cc 130
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 suite cc-full cc 150 cuda_linear cuda_two_level
suite cx cx 50
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
left=$((560 - $(el)))
if [ $left -gt 30 ]; then
  s=$RANDOM$RANDOM; GPUHASH_TEST_SEED=$s timeout $left $CS --tool memcheck --print-limit 20 $R/cc --test-threads 1 large_batches skewed_apply > $R/memcheck.log 2>&1
  echo "== memcheck seed $s rc=$? $(el)s ok=$(grep -c '\.\.\. ok' $R/memcheck.log) $(grep -E 'ERROR SUMMARY|test result|FAILED' $R/memcheck.log | head -4 | tr '\n' ' ')" >> $A
fi
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
