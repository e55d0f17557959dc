#!/bin/bash
# compute-sanitizer on the linear build's wide form (itw): memcheck and
# racecheck on cuda_linear::skewed_apply, whose insert-or-apply batches of
# 60,000 keys into 2^15 slots (4 regions, more keys than slots) take it, at
# the default scale (a smaller one would leave fewer keys than slots).
# Racecheck as scripts/gpu-run.sh runs it: the region build forced on,
# synchronous region loads (-DGH_REGION_SYNC_LOAD), its own kernel cache.
cd "$(dirname "$0")"
SHIP=${SHIP:-../../.ship} BINS="itw" source ../run-lib.sh
cs=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || command -v compute-sanitizer)
san() { # NAME TOOL SECONDS PAIRS [ENV...]
    local n=$1 tool=$2 t=$3 p=$4 s=$RANDOM$RANDOM
    shift 4
    env "$@" GPUHASH_TEST_PAIRS=$p GPUHASH_TEST_SEED=$s timeout "$t" "$cs" --tool "$tool" --report-api-errors no --print-limit 20 \
        "$R/itw" --test-threads 1 --exact conformance_cuda::cuda_linear::skewed_apply > "$R/$n.log" 2>&1
    echo "== $tool $n seed $s pairs $p rc=$? $(el)s: ok=$(grep -c '\.\.\. ok' "$R/$n.log")" \
        "$(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result|FAILED|Internal' "$R/$n.log" | sort | uniq -c | head -6 | tr '\n' ' ')" >> "$A"
    finish
}
san wide-mem memcheck 80 u32:u32
san wide-race racecheck 110 u32:u32 GPUHASH_TEST_REGION=always GPUHASH_NVRTC_FLAGS=-DGH_REGION_SYNC_LOAD GPUHASH_CACHE_DIR=/tmp/ghc-race
