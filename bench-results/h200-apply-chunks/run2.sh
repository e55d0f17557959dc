#!/bin/bash
# The committed rule (chunks of up to four times the table's slots where
# half the free memory holds their scratch; gpuhash) against the build
# before it (chunks of the table's slots; gpuhash-base, e321a19): insert-or-
# apply of 2^30 positions into 2^27 slots, u64 pairs in two rounds, u32
# pairs in one; the skewed batches on the new build; the counting example
# at that size, its counts checked; the CUDA suites' insert-or-apply tests
# and cuda_concurrency with fresh seeds.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-base cc cx ex08" source ../run-lib.sh
for round in 1 2; do
  for g in gpuhash-base gpuhash; do
    run r$round-$g-u64 $g --scheme two-level --keys u64 --values u64 --ops apply_sum --loads 0.5 --sizes 2^27
  done
done
for g in gpuhash-base gpuhash; do
  run $g-u32 $g --scheme two-level,linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^27
done
run skew-u32 gpuhash --scheme two-level --keys u32 --values u32 --ops apply_zipf,apply_hot --loads 0.5 --sizes 2^27
timeout 120 $R/ex08 30 26 > $R/ex08.log 2>&1; echo "== ex08 30 26 rc=$? $(el)s" >> $A; cat $R/ex08.log >> $A
suite apply cc 150 apply
suite cx cx 60
finish
