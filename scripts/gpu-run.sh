#!/usr/bin/env bash
# Runs the gpuhash GPU suite from a bundle made by scripts/gpu-bundle.sh.
#   run.sh [LOG_DIR]            all stages
#   STAGES="tests bench" run.sh  a selection of: tests reseed fullscale wgpu sanitizer examples bench
# Needs the NVIDIA driver, libnvrtc and (for the sanitizer stage) compute-sanitizer.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-$here/logs}"
stages="${STAGES:-tests reseed fullscale wgpu sanitizer examples bench}"
mkdir -p "$logs"
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR="$here/.kernel-cache"
summary="$logs/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$logs/device.txt" 2>&1
note "device: $(cat "$logs/device.txt")  commit: $(cat "$here/COMMIT" 2>/dev/null)"

has() { case " $stages " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# The CUDA conformance suite is the module conformance_cuda of the
# integration test binary (tests/integration): its tests whose names match
# the regular expression $1, for --exact (libtest's own filters match any).
suite="$here/bin/test-integration"
cuda_tests() { "$suite" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '^conformance_cuda::' | grep -E -- "${1:-.}"; }
fail=0
if has tests; then
    # TEST_BINS picks binaries by name (default: every one).
    for t in "$here"/bin/test-*; do
        n="$(basename "$t")"
        [ -n "${TEST_BINS:-}" ] && [[ " $TEST_BINS " != *" ${n#test-} "* ]] && continue
        show=--nocapture
        "$t" --test-threads=4 $show > "$logs/$n.log" 2>&1
        rc=$?
        note "tests $n: rc=$rc $(grep -E '^test result' "$logs/$n.log" | tail -1)"
        [ -z "$show" ] || grep -E '^faults .*all schemes' "$logs/$n.log" | while read -r l; do note "  $l"; done
        [ $rc -eq 0 ] || fail=1
    done
fi
fresh_seed() { printf '0x%s' "$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"; }
if has reseed; then
    # The CUDA suites again with a fresh seed (logged, so a failure replays):
    # a test that fails on one seed only is a bug as much as any.
    seed="${RESEED:-$(fresh_seed)}"
    for n in conformance_cuda cuda_concurrency faults; do
        exe="$here/bin/test-$n" only=()
        [ $n = conformance_cuda ] && exe="$suite" only=(conformance_cuda::)
        [ -x "$exe" ] || continue
        GPUHASH_TEST_SEED=$seed "$exe" --test-threads=4 --nocapture "${only[@]}" > "$logs/test-$n-$seed.log" 2>&1
        rc=$?
        note "tests $n, seed $seed: rc=$rc $(grep -E '^test result' "$logs/test-$n-$seed.log" | tail -1)"
        [ $rc -eq 0 ] || fail=1
    done
fi
if has tests; then
    # The linear and two-level suites again with the region build forced on
    # (GPUHASH_TEST_REGION=always: the tests' tables take
    # RegionBuild::Always, every batch that suits it at every load, not only
    # large ones up to 96% full), with the one-pass partition and with the
    # two-pass one that only tables of more than 256 regions need
    # (GPUHASH_TEST_REGION=two-pass takes it on the tests' small tables).
    for pass in one two; do
        region=$([ $pass = two ] && echo two-pass || echo always)
        GPUHASH_TEST_REGION=$region \
            "$suite" --test-threads=4 conformance_cuda::cuda_linear conformance_cuda::cuda_two_level > "$logs/test-region-build-$pass.log" 2>&1
        rc=$?
        note "tests region build, $pass-pass partition (linear, two-level): rc=$rc $(grep -E '^test result' "$logs/test-region-build-$pass.log" | tail -1)"
        [ $rc -eq 0 ] || fail=1
    done
fi
if has fullscale; then
    # The nothing-lost tests at the sizes where GPU-only losses showed
    # (GPUHASH_TEST_SCALE=full: 2^22-2^24 slots), with the fixed seed and a
    # fresh one (FULL_SEEDS lists seeds; "default" is the fixed one); every
    # seed is logged so a failure replays.
    seeds="${FULL_SEEDS:-default $(fresh_seed)}"
    full_tests="$(cuda_tests 'oversubscribed_batches|overfull_apply_every_key_twice|refill_after_erase_with_growth_off|fill_until_refused')"
    # No list (no suite binary): a failure, not the whole binary at full scale.
    [ -n "$full_tests" ] || { note "fullscale: no CUDA conformance tests listed by $suite"; fail=1; seeds=; }
    for seed in $seeds; do
        log="$logs/test-fullscale-$seed.log"
        env GPUHASH_TEST_SCALE=full GPUHASH_TEST_PAIRS="${FULL_PAIRS:-u32:u32,u64:u64}" \
            $([ "$seed" != default ] && echo GPUHASH_TEST_SEED="$seed") \
            "$suite" --test-threads=4 --nocapture --exact $full_tests > "$log" 2>&1
        rc=$?
        note "fullscale seed $seed: rc=$rc $(grep -E '^test result' "$log" | tail -1)"
        [ $rc -eq 0 ] || fail=1
    done
fi
if has wgpu; then
    # The wgpu suite (tests/integration's conformance_wgpu: every scheme the
    # backend runs, both first phases) on the GPU through Vulkan, at the
    # default sizes (WGPU_SCALE changes them). A machine with NVIDIA's ICD
    # but no Vulkan loader gets the loader packages the bundle carries in
    # vulkan/ (scripts/gpu-bundle.sh), unpacked into / (as root).
    if ! ldconfig -p | grep -q 'libvulkan\.so\.1 ' && ls "$here"/vulkan/*.deb >/dev/null 2>&1; then
        for d in "$here"/vulkan/*.deb; do dpkg -x "$d" / || note "wgpu: could not unpack $(basename "$d")"; done
        ldconfig
    fi
    icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
    seed="$(fresh_seed)"
    GPUHASH_REQUIRE_WGPU=1 GPUHASH_TEST_SCALE="${WGPU_SCALE:-default}" GPUHASH_TEST_SEED=$seed \
        "$suite" --test-threads=4 --nocapture conformance_wgpu:: > "$logs/test-wgpu-$seed.log" 2>&1
    rc=$?
    note "wgpu suite, seed $seed ($(grep -m1 -o 'wgpu adapter 0: .*' "$logs/test-wgpu-$seed.log")): rc=$rc $(grep -E '^test result' "$logs/test-wgpu-$seed.log" | tail -1)"
    [ $rc -eq 0 ] || fail=1
fi
if has sanitizer; then
    # The whole CUDA suite at small sizes (GPUHASH_TEST_SCALE=small: smaller
    # batches, fewer rounds) under every tool (SANITIZER_TOOLS, default
    # memcheck racecheck synccheck initcheck); racecheck (shared-memory
    # hazards) runs with the region build forced on
    # (GPUHASH_TEST_REGION=always) so its kernels run in every linear and
    # two-level test. The instrumented suite is slow, so every (tool,
    # binary, test, key/value pair) is its own process (GPUHASH_TEST_PAIRS
    # splits the conformance tests by pair; the other CUDA test binaries run
    # a test per process), SANITIZER_JOBS of them at once; SANITIZER_FILTER
    # (a regular expression) keeps the tests whose names match it,
    # SANITIZER_PAIRS the pairs it lists, SANITIZER_BINS picks the test binaries, SANITIZER_TIMEOUT bounds each
    # process. Driver calls that return an error are not counted
    # (--report-api-errors no): the tests see those themselves, and
    # borrow_device asks the driver about host addresses on purpose (its
    # clear error is what cuda_io checks). Racecheck runs build the region kernels with
    # -DGH_REGION_SYNC_LOAD: racecheck stops their cp.async copies with a
    # misaligned-address error that plain runs and memcheck do not show
    # (kernels/bulk.cu).
    jobs="$logs/sanitizer-jobs.txt" results="$logs/sanitizer-results.txt"
    mkdir -p "$logs/sanitizer"
    : > "$results"
    for bin in ${SANITIZER_BINS:-conformance_cuda cuda_io cuda_concurrency faults}; do
        # Tests that make no CUDA call (the CPU halves of the fault tests) and
        # the one that measures device memory (which the tools' own
        # allocations change) stay out.
        if [ $bin = conformance_cuda ]; then
            [ -x "$suite" ] || continue
            tests="$(cuda_tests "${SANITIZER_FILTER:-.}")"
        else
            [ -x "$here/bin/test-$bin" ] || continue
            tests="$("$here/bin/test-$bin" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E -- "${SANITIZER_FILTER:-.}" |
                grep -vE '^cpu_|out_of_device_memory')"
        fi
        for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}; do
            for t in $tests; do
                # Tests with pairs of their own (tests/common/suite.rs).
                case $bin:$t in
                    conformance_cuda:*growth_across_doublings) pairs="u32:u32 u64:f64 u32:i64 u64:f32" ;;
                    conformance_cuda:*refill_after_erase_with_growth_off) pairs="u32:u32 u64:f64" ;;
                    conformance_cuda:*oversubscribed_batches | conformance_cuda:*fill_until_refused) pairs="u32:u32 u64:u64" ;;
                    conformance_cuda:*) pairs="u32:u32 u32:i32 u32:f64 u64:u64 u64:i64 u64:f32" ;;
                    *) pairs="all" ;;
                esac
                for p in $pairs; do
                    # SANITIZER_PAIRS keeps only the pairs it lists.
                    [ -n "${SANITIZER_PAIRS:-}" ] && [ "$p" != all ] && [[ " $SANITIZER_PAIRS " != *" $p "* ]] && continue
                    echo "$tool $bin $t $p"
                done
            done
        done
    done > "$jobs"
    sanitize() { # tool binary test pair
        local name="$1-$2-${3//::/-}-${4//:/_}" extra=() exe="$here/bin/test-$2"
        [ "$2" = conformance_cuda ] && exe="$suite"
        [ "$1" = racecheck ] && extra=(GPUHASH_TEST_REGION=always GPUHASH_NVRTC_FLAGS=-DGH_REGION_SYNC_LOAD)
        [ "$4" != all ] && extra+=(GPUHASH_TEST_PAIRS="$4")
        env GPUHASH_TEST_SCALE=small "${extra[@]}" GPUHASH_CACHE_DIR="$here/.kernel-cache-$1" \
            timeout "${SANITIZER_TIMEOUT:-900}" compute-sanitizer --tool "$1" --error-exitcode 99 --report-api-errors no \
            "$exe" --exact "$3" --test-threads=1 > "$logs/sanitizer/$name.log" 2>&1
        local rc=$?
        local clean=no
        # Clean: the test passed, the tool found nothing, and it lost no launch.
        grep -q "^test result: ok. 1 passed" "$logs/sanitizer/$name.log" &&
            grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards" "$logs/sanitizer/$name.log" &&
            ! grep -q "Internal Sanitizer Error" "$logs/sanitizer/$name.log" && [ $rc -eq 0 ] && clean=yes
        echo "$clean rc=$rc $1 $2 $3 $4" >> "$results"
    }
    export -f sanitize
    export here logs results suite SANITIZER_TIMEOUT
    xargs -P "${SANITIZER_JOBS:-16}" -L 1 bash -c 'sanitize "$@"' _ < "$jobs"
    total=$(wc -l < "$jobs") ok=$(grep -c "^yes" "$results")
    note "sanitizer: $ok of $total (tool, binary, test, pair) runs clean (logs in sanitizer/, list in sanitizer-results.txt)"
    grep -v "^yes" "$results" | sort | while read -r line; do note "sanitizer not clean: $line"; done
    [ "$ok" -eq "$total" ] || fail=1
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
# Per-key outcomes the suites compared with their oracle (each test prints its count).
checked=$(cat "$logs"/test-*.log 2>/dev/null | sed -n 's/^oracle: \([0-9]*\) per-key.*/\1/p' | awk '{s += $1} END {print s + 0}')
note "oracle: $checked per-key outcomes checked in these logs"
note "overall: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
