//! Paged tables beyond the conformance suite: routing (results in the
//! caller's order, refusals exact, keys spread over pages), residency
//! (resident pages served first, the busiest pages kept, FIFO and LRU
//! eviction, only dirty pages written back), per-page growth, and allocation faults while pages grow
//! or are brought in, each checked against a `HashMap` oracle with seeded,
//! replayable inputs (`GPUHASH_TEST_SEED`).

use crate::common;

use common::*;
use gpuhash::{fault, Device, Error, HashTable, Key, Paging, Reduce, Residency, Scheme};
use rand::seq::SliceRandom;
use rand::Rng;

const SCHEMES: [Scheme; 5] = [Scheme::Linear, Scheme::Hashinator { team: 8 }, Scheme::RobinHood, Scheme::Cuckoo, Scheme::TwoLevel];

/// The CPU, and CUDA device 0 when there is one (else a printed skip, or a
/// failure under `GPUHASH_REQUIRE_CUDA=1`).
fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    if usable(Target::paged(Device::Cuda(0), Scheme::Linear, Paging::new(1, 1))).is_some() {
        d.push(Device::Cuda(0));
    }
    d
}

/// `paging` on `device`, pipelined and working on sparse pages in place
/// only if asked: so the residency decisions these tests count are the same
/// on every device.
fn target(device: Device, scheme: Scheme, paging: Paging) -> Target {
    let paging = if paging.pipeline.is_none() { paging.pipelined(false) } else { paging };
    let paging = if paging.sparse.is_none() { paging.sparse(u64::MAX) } else { paging };
    Target::paged(device, scheme, paging)
}

/// `n` fresh in-slot keys that route to `page`.
fn keys_in_page<K: Key, V: TestValue>(t: &HashTable<K, V>, cx: &mut Ctx, page: usize, n: usize, o: &Oracle<K, V>) -> Vec<K> {
    let p = t.paged().expect("a paged table");
    keys_routed_to(|k| p.page_of(k), cx, page, n, o)
}

#[test]
fn results_come_back_in_the_callers_order() {
    for device in devices() {
        for scheme in SCHEMES {
            let dev = target(device, scheme, Paging::new(7, 3));
            let mut cx = Ctx::new::<u64, u32>("results_in_callers_order", dev);
            let mut t = build_table::<u64, u32>(dev, 1 << 12, true, &cx);
            let mut o = Oracle::new();
            let mut universe = distinct_keys::<u64>(&mut cx.rng, 20_000);
            universe.extend(edge_keys::<u64>());
            for round in 0..6 {
                cx.phase = format!("round {round}");
                // Shuffled, with duplicates and out-of-band keys, every flavour.
                let keys = with_duplicates(&mut cx.rng, &universe[..(round + 1) * 3000], 2000);
                let vals = num_values::<u32>(&mut cx.rng, keys.len());
                let op = [Op::Assign, Op::Apply(Reduce::Sum), Op::IfAbsent][round % 3];
                insert(&mut t, &mut o, op, &keys, &vals, &cx);
                let mut probe = sample(&mut cx.rng, &universe, 5000);
                probe.shuffle(&mut cx.rng);
                check_find(&t, &o, &probe, &cx);
                let gone = sample(&mut cx.rng, &universe, 1500);
                erase(&mut t, &mut o, &gone, &cx);
            }
            check_table(&t, &o, &cx);
            let p = t.paged().unwrap();
            let per_page = p.page_len();
            assert_eq!(per_page.iter().sum::<u64>(), t.len(), "{cx}: page counts sum to len");
            let mean = t.len() as f64 / 7.0;
            for (i, n) in per_page.iter().enumerate() {
                assert!((*n as f64 - mean).abs() < 0.1 * mean, "{cx}: page {i} holds {n} keys, mean {mean:.0}");
            }
        }
    }
}

