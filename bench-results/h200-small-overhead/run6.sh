#!/bin/bash
# The CUDA conformance suite (the integration binary's conformance_cuda
# module) with a fresh seed, on the kept change.
cd "$(dirname "$0")"
BINS="it" source ../run-lib.sh
suite conformance-cuda it 540 conformance_cuda::
finish
