#!/bin/bash
# A slow host: the paged example held to 4 of the 16 cores (taskset), hot
# pages shared with the host against read in place by the GPU alone,
# alternating; then tests/paged and the CUDA paged suites that share pages
# with the host (THP-backed host pages, registered with the driver).
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
for b in ex04 pg cp; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
ex() { local who=$1; n=ex04-4cores-$who-$(el)
  taskset -c 0-3 timeout 150 $R/ex04 2048 1,8 - 16 $who hot > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s" >> $A
  grep -E 'find_zipf|^8,|^1,|8 hot pages' $R/$n.log >> $A; }
for r in 1 2; do ex host; ex gpu; done
suite() { local n=$1 b=$2 t=$3; shift 3; s=$RANDOM$RANDOM
  GPUHASH_TEST_SEED=$s timeout $t $R/$b --test-threads 8 "$@" > $R/$n.log 2>&1
  echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' $R/$n.log) $(grep -E 'test result|FAILED|panicked' $R/$n.log | head -5 | tr '\n' ' ')" >> $A; }
suite pg pg 170
[ $(el) -lt 420 ] && suite cp cp $((470 - $(el))) cuda_beside_
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