#[test]
fn refused_positions_are_exact_per_page() {
    for device in devices() {
        // Growth off, linear probing covering each page: exactly the keys
        // beyond a page's free slots are refused, at their caller positions,
        // even while other pages have room.
        let dev = target(device, Scheme::Linear, Paging::new(4, 1));
        let mut cx = Ctx::new::<u32, u32>("refused_positions_exact", dev);
        let mut t = build_table::<u32, u32>(dev, 4 * 256, false, &cx);
        let mut o = Oracle::new();
        let page_slots = t.paged().unwrap().page_slots();
        assert_eq!(page_slots, vec![256; 4], "{cx}: page sizes");
        // Page 2 gets 300 keys, the others 100 each, all in one shuffled batch.
        let mut keys = keys_in_page(&t, &mut cx, 2, 300, &o);
        for page in [0, 1, 3] {
            keys.extend(keys_in_page(&t, &mut cx, page, 100, &o));
        }
        keys.shuffle(&mut cx.rng);
        let vals = any_values::<u32>(&mut cx.rng, keys.len());
        let failed = insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
        assert_eq!(failed.len(), 44, "{cx}: refused");
        let p = t.paged().unwrap();
        assert!(failed.iter().all(|&i| p.page_of(keys[i]) == 2), "{cx}: a refusal outside the full page");
        assert_eq!(p.page_len(), vec![100, 100, 256, 100], "{cx}: page counts");
        check_table(&t, &o, &cx);
    }
}

#[test]
fn resident_pages_are_served_first() {
    for device in devices() {
        let dev = target(device, Scheme::Linear, Paging::new(4, 2));
        let mut cx = Ctx::new::<u32, u32>("resident_served_first", dev);
        let mut t = build_table::<u32, u32>(dev, 4 * 512, true, &cx);
        let mut o = Oracle::new();
        let by_page: Vec<Vec<u32>> = (0..4).map(|p| keys_in_page(&t, &mut cx, p, 50, &o)).collect();
        let all: Vec<u32> = by_page.concat();
        let vals = any_values::<u32>(&mut cx.rng, all.len());
        insert(&mut t, &mut o, Op::Assign, &all, &vals, &cx);
        // Pages were visited 0, 1, 2, 3: the last two are resident.
        let p = t.paged().unwrap();
        let mut resident: Vec<usize> = p.resident().into_iter().flatten().collect();
        resident.sort_unstable();
        assert_eq!(resident, vec![2, 3], "{cx}: resident after the first batch");
        // A batch touching every page brings in only the two that are not
        // resident: the resident ones are served before they could be evicted.
        let before = p.stats();
        check_find(&t, &o, &all, &cx);
        let p = t.paged().unwrap();
        // check_find makes four calls (find, find_into, contains, contains_into).
        assert_eq!(p.stats().page_ins - before.page_ins, 4 * 2, "{cx}: page-ins for four lookups of all pages");
    }
}

/// Brings the pages in as `seq` says, one lookup each, and returns which
/// pages are resident afterwards.
fn touch(t: &HashTable<u32, u32>, by_page: &[Vec<u32>], seq: &[usize]) -> Vec<usize> {
    for &p in seq {
        t.find(&by_page[p][..1]).unwrap();
    }
    let mut r: Vec<usize> = t.paged().unwrap().resident().into_iter().flatten().collect();
    r.sort_unstable();
    r
}

