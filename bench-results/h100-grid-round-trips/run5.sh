#!/bin/bash
# The committed build (3cafb02) through the test binaries not run on it yet,
# fresh seeds: fault injection (every allocation failing in turn, region
# builds that refuse keys included), concurrency, device I/O; then
# compute-sanitizer's memcheck on the linear suite with the region build
# forced on at the small scale (its deferred keys' kernel and the scan that
# decides packed bins), and on the two-level insert-or-apply tests.
cd "$(dirname "$0")"
BINS="faults cx io it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-450} - $(el) )) -ge "$1" ]; }
suite faults faults 150; finish
suite concurrency cx 60; finish
suite io io 60; finish
left 100 && { GPUHASH_TEST_SCALE=small GPUHASH_TEST_REGION=always memcheck mc-linear it $(( ${BUDGET:-450} - $(el) - 60 )) conformance_cuda::cuda_linear::; finish; }
left 50 && { GPUHASH_TEST_SCALE=small GPUHASH_TEST_REGION=always memcheck mc-two-level-apply it $(( ${BUDGET:-450} - $(el) - 5 )) conformance_cuda::cuda_two_level::skewed_apply conformance_cuda::cuda_two_level::one_key_repeated conformance_cuda::cuda_two_level::if_absent_and_apply; finish; }
