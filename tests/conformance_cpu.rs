//! The conformance suite on the CPU backend (the reference).

#[macro_use]
mod common;

use gpuhash::Device;

conformance_suite!(cpu, Device::Cpu);
