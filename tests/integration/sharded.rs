//! Sharded tables beyond the conformance suite: routing (results in the
//! caller's order however the batch splits over ranks, refusals exact at
//! the caller's positions, keys spread evenly over shards), per-shard
//! growth, and failures (an exchange rank that fails or stalls, allocations
//! that fail while shards grow), each checked against a `HashMap` oracle
//! with seeded, replayable inputs (`GPUHASH_TEST_SEED`).

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use gpuhash::fault::{self, ExchangeFault};
use gpuhash::{Device, Error, HashTable, Key, Paging, Reduce, Scheme, Sharding};
use rand::seq::SliceRandom;

const SCHEMES: [Scheme; 5] = [Scheme::Linear, Scheme::Hashinator { team: 8 }, Scheme::RobinHood, Scheme::Cuckoo, Scheme::TwoLevel];

fn target(scheme: Scheme, shards: usize) -> Target {
    Target::sharded(Device::Cpu, scheme, shards)
}

/// `n` fresh in-slot keys that route to `shard`.
fn keys_in_shard<K: Key, V: TestValue>(t: &HashTable<K, V>, cx: &mut Ctx, shard: usize, n: usize, o: &Oracle<K, V>) -> Vec<K> {
    let s = t.sharded().expect("a sharded table");
    keys_routed_to(|k| s.shard_of(k), cx, shard, n, o)
}

#[test]
fn results_come_back_in_the_callers_order() {
    for (scheme, shards) in SCHEMES.into_iter().zip([3, 5, 2, 7, 3]) {
        let dev = target(scheme, shards);
        let mut cx = Ctx::new::<u64, u32>("results_in_callers_order", dev);
        let mut t = build_table::<u64, u32>(dev, 1 << 12, true, &cx);
        let mut o = Oracle::new();
        let mut universe = distinct_keys::<u64>(&mut cx.rng, 20_000);
        universe.extend(edge_keys::<u64>());
        for round in 0..6 {
            cx.phase = format!("round {round}");
            // Shuffled, with duplicates and out-of-band keys, every flavour;
            // lengths that do not divide by the shard count.
            let keys = with_duplicates(&mut cx.rng, &universe[..(round + 1) * 3000 + round], 2000 + round);
            let vals = num_values::<u32>(&mut cx.rng, keys.len());
            let op = [Op::Assign, Op::Apply(Reduce::Sum), Op::IfAbsent][round % 3];
            insert(&mut t, &mut o, op, &keys, &vals, &cx);
            let mut probe = sample(&mut cx.rng, &universe, 5000 + round);
            probe.shuffle(&mut cx.rng);
            check_find(&t, &o, &probe, &cx);
            // Batches shorter than the rank count leave ranks empty.
            for len in [0, 1, 2, shards - 1, shards + 1] {
                check_find(&t, &o, &probe[..len], &cx);
            }
            let gone = sample(&mut cx.rng, &universe, 1500);
            erase(&mut t, &mut o, &gone, &cx);
        }
        check_table(&t, &o, &cx);
        let s = t.sharded().unwrap();
        assert_eq!(s.shard_len().iter().sum::<u64>(), t.len(), "{cx}: shard counts sum to len");
        assert_eq!(s.shard_devices(), vec![Device::Cpu; shards], "{cx}");
    }
}

#[test]
fn keys_spread_evenly_over_shards() {
    for shards in [2, 3, 5, 8] {
        let dev = target(Scheme::Linear, shards);
        let mut cx = Ctx::new::<u64, u64>("keys_spread_evenly", dev);
        let mut t = build_table::<u64, u64>(dev, 1 << 12, true, &cx);
        let mut o = Oracle::new();
        // Random keys and sequential ones (low bits only).
        let mut keys = distinct_keys::<u64>(&mut cx.rng, 60_000);
        keys.extend(1..=60_000u64);
        keys.sort_unstable();
        keys.dedup();
        let vals = num_values::<u64>(&mut cx.rng, keys.len());
        insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
        let per = t.sharded().unwrap().shard_len();
        let mean = t.len() as f64 / shards as f64;
        for (i, n) in per.iter().enumerate() {
            assert!((*n as f64 - mean).abs() < 0.03 * mean, "{cx}: shard {i} holds {n} keys, mean {mean:.0}");
        }
        check_table(&t, &o, &cx);
    }
}