#[test]
fn fifo_and_lru_evict_different_pages() {
    for device in devices() {
        // One key a call: a page the current call has not used goes first
        // under Hot, the one used longest ago, as LRU.
        for (residency, expect) in [(Residency::Fifo, vec![1, 2]), (Residency::Lru, vec![0, 2]), (Residency::Hot, vec![0, 2])] {
            let dev = target(device, Scheme::Linear, Paging::new(4, 2).residency(residency));
            let mut cx = Ctx::new::<u32, u32>("fifo_and_lru", dev);
            let t = build_table::<u32, u32>(dev, 4 * 64, true, &cx);
            let o = Oracle::new();
            let by_page: Vec<Vec<u32>> = (0..4).map(|p| keys_in_page(&t, &mut cx, p, 1, &o)).collect();
            // 0 and 1 come in; 0 is used again; 2 needs a slot: FIFO evicts 0
            // (in first), LRU evicts 1 (used last longest ago).
            assert_eq!(touch(&t, &by_page, &[0, 1]), vec![0, 1], "{cx}");
            assert_eq!(touch(&t, &by_page, &[0, 2]), expect, "{cx}: {residency:?}");
            let s = t.paged().unwrap().stats();
            assert_eq!((s.page_ins, s.evictions, s.write_backs), (3, 1, 0), "{cx}: {s:?}");
        }
    }
}

/// One lookup call of `n[p]` keys of each page `p` (resident pages are
/// served first, then the others in ascending order); the pages resident
/// afterwards.
fn call(t: &HashTable<u32, u32>, by_page: &[Vec<u32>], n: &[usize]) -> Vec<usize> {
    let keys: Vec<u32> = n.iter().enumerate().flat_map(|(p, &c)| by_page[p][..c].iter().copied()).collect();
    t.find(&keys).unwrap();
    let mut r: Vec<usize> = t.paged().unwrap().resident().into_iter().flatten().collect();
    r.sort_unstable();
    r
}

#[test]
fn hot_keeps_the_pages_a_call_has_the_most_keys_on() {
    for device in devices() {
        for residency in [Residency::Hot, Residency::Fifo, Residency::Lru] {
            let dev = target(device, Scheme::Linear, Paging::new(4, 2).residency(residency));
            let mut cx = Ctx::new::<u32, u32>("hot_keeps_busiest", dev);
            let mut t = build_table::<u32, u32>(dev, 4 * 64, true, &cx);
            let mut o = Oracle::new();
            let by_page: Vec<Vec<u32>> = (0..4).map(|p| keys_in_page(&t, &mut cx, p, 8, &o)).collect();
            let all = by_page.concat();
            let vals = any_values::<u32>(&mut cx.rng, all.len());
            insert(&mut t, &mut o, Op::Assign, &all, &vals, &cx);
            // Page 0 busy and page 1 nearly idle come in.
            assert_eq!(call(&t, &by_page, &[8, 1, 0, 0]), vec![0, 1], "{cx}: {residency:?}");
            // Both are served first, then page 2 needs a slot: Hot evicts
            // page 1 (one key of this call), FIFO and LRU page 0 (in
            // first, used first), the page the next call needs again.
            let expect = if residency == Residency::Hot { vec![0, 2] } else { vec![1, 2] };
            assert_eq!(call(&t, &by_page, &[8, 1, 4, 0]), expect, "{cx}: {residency:?}");
            if residency == Residency::Hot {
                // A page the call does not touch goes before one it does,
                // however few keys that one has: page 0 gives way to 3.
                assert_eq!(call(&t, &by_page, &[0, 0, 1, 1]), vec![2, 3], "{cx}");
            }
            check_find(&t, &o, &all, &cx);
        }
    }
}

