#!/bin/bash
# step 1 of a fresh build without the first read (s1) vs the walk-length build; apply_sum at 0.9: 83d70fc vs now
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3 --sizes 2^27 --scheme two-level"
for v in s1 gpuhash gpuhash_old; do gunzip -kf $v.gz; chmod +x $v; mkdir -p /tmp/c$v
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v kernels --scheme two-level > /dev/null 2>&1; echo "$v kernels rc=$? $(el)s" >> $A; done
for v in s1 gpuhash; do for k in u32 u64; do
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v bench $B --keys $k --values $k --ops insert --loads 0.5,0.9,0.95 --out $R/$v$k > $R/$v$k.log 2>&1; echo "bench $v $k rc=$? $(el)s" >> $A
  grep "two-level   insert" $R/$v$k.log | sed "s/^/$v /" >> $A
done; done
for v in gpuhash_old gpuhash s1; do
  GPUHASH_CACHE_DIR=/tmp/c$v timeout 45 ./$v bench $B --reps 1 --keys u32 --values u32 --ops apply_sum --loads 0.9 --out $R/a$v > $R/a$v.log 2>&1; echo "apply $v rc=$? $(el)s" >> $A
  grep "two-level   apply" $R/a$v.log | sed "s/^/$v /" >> $A
done
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
GPUHASH_CACHE_DIR=/tmp/cgpuhash timeout 60 $N --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel ./gpuhash bench --device cuda --no-peers --no-limits --reps 1 --sizes 2^27 --scheme two-level --keys u32 --values u32 --ops apply_sum --loads 0.9 --out $R/q > $R/ncu.log 2>&1; echo "ncu rc=$? $(el)s" >> $A
grep -A6 "^  gh_" $R/ncu.log | grep -E "^  gh_|gpu__time" | paste - - | awk '{print $1, $2, $(NF-3), $(NF-2), $(NF-1), $NF}' >> $A
