#!/bin/bash
# Issue 15's goal rows on main with the wide build (gpuhash-w, the CLI of
# f9e1921's code), one call: u32 inserts and lookups at 2^27 slots (with
# the hardware limits of the same run), u64 inserts and insert-or-apply,
# the aggregation, small batches; two-level and linear. Then, time
# allowing, the nothing-lost tests at full scale with a fresh seed (itw).
cd "$(dirname "$0")"
SHIP=${SHIP:-../../.ship} BINS="gpuhash-w itw" source ../run-lib.sh
left() { [ $(( ${BUDGET:-540} - $(el) )) -ge "$1" ]; }
B="--device cuda --no-peers --reps 3" run u32-tl gpuhash-w --scheme two-level --sizes 2^27 --keys u32 --values u32 --ops insert,find_hit,find_miss50 --loads 0.5,0.9,0.95
grep -E "limit_" "$R/u32-tl.log" | tr -s " " >> "$A"
finish
run agg gpuhash-w --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
run u32-lin gpuhash-w --scheme linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5,0.9,0.95
finish
run u64 gpuhash-w --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
finish
run a64 gpuhash-w --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops apply_sum --loads 0.5
finish
run small gpuhash-w --scheme two-level,linear --sizes 2^27 --keys u32,u64 --values u32 --ops insert,find_hit --loads 0.5 --batch 2^20
finish
full=$("$R/itw" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 80 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale itw 75 --exact $full; finish; }
