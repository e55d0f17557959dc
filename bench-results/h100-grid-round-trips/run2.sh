#!/bin/bash
# Two changes for u64 inserts, each against the committed build (gpuhash),
# in turn, two rounds:
#  gpuhash-exp: pass-1 bins for tables of an odd power of two of regions
#    (u64 pairs in 2^27 slots: 2^15 regions) split 128 x 256 (pass 1 x
#    pass 2) instead of 256 x 128;
#  gpuhash-exp2: the fresh two-level build of 16-byte slots writes the
#    table with streaming stores (__stcs), so that the bins it gathers the
#    slots from stay in L2 (it read 1.62 GB for a 1.07 GB batch on an H100);
#    Nsight Compute's DRAM bytes of its build after the rounds.
# Then every kernel of the
# linear aggregation under Nsight Compute (durations: what the deferred keys
# cost), and why the last call's wgpu suite found no Vulkan adapter.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-exp gpuhash-exp2" source ../run-lib.sh
left() { [ $(( ${BUDGET:-300} - $(el) )) -ge "$1" ]; }
for r in 1 2; do
  for g in gpuhash gpuhash-exp gpuhash-exp2; do
    s=two-level,linear; [ $g = gpuhash-exp2 ] && s=two-level
    run u64-$g-$r $g --scheme $s --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
  done
done
finish
N=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
for g in gpuhash gpuhash-exp2; do
  left 60 && { timeout 40 $N --clock-control none -k regex:gh_region_build_fresh --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    "$R/$g" bench --device cuda --no-peers --no-limits --reps 1 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27 \
    --out "$R/pf$g" > "$OUT/ncu-fresh-$g.log" 2>&1; echo "ncu fresh $g rc=$? $(el)s" >> "$A"; }
done
left 60 && { timeout 60 $N --clock-control none --metrics gpu__time_duration.sum "$R/gpuhash" bench --device cuda --no-peers --no-limits --reps 1 \
    --scheme linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23 --out "$R/pagg" > "$OUT/ncu-agg-all.log" 2>&1
  echo "ncu agg-all rc=$? $(el)s" >> "$A"; }
{ echo "== vulkan"; ls -la /usr/local/nvidia/share/vulkan/icd.d/ /etc/vulkan/icd.d /usr/share/vulkan/icd.d 2>&1
  timeout 20 find / -xdev \( -name 'nvidia_icd*.json' -o -name 'libGLX_nvidia.so*' -o -name 'libnvidia-glvkspirv*' \) 2>/dev/null | head
  cat /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json 2>&1 | head -8
  env | grep -i 'NVIDIA_DRIVER_CAP\|NVIDIA_VISIBLE' ; } >> "$A" 2>&1
finish
