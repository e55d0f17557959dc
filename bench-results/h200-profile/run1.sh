#!/bin/bash
# Per-kernel times (Nsight Compute) and a timeline (Nsight Systems, where
# installed) of the rows issue 15 still misses: 2^20 two-level u32 keys into
# 2^27 slots at load 0.5; u64 two-level inserts at 0.5; the aggregation
# (apply_sum, 2^23 slots) on two-level and linear.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
gunzip -c $S/gpuhash.gz > $R/gpuhash; chmod +x $R/gpuhash; G=$R/gpuhash
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
ls -d /opt/nvidia/* /usr/local/cuda*/bin/nsys 2>/dev/null >> $A; which nsys ncu >> $A 2>&1
B="--device cuda --no-peers --no-limits"
# Plain timing first (also warms the NVRTC cache).
run() { local n=$1; shift; timeout 100 $G bench $B --reps 3 "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s: $*" >> $A; grep -E "^cuda +" $R/$n.log | sort -u >> $A; }
run small --scheme two-level,linear --keys u32 --values u32 --ops insert,find_hit --loads 0.5 --batch 2^20 --sizes 2^27
run agg --scheme two-level,linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
run ins64 --scheme two-level --keys u64 --values u64 --ops insert,apply_sum --loads 0.5 --sizes 2^27
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
prof() { local n=$1; shift; timeout 100 $N --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel $G bench $B --reps 1 "$@" --out $R/p$n > $OUT/ncu-$n.log 2>&1
  echo "ncu $n rc=$? $(el)s" >> $A; }
prof small --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5 --batch 2^20 --sizes 2^27
prof agg2 --scheme two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
prof aggl --scheme linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
prof ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27
NS=$(ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1); [ -z "$NS" ] && NS=$(which nsys)
if [ -n "$NS" ]; then
  timeout 100 $NS profile -t cuda -o $R/small --force-overwrite true $G bench $B --reps 3 --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5 --batch 2^20 --sizes 2^27 --out $R/ns > $R/nsys.log 2>&1
  echo "nsys rc=$? $(el)s" >> $A
  timeout 60 $NS stats -r cuda_gpu_trace,cuda_api_trace -f csv -o $R/small $R/small.nsys-rep >> $R/nsys.log 2>&1
  for f in $R/small_cuda_gpu_trace.csv $R/small_cuda_api_trace.csv; do [ -f $f ] && tail -400 $f > $OUT/$(basename $f); done
fi
cd $R && tar czf $OUT/logs.tgz *.log */results.csv 2>/dev/null
echo "done $(el)s" >> $A
