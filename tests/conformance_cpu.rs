//! The conformance suite on the CPU backend (the reference), once per scheme.

#[macro_use]
mod common;

use gpuhash::{Device, Scheme};

conformance_suite!(cpu_linear, Device::Cpu, Scheme::Linear);
conformance_suite!(cpu_hashinator, Device::Cpu, Scheme::Hashinator { team: 8 });
conformance_suite!(cpu_robin_hood, Device::Cpu, Scheme::RobinHood);
conformance_suite!(cpu_cuckoo, Device::Cpu, Scheme::Cuckoo);
conformance_suite!(cpu_two_level, Device::Cpu, Scheme::TwoLevel);
conformance_suite!(cpu_slab_list, Device::Cpu, Scheme::SlabList);
