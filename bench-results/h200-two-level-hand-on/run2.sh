#!/bin/bash
# walk length of a fresh table's build: 512 (committed) against 256/128/64; ncu old vs new at u32 0.5
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3 --sizes 2^27 --scheme two-level"
for v in gpuhash w256 w128 w64; do
  gunzip -kf $v.gz; chmod +x $v; mkdir -p /tmp/c$v
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v kernels --scheme two-level > /dev/null 2>&1; echo "$v kernels rc=$? $(el)s" >> $A
  for k in u32 u64; do
    GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v bench $B --keys $k --values $k --ops insert --loads 0.9,0.95 --out $R/$v$k > $R/$v$k.log 2>&1; echo "bench $v $k rc=$? $(el)s" >> $A
    grep "two-level   insert" $R/$v$k.log | sed "s/^/$v /" >> $A
  done
done
gunzip -kf gpuhash_old.gz; chmod +x gpuhash_old; mkdir -p /tmp/cold
GPUHASH_CACHE_DIR=/tmp/cold timeout 60 ./gpuhash_old kernels --scheme two-level > /dev/null 2>&1
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
for v in gpuhash gpuhash_old; do
  c=/tmp/c$v; [ $v = gpuhash_old ] && c=/tmp/cold
  GPUHASH_CACHE_DIR=$c timeout 60 $N --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel ./$v bench --device cuda --no-peers --no-limits --reps 1 --sizes 2^27 --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5 --out $R/q > $OUT/ncu-$v.log 2>&1; echo "ncu $v rc=$? $(el)s" >> $A
done
