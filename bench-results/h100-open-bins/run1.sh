#!/bin/bash
# Open bins (the partition without its histogram pass) on the GPU, in one
# call, the most needed first; each step is skipped once the call's time
# runs short (`left`), and the logs are packed after each:
#  1. the CUDA conformance suite with a fresh seed;
#  2. open against packed bins, one binary, switched by GPUHASH_REGION_OPEN
#     (a measuring switch of this build only), in alternating rounds;
#  3. the nothing-lost tests at full scale (2^22-2^24 slots), fresh seed;
#  4. the linear and two-level suites with the region build forced on;
#  5. skewed insert-or-apply (zipf, one hot key), open against packed;
#  6. the wgpu suite on the GPU through Vulkan.
cd "$(dirname "$0")"
BINS="gpuhash it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-560} - $(el) )) -ge "$1" ]; }
suite conformance it 200 conformance_cuda::; finish
ab() {
  for o in 0 1; do
    export GPUHASH_REGION_OPEN=$o
    run agg-r$1-o$o gpuhash --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
    run u32-r$1-o$o gpuhash --scheme two-level,linear --sizes 2^27 --keys u32 --values u32 --ops insert --loads 0.5,0.9
    run u64-r$1-o$o gpuhash --scheme two-level --sizes 2^27 --keys u64 --values u64 --ops insert --loads 0.5,0.9
  done
  unset GPUHASH_REGION_OPEN
  finish
}
left 200 && ab 1
full=$("$R/it" --list 2>/dev/null | sed -n 's/: test$//p' | grep '^conformance_cuda::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
left 180 && { GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 suite fullscale it 170 --exact $full; finish; }
left 200 && ab 2
left 110 && { GPUHASH_TEST_REGION=always suite region-always it 100 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish; }
for o in 0 1; do
    left 100 || break
    GPUHASH_REGION_OPEN=$o run skew-o$o gpuhash --scheme two-level --sizes 2^26 --keys u32 --values u32 --ops apply_sum,apply_zipf,apply_hot --loads 0.5
done
finish
if left 100; then
    if ! ldconfig -p | grep -q 'libvulkan\.so\.1 '; then
        for d in ../../.ship/*.deb; do dpkg -x "$d" /; done
        ldconfig
    fi
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    GPUHASH_REQUIRE_WGPU=1 suite wgpu-suite it $(( 560 - $(el) )) conformance_wgpu::
    grep -m1 -o 'wgpu adapter 0: .*' "$R/wgpu-suite.log" >> "$A"
fi
finish
