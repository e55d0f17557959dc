#!/bin/bash
# call 4: u64 skewed apply rows (heavy regions only), batch-size sweep; one file back
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
gunzip -kf gpuhash.gz; chmod +x gpuhash
tar xzf ghc.tgz -C /tmp
export GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
for b in 4096 65536 4194304; do
  timeout 30 ./gpuhash bench --device cuda --no-peers --no-limits --reps 5 --sizes 2^27 --batch $b --loads 0.5 --ops insert --keys u32 --values u32 --scheme two-level,linear --out $R/b$b > $R/b$b.log 2>&1; echo "batch $b rc=$? $(el)s" >> $OUT/all.txt
  grep -h "^cuda:0" $R/b$b.log | head -2 >> $OUT/all.txt
done
B="--device cuda --no-peers --reps 3 --sizes 2^27 --no-limits --scheme two-level --keys u64 --values u64 --loads 0.5 --ops apply_zipf,apply_hot"
timeout 160 ./gpuhash bench $B --out $R/skew > $R/skew.log 2>&1; echo "skew rc=$? $(el)s" >> $OUT/all.txt
grep -h "^cuda:0" $R/skew.log | head -2 >> $OUT/all.txt
