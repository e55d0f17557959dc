#!/bin/bash
# The rest owed, in one call, fresh seeds:
#  1. wgpu against CUDA on this GPU: two-level and linear, u32 pairs, 2^26
#     slots; CUDA a thread per key (--region-build never: the goal's
#     reference) and with its default;
#  2. the two-level suite with the region build forced on;
#  3. memcheck on the region build's tests (linear, forced on).
cd "$(dirname "$0")"
BINS="gpuhash it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-575} - $(el) )) -ge "$1" ]; }
if ! ldconfig -p | grep -q 'libvulkan\.so\.1 '; then
    for d in ../../.ship/*.deb; do dpkg -x "$d" /; done
    ldconfig
fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
W="--scheme two-level,linear --sizes 2^26 --keys u32 --values u32 --ops insert,find_hit,find_miss50 --loads 0.5,0.9"
B="--device wgpu --no-peers --no-limits --reps 3" run wgpu gpuhash $W
grep -m1 -iE "adapter|vulkan" "$R/wgpu.log" >> "$A"
run cuda-thread gpuhash $W --region-build never
run cuda-auto gpuhash $W
finish
left 120 && { GPUHASH_TEST_REGION=always TT=16 suite region-always-two-level it $(( 575 - 100 - $(el) )) conformance_cuda::cuda_two_level; finish; }
left 60 && { GPUHASH_TEST_REGION=always memcheck region-linear it $(( 575 - $(el) )) conformance_cuda::cuda_linear::oversubscribed; }
finish