#[test]
fn only_dirty_pages_are_written_back() {
    for device in devices() {
        let dev = target(device, Scheme::RobinHood, Paging::new(4, 1));
        let mut cx = Ctx::new::<u64, u64>("dirty_write_back", dev);
        let mut t = build_table::<u64, u64>(dev, 4 * 256, true, &cx);
        let mut o = Oracle::new();
        let by_page: Vec<Vec<u64>> = (0..4).map(|p| keys_in_page(&t, &mut cx, p, 20, &o)).collect();
        let stats = |t: &HashTable<u64, u64>| t.paged().unwrap().stats();

        // Filling every page dirties each; with one slot, each is written back
        // when the next comes in (the last stays resident, dirty).
        let all = by_page.concat();
        let vals = any_values::<u64>(&mut cx.rng, all.len());
        insert(&mut t, &mut o, Op::Assign, &all, &vals, &cx);
        let s = stats(&t);
        assert_eq!((s.page_ins, s.write_backs), (4, 3), "{cx}: {s:?}");

        // Lookups cycle the pages through the slot: only page 3 (dirty) is written back.
        cx.phase = "lookups".into();
        check_find(&t, &o, &all, &cx);
        let s2 = stats(&t);
        assert_eq!(s2.write_backs, s.write_backs + 1, "{cx}: {s2:?}");
        assert!(s2.evictions >= s.evictions + 4, "{cx}: {s2:?}");

        // Changes that change nothing leave pages clean: erasing absent keys,
        // insert-if-absent of present keys.
        cx.phase = "no-op changes".into();
        let absent = keys_in_page(&t, &mut cx, 0, 10, &o);
        erase(&mut t, &mut o, &absent, &cx);
        let vals = any_values::<u64>(&mut cx.rng, by_page[1].len());
        insert(&mut t, &mut o, Op::IfAbsent, &by_page[1], &vals, &cx);
        touch_all(&t, &by_page);
        assert_eq!(stats(&t).write_backs, s2.write_backs, "{cx}: {:?}", stats(&t));

        // A real change to page 1 is written back once, and survives it.
        cx.phase = "assign to page 1".into();
        let vals = any_values::<u64>(&mut cx.rng, by_page[1].len());
        insert(&mut t, &mut o, Op::Assign, &by_page[1], &vals, &cx);
        touch_all(&t, &by_page);
        assert_eq!(stats(&t).write_backs, s2.write_backs + 1, "{cx}: {:?}", stats(&t));
        check_table(&t, &o, &cx);
    }
}

fn touch_all(t: &HashTable<u64, u64>, by_page: &[Vec<u64>]) {
    for keys in by_page.iter().rev() {
        t.find(&keys[..1]).unwrap();
    }
}

#[test]
fn a_full_page_grows_alone() {
    for device in devices() {
        for scheme in SCHEMES {
            let dev = target(device, scheme, Paging::new(8, 2));
            let mut cx = Ctx::new::<u32, f64>("full_page_grows_alone", dev);
            let mut t = build_table::<u32, f64>(dev, 8 * 256, true, &cx);
            let mut o = Oracle::new();
            let before = t.paged().unwrap().page_slots();
            // Ten times a page's slots, all to page 5.
            let keys = keys_in_page(&t, &mut cx, 5, 10 * before[5] as usize, &o);
            let vals = num_values::<f64>(&mut cx.rng, keys.len());
            insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
            let p = t.paged().unwrap();
            let after = p.page_slots();
            for i in 0..8 {
                if i == 5 {
                    assert!(after[i] as f64 * t.max_load_factor() >= keys.len() as f64, "{cx}: page 5 has {} slots", after[i]);
                } else {
                    assert_eq!(after[i], before[i], "{cx}: page {i} changed size");
                }
            }
            assert!(p.stats().pages_resized >= 1, "{cx}: {:?}", p.stats());
            assert!(t.load_factor() <= t.max_load_factor(), "{cx}");
            check_table(&t, &o, &cx);
        }
    }
}

