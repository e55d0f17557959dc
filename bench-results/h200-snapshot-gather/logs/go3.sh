#!/bin/bash
# call 3: batch-size sweep (fixed cost per call?), cuckoo/two-level inserts at 0.9 (combo vs new), u64 skewed apply rows, paged/faults/io/concurrency suites
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
for f in gpuhash gpuhash_combo ck cp cf ci; do gunzip -kf $f.gz; chmod +x $f; done
mkdir -p /tmp && tar xzf ghc.tgz -C /tmp
export GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_REQUIRE_CUDA=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
seed() { echo 0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' '); }
for b in 2^12 2^16 2^22; do
  timeout 40 ./gpuhash bench --device cuda --no-peers --no-limits --reps 5 --sizes 2^27 --batch $b --loads 0.5 --ops insert --keys u32 --values u32 --scheme two-level,linear --out $R/batch > $R/batch-$b.log 2>&1; echo "batch $b rc=$? $(el)s" >> $R/sum.txt
done
for b in gpuhash_combo gpuhash; do
  timeout 60 ./$b bench --device cuda --no-peers --no-limits --reps 3 --sizes 2^27 --loads 0.9 --ops insert --keys u32 --values u32 --scheme cuckoo --out $R/hi > $R/hi-$b.log 2>&1; echo "hi $b rc=$? $(el)s" >> $R/sum.txt
done
B="--device cuda --no-peers --reps 3 --sizes 2^27 --no-limits --scheme two-level --keys u64 --values u64 --loads 0.5 --ops apply_zipf,apply_hot"
timeout 150 ./gpuhash bench $B --out $R/skew > $R/skew.log 2>&1; echo "skew rc=$? $(el)s" >> $R/sum.txt
for t in ck cp cf ci; do
  s=$(seed); GPUHASH_TEST_SEED=$s timeout $(( 560-$(el) )) ./$t --test-threads 4 > $R/$t-$s.log 2>&1; echo "$t seed $s rc=$? $(el)s $(grep '^test result' $R/$t-$s.log)" >> $R/sum.txt
done
for f in $R/*.log; do grep -h "^cuda:0" $f | sed "s|^|$(basename $f .log) |"; done | sort -u > $R/rows.txt
grep -h "FAILED\|panicked" $R/c?-*.log | head -40 > $R/fails.txt
