#!/bin/bash
# Insert-or-apply batches larger than the table are built in chunks, each a
# pass over the whole table. The committed chunk is the table's slots (2^27
# here); GPUHASH_EXP_CHUNK_LOG2 (a switch of this call's build only) sets
# 2^28, 2^29 or 2^30 keys a chunk: u64 and u32 pairs, 16 passes over the
# keys of a load of 0.5 (2^30 positions), alternating in two rounds.
cd "$(dirname "$0")"
BINS="gpuhash" source ../run-lib.sh
for round in 1 2; do
  for c in 27 28 29 30; do
    GPUHASH_EXP_CHUNK_LOG2=$c run r$round-c$c-u64 gpuhash --scheme two-level --keys u64 --values u64 --ops apply_sum --loads 0.5 --sizes 2^27
  done
done
for c in 27 29; do
  GPUHASH_EXP_CHUNK_LOG2=$c run c$c-u32 gpuhash --scheme two-level,linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^27
done
finish
