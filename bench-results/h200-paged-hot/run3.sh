#!/bin/bash
# After the split measures the GPU until its kernels are done, and Hot
# counts a page busier only at twice the incoming keys: a diagnostic build of examples/04-paged-stream (DIAG lines per group and
# wave of each lookup split on the device; not in the library): where a
# hot-page call's time goes under Hot, FIFO and LRU eviction, alternating.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
gunzip -c $S/ex04diag.gz > $R/ex04; chmod +x $R/ex04
export GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
for r in hot fifo hot fifo; do
  n=diag-$r-$(el)
  timeout 150 $R/ex04 2048 1,8 - 8 host $r > $OUT/$n.txt 2>&1
  echo "== $n rc=$? $(el)s" >> $A; grep -E 'find_zipf|^8,|both|hot pages' $OUT/$n.txt >> $A
done
echo "done $(el)s" >> $A
