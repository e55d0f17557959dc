#!/bin/bash
# Hot-page residency (Residency::Hot, the new default) against FIFO (the
# previous default) in examples/04-paged-stream, alternating; then the
# paged tests and the Hot conformance suites on CUDA, and the two-level
# module of conformance_cuda at full scale with a fresh seed.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
for b in ex04 pg cp cc; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
nproc >> $A
for r in hot fifo hot; do
  n=ex-$r-$(el)
  timeout 200 $R/ex04 2048 1,8 - 8 host $r > $OUT/$n.txt 2>&1
  echo "== $n rc=$? $(el)s" >> $A; grep -E 'find_zipf|^8,|both|device' $OUT/$n.txt >> $A
done
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | head -5 | tr '\n' ' ')" >> $A; }
suite pg pg 150
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 suite cc-full cc 120 cuda_two_level
[ $(el) -lt 480 ] && suite cp cp $((550 - $(el))) cuda_paged_cuckoo cuda_split_cuckoo
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
