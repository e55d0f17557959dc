#!/bin/bash
# Linear u32 and u64 at full scale with the slot-width probe limit:
# the seed that refused at 0.90, and a fresh one.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
gunzip -c $S/cc.gz > $R/cc; chmod +x $R/cc
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64
t0=$(date +%s); A=$OUT/all.txt
for s in 0x31f03e0a $RANDOM$RANDOM; do
  GPUHASH_TEST_SEED=$s timeout 75 $R/cc --test-threads 8 --nocapture cuda_linear > $R/s$s.log 2>&1
  echo "== seed $s rc=$? $(( $(date +%s)-t0 ))s ok=$(grep -c '\.\.\. ok' $R/s$s.log) $(grep -E 'test result|FAILED|panicked' $R/s$s.log | head -4 | tr '\n' ' ')" >> $A
  grep "^fill_until" $R/s$s.log >> $A
done
cd $R && tar czf $OUT/logs.tgz *.log
