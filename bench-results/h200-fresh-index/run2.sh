#!/bin/bash
# Where the index build's time goes at load 0.5: Nsight Compute on the
# first build launch of the index build and of the slot-wide one
# (GH_EXP_NO_FRESH=1, a host switch of this call's binary only); then
# variants by NVRTC flags, alternating in two rounds: for the index
# build, streaming stores in its write-back (-DGH_EXP_FR_CS) and three
# blocks an SM at 40 registers (-DGH_EXP_FR_BLOCKS=3); for the slot-wide
# build, the previous call's untested variants (variants.patch of
# ../h200-scatter-prefetch, applied to this call's binary): streaming
# stores of the scatter's output (-DGH_EXP_SCATTER_CS), of the build's
# write-back (-DGH_EXP_BUILD_CS), and the wider digit in pass 1 for u64
# pairs (host switch GH_EXP_SHIFT_UP).
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
for b in gpuhash; do gunzip -c $S/$b.gz > $R/$b; chmod +x $R/$b; done; G=$R/gpuhash
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3"
run() { local n=$1; shift
  timeout 150 $G bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s [${GH_EXP_NO_FRESH:+slot-wide} ${GPUHASH_NVRTC_FLAGS:-}${GH_EXP_SHIFT_UP:+ shift-up}]: $*" >> $A; grep -E "^cuda:0 +[a-z-]+ {2,}" $R/$n.log | awk '!s[$0]++' | head -4 >> $A; }
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
prof() { local n=$1; shift
  timeout 100 $N --clock-control none -k regex:'gh_region_build' -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats $G bench --device cuda --no-peers --no-limits --reps 1 \
    --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27 --out $R/p$n > $OUT/ncu-$n.txt 2>&1
  echo "ncu $n rc=$? $(el)s" >> $A; }
prof fresh
GH_EXP_NO_FRESH=1 prof wide
rows() { run $1 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9 --sizes 2^27; }
small() { run $1-32 --scheme two-level,linear --keys u32 --values u32 --ops insert --loads 0.5 --sizes 2^27
  run $1-agg --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23; }
for round in 1 2; do
  [ $(el) -gt 520 ] && break
  rows r$round-fresh
  GPUHASH_NVRTC_FLAGS=-DGH_EXP_FR_CS rows r$round-frcs
  GPUHASH_NVRTC_FLAGS=-DGH_EXP_FR_BLOCKS=3 rows r$round-b3
  GH_EXP_NO_FRESH=1 rows r$round-wide
  GH_EXP_NO_FRESH=1 GPUHASH_NVRTC_FLAGS=-DGH_EXP_SCATTER_CS rows r$round-scs
  GH_EXP_NO_FRESH=1 GPUHASH_NVRTC_FLAGS=-DGH_EXP_BUILD_CS rows r$round-bcs
  GH_EXP_NO_FRESH=1 GH_EXP_SHIFT_UP=1 rows r$round-up
  [ $(el) -gt 480 ] && continue
  small r$round-now
  GPUHASH_NVRTC_FLAGS=-DGH_EXP_SCATTER_CS small r$round-scs
done
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
