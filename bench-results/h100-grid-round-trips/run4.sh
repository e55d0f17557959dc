#!/bin/bash
# The region build without host round trips in the middle (gpuhash): the
# sample of an insert-or-apply batch decides open or packed bins on the
# device, and the linear build's deferred keys are inserted with it; against
# 763e534 (gpuhash-exp2), in turn, two rounds. Then the CUDA conformance
# suite, the linear and two-level suites with the region build forced on,
# the nothing-lost tests at full scale (fresh seeds), and skewed
# insert-or-apply on both builds; last, whether wgpu finds NVIDIA's Vulkan
# driver when its manifest names either libGLX_nvidia by its full path.
cd "$(dirname "$0")"
BINS="gpuhash gpuhash-exp2 it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-500} - $(el) )) -ge "$1" ]; }
for r in 1 2; do
  for g in gpuhash-exp2 gpuhash; do
    run agg-$g-$r $g --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
  done
done
finish
TT=16 suite conformance it 230 conformance_cuda::; finish
left 120 && { GPUHASH_TEST_REGION=always TT=16 suite region-always it 110 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish; }
full=$("$R/it" --list 2>/dev/null | sed -n 's/: test$//p' | grep '^conformance_cuda::cuda_\(linear\|two_level\)::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 80 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it 75 --exact $full; finish; }
for g in gpuhash gpuhash-exp2; do
  left 40 && run skew-$g $g --scheme linear,two-level --sizes 2^24 --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5
done
finish
if left 30; then
    ldconfig -p | grep -q 'libvulkan\.so\.1 ' || { for d in ../../.ship/*.deb; do dpkg -x "$d" /; done; ldconfig; }
    ls -la /usr/local/nvidia/lib64/libGLX_nvidia* /lib/libGLX_nvidia* /usr/lib/libGLX_nvidia* >> "$A" 2>&1
    for lib in /usr/local/nvidia/lib64/libGLX_nvidia.so.0 /lib/libGLX_nvidia.so.0; do
        printf '{"file_format_version":"1.0.1","ICD":{"library_path":"%s","api_version":"1.4.312"}}' "$lib" > /tmp/icd.json
        VK_LOADER_DEBUG=error VK_DRIVER_FILES=/tmp/icd.json GPUHASH_REQUIRE_WGPU=1 \
            timeout 30 "$R/it" --exact conformance_wgpu::adapters_by_index --nocapture > "$R/vk.log" 2>&1
        echo "vk $lib rc=$?" >> "$A"; grep -v '^$' "$R/vk.log" | grep -i 'error\|adapter\|result' | head -6 >> "$A"
    done
fi
finish
