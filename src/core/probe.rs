//! The probe sequence: linear over 32-byte buckets, starting at the key's
//! home bucket and wrapping around.
//!
//! Why lookups may stop early: inserts claim only EMPTY slots, always the
//! first one on the key's sequence, and a slot never returns to EMPTY while
//! the table lives (erase leaves a TOMBSTONE; only clear and rehash reset
//! slots). So once a bucket on the sequence holds an EMPTY slot, the key is
//! not stored further on.
//!
//! Why probing terminates: the sequence visits at most `limit` buckets
//! (never more than the table has), so a full table costs a bounded scan and
//! the key is reported as not stored, never a hang.

use super::hash::{mix64, reduce_range};

/// Default upper bound on buckets visited by one operation of the linear
/// schemes with 8-byte slots (1024 buckets = 32 KiB of slots, 4096 slots;
/// 16-byte slots take twice the buckets, the same reach in slots: see
/// `Scheme::default_max_probe_buckets`).
pub const DEFAULT_MAX_PROBE_BUCKETS: u64 = 1024;

/// Parameters of a table's probe sequence, shared by all its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeParams {
    /// Number of buckets in the table.
    pub buckets: u64,
    /// Hash seed.
    pub seed: u64,
    /// Buckets visited at most per operation (`1..=buckets`).
    pub limit: u64,
}

impl ProbeParams {
    /// The home bucket of a key given as zero-extended bits.
    #[inline(always)]
    pub fn home(&self, key: u64) -> u64 {
        reduce_range(mix64(key, self.seed), self.buckets)
    }

    /// The probe sequence of a key.
    #[inline(always)]
    pub fn seq(&self, key: u64) -> ProbeSeq {
        ProbeSeq { bucket: self.home(key), buckets: self.buckets, left: self.limit }
    }

    /// How many buckets after its home a key sits at `bucket` (0 = at home).
    #[inline(always)]
    pub fn displacement(&self, key: u64, bucket: u64) -> u64 {
        let home = self.home(key);
        if bucket >= home { bucket - home } else { bucket + self.buckets - home }
    }
}

/// Iterator over the bucket indices one key visits.
#[derive(Clone, Debug)]
pub struct ProbeSeq {
    bucket: u64,
    buckets: u64,
    left: u64,
}

impl Iterator for ProbeSeq {
    type Item = u64;
    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let b = self.bucket;
        self.bucket += 1;
        if self.bucket == self.buckets {
            self.bucket = 0;
        }
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_wraps_and_is_bounded() {
        let p = ProbeParams { buckets: 5, seed: 1, limit: 5 };
        let seq: Vec<u64> = p.seq(123).collect();
        assert_eq!(seq.len(), 5);
        let mut sorted = seq.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
        assert_eq!(seq[0], p.home(123));
        assert_eq!(p.displacement(123, seq[4]), 4);
    }
}
