#!/bin/bash
# Call 1's cuckoo suite timed out with every test stuck: is it the change?
#  1. the flat cuckoo suite alone, 16 threads, on the build before the
#     change (it-base, 90 s);
#  2. async inserts on cuckoo and two-level tables taking the step without
#     locks (gpuhash-async, io2; the kernels as before): the device I/O tests,
#     which now run the async calls on linear, cuckoo and two-level tables,
#     and the small-batch async rows against gpuhash-base;
#  3. the flat cuckoo suite on the change (it2), 90 s;
#  4. as time allows: if it hangs, each flat cuckoo test alone on it2 with
#     a 20 s limit; the two-level suite on it3 (the seed-0 candidates only).
cd "$(dirname "$0")"
BINS="it-base it2 it3 io2 gpuhash-base gpuhash-async" source ../run-lib.sh
left() { [ $(( ${BUDGET:-400} - $(el) )) -ge "$1" ]; }
TT=16 suite ck-base it-base 90 conformance_cuda::cuda_cuckoo::; finish
suite io2 io2 100; finish
for r in 1 2; do
  for g in gpuhash-base gpuhash-async; do
    B="$B --cuda-async" run async-$g-$r $g --scheme two-level,cuckoo --sizes 2^27 --batch 2^20 --keys u32,u64 --values u32 --ops insert --loads 0.5
    grep -h "+async" "$R/async-$g-$r.log" | awk '!s[$0]++' >> "$A"
  done
done
finish
left 95 && { TT=16 suite ck-new it2 90 conformance_cuda::cuda_cuckoo::; finish; }
if grep -q "suite ck-new .* rc=124" "$A"; then
  for t in $("$R/it2" --list 2>/dev/null | sed -n 's/: test$//p' | grep '^conformance_cuda::cuda_cuckoo::'); do
    left 25 || break
    s=$RANDOM$RANDOM
    GPUHASH_TEST_SEED=$s timeout 20 "$R/it2" --exact "$t" > "$R/one.log" 2>&1
    echo "one $t seed $s rc=$? $(el)s" >> "$A"
  done
fi
left 95 && { TT=16 suite tl-spec it3 90 conformance_cuda::cuda_two_level; finish; }
finish
