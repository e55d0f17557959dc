// Generated from src/core/constants.rs: do not edit by hand.
// `cargo test` fails if this file and the Rust constants differ.
#pragma once
#define GH_MIX_MUL_1 0xff51afd7ed558ccdull
#define GH_MIX_MUL_2 0xc4ceb9fe1a85ec53ull
#define GH_DEFAULT_SEED 0x9e3779b97f4a7c15ull
#define GH_FIBONACCI_MUL 0x9e3779b97f4a7c15ull
#define GH_BUCKET_BYTES 32
#define GH_DEFAULT_MAX_PROBE_BUCKETS 1024ull
#define GH_MIN_SLOTS 16ull
#define GH_SCHEME_LINEAR 0
#define GH_SCHEME_HASHINATOR 1
#define GH_SCHEME_ROBIN_HOOD 2
#define GH_SCHEME_CUCKOO 3
#define GH_SCHEME_TWO_LEVEL 4
