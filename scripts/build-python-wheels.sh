#!/usr/bin/env bash
# Builds the abi3 wheel of the Python package (python/) into dist/: one
# wheel for CPython 3.9+ on this platform, tagged manylinux where the
# host's glibc allows. maturin comes pinned from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet "maturin==1.9.6"
python3 -m maturin build --release --manifest-path python/Cargo.toml --out dist "$@"
ls -l dist/*.whl