#[test]
fn build_reports_a_failed_allocation() {
    for device in devices() {
        let guard = fault::fail_allocations(5, 1);
        let r = HashTable::<u32, u32>::builder().device(device).capacity(1 << 12).paged(Paging::new(8, 2)).build::<u32, u32>();
        assert!(matches!(r, Err(Error::OutOfMemory { .. })), "{r:?}");
        assert_eq!(guard.injected(), 1);
        let bad = HashTable::<u32, u32>::builder().device(device).paged(Paging::new(4, 5)).build::<u32, u32>();
        assert!(matches!(bad, Err(Error::Unsupported(_))), "{bad:?}");
        let bad = HashTable::<u32, u32>::builder().device(device).paged(Paging::new(0, 0)).build::<u32, u32>();
        assert!(matches!(bad, Err(Error::Unsupported(_))), "{bad:?}");
        if device != Device::Cpu {
            // A page's third allocation point is its page-locking: a
            // refusal names pinned host memory.
            let guard = fault::fail_allocations(2, 1);
            let r = HashTable::<u32, u32>::builder().device(device).capacity(1 << 12).paged(Paging::new(4, 2)).build::<u32, u32>();
            assert_eq!(guard.injected(), 1);
            match r {
                Err(Error::OutOfMemory { device: what, .. }) => assert!(what.contains("pinned"), "{what}"),
                other => panic!("expected a pinned-memory error, got {:?}", other.err()),
            }
        }
    }
}

/// Every allocation of an insert whose pages grow (page rebuilds, working
/// copies, on CUDA the scratch of a batch split by page on the device) is
/// made to fail in turn: once (the page is redone alone, or the batch split
/// on the host, and the call succeeds) and from there on (the call reports
/// exactly what it did not store). The table always equals the oracle
/// afterwards. Batches are split on the host and, on CUDA, on the device.
/// On the CPU every point is tried; on CUDA, where a batch split on the
/// device passes hundreds (scratch per page and per growth step) and each
/// try is a whole scenario, the first four and then every `stride`-th from
/// a seeded offset, about 40 in all, so fresh seeds reach the others.
#[test]
fn faults_while_pages_grow_lose_nothing() {
    for device in devices() {
        let mut injected = 0;
        // Split on the device (CUDA): one probing and one bounded scheme.
        let split = |s: Scheme| device != Device::Cpu && matches!(s, Scheme::Linear | Scheme::Cuckoo);
        let cases = SCHEMES.iter().map(|&s| (s, usize::MAX)).chain(SCHEMES.iter().filter(|&&s| split(s)).map(|&s| (s, 1)));
        for (scheme, split) in cases {
            for (count, residency) in [(1, Residency::Fifo), (u64::MAX, Residency::Lru)] {
                let dev = target(device, scheme, Paging::new(4, 2).residency(residency).device_split(split));
                let mut cx = Ctx::new::<u64, u64>("faults_while_pages_grow", dev);
                let base = distinct_keys::<u64>(&mut cx.rng, 400);
                let batch = {
                    let mut b = distinct_keys::<u64>(&mut cx.rng, 3000);
                    b.extend(edge_keys::<u64>());
                    b.extend_from_slice(&base[..100]);
                    b.shuffle(&mut cx.rng);
                    b
                };
                let stride = if device == Device::Cpu {
                    1
                } else {
                    let mut t = build_table::<u64, u64>(dev, 4 * 128, true, &cx);
                    let mut o = Oracle::new();
                    let vals = num_values::<u64>(&mut cx.rng, base.len());
                    insert(&mut t, &mut o, Op::Assign, &base, &vals, &cx);
                    let vals = num_values::<u64>(&mut cx.rng, batch.len());
                    let counter = fault::count_allocations();
                    try_insert(&mut t, &mut o, Op::Apply(Reduce::Sum), &batch, &vals, &cx).expect("no fault injected");
                    (counter.allocations() / 40).max(1)
                };
                let offset = cx.rng.random_range(0..stride);
                let (mut skip, mut tried, mut partial, mut nothing) = (0, 0, 0, 0);
                loop {
                    cx.phase = format!("allocation {skip} failing, count {count}");
                    let mut t = build_table::<u64, u64>(dev, 4 * 128, true, &cx);
                    let mut o = Oracle::new();
                    let vals = num_values::<u64>(&mut cx.rng, base.len());
                    insert(&mut t, &mut o, Op::Assign, &base, &vals, &cx);
                    let vals = num_values::<u64>(&mut cx.rng, batch.len());
                    let guard = fault::fail_allocations(skip, count);
                    let r = try_insert(&mut t, &mut o, Op::Apply(Reduce::Sum), &batch, &vals, &cx);
                    let hit = guard.injected();
                    drop(guard);
                    match r {
                        // One failure: a page whose rebuild failed was redone
                        // alone, a page without a working copy served in host
                        // memory; the call stores everything.
                        Ok(failed) if count == 1 => assert!(failed.is_empty(), "{cx}: {} positions not stored", failed.len()),
                        Ok(failed) => partial += !failed.is_empty() as u32,
                        Err(Error::OutOfMemory { .. }) if count > 1 => nothing += 1,
                        Err(e) => panic!("{cx}: unexpected {e}"),
                    }
                    takes_more_after_fault(&mut t, &mut o, &mut cx);
                    if hit == 0 {
                        break;
                    }
                    injected += hit;
                    tried += 1;
                    skip = match skip {
                        0..=2 => skip + 1,
                        3 => 4 + offset,
                        _ => skip + stride,
                    };
                }
                assert!(tried >= 3, "{cx}: only {tried} allocations in an insert that grows pages");
                if count > 1 {
                    // Pages that could not grow leave part of the batch unstored.
                    assert!(partial > 0, "{cx}: {partial} partial and {nothing} empty outcomes");
                }
                println!("{dev}, count {count}: {tried} allocation points tried (stride {stride}), {partial} GrowthFailed, {nothing} OutOfMemory");
            }
        }
        println!("faults paged: {injected} injected, all survived");
    }
}

