#!/bin/bash
# Open bins on an H200 (the committed build: a quarter's headroom, insert-or-
# apply batches sampled first), in one call, the most needed first; each
# step is skipped once the call's time runs short (`left`), and the logs
# are packed after each:
#  1. packed bins (gpuhash-base, the build before open bins) against open
#     bins (gpuhash), alternating binaries, two rounds: the aggregation, u32
#     and u64 inserts, skewed insert-or-apply;
#     Also gpuhash-exp (open bins, and the fresh two-level build of 16-byte
#     slots at 384 threads, four blocks an SM, instead of 512 and three) on
#     the u64 inserts;
#  2. the two-level grid at 2^27 slots against TARGETS.md, with the limits
#     measured in the same run: large and small batches, u32 and u64;
#  3. the nothing-lost tests at full scale (2^22-2^24 slots), fresh seed.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-base gpuhash-exp it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-570} - $(el) )) -ge "$1" ]; }
ab() {
  for g in gpuhash-base gpuhash; do
    run agg-r$1-$g $g --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
    run u32-r$1-$g $g --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5,0.9
    run u64-r$1-$g $g --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
    run skew-r$1-$g $g --scheme two-level --sizes 2^26 --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5
  done
  run u64-r$1-gpuhash-exp gpuhash-exp --scheme two-level --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
  finish
}
ab 1
if left 200; then
  B="--device cuda --no-peers --reps 3" run grid32 gpuhash --scheme two-level --sizes 2^27 --keys u32 --values u32 \
      --ops insert,apply_sum,find_hit,find_miss50 --loads 0.5,0.9,0.95
  cp "$R/grid32/results.csv" "$R/grid32-results.log"; grep -i limit "$R/grid32/results.csv" | head -12 >> "$A"
  run grid64 gpuhash --scheme two-level --sizes 2^27 --keys u64 --values u64 --ops insert,find_hit,find_miss50 --loads 0.5,0.9,0.95
  run small gpuhash --scheme two-level,linear --sizes 2^27 --keys u32,u64 --values u32 --batch 2^20 --ops insert,find_hit --loads 0.5
  finish
fi
left 180 && ab 2
full=$("$R/it" --list 2>/dev/null | sed -n 's/: test$//p' | grep '^conformance_cuda::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 150 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 suite fullscale it $(( 570 - $(el) )) --exact $full; }
finish
