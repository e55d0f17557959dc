//! The conformance suite on CUDA device 0. Without a usable device each
//! test prints `skipped: no CUDA device (...)`; set `GPUHASH_REQUIRE_CUDA=1`
//! to make that a failure instead.

#[macro_use]
mod common;

use gpuhash::Device;

conformance_suite!(cuda, Device::Cuda(0));