/// Lookups and erases whose working copies find no memory are served from
/// the host pages.
#[test]
fn pages_without_memory_for_a_copy_are_served_in_host_memory() {
    for device in devices() {
        let dev = target(device, Scheme::Cuckoo, Paging::new(4, 1));
        let mut cx = Ctx::new::<u32, i64>("served_in_host", dev);
        let mut t = build_table::<u32, i64>(dev, 1 << 12, true, &cx);
        let mut o = Oracle::new();
        let keys = distinct_keys::<u32>(&mut cx.rng, 2000);
        let vals = num_values::<i64>(&mut cx.rng, keys.len());
        insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
        let guard = fault::fail_allocations(0, u64::MAX);
        check_find(&t, &o, &keys, &cx);
        erase(&mut t, &mut o, &keys[..500], &cx);
        let vals = num_values::<i64>(&mut cx.rng, 1000);
        insert(&mut t, &mut o, Op::Apply(Reduce::Max), &keys[..1000], &vals, &cx);
        assert!(guard.injected() > 0, "{cx}: no allocation was tried");
        drop(guard);
        assert!(t.paged().unwrap().stats().served_in_host > 0, "{cx}");
        check_table(&t, &o, &cx);
    }
}

/// Lookups and erases split by page on the device (every batch, through
/// `Paging::device_split(1)`) with every allocation from the `skip`-th on
/// failing, for `skip` = 0, 1, ... until a call pair meets no fault: the
/// split's scratch (the call is then split on the host), the pages brought
/// in (served in host memory) and the results' way back. Every answer must
/// still match the oracle. On the CPU the setting changes nothing.
#[test]
fn device_split_lookups_survive_allocation_failures() {
    for device in devices() {
        for scheme in [Scheme::Linear, Scheme::Cuckoo] {
            let dev = target(device, scheme, Paging::new(4, 2).device_split(1));
            let mut cx = Ctx::new::<u32, u64>("device_split_faults", dev);
            let mut t = build_table::<u32, u64>(dev, 1 << 12, true, &cx);
            let mut o = Oracle::new();
            let mut keys = distinct_keys::<u32>(&mut cx.rng, 3000);
            keys.extend(edge_keys::<u32>());
            let vals = num_values::<u64>(&mut cx.rng, keys.len());
            insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
            let mut probe = sample(&mut cx.rng, &keys, 2000);
            probe.extend(fresh_keys(&mut cx.rng, 500, &o, &[]));
            probe.shuffle(&mut cx.rng);
            for skip in 0.. {
                cx.phase = format!("allocations from the {skip}th on fail");
                let guard = fault::fail_allocations(skip, u64::MAX);
                check_find(&t, &o, &probe, &cx);
                let gone = sample(&mut cx.rng, &keys, 100);
                erase(&mut t, &mut o, &gone, &cx);
                let injected = guard.injected();
                drop(guard);
                if injected == 0 {
                    break;
                }
                assert!(skip < 200, "{cx}: still failing allocations after 200 rounds");
            }
            check_table(&t, &o, &cx);
        }
    }
}