#[test]
fn refused_positions_are_exact_per_shard() {
    // Growth off, linear probing covering each shard: exactly the keys
    // beyond a shard's free slots are refused, at their caller positions,
    // even while other shards have room.
    let dev = target(Scheme::Linear, 3);
    let mut cx = Ctx::new::<u32, u32>("refused_positions_exact", dev);
    let mut t = build_table::<u32, u32>(dev, 3 * 256, false, &cx);
    let mut o = Oracle::new();
    assert_eq!(t.sharded().unwrap().shard_slots(), vec![256; 3], "{cx}: shard sizes");
    assert_eq!(t.capacity(), 768, "{cx}");
    // Shard 1 gets 300 keys, the others 100 each, all in one shuffled batch.
    let mut keys = keys_in_shard(&t, &mut cx, 1, 300, &o);
    for shard in [0, 2] {
        keys.extend(keys_in_shard(&t, &mut cx, shard, 100, &o));
    }
    keys.shuffle(&mut cx.rng);
    let vals = any_values::<u32>(&mut cx.rng, keys.len());
    let failed = insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
    assert_eq!(failed.len(), 44, "{cx}: refused");
    let s = t.sharded().unwrap();
    assert!(failed.iter().all(|&i| s.shard_of(keys[i]) == 1), "{cx}: a refusal outside the full shard");
    assert_eq!(s.shard_len(), vec![100, 256, 100], "{cx}: shard counts");
    check_table(&t, &o, &cx);
}

#[test]
fn a_full_shard_grows_alone() {
    for scheme in SCHEMES {
        let dev = target(scheme, 3);
        let mut cx = Ctx::new::<u32, f64>("full_shard_grows_alone", dev);
        let mut t = build_table::<u32, f64>(dev, 3 * 256, true, &cx);
        let mut o = Oracle::new();
        let before = t.sharded().unwrap().shard_slots();
        // Ten times a shard's slots, all to shard 2.
        let keys = keys_in_shard(&t, &mut cx, 2, 10 * before[2] as usize, &o);
        let vals = num_values::<f64>(&mut cx.rng, keys.len());
        insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
        let after = t.sharded().unwrap().shard_slots();
        assert!(after[2] as f64 * t.max_load_factor() >= keys.len() as f64, "{cx}: shard 2 has {} slots", after[2]);
        assert_eq!((after[0], after[1]), (before[0], before[1]), "{cx}: other shards changed size");
        assert!(t.load_factor() <= t.max_load_factor(), "{cx}");
        check_table(&t, &o, &cx);
    }
}

/// Transfers of one bulk call: 0 and 1 carry the batch out (counts, data),
/// 2 and 3 carry the results back.
const TRANSFERS: u64 = 4;

