#!/bin/bash
# Build blocks of 768 threads, two an SM, against 512 threads, three an SM.
# A table of 2^23 eight-byte slots has 1024 build regions: 2.59 waves of
# 396 blocks (the last wave 59% full) against 3.88 waves of 264. One
# measuring binary (gpuhash-x), variants in turn, three rounds:
#   base  512 threads, __launch_bounds__(512, 3) (main);
#   w768  768 threads, __launch_bounds__(768, 2) (-DGH_BUILD_THREADS=768);
#   w1024 1024 threads, two an SM (32 registers: the linear build spills
#         20-40 bytes, so only the linear aggregation row is measured).
# Then the linear and two-level suites with the two-pass region build
# forced on, on the 768-thread build (itx), main's CUDA conformance suite
# and its nothing-lost tests at full scale (it9), and the device I/O tests
# (io9: the async insert's step without locks).
cd "$(dirname "$0")"
BINS="itx it9 io9 gpuhash-x" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
w768() { export GPUHASH_X_BUILD_THREADS=768 GPUHASH_NVRTC_FLAGS="-DGH_BUILD_THREADS=768 -DGH_BUILD_MIN_BLOCKS=2"; }
v() (  # v VARIANT ROUND: the rows of one variant (a subshell: its settings stay in it)
    [ "$1" = w768 ] && w768
    run agg-$1-$2 gpuhash-x --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
    run u32-$1-$2 gpuhash-x --scheme linear,two-level --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5
    run u64-$1-$2 gpuhash-x --scheme linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5
)
w1024() (
    export GPUHASH_X_BUILD_THREADS=1024 GPUHASH_NVRTC_FLAGS="-DGH_BUILD_THREADS=1024 -DGH_BUILD_MIN_BLOCKS=2"
    run agg-w1024-$1 gpuhash-x --scheme linear --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
)
round() { for x in base w768; do v $x $1; done; w1024 $1; finish; }
round 1
left 200 && { TT=16 suite cuda it9 190 conformance_cuda::; finish; }
left 60 && { suite io io9 50; finish; }
left 150 && round 2
left 110 && { (w768; GPUHASH_TEST_REGION=two-pass TT=16 suite two-pass-w768 itx 100 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level); finish; }
# The nothing-lost tests at full scale on main, a fresh seed.
full=$("$R/it9" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 75 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it9 75 --exact $full; finish; }
left 100 && round 3
finish
