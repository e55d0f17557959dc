//! The conformance suite on CUDA device 0, once per scheme. Without a usable
//! device each test prints `skipped: no CUDA device (...)`; set
//! `GPUHASH_REQUIRE_CUDA=1` to make that a failure instead.

use crate::common;

use gpuhash::{Device, Scheme};

conformance_suite!(cuda_linear, Device::Cuda(0), Scheme::Linear);
conformance_suite!(cuda_hashinator, Device::Cuda(0), Scheme::Hashinator { team: 8 });
conformance_suite!(cuda_robin_hood, Device::Cuda(0), Scheme::RobinHood);
conformance_suite!(cuda_cuckoo, Device::Cuda(0), Scheme::Cuckoo);
conformance_suite!(cuda_two_level, Device::Cuda(0), Scheme::TwoLevel);
// The team kernels at the smallest and the largest team size.
conformance_suite!(cuda_hashinator_t4, Device::Cuda(0), Scheme::Hashinator { team: 4 });
conformance_suite!(cuda_hashinator_t32, Device::Cuda(0), Scheme::Hashinator { team: 32 });

/// Two-level tables from 2^20 buckets take 2048-bucket regions (the region
/// build then places one region per block): a large table at high load,
/// checked against the oracle.
#[test]
fn cuda_two_level_large_regions() {
    if let Some(dev) = common::usable(common::Target::new(Device::Cuda(0), Scheme::TwoLevel)) {
        common::suite::large_regions_at_high_load(dev);
    }
}
