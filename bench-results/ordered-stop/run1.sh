#!/bin/bash
# Two-level lookups and the step without locks stopping at the first
# candidate bucket with an EMPTY slot in ordered regions (ordered-stop.patch:
# gpuhash-o, ito, cco) against main (gpuhash-w), two rounds in turn; then
# the patched build's tests with fresh seeds: the two-level suites, the
# concurrency races (erases and lookups together), the nothing-lost tests
# at full scale, memcheck on the two-level erase and lookup tests.
cd "$(dirname "$0")"
SHIP=${SHIP:-../../.ship} BINS="gpuhash-w gpuhash-o ito cco" source ../run-lib.sh
left() { [ $(( ${BUDGET:-560} - $(el) )) -ge "$1" ]; }
rows() {  # rows ROUND BINARY
    run small-$2-$1 $2 --scheme two-level --sizes 2^27 --keys u32,u64 --values u32 --ops insert,find_hit,find_miss50 --loads 0.5 --batch 2^20
    run large-$2-$1 $2 --scheme two-level --sizes 2^27 --keys u32 --values u32 --ops find_hit,find_miss50,erase --loads 0.5,0.9,0.95
}
for round in 1 2; do for g in gpuhash-w gpuhash-o; do rows $round $g; done; finish; done
TT=16 suite two-level ito 150 conformance_cuda::cuda_two_level
finish
suite conc cco 120
finish
full=$("$R/ito" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_two_level::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused|erase_churn|insert_erase_insert')
left 90 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale ito 90 --exact $full; finish; }
left 70 && { GPUHASH_TEST_SCALE=small GPUHASH_TEST_PAIRS=u32:u32 memcheck mem ito 60 conformance_cuda::cuda_two_level::erase_churn conformance_cuda::cuda_two_level::insert_erase_insert; finish; }
finish
