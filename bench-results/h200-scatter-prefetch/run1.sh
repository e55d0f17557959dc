#!/bin/bash
# Candidate L2 prefetches in the partition, selected by NVRTC flags and run
# alternating in two rounds against the committed kernels: the histogram a
# round of keys ahead (-DGH_EXP_HIST_PF=1), the scatter the next tile
# (-DGH_EXP_SCATTER_PF=1) or the one after (=2) at the start of each tile,
# and streaming stores of the scatter's output (-DGH_EXP_SCATTER_CS).
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
  echo "== $n rc=$? $(el)s [${GPUHASH_NVRTC_FLAGS:-}]: $*" >> $A; grep -E "^cuda:0 +[a-z-]+ {2,}" $R/$n.log | awk '!s[$0]++' >> $A; }
rows() { local v=$1
  run $v-ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9 --sizes 2^27
  run $v-ins32 --scheme two-level,linear --keys u32 --values u32 --ops insert --loads 0.5 --sizes 2^27
  run $v-agg --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23; }
for round in 1 2; do
  (unset GPUHASH_NVRTC_FLAGS; rows r$round-now)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_HIST_PF=1; rows r$round-h1)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_SCATTER_PF=1; rows r$round-s1)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_SCATTER_PF=2; rows r$round-s2)
  (export GPUHASH_NVRTC_FLAGS="-DGH_EXP_SCATTER_PF=2 -DGH_EXP_SCATTER_CS"; rows r$round-s2c)
done
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
