#!/bin/bash
# The CPU backend's random lookups over 16 GiB on the H200 machine's host,
# the previous build against transparent huge pages; then the paged
# example (THP, hot-page rows the median of 5 calls) with 8, 16 and 32
# resident pages in the 2 GiB budget, twice; then 16 pages against
# unified memory.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
for b in ghold gh ex04; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
huge() { local most=0; while sleep 2; do h=$(awk '/AnonHugePages/{print $2}' /proc/meminfo); [ $h -gt $most ] && most=$h && echo $most > $R/huge; done; }
for b in ghold gh; do
  echo 0 > $R/huge; huge & H=$!
  timeout 150 $R/$b bench --device cpu --no-peers --no-limits --reps 3 --scheme linear --keys u32 --values u32 --ops find_hit --loads 0.5 --sizes 2^31 --batch 2^24 --out $R/cpu-$b > $R/cpu-$b.log 2>&1
  echo "== cpu $b rc=$? $(el)s most AnonHugePages kB: $(cat $R/huge)" >> $A; kill $H; grep -E 'find_hit' $R/cpu-$b.log | tail -1 >> $A
done
ex() { local slots=$1 uni=$2; n=ex04-$slots-$(el)
  echo 0 > $R/huge; huge & H=$!
  timeout 150 $R/ex04 2048 1,8 $uni $slots host hot > $R/$n.log 2>&1
  echo "== $n unified $uni rc=$? $(el)s most AnonHugePages kB: $(cat $R/huge)" >> $A; kill $H
  grep -E 'find_zipf|^8,|^1,|both|8 hot pages|unified' $R/$n.log >> $A; }
for r in 1 2; do for s in 8 16 32; do ex $s -; done; done
[ $(el) -lt 400 ] && ex 16 8
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
