#!/bin/bash
# The CUDA suites that make async calls, with fresh seeds: cuda_io,
# cuda_concurrency and the fault tests.
cd "$(dirname "$0")"
BINS="io cx fa" source ../run-lib.sh
suite io io 200
suite cx cx 120
suite fa fa 240
finish
