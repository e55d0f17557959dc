//! The conformance suite on the CPU backend (the reference), once per scheme.

use crate::common;

use gpuhash::{Device, Scheme};

conformance_suite!(cpu_linear, Device::Cpu, Scheme::Linear);
conformance_suite!(cpu_hashinator, Device::Cpu, Scheme::Hashinator { team: 8 });
conformance_suite!(cpu_robin_hood, Device::Cpu, Scheme::RobinHood);
conformance_suite!(cpu_cuckoo, Device::Cpu, Scheme::Cuckoo);
conformance_suite!(cpu_two_level, Device::Cpu, Scheme::TwoLevel);
conformance_suite!(cpu_slab_list, Device::Cpu, Scheme::SlabList);

/// `Builder::region_build` is accepted where there is no region build (the
/// CPU backend) and changes nothing: under every setting, batches with
/// repeated and edge keys into a plain, a paged and a sharded table that
/// grow leave the oracle's contents.
#[test]
fn region_build_is_a_no_op_on_the_cpu() {
    use common::{Ctx, Oracle, Target};
    use gpuhash::{Paging, Reduce, RegionBuild};

    let targets = [
        Target::new(Device::Cpu, Scheme::Linear),
        Target::paged(Device::Cpu, Scheme::Linear, Paging::new(4, 2)),
        Target::sharded(Device::Cpu, Scheme::Linear, 3),
    ];
    for setting in [RegionBuild::Auto, RegionBuild::Never, RegionBuild::Always, RegionBuild::TwoPass] {
        for dev in targets {
            let mut cx = Ctx::new::<u32, u64>("region_build_is_a_no_op_on_the_cpu", dev);
            cx.phase = format!("{setting:?}");
            let b = common::builder(dev).region_build(setting).capacity(3 << 10);
            let mut t = b.build::<u32, u64>().unwrap_or_else(|e| panic!("{cx}: build failed: {e}"));
            let mut o = Oracle::new();
            // Each round a batch larger than the table was: growth rehashes
            // the table (and each page or shard) under the same setting.
            for _ in 0..3 {
                let distinct = common::distinct_keys::<u32>(&mut cx.rng, 1 << 12);
                let mut keys = common::with_duplicates(&mut cx.rng, &distinct, 1 << 10);
                keys.extend(common::edge_keys::<u32>());
                let values = common::num_values::<u64>(&mut cx.rng, keys.len());
                common::insert(&mut t, &mut o, common::Op::Apply(Reduce::Sum), &keys, &values, &cx);
                common::insert(&mut t, &mut o, common::Op::Assign, &distinct[..1 << 11], &values[..1 << 11], &cx);
            }
            common::check_table(&t, &o, &cx);
        }
    }
}

/// Two-level tables from 2^20 buckets take 2048-bucket regions: a large
/// table at high load, checked against the oracle.
#[test]
fn two_level_large_regions() {
    if let Some(dev) = common::usable(common::Target::new(Device::Cpu, Scheme::TwoLevel)) {
        common::suite::large_regions_at_high_load(dev);
    }
}