/// A rank that fails in any transfer of an insert, lookup or erase ends the
/// call with `ShardFailed` naming it. Failing on the way out changes
/// nothing; failing on the way back, after the shards worked, loses nothing
/// stored before, and the call, repeated, completes.
#[test]
fn a_failing_exchange_names_the_shard_and_loses_nothing() {
    let dev = target(Scheme::RobinHood, 3);
    let mut cx = Ctx::new::<u64, u64>("failing_exchange", dev);
    let mut injected = 0;
    for rank in 0..3 {
        for call in 0..TRANSFERS {
            cx.phase = format!("rank {rank} failing in transfer {call}");
            let mut t = build_table::<u64, u64>(dev, 1 << 10, true, &cx);
            let mut o = Oracle::new();
            let base = distinct_keys::<u64>(&mut cx.rng, 2000);
            let vals = num_values::<u64>(&mut cx.rng, base.len());
            insert(&mut t, &mut o, Op::Assign, &base, &vals, &cx);
            let mut batch = fresh_keys(&mut cx.rng, 3000, &o, &[]);
            batch.extend(edge_keys::<u64>());
            batch.extend_from_slice(&base[..500]);
            batch.sort_unstable();
            batch.dedup();
            batch.shuffle(&mut cx.rng);
            let vals = num_values::<u64>(&mut cx.rng, batch.len());

            let named = |r: gpuhash::Result<_>, what: &str| match r {
                Err(Error::ShardFailed { shard, reason }) => {
                    assert_eq!(shard, rank, "{cx}: {what}: {reason}");
                }
                Err(e) => panic!("{cx}: {what}: unexpected {e}"),
                Ok(_) => panic!("{cx}: {what} succeeded through a failing exchange"),
            };
            let guard = fault::fail_exchange(rank, call, ExchangeFault::Fail);
            named(t.insert_or_assign(&batch, &vals).map(|_| ()), "insert");
            assert_eq!(guard.injected(), 1, "{cx}");
            drop(guard);
            if call < 2 {
                check_table(&t, &o, &cx);
            } else {
                // The shards stored the batch; the caller could not be told.
                // Nothing stored before is lost, and the repeated call
                // completes (as an overwrite of what the first one stored).
                let now = t.find(&base).unwrap();
                assert!(now.iter().all(Option::is_some), "{cx}: a key stored before was lost");
                let r = t.insert_or_assign(&batch, &vals).unwrap_or_else(|e| panic!("{cx}: repeated insert: {e}"));
                assert_eq!((r.inserted, r.existing), (0, batch.len() as u64), "{cx}: repeated insert");
                o.map.extend(batch.iter().copied().zip(vals.iter().copied()));
                check_table(&t, &o, &cx);
            }

            let guard = fault::fail_exchange(rank, call, ExchangeFault::Fail);
            named(t.find(&batch).map(|_| ()), "find");
            drop(guard);
            let guard = fault::fail_exchange(rank, call, ExchangeFault::Fail);
            named(t.erase(&base[..1000]).map(|_| ()), "erase");
            drop(guard);
            if call >= 2 {
                // The shards erased the keys before the counts were lost.
                for k in &base[..1000] {
                    o.map.remove(k);
                }
            }
            check_table(&t, &o, &cx);
            injected += 3;
        }
    }
    println!("failing exchange: {injected} faults injected, each named its rank");
}

/// A rank that sends nothing makes the others wait at most the timeout;
/// the call returns `ShardFailed` naming the silent rank, the table is
/// unchanged, and the next call works.
#[test]
fn a_stalled_rank_times_out_instead_of_hanging() {
    let dev = target(Scheme::Linear, 4);
    let mut cx = Ctx::new::<u32, u32>("stalled_rank_times_out", dev);
    let timeout = Duration::from_millis(50);
    let mut t = HashTable::<u32, u32>::builder()
        .capacity(1 << 12)
        .sharded(Sharding::cpu(4).timeout(timeout))
        .build::<u32, u32>()
        .unwrap();
    assert_eq!(t.sharded().unwrap().sharding().timeout, timeout);
    let mut o = Oracle::new();
    let keys = distinct_keys::<u32>(&mut cx.rng, 5000);
    let vals = num_values::<u32>(&mut cx.rng, keys.len());
    insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
    for call in 0..2 {
        cx.phase = format!("rank 2 silent in transfer {call}");
        let more = fresh_keys(&mut cx.rng, 1000, &o, &[]);
        let start = Instant::now();
        let guard = fault::fail_exchange(2, call, ExchangeFault::Stall);
        let r = t.insert_or_assign(&more, &vals[..more.len()]);
        drop(guard);
        let waited = start.elapsed();
        match r {
            Err(Error::ShardFailed { shard: 2, reason }) => assert!(reason.contains("within"), "{cx}: {reason}"),
            other => panic!("{cx}: expected rank 2 to time out, got {other:?}"),
        }
        assert!(waited >= timeout && waited < Duration::from_secs(10), "{cx}: waited {waited:?}");
        check_table(&t, &o, &cx);
    }
    let more = fresh_keys(&mut cx.rng, 1000, &o, &[]);
    insert(&mut t, &mut o, Op::Assign, &more, &vals[..more.len()], &cx);
    check_table(&t, &o, &cx);
}