/// A batch that touches two pages with many keys and every other page with
/// a handful: the sparse pages are worked on where they lie in host memory
/// (never brought in, so the two dense pages stay resident across calls),
/// for lookups, erases and inserts, host- and device-split; every answer
/// matches the oracle.
#[test]
fn sparse_pages_are_worked_on_in_place() {
    for device in devices() {
        for (scheme, split) in [(Scheme::Linear, usize::MAX), (Scheme::Cuckoo, 1), (Scheme::RobinHood, 1)] {
            // Pages of 2^12 slots of 16 bytes: 64 KiB; at 64 bytes a key, a
            // page read with fewer than 1,024 keys (written: 2,048, as it
            // would also go back) stays put.
            let paging = Paging::new(8, 2).sparse(64).device_split(split);
            let dev = target(device, scheme, paging);
            let mut cx = Ctx::new::<u64, u64>("sparse_in_place", dev);
            let mut t = build_table::<u64, u64>(dev, 8 << 12, false, &cx);
            let mut o = Oracle::new();
            let dense: Vec<u64> = [3usize, 6].iter().flat_map(|&p| keys_in_page(&t, &mut cx, p, 3000, &o)).collect();
            let sparse: Vec<u64> = [0usize, 1, 2, 4, 5, 7].iter().flat_map(|&p| keys_in_page(&t, &mut cx, p, 20, &o)).collect();
            let mut batch: Vec<u64> = dense.iter().chain(&sparse).copied().collect();
            batch.shuffle(&mut cx.rng);
            let vals = num_values::<u64>(&mut cx.rng, batch.len());
            let before = t.paged().unwrap().stats();
            insert(&mut t, &mut o, Op::Assign, &batch, &vals, &cx);
            let mut resident = t.paged().unwrap().resident();
            resident.sort();
            assert_eq!(resident, vec![Some(3), Some(6)], "{cx}: the dense pages are the resident ones");
            let after = t.paged().unwrap().stats();
            assert_eq!(after.in_place - before.in_place, 6, "{cx}: six sparse pages worked on in place");
            assert_eq!(after.page_ins - before.page_ins, 2, "{cx}: only the dense pages brought in");
            for round in 0..3 {
                cx.phase = format!("round {round}");
                let before = t.paged().unwrap().stats();
                let mut probe = sample(&mut cx.rng, &batch, batch.len());
                probe.extend(fresh_keys(&mut cx.rng, 10, &o, &[]));
                check_find(&t, &o, &probe, &cx);
                let gone = sample(&mut cx.rng, &sparse, 30);
                erase(&mut t, &mut o, &gone, &cx);
                let vals = num_values::<u64>(&mut cx.rng, gone.len());
                insert(&mut t, &mut o, Op::Apply(Reduce::Sum), &gone, &vals, &cx);
                let after = t.paged().unwrap().stats();
                assert_eq!(after.page_ins, before.page_ins, "{cx}: a resident or sparse page was brought in");
                assert!(after.in_place > before.in_place, "{cx}");
            }
            check_table(&t, &o, &cx);
        }
    }
}
