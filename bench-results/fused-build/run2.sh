#!/bin/bash
# On main (it9, io9: the launch helper for the step without locks and the
# bins' ends named once, both host code), fresh seeds: the CUDA
# conformance suite, the device I/O tests, the linear and two-level suites with
# the two-pass region build forced on, on an H200 main's u64 insert and
# aggregation rows (gpuhash-m), the nothing-lost tests at full scale.
cd "$(dirname "$0")"
BINS="it9 io9 gpuhash-m" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
TT=16 suite cuda it9 210 conformance_cuda::; finish
left 80 && { TT=8 suite io io9 80; finish; }
left 100 && { GPUHASH_TEST_REGION=two-pass TT=16 suite two-pass it9 100 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish; }
full=$("$R/it9" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
# On an H200 (TARGETS.md's card), main's rows for the issue's open goals.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  left 60 && run u64 gpuhash-m --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
  left 40 && run agg gpuhash-m --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
fi
left 75 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it9 75 --exact $full; finish; }
finish
