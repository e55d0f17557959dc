//! The behaviour tests that can share a process, in one test binary: the
//! conformance suite (`tests/common/suite.rs`) on every backend and table
//! layout, the paged and sharded routing tests and the property tests.
//! Their helpers and the suite's bodies, generic over key and value types,
//! are so compiled once, not once per backend (each copy took about three
//! minutes of a 2-core build). A module per former test file; filters such
//! as `conformance_cuda::` or `cuda_two_level` pick tests as before.
//! `tests/faults.rs` (it takes nearly all of a device's memory) and the
//! CUDA-only binaries stay apart.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod conformance_cpu;
mod conformance_cuda;
mod conformance_paged;
mod conformance_sharded;
mod conformance_wgpu;
mod paged;
mod proptest_ops;
mod sharded;
