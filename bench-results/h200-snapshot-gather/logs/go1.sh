#!/bin/bash
# call 1: kernel times of small batches (ncu), small batches and u64 apply rows (before/main/combo), concurrency, two-level+cuckoo suites
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
for f in gpuhash gpuhash0 gpuhash_main cc ck; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_REQUIRE_CUDA=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
seed() { echo 0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' '); }
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for sc in two-level cuckoo linear; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum --csv ./gpuhash bench --device cuda --no-peers --no-limits --reps 1 --sizes 2^27 --batch 2^20 --loads 0.5 --ops insert --keys u32 --values u32 --scheme $sc --out $R/ncu-$sc > $R/ncu-$sc.log 2>&1
  echo "ncu $sc rc=$? $(el)s" >> $R/sum.txt
done
SB="--device cuda --no-peers --no-limits --reps 5 --sizes 2^27 --batch 2^20 --loads 0.5 --ops insert,apply_sum --keys u32 --values u32 --scheme two-level,cuckoo,linear"
for b in gpuhash_main gpuhash; do
  timeout 60 ./$b bench $SB --out $R/small-$b > $R/small-$b.log 2>&1; echo "small $b rc=$? $(el)s" >> $R/sum.txt
done
B="--device cuda --no-peers --reps 3 --sizes 2^27 --no-limits --scheme two-level --keys u64 --values u64 --loads 0.5 --ops apply_sum"
for b in gpuhash0 gpuhash; do
  timeout 90 ./$b bench $B --out $R/u64-$b > $R/u64-$b.log 2>&1; echo "u64 $b rc=$? $(el)s" >> $R/sum.txt
done
s=$(seed); GPUHASH_TEST_SEED=$s timeout 60 ./ck > $R/ck-$s.log 2>&1; echo "ck seed $s rc=$? $(el)s $(grep '^test result' $R/ck-$s.log)" >> $R/sum.txt
s=$(seed); GPUHASH_TEST_SEED=$s timeout $((570-$(el))) ./cc --test-threads 8 cuda_two_level:: cuda_cuckoo:: > $R/cc-$s.log 2>&1; echo "cc seed $s rc=$? $(el)s $(grep '^test result' $R/cc-$s.log)" >> $R/sum.txt
for f in $R/small*.log $R/u64*.log; do grep -h "^cuda:0" $f | sed "s|^|$(basename $f .log) |"; done > $R/rows.txt
for sc in two-level cuckoo linear; do grep -h '^"' $R/ncu-$sc.log | awk -F'","' '{print $5, $(NF)}' | tail -40 | sed "s|^|$sc |"; done > $R/ncu.txt
