#!/bin/bash
# Packed (gpuhash-base) against open bins (gpuhash), in turn, as long as
# the call's time allows: the aggregation, u32 and u64 inserts, then
# skewed insert-or-apply with open bins.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-base" source ../run-lib.sh
left() { [ $(( ${BUDGET:-200} - $(el) )) -ge "$1" ]; }
ab() {
  for g in "$@"; do
    run agg-$g-$r $g --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
    run u32-$g-$r $g --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5,0.9
    run u64-$g-$r $g --scheme two-level --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
  done
}
r=1 ab gpuhash-base gpuhash
left 70 && run skew-gpuhash gpuhash --scheme two-level --sizes 2^26 --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5
left 50 && r=2 ab gpuhash gpuhash-base
finish
