#!/bin/bash
# Builds of a fresh table write back only the 32-byte buckets that hold a
# key (gpuhash, the new default), or only the 64-byte groups of two buckets
# that do (gpuhash with -DGH_EXP_SKIP16=4, a switch of this call's build
# only), against the committed build that writes every bucket
# (gpuhash-base, e321a19): inserts into an empty table and insert-or-apply
# batches, alternating in two rounds.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-base" source ../run-lib.sh
rows() {
  local v=$1 g=$2
  run $v-tl64 $g --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9 --sizes 2^27
  run $v-tl32 $g --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5,0.9 --sizes 2^27
  run $v-lin32 $g --scheme linear --keys u32 --values u32 --ops insert --loads 0.5 --sizes 2^27
  run $v-agg $g --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
  run $v-app64 $g --scheme two-level --keys u64 --values u64 --ops apply_sum --loads 0.5 --sizes 2^27
}
for round in 1 2; do
  rows r$round-base gpuhash-base
  rows r$round-skip2 gpuhash
  GPUHASH_NVRTC_FLAGS=-DGH_EXP_SKIP16=4 rows r$round-skip4 gpuhash
done
finish
