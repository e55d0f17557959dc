# Source this: installs (once) the pinned CUDA 13.0 compilers from PyPI into
# .cuda/venv and exports CUDA_BIN and LD_LIBRARY_PATH for NVRTC.
# No GPU is needed; the 580 driver of our GPU machines accepts 13.0 PTX, so
# every wheel is pinned to 13.0.x (a newer compiler emits PTX it rejects).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.cuda/venv"
if [ ! -x "$venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc" ] && [ ! -x "$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cu13/bin 2>/dev/null | head -1)/nvcc" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --no-cache-dir --disable-pip-version-check \
        nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 \
        nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85
fi
cu13="$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cu13 | head -1)"
export CUDA_BIN="$cu13/bin"
export LD_LIBRARY_PATH="$cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
