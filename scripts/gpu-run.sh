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
    # The region build of large inserts is off by default; its own run of the
    # tests that reach it.
    GPUHASH_REGION_BUILD=1 "$here/bin/test-conformance_cuda" --test-threads=4 linear > "$logs/test-region-build.log" 2>&1
    rc=$?
    note "tests region build (linear, GPUHASH_REGION_BUILD=1): rc=$rc $(grep -E '^test result' "$logs/test-region-build.log" | tail -1)"
    [ $rc -eq 0 ] || fail=1
fi
if has sanitizer; then
    # Small sizes keep the instrumented run short; the same tests as above.
    for tool in memcheck racecheck; do
        GPUHASH_TEST_SCALE=small timeout "${SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool $tool --error-exitcode 99 \
            "$here/bin/test-conformance_cuda" --test-threads=1 ${SANITIZER_FILTER:-} > "$logs/sanitizer-$tool.log" 2>&1
        rc=$?
        note "sanitizer $tool: rc=$rc $(grep -E 'ERROR SUMMARY|test result' "$logs/sanitizer-$tool.log" | tr '\n' ' ')"
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
