#!/bin/bash
# 1. What the host round trips of an aggregation cost: gpuhash-exp3 skips
#    the skew sample's read-back and the deferred keys' insert (a
#    measuring build that loses those keys, never kept), against
#    gpuhash-exp2 (the fresh build's streaming stores; its aggregation is
#    the committed one), in turn, two rounds;
# 2. the kernels of a small two-level insert (2^20 u32 keys into 2^27 slots
#    at load 0.5) under Nsight Compute, durations of every launch;
# 3. the two-level suite on gpuhash-exp2's library (full scale for 16-byte
#    pairs, whose fresh build changed; then the default scale);
# 4. why wgpu finds no Vulkan adapter: the loader's own messages.
cd "$(dirname "$0")"
BINS="gpuhash-exp2 gpuhash-exp3 it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
for r in 1 2; do
  for g in gpuhash-exp2 gpuhash-exp3; do
    run agg-$g-$r $g --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
  done
done
finish
N=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
timeout 60 $N --clock-control none --metrics gpu__time_duration.sum "$R/gpuhash-exp2" bench --device cuda --no-peers --no-limits --reps 1 \
    --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5 --batch 2^20 --sizes 2^27 --out "$R/psmall" > "$R/ncu-small.log" 2>&1
echo "ncu small rc=$? $(el)s" >> "$A"
grep -E "^  [a-z_0-9]+ \(|gpu__time_duration" "$R/ncu-small.log" | paste - - | awk '{print $1, $2, $NF, $(NF-1)}' | tail -12 >> "$A"
gzip -c "$R/ncu-small.log" > "$OUT/ncu-small.log.gz"
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=$P16 TT=16 suite tl-full16 it 130 conformance_cuda::cuda_two_level; finish
left 100 && { TT=16 suite tl-default it 90 conformance_cuda::cuda_two_level; finish; }
if left 40; then
    ldconfig -p | grep -q 'libvulkan\.so\.1 ' || { for d in ../../.ship/*.deb; do dpkg -x "$d" /; done; ldconfig; }
    { echo "== vulkan"; ldconfig -p | grep -i 'vulkan\|GLX_nvidia'; ldd /usr/lib/libGLX_nvidia.so.0 | grep -i 'not found'; } >> "$A" 2>&1
    VK_LOADER_DEBUG=error,warn,driver VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GPUHASH_REQUIRE_WGPU=1 \
        timeout 30 "$R/it" --exact conformance_wgpu::adapters_by_index --nocapture > "$R/vk.log" 2>&1
    echo "vk rc=$?" >> "$A"; grep -v '^$' "$R/vk.log" | head -30 >> "$A"
fi
finish