/// Every allocation of an insert whose shards grow is made to fail in
/// turn, from there on: the call reports exactly what it did not store
/// (`GrowthFailed`), or fails having stored nothing; the table always
/// equals the oracle and takes further inserts.
#[test]
fn faults_while_shards_grow_lose_nothing() {
    let mut injected = 0;
    for scheme in SCHEMES {
        let dev = target(scheme, 3);
        let mut cx = Ctx::new::<u64, u64>("faults_while_shards_grow", dev);
        let base = distinct_keys::<u64>(&mut cx.rng, 300);
        let batch = {
            let mut b = distinct_keys::<u64>(&mut cx.rng, 3000);
            b.extend(edge_keys::<u64>());
            b.extend_from_slice(&base[..100]);
            b.shuffle(&mut cx.rng);
            b
        };
        let (mut skip, mut partial, mut nothing) = (0, 0, 0);
        loop {
            cx.phase = format!("allocation {skip} on failing");
            let mut t = build_table::<u64, u64>(dev, 3 * 128, true, &cx);
            let mut o = Oracle::new();
            let vals = num_values::<u64>(&mut cx.rng, base.len());
            insert(&mut t, &mut o, Op::Assign, &base, &vals, &cx);
            let vals = num_values::<u64>(&mut cx.rng, batch.len());
            let guard = fault::fail_allocations(skip, u64::MAX);
            let r = try_insert(&mut t, &mut o, Op::Apply(Reduce::Sum), &batch, &vals, &cx);
            let hit = guard.injected();
            drop(guard);
            match r {
                Ok(failed) => partial += !failed.is_empty() as u32,
                Err(Error::OutOfMemory { .. }) => nothing += 1,
                Err(e) => panic!("{cx}: unexpected {e}"),
            }
            takes_more_after_fault(&mut t, &mut o, &mut cx);
            if hit == 0 {
                break;
            }
            injected += hit;
            skip += 1;
        }
        assert!(skip >= 3, "{cx}: only {skip} allocation points in an insert that grows shards");
        assert!(partial > 0, "{cx}: {partial} partial and {nothing} empty outcomes");
        println!("{dev}: {skip} allocation points, {partial} GrowthFailed, {nothing} OutOfMemory");
    }
    println!("faults sharded: {injected} injected, all survived");
}

#[test]
fn build_checks_its_configuration() {
    let guard = fault::fail_allocations(2, 1);
    let r = HashTable::<u32, u32>::builder().capacity(1 << 12).sharded(Sharding::cpu(3)).build::<u32, u32>();
    assert!(matches!(r, Err(Error::OutOfMemory { .. })), "{r:?}");
    assert_eq!(guard.injected(), 1);
    drop(guard);
    for bad in [Sharding::cpu(0), Sharding::cpu(2).timeout(Duration::ZERO)] {
        let r = HashTable::<u32, u32>::builder().sharded(bad).build::<u32, u32>();
        assert!(matches!(r, Err(Error::Unsupported(_))), "{r:?}");
    }
    let both = HashTable::<u32, u32>::builder().paged(Paging::new(4, 1)).sharded(Sharding::cpu(2)).build::<u32, u32>();
    assert!(matches!(both, Err(Error::Unsupported(_))), "{both:?}");
    // A shard on a GPU that is missing fails with a clear error; where one
    // is present, the shards are built on their devices.
    let gpus = Sharding::new(vec![Device::Cpu, Device::Cuda(0)]);
    match (Device::Cuda(0).check_available(), HashTable::<u32, u32>::builder().sharded(gpus).build::<u32, u32>()) {
        (Err(_), Err(Error::Unavailable { device, .. })) => assert_eq!(device, "cuda:0"),
        (Ok(()), Ok(t)) => assert_eq!(t.sharded().unwrap().shard_devices(), vec![Device::Cpu, Device::Cuda(0)]),
        (a, b) => panic!("CUDA check {a:?}, build {b:?}"),
    }
    // One shard is a plain table behind the exchange.
    let mut t = HashTable::<u32, u32>::builder().capacity(1 << 10).sharded(Sharding::cpu(1)).build::<u32, u32>().unwrap();
    t.insert_or_apply(&[5, 5, 0, u32::MAX], &[1, 2, 3, 4], Reduce::Sum).unwrap();
    assert_eq!(t.find(&[5, 0, u32::MAX, 6]).unwrap(), vec![Some(3), Some(3), Some(4), None]);
}
