#!/bin/bash
# Why pass 1 of the partition moves the same bytes as pass 2 at 1.8 TB/s
# against 2.6 (u64 two-level inserts at load 0.5 into 2^27 slots): Nsight
# Compute's throughput, memory, scheduler and warp-state sections of the
# first launch of each scatter, and the same for the aggregation's.
cd "$(dirname "$0")"
BINS="gpuhash" source ../run-lib.sh
N=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
prof() { local n=$1; shift; timeout 120 $N --clock-control none -k regex:gh_region_scatter --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
    --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    "$R/gpuhash" bench --device cuda --no-peers --no-limits --reps 1 "$@" --out "$R/p$n" > "$OUT/ncu-$n.log" 2>&1
  echo "ncu $n rc=$? $(el)s" >> "$A"; }
prof scatter-u64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27
prof scatter-agg --scheme linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
finish
