# Shared by the run scripts of bench-results/*/ (sourced, not run): the
# setup of a measuring call on a GPU machine and the three things such a
# call does: bench rows, a test suite with a fresh seed, memcheck.
#
# The caller sets OUT (where the call's record goes) and may set SHIP (the
# gzipped binaries, default ../../.ship from the run script's folder) and
# BINS (which of them to unpack, default "gpuhash gpuhash-base cc cx":
# the CLI, the CLI of the build compared against, the CUDA conformance
# and concurrency test binaries). Everything lands in $OUT/all.txt, one
# "== NAME rc=... ELAPSEDs" line per step with its rows or test counts;
# each step's full log goes to $R and, at `finish`, to $OUT/logs.tgz.
R=/tmp/r
mkdir -p "$R" "$OUT" /tmp/ghc
SHIP=${SHIP:-../../.ship}
for b in ${BINS:-gpuhash gpuhash-base cc cx}; do
    gunzip -c "$SHIP/$b.gz" > "$R/$b" && chmod +x "$R/$b"
done
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$A"
# Bench options every row shares (a run script may change them).
B=${B:-"--device cuda --no-peers --no-limits --reps 3"}
# The 16-byte key/value pairs, for GPUHASH_TEST_PAIRS.
P16=u32:f64,u64:u64,u64:i64,u64:f32

# run NAME BINARY BENCH-ARGS...: bench rows, each row once, at most 150 s.
run() {
    local n=$1 g=$2
    shift 2
    timeout 150 "$R/$g" bench $B "$@" --out "$R/$n" > "$R/$n.log" 2>&1
    echo "== $n rc=$? $(el)s [$g]: $*" >> "$A"
    grep -E "^cuda:0 +[a-z+-]+ {2,}" "$R/$n.log" | tr -s " " | awk '!s[$0]++' >> "$A"
}

# suite NAME BINARY SECONDS TEST-ARGS...: a test binary with a fresh, logged seed
# (TT test threads, default 8).
suite() {
    local n=$1 b=$2 t=$3 s=$RANDOM$RANDOM
    shift 3
    GPUHASH_TEST_SEED=$s timeout "$t" "$R/$b" --test-threads ${TT:-8} "$@" > "$R/$n.log" 2>&1
    echo "== suite $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' "$R/$n.log")" \
        "$(grep -E 'test result|FAILED|panicked' "$R/$n.log" | sort | uniq -c | head -8 | tr '\n' ' ')" >> "$A"
}

# memcheck NAME BINARY SECONDS TEST-ARGS...: compute-sanitizer's memcheck on a
# test binary (driver calls that return an error are left to the tests, as
# in scripts/gpu-run.sh).
memcheck() {
    local n=$1 b=$2 t=$3 s=$RANDOM$RANDOM cs
    shift 3
    cs=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || command -v compute-sanitizer)
    GPUHASH_TEST_SEED=$s timeout "$t" "$cs" --tool memcheck --report-api-errors no --print-limit 20 "$R/$b" --test-threads 4 "$@" > "$R/$n.log" 2>&1
    echo "== memcheck $n seed $s rc=$? $(el)s: $* ok=$(grep -c '\.\.\. ok' "$R/$n.log")" \
        "$(grep -E 'ERROR SUMMARY|test result|FAILED' "$R/$n.log" | sort | uniq -c | head -6 | tr '\n' ' ')" >> "$A"
}

# finish: the logs into $OUT.
finish() {
    (cd "$R" && tar czf "$OUT/logs.tgz" *.log 2>/dev/null)
    echo "done $(el)s" >> "$A"
}
