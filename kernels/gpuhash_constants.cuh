// Generated from src/core/constants.rs: do not edit by hand.
// `cargo test` fails if this file and the Rust constants differ.
#pragma once
#define GH_MIX_MUL_1 0xff51afd7ed558ccdull
#define GH_MIX_MUL_2 0xc4ceb9fe1a85ec53ull
#define GH_DEFAULT_SEED 0x9e3779b97f4a7c15ull
#define GH_FIBONACCI_MUL 0x9e3779b97f4a7c15ull
#define GH_ROUTE_SALT 0xbe5466cf34e90c6dull
#define GH_BUCKET_BYTES 32
#define GH_DEFAULT_MAX_PROBE_BUCKETS 1024ull
#define GH_MIN_SLOTS 16ull
#define GH_SCHEME_LINEAR 0
#define GH_SCHEME_HASHINATOR 1
#define GH_SCHEME_ROBIN_HOOD 2
#define GH_SCHEME_CUCKOO 3
#define GH_SCHEME_TWO_LEVEL 4
#define GH_CUCKOO_SALT_0 0x243f6a8885a308d3ull
#define GH_CUCKOO_SALT_1 0x13198a2e03707345ull
#define GH_CUCKOO_SALT_2 0xa4093822299f31d1ull
#define GH_CUCKOO_WALK_SALT 0x082efa98ec4e6c89ull
#define GH_CUCKOO_REGION_SALT 0x452821e638d01377ull
#define GH_CUCKOO_REGION_LOCK 0x8000000000000000ull
#define GH_CUCKOO_REGION_FULL 0x4000000000000000ull
#define GH_CUCKOO_REGION_SEED 0x3fffffffffffffffull
#define GH_CUCKOO_MAX_EVICTIONS 64ull
#define GH_CUCKOO_STASH_PAIRS 32ull
#define GH_CUCKOO_REGION_BUCKETS 512ull
#define GH_CUCKOO_LARGE_REGION_BUCKETS 2048ull
#define GH_CUCKOO_LARGE_REGIONS_FROM 1048576ull
#define GH_CUCKOO_REBUILD_SEEDS 8ull
#define GH_CUCKOO_REBUILD_AREAS 64ull
