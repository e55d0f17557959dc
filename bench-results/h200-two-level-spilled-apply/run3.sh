#!/bin/bash
# apply rows the last call's timeouts cut: new vs old at 0.9, skew at 0.95/0.9, u64
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT
export GPUHASH_REQUIRE_CUDA=1
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
for v in gpuhash gpuhash_old; do gunzip -kf $v.gz; chmod +x $v; mkdir -p /tmp/c$v; GPUHASH_CACHE_DIR=/tmp/c$v timeout 60 ./$v kernels --scheme two-level > /dev/null 2>&1; echo "$v kernels rc=$? $(el)s" >> $A; done
B="--device cuda --no-peers --no-limits --scheme two-level --sizes 2^27 --reps 3"
run() { # name version timeout args...
  local n=$1 v=$2 t=$3; shift 3; local left=$(( 560 - $(el) )); [ $t -gt $left ] && t=$left; [ $t -le 5 ] && return
  GPUHASH_CACHE_DIR=/tmp/c$v timeout $t ./$v bench $B "$@" --out $R/$n > $R/$n.log 2>&1; echo "$n $v rc=$? $(el)s" >> $A; grep "two-level   apply" $R/$n.log | sed "s/^/$v /" >> $A; cp $R/$n.log $OUT/ 2>/dev/null
}
run s9 gpuhash 90 --keys u32 --values u32 --ops apply_sum --loads 0.9
run k95 gpuhash 150 --keys u32 --values u32 --ops apply_zipf,apply_hot --loads 0.95
run u9 gpuhash 90 --keys u64 --values u64 --ops apply_sum --loads 0.9
run o9 gpuhash_old 90 --keys u32 --values u32 --ops apply_sum --loads 0.9
run k9 gpuhash 150 --keys u32 --values u32 --ops apply_zipf,apply_hot --loads 0.9
run u95 gpuhash 100 --keys u64 --values u64 --ops apply_sum --loads 0.95
