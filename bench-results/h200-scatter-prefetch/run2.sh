#!/bin/bash
# Streaming (evict-first) stores, selected by NVRTC flags, against the
# committed kernels, alternating in two rounds: the scatter's output
# (-DGH_EXP_SCATTER_CS), the build's region write-back (-DGH_EXP_BUILD_CS),
# both; and, for u64 pairs (2^15 regions, 15 bits), the wider digit in pass 1
# instead of pass 2 (GH_EXP_SHIFT_UP: 128 pass-1 bins of 256 regions).
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
  echo "== $n rc=$? $(el)s [${GPUHASH_NVRTC_FLAGS:-}${GH_EXP_SHIFT_UP:+ shift-up}]: $*" >> $A; grep -E "^cuda:0 +[a-z-]+ {2,}" $R/$n.log | awk '!s[$0]++' >> $A; }
u64() { local v=$1
  run $v-ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9 --sizes 2^27
  run $v-app64 --scheme two-level --keys u64 --values u64 --ops apply_sum --loads 0.5 --sizes 2^27; }
rows() { local v=$1
  u64 $v
  run $v-ins32 --scheme two-level,linear --keys u32 --values u32 --ops insert --loads 0.5 --sizes 2^27
  run $v-agg --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23; }
for round in 1 2; do
  (unset GPUHASH_NVRTC_FLAGS; rows r$round-now)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_SCATTER_CS; rows r$round-cs)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_BUILD_CS; rows r$round-bcs)
  (export GPUHASH_NVRTC_FLAGS="-DGH_EXP_SCATTER_CS -DGH_EXP_BUILD_CS"; rows r$round-both)
  (unset GPUHASH_NVRTC_FLAGS; export GH_EXP_SHIFT_UP=1; u64 r$round-up)
done
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
