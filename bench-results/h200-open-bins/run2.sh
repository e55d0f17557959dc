#!/bin/bash
# The suites owed on the open-bins build, fresh seeds, in one call:
#  1. the CUDA conformance suite (every scheme, about 430 s at 8 threads);
#  2. the wgpu conformance suite on this GPU through Vulkan (NVIDIA's ICD;
#     the loader travels as a .deb);
#  3. wgpu against CUDA rows on this GPU, two-level and linear, if time is left.
cd "$(dirname "$0")"
BINS="gpuhash it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-575} - $(el) )) -ge "$1" ]; }
TT=16 suite conformance-cuda it 470 conformance_cuda::; finish
if ! ldconfig -p | grep -q 'libvulkan\.so\.1 '; then
    for d in ../../.ship/*.deb; do dpkg -x "$d" /; done
    ldconfig
fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
left 40 && GPUHASH_REQUIRE_WGPU=1 suite conformance-wgpu it $(( 575 - $(el) )) conformance_wgpu::
grep -m1 -o 'wgpu adapter 0: .*' "$R/conformance-wgpu.log" >> "$A"
finish
