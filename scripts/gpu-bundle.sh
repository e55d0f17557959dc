#!/usr/bin/env bash
# Builds the GPU test suite, the examples and the CLI here (no GPU needed) and
# packs them, stripped, with a runner into gpu-bundle/. Copy that folder to a
# machine with only the NVIDIA driver and CUDA libraries (no Rust) and run
#   gpu-bundle/run.sh [LOG_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/gpu-bundle"
cd "$root"
rm -rf "$out"
mkdir -p "$out/bin"

# Test executables (one per test target), named after their targets.
cargo test --release --workspace --no-run --message-format=json 2>"$out/build.log" |
    python3 -c '
import json, shutil, sys
out = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        t = m["target"]
        name = "test-" + t["name"].replace("-", "_") + ("-lib" if "lib" in t["kind"] else "")
        shutil.copy(m["executable"], f"{out}/bin/{name}")
' "$out" || { grep -E "^(error|warning: unused)" -A12 "$out/build.log" | head -60; echo "gpu-bundle: the test build failed" >&2; exit 1; }
cargo build --release --examples -q
cargo build --release -p gpuhash-cli -q
for e in examples/*.rs; do
    n="$(basename "$e" .rs)"
    cp "target/release/examples/$n" "$out/bin/example-$n"
done
cp target/release/gpuhash "$out/bin/gpuhash"
strip "$out"/bin/*
# Debian's Vulkan loader, for run.sh's wgpu stage on GPU machines that have
# NVIDIA's Vulkan driver (ICD) but no loader: wgpu loads libvulkan.so.1.
mkdir -p "$out/vulkan"
(cd "$out/vulkan" && apt-get download -q libvulkan1 >/dev/null 2>&1) ||
    echo "gpu-bundle: apt-get download libvulkan1 failed: the wgpu stage needs a Vulkan loader on the GPU machine" >&2
git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || true
cp "$root/scripts/gpu-run.sh" "$out/run.sh"
chmod +x "$out/run.sh"
du -sh "$out"
