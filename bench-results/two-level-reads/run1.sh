#!/bin/bash
# gpuhash-exp (two-level: a key's candidates under seed 0 read together with
# its region word; the locked inserts of cuckoo and two-level read whole
# buckets, their candidates at once) against gpuhash-base (c89088e), in
# turn, two rounds:
#  1. small batches (2^20 keys into or out of 2^27 slots at load 0.5),
#     u32 and u64 keys, the calls that return counts and the async ones;
#  2. large batches, u32, insert / hits / 50% miss at 0.5, 0.9, 0.95;
# then, on the new build: the cuckoo and two-level suites (default scale)
# and their nothing-lost tests at full scale, fresh seeds; the linear and
# two-level suites with the region build forced on (the skew flag now one word).
cd "$(dirname "$0")"
BINS="gpuhash-base gpuhash-exp it2" source ../run-lib.sh
left() { [ $(( ${BUDGET:-480} - $(el) )) -ge "$1" ]; }
B="--device cuda --no-peers --reps 3" run limits gpuhash-exp --scheme two-level --sizes 2^20 --keys u32 --values u32 --ops find_hit --loads 0.5
for r in 1 2; do
  for g in gpuhash-base gpuhash-exp; do
    run small-$g-$r $g --scheme two-level --sizes 2^27 --batch 2^20 --keys u32,u64 --values u32 --ops insert,find_hit,find_miss50 --loads 0.5
    B="$B --cuda-async" run async-$g-$r $g --scheme two-level --sizes 2^27 --batch 2^20 --keys u32,u64 --values u32 --ops insert,find_hit --loads 0.5
  done
done
finish
for r in 1 2; do
  for g in gpuhash-base gpuhash-exp; do
    left 150 && run large-$g-$r $g --scheme two-level --sizes 2^27 --keys u32 --values u32 --ops insert,find_hit,find_miss50 --loads 0.5,0.9,0.95
  done
done
finish
left 120 && { TT=16 suite ck-tl it2 110 conformance_cuda::cuda_two_level conformance_cuda::cuda_cuckoo; finish; }
full=$("$R/it2" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 80 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it2 75 --exact $full; finish; }
finish
left 100 && { GPUHASH_TEST_REGION=always TT=16 suite region-always it2 95 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish; }
