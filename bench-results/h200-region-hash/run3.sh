#!/bin/bash
# The CUDA paged two-level suites whose pages the host looks up (built by the GPU), run2.sh's build.
cd "$(dirname "$0")"; R=/tmp/r; mkdir -p $R; S=../../.ship
gunzip -c $S/cp.gz > $R/cp; chmod +x $R/cp; export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
s=$RANDOM$RANDOM; echo seed $s
GPUHASH_TEST_SEED=$s timeout 230 $R/cp --test-threads 16 cuda_beside_two_level cuda_zero_copy_two_level > $OUT/paged.log 2>&1; echo rc=$?
grep -c '\.\.\. ok' $OUT/paged.log; grep -E 'FAILED|panicked|test result' $OUT/paged.log | head
