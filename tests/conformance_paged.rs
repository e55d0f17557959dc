//! The conformance suite on paged tables over the CPU backend, once per
//! scheme: every table of every test is split into 8 pages with 2 resident
//! at a time, so every bulk call brings pages in and evicts others (FIFO
//! for some schemes, LRU for the others, so both policies run the suite).

#[macro_use]
mod common;

use gpuhash::{Device, Paging, Residency, Scheme};

const FIFO: Paging = Paging::new(8, 2);
const LRU: Paging = Paging::new(8, 2).residency(Residency::Lru);

conformance_suite!(paged_linear, Device::Cpu, Scheme::Linear, paged: FIFO);
conformance_suite!(paged_linear_lru, Device::Cpu, Scheme::Linear, paged: LRU);
conformance_suite!(paged_hashinator, Device::Cpu, Scheme::Hashinator { team: 8 }, paged: LRU);
conformance_suite!(paged_robin_hood, Device::Cpu, Scheme::RobinHood, paged: FIFO);
conformance_suite!(paged_cuckoo, Device::Cpu, Scheme::Cuckoo, paged: LRU);
conformance_suite!(paged_two_level, Device::Cpu, Scheme::TwoLevel, paged: FIFO);
