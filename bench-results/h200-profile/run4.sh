#!/bin/bash
# The committed candidate (scan in shared-memory chunks, build loads ahead)
# against the previous build, alternating; then the CUDA suites with fresh seeds.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
for b in gpuhash gpuhash-old cc cx cp; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3"
run() { local n=$1 g=$2; shift 2
  timeout 100 $R/$g bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n [$g] rc=$? $(el)s: $*" >> $A; grep -E "^cuda:0 " $R/$n.log | sort -u >> $A; }
for round in 1 2; do
  for g in gpuhash-old gpuhash; do
    run r$round-$g-ins32 $g --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
    run r$round-$g-ins64 $g --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9 --sizes 2^27
    run r$round-$g-agg $g --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
  done
done
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | head -5 | tr '\n' ' ')" >> $A; }
suite cc-default cc 120 cuda_linear cuda_two_level
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 suite cc-full cc 150 cuda_linear cuda_two_level
suite cx cx 60
[ $(el) -lt 470 ] && suite cp cp $((540 - $(el))) cuda_paged_two_level cuda_paged_linear
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
