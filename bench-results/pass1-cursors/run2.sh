#!/bin/bash
# On main (it5, 7d7a5fe), fresh seeds: the nothing-lost tests at full scale
# for cuckoo and two-level, then the linear and two-level suites with the
# region build forced on.
cd "$(dirname "$0")"
BINS="it5" source ../run-lib.sh
full=$("$R/it5" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it5 80 --exact $full; finish
GPUHASH_TEST_REGION=always TT=16 suite region-always it5 110 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish
