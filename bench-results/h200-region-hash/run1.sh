#!/bin/bash
# Two-level: base vs one hash for a region's candidates (GH_EXP_A: no region
# hash in the build's step 1 of one-region blocks; GH_EXP_B: candidates from
# one hash) vs B + candidates of seed number 0 read beside the region word
# (GH_EXP_C), alternating; the u64 small-batch crossover at load 0.95.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
gunzip -c $S/gpuhash.gz > $R/gpuhash; chmod +x $R/gpuhash; G=$R/gpuhash
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3 --scheme two-level"
V0=""; V1="-DGH_EXP_A -DGH_EXP_B"; V2="-DGH_EXP_A -DGH_EXP_B -DGH_EXP_C"
run() { # name flags args...
  local n=$1 f=$2; shift 2
  GPUHASH_NVRTC_FLAGS="$f" timeout 90 $G bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n [$f] rc=$? $(el)s: $*" >> $A
  grep -E "^cuda +two-level" $R/$n.log | sort -u >> $A
}
for round in 1 2; do
  for v in 0 1 2; do
    eval f=\$V$v
    run r${round}v${v}-ins32 "$f" --keys u32 --values u32 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
    run r${round}v${v}-ins64 "$f" --keys u64 --values u64 --ops insert --loads 0.5,0.9,0.95 --sizes 2^27
    run r${round}v${v}-find32 "$f" --keys u32 --values u32 --ops find_hit,find_miss50 --loads 0.5,0.95 --sizes 2^27
    run r${round}v${v}-small32 "$f" --keys u32 --values u32 --ops insert,find_hit --loads 0.5 --batch 2^20 --sizes 2^27
    run r${round}v${v}-agg "$f" --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
  done
done
for rb in never always; do
  run u64x-$rb "" --keys u64 --values u64 --ops insert --loads 0.95 --batch 2^16,2^17,2^18 --region-build $rb --sizes 2^27
done
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
for v in 0 2; do
  eval f=\$V$v
  GPUHASH_NVRTC_FLAGS="$f" timeout 60 $N --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel $G bench $B --reps 1 --keys u32 --values u32 --ops insert,find_hit --loads 0.5 --batch 2^20 --sizes 2^27 --out $R/q$v > $OUT/ncu-small-v$v.log 2>&1
  echo "ncu v$v rc=$? $(el)s" >> $A
done
cd $R && tar czf $OUT/logs.tgz *.log */results.csv 2>/dev/null
echo "done $(el)s" >> $A
