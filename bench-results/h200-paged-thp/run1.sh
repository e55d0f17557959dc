#!/bin/bash
# Host pages backed by transparent huge pages (MADV_HUGEPAGE on large cell
# allocations) against the previous build, alternating: hot pages and bulk
# calls at 8x with 8 resident pages of 256 MiB, then both builds with 16
# resident pages of 128 MiB; gpuhash bench with its limits (limit_copy_both
# through the CLI); tests/paged.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc; S=../../.ship
for b in ex04old ex04thp gh pg; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
{ echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"; nproc; grep -E 'MemTotal|AnonHuge' /proc/meminfo; } >> $A
ex() { local b=$1 slots=$2; n=$b-$slots-$(el)
  timeout 100 $R/$b 2048 1,8 - $slots host hot > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s $(grep AnonHuge /proc/meminfo)" >> $A; grep -E 'find_zipf|^8,|^1,|both|8 hot pages' $R/$n.log >> $A; }
for r in 1 2; do ex ex04old 8; ex ex04thp 8; done
ex ex04thp 16; ex ex04old 16
timeout 120 $R/gh bench --device cuda --no-peers --reps 3 --scheme linear --keys u32 --values u32 --ops insert,find_hit --loads 0.5 --sizes 2^27 --out $R/bench > $R/bench.log 2>&1
echo "== bench rc=$? $(el)s" >> $A; grep -E 'limit|insert|find_hit' $R/bench.log | head -30 >> $A
s=$RANDOM$RANDOM; GPUHASH_TEST_SEED=$s timeout 100 $R/pg --test-threads 8 > $R/pg.log 2>&1
echo "== suite pg seed $s rc=$? $(el)s ok=$(grep -c '\.\.\. ok' $R/pg.log) $(grep -E 'test result|FAILED|panicked' $R/pg.log | head -5 | tr '\n' ' ')" >> $A
cp $R/bench/results.csv $OUT/bench.csv 2>/dev/null
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
