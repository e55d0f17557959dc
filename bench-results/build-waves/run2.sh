#!/bin/bash
# Where the 768-thread build pays: linear aggregations and inserts at load
# 0.5 into 2^22, 2^24 and 2^25 slots (512, 2048 and 4096 regions), main's
# blocks (base) against 768 threads, two rounds in turn, on gpuhash-x.
cd "$(dirname "$0")"
BINS="gpuhash-x" source ../run-lib.sh
for r in 1 2; do
    for x in base w768; do
        (
            [ $x = w768 ] && export GPUHASH_X_BUILD_THREADS=768 GPUHASH_NVRTC_FLAGS="-DGH_BUILD_THREADS=768 -DGH_BUILD_MIN_BLOCKS=2"
            run sz-$x-$r gpuhash-x --scheme linear --sizes 2^22,2^24,2^25 --keys u32 --values u32 --ops apply_sum,insert --loads 0.5
        )
    done
done
finish
