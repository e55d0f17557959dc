#!/bin/bash
# call 2: small batches (combo vs snapshot+gather), whole CUDA suite (fresh seed), full-scale nothing-lost stage; NVRTC cache back
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
for f in gpuhash gpuhash_combo cc ck; do gunzip -kf $f.gz; chmod +x $f; done
export GPUHASH_CACHE_DIR=/tmp/ghc GPUHASH_REQUIRE_CUDA=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
seed() { echo 0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' '); }
SB="--device cuda --no-peers --no-limits --reps 5 --sizes 2^27 --batch 2^20 --loads 0.5 --ops insert,apply_sum --keys u32,u64 --values u32 --scheme two-level,cuckoo"
for b in gpuhash_combo gpuhash; do
  timeout 60 ./$b bench $SB --out $R/small-$b > $R/small-$b.log 2>&1; echo "small $b rc=$? $(el)s" >> $R/sum.txt
done
s=$(seed); GPUHASH_TEST_SEED=$s timeout 330 ./cc --test-threads 8 > $R/cc-$s.log 2>&1; echo "cc seed $s rc=$? $(el)s $(grep '^test result' $R/cc-$s.log)" >> $R/sum.txt
s=$(seed); GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 GPUHASH_TEST_SEED=$s timeout $((565-$(el))) ./cc --test-threads 4 oversubscribed_batches overfull_apply_every_key_twice refill_after_erase_with_growth_off fill_until_refused skewed_apply > $R/full-$s.log 2>&1; echo "full seed $s rc=$? $(el)s $(grep '^test result' $R/full-$s.log)" >> $R/sum.txt
for f in $R/small*.log; do grep -h "^cuda:0" $f | sed "s|^|$(basename $f .log) |"; done | sort -u > $R/rows.txt
grep -h "FAILED\|panicked\|failed" $R/cc-*.log $R/full-*.log | head -40 > $R/fails.txt
tar czf $OUT/ghc.tgz -C /tmp ghc 2>/dev/null; ls -la $OUT/ghc.tgz >> $R/sum.txt
