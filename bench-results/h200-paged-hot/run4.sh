#!/bin/bash
# The split's rates learnt only from groups the host shared (a group of hot
# resident pages alone had taught the GPU a rate ten times too fast):
# the diagnostic build under Hot and FIFO, alternating; then tests/paged
# and the conformance suites that run Hot on CUDA (release, not diagnostic).
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
for b in ex04diag pg cp; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
for r in hot fifo hot fifo; do
  n=diag-$r-$(el)
  timeout 100 $R/ex04diag 2048 1,8 - 8 host $r > $OUT/$n.txt 2>&1
  echo "== $n rc=$? $(el)s" >> $A; grep -E 'find_zipf|^8,|both|hot pages' $OUT/$n.txt >> $A
done
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | head -5 | tr '\n' ' ')" >> $A; }
suite pg pg 80
[ $(el) -lt 280 ] && suite cp cp $((330 - $(el))) cuda_paged_cuckoo
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
