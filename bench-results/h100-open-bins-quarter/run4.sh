#!/bin/bash
# One call for what matters most when little device time is left:
#  1. packed bins (gpuhash-base) against open bins (gpuhash), one round,
#     and gpuhash-exp on the u64 inserts (the fresh two-level build of 16-byte slots at 384 threads and four blocks an SM instead of 512 and three, with open bins);
#  2. the CUDA conformance suite, fresh seed, 16 test threads, with the
#     call's remaining time;
#  3. the nothing-lost tests at full scale, if time is left.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-base gpuhash-exp it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-570} - $(el) )) -ge "$1" ]; }
for g in gpuhash-base gpuhash; do
  run agg-$g $g --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
  run u32-$g $g --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5,0.9
  run u64-$g $g --scheme two-level --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
done
run u64-gpuhash-exp gpuhash-exp --scheme two-level --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
run skew-gpuhash gpuhash --scheme two-level --sizes 2^26 --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5
finish
TT=16 suite conformance-cuda it $(( ${BUDGET:-570} - $(el) )) conformance_cuda::
finish
