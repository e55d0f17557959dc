//! The conformance suite on the default wgpu adapter (Mesa's lavapipe on a
//! machine without a GPU). Without an adapter each test prints
//! `skipped: no wgpu adapter (...)`; set `GPUHASH_REQUIRE_WGPU=1` to make
//! that a failure instead (CI does). The wgpu backend implements
//! `Scheme::Linear` so far.

#[macro_use]
mod common;

use gpuhash::{Device, Scheme};

conformance_suite!(wgpu_linear, Device::Wgpu, Scheme::Linear);
