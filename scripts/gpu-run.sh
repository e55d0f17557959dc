#!/usr/bin/env bash
# Runs the gpuhash GPU suite from a bundle made by scripts/gpu-bundle.sh.
#   run.sh [LOG_DIR]            all stages
#   STAGES="tests bench" run.sh  a selection of: tests sanitizer examples bench
# Needs the NVIDIA driver, libnvrtc and (for the sanitizer stage) compute-sanitizer.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-$here/logs}"
stages="${STAGES:-tests sanitizer examples bench}"
mkdir -p "$logs"
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR="$here/.kernel-cache"
summary="$logs/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$logs/device.txt" 2>&1
note "device: $(cat "$logs/device.txt")  commit: $(cat "$here/COMMIT" 2>/dev/null)"

has() { case " $stages " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
fail=0
if has tests; then
    for t in "$here"/bin/test-*; do
        n="$(basename "$t")"
        "$t" --test-threads=4 > "$logs/$n.log" 2>&1
        rc=$?
        note "tests $n: rc=$rc $(grep -E '^test result' "$logs/$n.log" | tail -1)"
        [ $rc -eq 0 ] || fail=1
    done
fi
if has tests; then
    # The linear suite again with the region build forced on
    # (GPUHASH_REGION_BUILD=1: every batch that suits it, at every load, not
    # only large ones up to 96% full), with the one-pass partition and with
    # the two-pass one that only tables of more than 256 regions need
    # (GPUHASH_REGION_TWO_PASS=1 takes it on the tests' small tables).
    for pass in one two; do
        env GPUHASH_REGION_BUILD=1 $([ $pass = two ] && echo GPUHASH_REGION_TWO_PASS=1) \
            "$here/bin/test-conformance_cuda" --test-threads=4 cuda_linear > "$logs/test-region-build-$pass.log" 2>&1
        rc=$?
        note "tests region build, $pass-pass partition (linear): rc=$rc $(grep -E '^test result' "$logs/test-region-build-$pass.log" | tail -1)"
        [ $rc -eq 0 ] || fail=1
    done
fi
if has sanitizer; then
    # The whole CUDA suite at small sizes (GPUHASH_TEST_SCALE=small: smaller
    # batches, fewer rounds) under memcheck, and again under racecheck
    # (shared-memory hazards) with the region build forced on so its kernels
    # run in every linear test. Each tool runs as SANITIZER_SHARDS processes
    # side by side (test filters separated by '|', default: by scheme), as
    # the instrumented suite is slow; MEMCHECK_FILTER / RACECHECK_FILTER
    # replace the shards with one filter, SANITIZER_TIMEOUT bounds each run.
    # Racecheck runs build the region kernels with -DGH_REGION_SYNC_LOAD:
    # racecheck stops their cp.async copies with a misaligned-address error
    # that plain runs and memcheck do not show (kernels/bulk.cu).
    shards="${SANITIZER_SHARDS:-cuda_linear|cuda_cuckoo cuda_two_level|cuda_robin_hood cuda_hashinator_t4|cuda_hashinator::|cuda_hashinator_t32}"
    pids=() names=() files=()
    for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
        extra=() filters="$shards"
        [ $tool = memcheck ] && [ -n "${MEMCHECK_FILTER:-}" ] && filters="$MEMCHECK_FILTER"
        if [ $tool = racecheck ]; then
            [ -n "${RACECHECK_FILTER:-}" ] && filters="$RACECHECK_FILTER"
            extra=(GPUHASH_REGION_BUILD=1 GPUHASH_NVRTC_FLAGS=-DGH_REGION_SYNC_LOAD)
        fi
        i=0
        IFS='|' read -ra parts <<< "$filters"
        for f in "${parts[@]}"; do
            i=$((i + 1))
            name="$tool-$i"
            # shellcheck disable=SC2086 # a shard is several filters
            env GPUHASH_TEST_SCALE=small "${extra[@]}" GPUHASH_CACHE_DIR="$here/.kernel-cache-$tool" \
                timeout "${SANITIZER_TIMEOUT:-900}" compute-sanitizer --tool $tool --error-exitcode 99 \
                "$here/bin/test-conformance_cuda" --test-threads="${SANITIZER_THREADS:-3}" $f > "$logs/sanitizer-$name.log" 2>&1 &
            pids+=($!) names+=("$name ($f)") files+=("$logs/sanitizer-$name.log")
        done
    done
    for j in "${!pids[@]}"; do
        wait "${pids[$j]}"
        rc=$?
        note "sanitizer ${names[$j]}: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' "${files[$j]}" | tr '\n' ' ')"
        [ $rc -eq 0 ] || fail=1
    done
fi
if has examples; then
    for e in "$here"/bin/example-*; do
        n="$(basename "$e")"
        "$e" > "$logs/$n.log" 2>&1
        rc=$?
        note "$n: rc=$rc $(tail -1 "$logs/$n.log")"
        [ $rc -eq 0 ] || fail=1
    done
fi
if has bench; then
    "$here/bin/gpuhash" bench --device cuda ${BENCH_ARGS:-} --out "$logs/bench" > "$logs/bench.log" 2>&1
    rc=$?
    note "bench: rc=$rc (table in bench.log, rows in bench/results.csv)"
    [ $rc -eq 0 ] || fail=1
fi
note "overall: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
