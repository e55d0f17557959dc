#!/usr/bin/env bash
# Builds the browser module into web/www/pkg: gpuhash-web for wasm32, then the
# JS bindings by the wasm-bindgen CLI (the version in Cargo.lock).
set -euo pipefail
cd "$(dirname "$0")/.."

want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
    echo "web/build.sh: needs wasm-bindgen $want (found '${have:-none}'); install it with" >&2
    echo "    cargo install --locked wasm-bindgen-cli --version =$want   (without --locked if the index lacks a locked crate)" >&2
    exit 1
fi
cargo build --release --target wasm32-unknown-unknown -p gpuhash-web
wasm-bindgen --target web --no-typescript --out-dir web/www/pkg target/wasm32-unknown-unknown/release/gpuhash_web.wasm
echo "built web/www/pkg; serve it with: python3 web/serve.py"
