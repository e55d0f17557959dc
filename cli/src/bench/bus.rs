//! The bus-bound model of a paged case (`--oversub`): the bytes a timed call
//! on a paged table must move between host and device, over the pinned copy
//! rates measured in the same run, give the least time the call can take
//! when the pages do not fit the device budget.

use gpuhash::{PagingStats, Value};

use super::grid::{Case, Op};
use super::keys::Workload;

/// What one timed call on a paged table moved across the bus.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Traffic {
    /// Pages copied into a resident slot during the call.
    pub page_ins: u64,
    /// Dirty pages copied back to host memory during the call.
    pub write_backs: u64,
    /// Bytes of one page (every page has the same slot count: growth is off).
    pub page_bytes: u64,
    /// The call's own inputs: keys, and values for the insert ops.
    pub io_up: u64,
    /// The call's own outputs: values and found flags of lookups.
    pub io_down: u64,
}

impl Traffic {
    /// The traffic of a call that ran between the paging counters `before`
    /// and `after`.
    pub(crate) fn of_call(before: PagingStats, after: PagingStats, page_bytes: u64, io: (u64, u64)) -> Traffic {
        Traffic {
            page_ins: after.page_ins - before.page_ins,
            write_backs: after.write_backs - before.write_backs,
            page_bytes,
            io_up: io.0,
            io_down: io.1,
        }
    }

    /// Bytes host to device: pages brought in, then the inputs.
    pub(crate) fn up_bytes(&self) -> u64 {
        self.page_ins * self.page_bytes + self.io_up
    }

    /// Bytes device to host: pages written back, then the outputs.
    pub(crate) fn down_bytes(&self) -> u64 {
        self.write_backs * self.page_bytes + self.io_down
    }
}

/// Bytes of the inputs and outputs of `case`'s timed call with workload `w`
/// (up, down), as the host API moves them: keys and values up; values plus
/// one found byte per lookup down. Counts and reports are not counted.
pub(crate) fn io_bytes<K, V: Value>(case: &Case, w: &Workload<K, V>) -> (u64, u64) {
    let (kb, vb) = (u64::from(case.key_bits / 8), u64::from(case.value_bits / 8));
    let keys = (w.keys.len() + w.erase_keys.len() + w.find_keys.len()) as u64;
    let up = keys * kb + w.values.len() as u64 * vb;
    let down = match case.op {
        Op::FindHit | Op::FindMiss50 | Op::FindMiss => w.keys.len() as u64 * (vb + 1),
        Op::Contains => w.keys.len() as u64,
        Op::Mixed => w.find_keys.len() as u64 * (vb + 1),
        _ => 0,
    };
    (up, down)
}

/// The bus-bound time and how close a call came to it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BusBound {
    /// Least milliseconds the copies need.
    pub ms: f64,
    /// Bus-bound time over the measured time: the fraction of the
    /// bus-bound rate achieved (1.0: the call ran at the bus's pace).
    pub fraction: f64,
}

/// The bus bound of a call that took `ms` and moved `up` bytes host to
/// device and `down` bytes back, at pinned copy rates of `h2d` and `d2h`
/// GB/s. The two directions overlap (PCIe is full duplex and the paged
/// table pipelines its copies), so the slower one bounds the call. `None`
/// when a rate or the time is not a positive number.
pub(crate) fn bus_bound(up: u64, down: u64, h2d_gbs: f64, d2h_gbs: f64, ms: f64) -> Option<BusBound> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !(positive(h2d_gbs) && positive(d2h_gbs) && positive(ms)) {
        return None;
    }
    // GB/s is bytes per nanosecond; 1e6 ns per ms.
    let bound = (up as f64 / h2d_gbs).max(down as f64 / d2h_gbs) / 1e6;
    Some(BusBound { ms: bound, fraction: bound / ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::grid::{Batch, Mix};

    #[test]
    fn the_slower_direction_bounds_the_call() {
        // 25 GB up at 25 GB/s = 1 s; 10 GB down at 20 GB/s = 0.5 s.
        let b = bus_bound(25_000_000_000, 10_000_000_000, 25.0, 20.0, 2000.0).unwrap();
        assert!((b.ms - 1000.0).abs() < 1e-9, "{b:?}");
        assert!((b.fraction - 0.5).abs() < 1e-12);
        // Downloads bound it when they are the larger share.
        let b = bus_bound(1_000_000, 4_000_000, 10.0, 10.0, 0.4).unwrap();
        assert!((b.ms - 0.4).abs() < 1e-12 && (b.fraction - 1.0).abs() < 1e-12, "{b:?}");
        // Nothing to move: no time needed.
        assert_eq!(bus_bound(0, 0, 10.0, 10.0, 1.0), Some(BusBound { ms: 0.0, fraction: 0.0 }));
    }

    #[test]
    fn no_bound_without_rates() {
        assert_eq!(bus_bound(1, 1, f64::NAN, 10.0, 1.0), None);
        assert_eq!(bus_bound(1, 1, 10.0, 0.0, 1.0), None);
        assert_eq!(bus_bound(1, 1, 10.0, 10.0, 0.0), None);
    }

    #[test]
    fn traffic_counts_pages_and_io() {
        let before = PagingStats { page_ins: 3, write_backs: 1, ..Default::default() };
        let after = PagingStats { page_ins: 11, write_backs: 6, evictions: 7, ..Default::default() };
        let t = Traffic::of_call(before, after, 1 << 20, (800, 500));
        assert_eq!((t.page_ins, t.write_backs), (8, 5));
        assert_eq!(t.up_bytes(), 8 * (1 << 20) + 800);
        assert_eq!(t.down_bytes(), 5 * (1 << 20) + 500);
    }

    #[test]
    fn io_follows_the_op() {
        let mut case = Case {
            op: Op::FindHit,
            key_bits: 64,
            value_bits: 32,
            slots: 1024,
            table_bytes: 1024 * 16,
            load: 0.5,
            distinct: 512,
            batch: Batch::All,
            multiplicity: 1,
            mix: Mix { insert: 20, erase: 10, find: 70 },
            round_ops: 64,
            paging: None,
        };
        let w = Workload::<u64, u32> { keys: vec![1; 10], ..Default::default() };
        assert_eq!(io_bytes(&case, &w), (80, 50));
        case.op = Op::Contains;
        assert_eq!(io_bytes(&case, &w), (80, 10));
        case.op = Op::Insert;
        let w = Workload::<u64, u32> { keys: vec![1; 10], values: vec![2; 10], ..Default::default() };
        assert_eq!(io_bytes(&case, &w), (120, 0));
        case.op = Op::Mixed;
        let w = Workload::<u64, u32> {
            keys: vec![1; 2],
            values: vec![2; 2],
            erase_keys: vec![3; 1],
            find_keys: vec![4; 7],
            ..Default::default()
        };
        assert_eq!(io_bytes(&case, &w), ((2 + 1 + 7) * 8 + 2 * 4, 7 * 5));
    }
}
