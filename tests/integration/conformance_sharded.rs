//! The conformance suite on sharded tables over CPU shards, once per
//! scheme: every table of every test is spread over several shards, so
//! every bulk call splits its batch over as many ranks, moves each key to
//! its shard through the in-process exchange and returns the results to
//! the caller's order. 3 shards (not a power of two) where the scheme's
//! sizes let 3 shards hold exactly the capacity a test asks for; Hashinator
//! (tables of powers of two) and TwoLevel (whole regions) on 4 and 2.

use gpuhash::{Device, Scheme};

conformance_suite!(sharded_linear, Device::Cpu, Scheme::Linear, sharded: 3);
conformance_suite!(sharded_hashinator, Device::Cpu, Scheme::Hashinator { team: 8 }, sharded: 4);
conformance_suite!(sharded_robin_hood, Device::Cpu, Scheme::RobinHood, sharded: 3);
conformance_suite!(sharded_cuckoo, Device::Cpu, Scheme::Cuckoo, sharded: 3);
conformance_suite!(sharded_two_level, Device::Cpu, Scheme::TwoLevel, sharded: 2);
