#!/usr/bin/env bash
# Compiles every kernel module (key type x value type x scheme) for sm_90 with
# the pinned nvcc 13.0 and fails if any kernel spills registers, or if a hot
# kernel (insert, find, contains, erase) of a lock-free scheme (linear,
# hashinator) uses a stack frame. Needs no GPU.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/cuda-env.sh"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
status=0
modules=0
# Scheme codes as in src/core/scheme.rs (GH_SCHEME_*).
schemes="0:linear 1:hashinator 2:robin-hood 3:cuckoo 4:two-level"
for sc in $schemes; do
  code="${sc%%:*}" name="${sc#*:}"
  for key in "unsigned int" "unsigned long long"; do
    for value in "unsigned int" "int" "float" "unsigned long long" "long long" "double"; do
        log="$out/log"
        "$CUDA_BIN/nvcc" -arch=sm_90 -std=c++17 -c "$root/kernels/bulk.cu" -o "$out/bulk.o" \
            -Xptxas -v "-DGH_KEY_T=$key" "-DGH_VALUE_T=$value" "-DGH_SCHEME=$code" >"$log" 2>&1 || { cat "$log"; exit 1; }
        modules=$((modules + 1))
        # ptxas prints "Compiling entry function 'NAME'" then its properties.
        awk -v kv="$name $key -> $value" -v lockfree="$([ "$code" -le 1 ] && echo 1 || echo 0)" '
            /Compiling entry function/ { fn = $0; sub(/.*function ./, "", fn); sub(/. for .*/, "", fn) }
            /bytes stack frame/ {
                hot = lockfree && (fn ~ /gh_(insert|find|contains|erase)$/)
                split($0, a, " "); frame = a[1]; spills = a[5] + a[9]
                if (spills > 0 || (hot && frame > 0)) { printf "FAIL %s %s: %s\n", kv, fn, $0; bad = 1 }
            }
            END { exit bad }' "$log" || status=1
    done
  done
done
[ $status -eq 0 ] && echo "kernels: $modules modules compiled for sm_90, no spills, no stack frames in hot lock-free kernels"
exit $status
