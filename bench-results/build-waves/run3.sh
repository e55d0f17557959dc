#!/bin/bash
# The wide form committed: gh_region_build_wide, chosen by the host for
# linear builds of at most three waves of narrow blocks with more keys than
# slots (gpuhash-w, itw), against main before it (gpuhash-m), one round;
# then the linear conformance suite, region build forced (two-pass) and
# as chosen, on itw.
cd "$(dirname "$0")"
BINS="itw gpuhash-m gpuhash-w" source ../run-lib.sh
for g in gpuhash-m gpuhash-w; do
    run agg-$g $g --scheme linear --sizes 2^22,2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
done
run ins-gpuhash-w gpuhash-w --scheme linear --sizes 2^23 --keys u32 --values u32 --ops insert --loads 0.5
finish
GPUHASH_TEST_REGION=two-pass TT=16 suite linear-two-pass itw 90 conformance_cuda::cuda_linear
finish
TT=16 suite linear itw 90 conformance_cuda::cuda_linear
finish
