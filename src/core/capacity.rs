//! Capacity math: slot counts, load limits and growth targets.

use super::layout::BUCKET_BYTES;

/// Default maximum load factor: growth starts when live keys plus
/// tombstones would pass this fraction of the slots.
pub const DEFAULT_MAX_LOAD: f64 = 0.875;
/// Largest accepted slot count (2^40 slots = 8-16 TiB): anything larger is
/// surely a mistake, reported as an error rather than attempted.
pub const MAX_SLOTS: u64 = 1 << 40;
/// Smallest table, in slots (one bucket of the widest layout is 2 slots;
/// a few buckets keep tiny tables from degenerating).
pub const MIN_SLOTS: u64 = 16;

/// Slots a table gets when asked for `requested`: at least [`MIN_SLOTS`],
/// rounded up to whole buckets. `None` if over [`MAX_SLOTS`] or zero.
pub fn round_slots(requested: u64, slot_bytes: usize) -> Option<u64> {
    if requested == 0 || requested > MAX_SLOTS {
        return None;
    }
    let per_bucket = (BUCKET_BYTES / slot_bytes) as u64;
    let s = requested.max(MIN_SLOTS);
    Some(s.div_ceil(per_bucket) * per_bucket)
}

/// Slots needed to hold `keys` keys at load `max_load`.
pub fn slots_for_keys(keys: u64, max_load: f64) -> u64 {
    ((keys as f64 / max_load).ceil() as u64).max(MIN_SLOTS)
}

/// Keys a table of `slots` may hold (live plus tombstones) before growing.
pub fn load_limit(slots: u64, max_load: f64) -> u64 {
    ((slots as f64) * max_load).floor() as u64
}

/// New slot count when a table of `slots` must hold `expected` live keys:
/// at least double, and enough for `expected` at `max_load`.
pub fn grow_target(slots: u64, expected: u64, max_load: f64) -> u64 {
    (slots.saturating_mul(2)).max(slots_for_keys(expected, max_load))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding() {
        assert_eq!(round_slots(0, 8), None);
        assert_eq!(round_slots(MAX_SLOTS + 1, 8), None);
        assert_eq!(round_slots(1, 8), Some(16));
        assert_eq!(round_slots(17, 8), Some(20));
        assert_eq!(round_slots(17, 16), Some(18));
    }

    #[test]
    fn growth() {
        assert_eq!(load_limit(100, 0.5), 50);
        assert_eq!(grow_target(100, 10, 0.5), 200);
        assert_eq!(grow_target(100, 1000, 0.5), 2000);
    }
}
