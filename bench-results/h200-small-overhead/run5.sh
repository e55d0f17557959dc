#!/bin/bash
# The kept change (async inserts' counters read from page-locked words):
# the probe once more and the bench's small-batch rows (async and sync
# calls, with the limits of the same run). Then lookups whose home bucket
# is read whole (both halves loaded together, switch GH_EXP_WHOLE_HOME of
# this build only) against the committed first-half-first read, small and
# whole-load batches, alternating in two rounds.
cd "$(dirname "$0")"
BINS="gpuhash probe" source ../run-lib.sh
timeout 120 $R/probe tracked > $R/probe.log 2>&1; echo "== probe rc=$? $(el)s" >> $A; cat $R/probe.log >> $A
B="--device cuda --no-peers --reps 9" run small-async gpuhash --scheme linear --keys u32,u64 --values u32 --loads 0.5 --sizes 2^27 --batch 2^20 --ops insert,find_hit,find_miss50 --cuda-async
grep -A16 "^Limits" $R/small-async.log >> $A
B="--device cuda --no-peers --no-limits --reps 9" run small-sync gpuhash --scheme linear --keys u32,u64 --values u32 --loads 0.5 --sizes 2^27 --batch 2^20 --ops insert,find_hit
for round in 1 2; do
  for f in "" -DGH_EXP_WHOLE_HOME; do
    export GPUHASH_NVRTC_FLAGS="$f"
    B="--device cuda --no-peers --no-limits --reps 9" run small-find-r$round${f:+-whole} gpuhash --scheme linear --keys u32,u64 --values u32 --loads 0.5 --sizes 2^27 --batch 2^20 --ops find_hit,find_miss50 --cuda-async
    run large-find-r$round${f:+-whole} gpuhash --scheme linear --keys u32,u64 --values u32 --loads 0.5,0.9 --sizes 2^27 --ops find_hit,find_miss50
  done
done
unset GPUHASH_NVRTC_FLAGS
finish
