#!/bin/bash
# Pass 2 and the build in one queue of items (gh_region_fused): one
# measuring binary (gpuhash-f), rounds in turn:
#   base  pass 2 and the build as two launches (GH_X_FUSED=0);
#   f2    fused, the parts of segment s + 2 queued before the builds of s;
#   f4    the same with a lead of 4 segments (-DGH_X_FUSE_LEAD=4).
# Then the tests on the fused build (it8): the linear and two-level suites
# with the two-pass region build forced on (every large batch fused), the
# CUDA conformance suite.
cd "$(dirname "$0")"
BINS="it8 gpuhash-f" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
v() {  # v VARIANT ROUND: the rows of one variant
    local f="" x=1
    case $1 in base) x=0 ;; f4) f="-DGH_X_FUSE_LEAD=4" ;; esac
    GH_X_FUSED=$x GPUHASH_NVRTC_FLAGS="$f" run u64-$1-$2 gpuhash-f --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
    GH_X_FUSED=$x GPUHASH_NVRTC_FLAGS="$f" run u32-$1-$2 gpuhash-f --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5,0.9
    GH_X_FUSED=$x GPUHASH_NVRTC_FLAGS="$f" run agg-$1-$2 gpuhash-f --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
}
for r in 1 2 3; do
  for x in base f2 f4; do left ${ROWS_LEFT:-300} && v $x $r; done
  finish
done
GPUHASH_TEST_REGION=two-pass TT=16 suite two-pass it8 110 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish
left 190 && { TT=16 suite cuda it8 190 conformance_cuda::; finish; }
finish
