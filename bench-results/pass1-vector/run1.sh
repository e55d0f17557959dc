#!/bin/bash
# 1. The device I/O tests (io7: main plus one launch helper for the step
#    without locks, shared by the synchronous and the async inserts).
# 2. Pass 1 of the partition fetching keys and values in 16-byte copies
#    (vec) against a copy per item and array (base, -DGH_X_SCALAR_FETCH),
#    one measuring binary (gpuhash-x), rounds in turn.
# 3. Before the rows: the nothing-lost tests at full scale on the same
#    build (it7), fresh seed.
cd "$(dirname "$0")"
BINS="io7 it7 gpuhash-x" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
TT=8 suite io io7 150; finish
v() {  # v VARIANT ROUND: the rows of one variant
    local f=""
    [ "$1" = base ] && f="-DGH_X_SCALAR_FETCH"
    GPUHASH_NVRTC_FLAGS="$f" run u64-$1-$2 gpuhash-x --scheme two-level,linear --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
    GPUHASH_NVRTC_FLAGS="$f" run u32-$1-$2 gpuhash-x --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5
    GPUHASH_NVRTC_FLAGS="$f" run agg-$1-$2 gpuhash-x --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
}
full=$("$R/it7" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::cuda_(cuckoo|two_level)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it7 90 --exact $full; finish
for r in 1 2 3; do
  for x in base vec; do left ${ROWS_LEFT:-180} && v $x $r; done
  finish
done
finish
