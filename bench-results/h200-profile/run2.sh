#!/bin/bash
# Build-kernel variants by NVRTC flags (one binary), alternating; the scan
# in shared-memory chunks is in every variant. E1: linear insert-or-apply
# skips the counted placement; E2: the linear build's plain loop keeps 4
# (16-byte words: 2) words in flight; E3: for_bin loads the next round while
# this one is worked on; E4: for_bin prefetches the next round into L2.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
gunzip -c $S/gpuhash.gz > $R/gpuhash; chmod +x $R/gpuhash; G=$R/gpuhash
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3"
run() { local n=$1 f=$2; shift 2
  GPUHASH_NVRTC_FLAGS="$f" timeout 100 $G bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n [$f] rc=$? $(el)s: $*" >> $A; grep -E "^cuda:0 " $R/$n.log | sort -u >> $A; }
E1="-DGH_EXP_E1"; E2="-DGH_EXP_E2"; E3="-DGH_EXP_E3"; E4="-DGH_EXP_E4"
for round in 1 2; do
  for v in "" "$E1" "$E2" "$E1 $E2" "$E4" "$E1 $E2 $E4"; do
    run r$round-aggl "$v" --scheme linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
  done
  for v in "" "$E4" "$E3"; do
    run r$round-agg2 "$v" --scheme two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
    run r$round-ins "$v" --scheme two-level --keys u32,u64 --values u32,u64 --ops insert --loads 0.5,0.9 --sizes 2^27
  done
done
run lin "" --scheme linear --keys u32,u64 --values u32,u64 --ops insert --loads 0.5,0.9 --sizes 2^27
run lin4 "$E4" --scheme linear --keys u32,u64 --values u32,u64 --ops insert --loads 0.5,0.9 --sizes 2^27
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
timeout 120 $N --clock-control none --kernel-name gh_region_build --launch-skip 1 --launch-count 1 $SEC $G bench $B --reps 1 --scheme two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23 --out $R/n1 > $OUT/ncu-build-agg2.log 2>&1
echo "ncu1 rc=$? $(el)s" >> $A
timeout 120 $N --clock-control none --kernel-name gh_region_build --launch-skip 1 --launch-count 1 $SEC $G bench $B --reps 1 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27 --out $R/n2 > $OUT/ncu-build-ins64.log 2>&1
echo "ncu2 rc=$? $(el)s" >> $A
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
