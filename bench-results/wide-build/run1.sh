#!/bin/bash
# The wide linear build (wide.patch of ../build-waves, applied: gpuhash-w,
# itw) against main before it (gpuhash-m): the linear aggregation rows of
# issue 15 (2^26 inputs over 2^22 keys, 2^22 and 2^23 slots) and an insert
# row of few heavy-free regions; then the tests of the patched build: the
# linear suite with the two-pass region build forced, the whole CUDA
# conformance suite as chosen, the nothing-lost tests at full scale
# (fresh seeds); then, time allowing, u64 inserts and two-level
# aggregation rows on the patched build.
cd "$(dirname "$0")"
SHIP=${SHIP:-../../.ship} BINS="itw gpuhash-m gpuhash-w" source ../run-lib.sh
left() { [ $(( ${BUDGET:-540} - $(el) )) -ge "$1" ]; }
for g in gpuhash-m gpuhash-w; do
    run agg-$g $g --scheme linear --sizes 2^22,2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
done
run ins-gpuhash-w gpuhash-w --scheme linear --sizes 2^23,2^27 --keys u32 --values u32 --ops insert --loads 0.5
finish
GPUHASH_TEST_REGION=two-pass TT=16 suite linear-two-pass itw 90 conformance_cuda::cuda_linear
finish
TT=16 suite cuda itw 240 conformance_cuda::
finish
full=$("$R/itw" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 80 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale itw 75 --exact $full; finish; }
left 40 && { run u64-gpuhash-w gpuhash-w --scheme linear,two-level --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9; finish; }
left 25 && { run agg2-gpuhash-w gpuhash-w --scheme two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5; finish; }
finish
