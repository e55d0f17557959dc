#!/bin/bash
# Pass 1 staging pairs as words where a key and a value fill one
# (gpuhash-exp) against 3cafb02 (gpuhash): u64 and u32 inserts, the
# aggregation, in turn; between the rounds, the linear and two-level suites
# with the region build forced on (every pair type), on the new build.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-exp it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-240} - $(el) )) -ge "$1" ]; }
ab() {
  for g in gpuhash gpuhash-exp; do
    run u64-$g-$1 $g --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5
    run u32-$g-$1 $g --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5
    run agg-$g-$1 $g --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
  done
  finish
}
ab 1
GPUHASH_TEST_REGION=always TT=16 suite region-always it 100 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish
left 60 && ab 2
