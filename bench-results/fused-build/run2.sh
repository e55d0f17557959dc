#!/bin/bash
# On main (it9, io9: the launch helper for the step without locks and the
# bins' ends named once, both host code), fresh seeds: the device I/O
# tests, the CUDA conformance suite, the linear and two-level suites with
# the two-pass region build forced on, the nothing-lost tests at full scale.
cd "$(dirname "$0")"
BINS="it9 io9" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
TT=8 suite io io9 150; finish
TT=16 suite cuda it9 220 conformance_cuda::; finish
left 100 && { GPUHASH_TEST_REGION=two-pass TT=16 suite two-pass it9 100 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish; }
full=$("$R/it9" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 75 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it9 75 --exact $full; finish; }
finish
