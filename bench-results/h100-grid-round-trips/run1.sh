#!/bin/bash
# One call for what is owed on the committed build (open bins), the most
# needed first; each later step runs only while the call's time allows:
#  1. the nothing-lost tests at full scale (2^22-2^24 slots), fresh seed;
#  2. the two-level grid against TARGETS.md: u32 and u64 keys, 2^27 slots,
#     insert / hits / 50% miss at 0.5, 0.9 (0.95 for u32), with the
#     hardware limits; the aggregation (linear and two-level); small
#     batches (2^20 keys at load 0.5);
#  3. Nsight Compute, DRAM bytes read and written and the time of each
#     region kernel: u64 two-level inserts at 0.5 and the aggregation
#     (are the scatters' partial-sector writes read back?);
#  4. the linear and two-level suites with the region build forced on;
#  5. the wgpu suite on the GPU through Vulkan.
cd "$(dirname "$0")"
BINS="gpuhash it" source ../run-lib.sh
left() { [ $(( ${BUDGET:-540} - $(el) )) -ge "$1" ]; }
full=$("$R/it" --list 2>/dev/null | sed -n 's/: test$//p' | grep '^conformance_cuda::' |
    grep -E 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')
GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS=u32:u32,u64:u64 TT=16 suite fullscale it 170 --exact $full; finish
B="--device cuda --no-peers --reps 3" run u32 gpuhash --scheme two-level --sizes 2^27 --keys u32 --values u32 --ops insert,find_hit,find_miss50 --loads 0.5,0.9,0.95
run u64 gpuhash --scheme two-level --sizes 2^27 --keys u64 --values u64 --ops insert,find_hit,find_miss50 --loads 0.5,0.9
run agg gpuhash --scheme linear,two-level --sizes 2^23 --keys u32 --values u32 --ops apply_sum --loads 0.5
run small gpuhash --scheme two-level,linear --sizes 2^27 --batch 2^20 --keys u32,u64 --values u32 --ops insert,find_hit --loads 0.5
finish
N=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
prof() { local n=$1; shift; timeout 90 $N --clock-control none -k regex:gh_region \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum \
    "$R/gpuhash" bench --device cuda --no-peers --no-limits --reps 1 "$@" --out "$R/p$n" > "$OUT/ncu-$n.log" 2>&1
  echo "ncu $n rc=$? $(el)s" >> "$A"; }
left 150 && prof ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27
left 120 && prof agg --scheme linear --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23
left 120 && { GPUHASH_TEST_REGION=always TT=16 suite region-always it 110 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level; finish; }
if left 90; then
    if ! ldconfig -p | grep -q 'libvulkan\.so\.1 '; then
        for d in ../../.ship/*.deb; do dpkg -x "$d" /; done
        ldconfig
    fi
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    GPUHASH_REQUIRE_WGPU=1 suite wgpu-suite it $(( ${BUDGET:-540} - $(el) )) conformance_wgpu::
    grep -m1 -o 'wgpu adapter 0: .*' "$R/wgpu-suite.log" >> "$A"
fi
finish
