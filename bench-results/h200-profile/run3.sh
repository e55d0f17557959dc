#!/bin/bash
# Nsight Compute details (stall reasons, memory, occupancy) of the region
# build's kernels: the linear and two-level aggregation, the two-level u64 insert.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
gunzip -c $S/gpuhash.gz > $R/gpuhash; chmod +x $R/gpuhash; G=$R/gpuhash
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
B="--device cuda --no-peers --no-limits --reps 1"
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
prof() { local n=$1 k=$2; shift 2
  timeout 100 $N --clock-control none --kernel-name regex:"$k" --launch-skip 0 --launch-count 3 $SEC $G bench $B "$@" --out $R/$n > $OUT/ncu-$n.log 2>&1
  echo "ncu $n rc=$? $(el)s" >> $A; }
prof aggl 'gh_region_(build|scatter1|scatter2)' --scheme linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
prof agg2 'gh_region_build' --scheme two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
prof ins64 'gh_region_(build|scatter1|scatter2)' --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27
echo "done $(el)s" >> $A
