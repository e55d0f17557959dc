#!/bin/bash
# tests/paged's faults_while_pages_grow_lose_nothing with the seed that ran
# past 100 s in call 1 (45055241), alone and with its progress lines; if it
# still runs at 120 s, the threads' states and stacks (gdb where present).
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
gunzip -c $S/pg.gz > $R/pg; chmod +x $R/pg
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
GPUHASH_TEST_SEED=45055241 $R/pg --nocapture --test-threads 1 faults_while_pages_grow > $R/f1.log 2>&1 &
P=$!
for i in $(seq 1 60); do sleep 2; kill -0 $P 2>/dev/null || break; done
if kill -0 $P 2>/dev/null; then
  echo "== still running at $(el)s" >> $A
  for t in /proc/$P/task/*; do echo "$(basename $t) $(awk '{print $3, $14, $15}' $t/stat) $(cat $t/wchan 2>/dev/null)"; done >> $A
  which gdb >> $A 2>&1 && timeout 40 gdb -p $P -batch -ex "thread apply all bt 25" > $R/gdb.log 2>&1
  sleep 10; for t in /proc/$P/task/*; do echo "$(basename $t) $(awk '{print $3, $14, $15}' $t/stat)"; done >> $A
  kill $P
fi
wait $P; echo "== f1 seed 45055241 rc=$? $(el)s" >> $A; tail -25 $R/f1.log >> $A
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
