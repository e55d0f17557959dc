#!/bin/bash
# 1. The device I/O tests on main with the async step without locks merged (io5).
# 2. Two guesses at what pass 1 of the partition loses against pass 2, one
#    measuring binary (gpuhash-x, whose kernels default to the stride of 32),
#    three rounds in turn:
#      base   as main (GPUHASH_NVRTC_FLAGS=-DGH_CURSOR1_STRIDE=1);
#      s32    the pass-1 cursors 32 words apart: each tile's per-bin
#             atomics then go to 128 lines, not 4;
#      w2/w4  pass 1 in 2 or 4 waves of blocks instead of one (GH_X_PASS1_WAVES);
#      s32w2  both.
# 3. On the merged build with the stride of 32 (it6): the linear and
#    two-level suites with the two-pass region build forced on, the CUDA
#    conformance suite, then as time allows the nothing-lost tests at full scale.
cd "$(dirname "$0")"
BINS="io5 it6 gpuhash-x" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
TT=8 suite io io5 150; finish
S1="-DGH_CURSOR1_STRIDE=1"
v() {  # v VARIANT ROUND: the rows of one variant
    local f=$S1 w=1
    case $1 in s32) f="" ;; w2) w=2 ;; w4) w=4 ;; s32w2) f=""; w=2 ;; esac
    GPUHASH_NVRTC_FLAGS="$f" GH_X_PASS1_WAVES=$w run u64-$1-$2 gpuhash-x --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
    GPUHASH_NVRTC_FLAGS="$f" GH_X_PASS1_WAVES=$w run u32-$1-$2 gpuhash-x --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5
    GPUHASH_NVRTC_FLAGS="$f" GH_X_PASS1_WAVES=$w run agg-$1-$2 gpuhash-x --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
}
for r in 1 2 3; do
  for x in base s32 w2 w4 s32w2; do left 330 && v $x $r; done
  finish
done
left 230 && { GPUHASH_TEST_REGION=two-pass TT=16 suite two-pass it6 100 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish; }
left 200 && { TT=16 suite cuda it6 200 conformance_cuda::; finish; }
full=$("$R/it6" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 60 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it6 60 --exact $full; finish; }
finish
