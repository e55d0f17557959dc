//! Hashinator's tombstone cleaning, the part both backends share.
//!
//! For the linear schemes ([`Scheme::Linear`], [`Scheme::Hashinator`]) a
//! backend cleans in two steps instead of rebuilding the table:
//!
//! 1. A parallel compaction reads every bucket and leaves in place only the
//!    keys that lookups, which stop at the first EMPTY slot, still reach once
//!    every other slot is EMPTY: for Linear the keys whose home bucket it is,
//!    packed to its front (lookups scan a bucket from its start); for
//!    Hashinator a key whose home slot lies in the same bucket, at or before
//!    it, with no slot between turning EMPTY (the paper lifts every key past
//!    its home slot; this keeps more). Every other key is lifted into a
//!    buffer and its slot, like every tombstone, becomes EMPTY.
//! 2. The lifted keys are inserted again with the scheme's insert, each into
//!    the first EMPTY slot of its sequence, so lookups find them too.
//!
//! Why step 2 cannot fail: each lifted key left an EMPTY slot behind and
//! each tombstone became one, so there are at least as many EMPTY slots as
//! keys to place, and a walk over the whole table always finds one. Within
//! the probe limit too: put back one at a time in slot order (from a slot
//! that was EMPTY before), each key lands no further from home than it sat
//! (Linear: than its bucket), since the keys before it land no further than
//! theirs and the keys that stay move at most to the front of their own
//! bucket, so its slot (bucket) is still free when its walk reaches it.
//! The parallel reinsertion only approximates that order (on the GPU not at
//! all), so a key may be pushed past a probe limit much shorter than the
//! table; such a key goes to [`rebuild_with`], which never drops it.
//!
//! **Memory.** Step 1 empties slots, so everything step 2 needs is
//! allocated before it: the buffer of lifted keys (and on the GPU the
//! insert's failure list). Only the fallback rebuild allocates afterwards (a
//! new table). Should that fail, the keys it could not place are in no slot,
//! and the backend's last resort puts them back with no memory at all: the
//! probe limit becomes the whole table until the next rehash, and each such
//! key takes the first EMPTY slot of its sequence (there are at least as
//! many EMPTY slots as keys out: each left one behind). Lookups stop at the
//! first EMPTY slot anyway, so they find every key; only the bound on a
//! refused insert's walk is lost until a rehash restores it.

use super::{Backend, InsertMode};
use crate::core::keys::{Key, Value};
use crate::core::layout::Word;
use crate::core::scheme::Scheme;
use crate::{Error, Result};

/// Whether `scheme` cleans tombstones in place (the others rebuild).
pub(crate) fn cleans_in_place(scheme: Scheme) -> bool {
    matches!(scheme, Scheme::Linear | Scheme::Hashinator { .. })
}

/// The next table size to try when `slots` is too small: twice as many,
/// rounded as the scheme needs; `None` past the largest table.
fn doubled(scheme: Scheme, slots: u64, slot_bytes: usize) -> Option<u64> {
    scheme.round_slots(slots.checked_mul(2)?, slot_bytes)
}

/// Rebuilds the table (dropping tombstones, and reaching keys a cleaning
/// could not put back on their sequence) and inserts `keys`, which are in no
/// slot: first at the same size, then doubling while keys still find no
/// slot within the probe limit. The capacity grows only when the keys do
/// not fit at the current size.
///
/// On error (no memory for a rebuild, or no larger size) the table holds
/// every key it held, at some size, and `keys` and `values` are left
/// holding the keys still in no slot: the caller must place them.
pub(crate) fn rebuild_with<K: Key, V: Value, B: Backend<K, V> + ?Sized>(
    b: &mut B,
    keys: &mut Vec<K>,
    values: &mut Vec<V>,
) -> Result<()> {
    let (scheme, bytes) = (b.scheme(), <K::Word<V> as Word>::BYTES);
    let mut slots = b.slots();
    loop {
        match b.rehash(slots) {
            Ok(()) => {
                // A failed insert stored nothing (the backend contract): `keys` stay out.
                let out = b.insert(keys, values, InsertMode::IfAbsent)?;
                if out.failed.is_empty() {
                    keys.clear();
                    values.clear();
                    return Ok(());
                }
                *keys = out.failed.iter().map(|&i| keys[i]).collect();
                *values = out.failed.iter().map(|&i| values[i]).collect();
            }
            // The probe limit is too short for this size: keep the table, try a larger one.
            Err(Error::RehashFailed { .. }) => {}
            Err(e) => return Err(e),
        }
        slots = doubled(scheme, slots, bytes)
            .ok_or(Error::RehashFailed { slots: b.slots(), unplaced: keys.len() as u64 })?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_keeps_each_scheme_size_rule() {
        let h = Scheme::Hashinator { team: 8 };
        assert_eq!(doubled(h, 1024, 8), Some(2048));
        assert_eq!(doubled(Scheme::Linear, 1000, 16), Some(2000));
        assert_eq!(doubled(Scheme::Linear, crate::core::capacity::MAX_SLOTS, 8), None);
        assert_eq!(doubled(Scheme::Linear, u64::MAX, 8), None);
        assert!(cleans_in_place(h) && cleans_in_place(Scheme::Linear));
        assert!(!cleans_in_place(Scheme::Cuckoo));
    }
}
