//! Slot and bucket layout, identical on every backend.
//!
//! A slot is one packed word holding a key and its value, so a single atomic
//! compare-and-swap publishes the pair: readers never see a key without its
//! value.
//!
//! ```text
//!  8-byte slot (u32 key, 4-byte value)      16-byte slot (any 8-byte key or value)
//!  bit 63        32 31          0           bit 127        64 63           0
//!  +------------+--------------+            +----------------+---------------+
//!  |   value    |     key      |            |     value      |      key      |
//!  +------------+--------------+            +----------------+---------------+
//! ```
//!
//! Free and erased slots are marked in the key field: all ones is EMPTY,
//! all ones minus one is TOMBSTONE (keys equal to these are stored out of
//! band). A bucket is the slots in one 32-byte sector, the unit the GPU's
//! memory moves, so one probe step costs one sector read:
//!
//! ```text
//!  bucket (32 bytes) = 4 x 8-byte slots  or  2 x 16-byte slots
//! ```

use portable_atomic::{AtomicU128, AtomicU64, Ordering};

/// Bytes per bucket: one 32-byte DRAM/L2 sector of the GPU.
pub const BUCKET_BYTES: usize = 32;

/// A packed key/value slot word (`u64` or `u128`).
pub trait Word: Copy + Eq + Send + Sync + std::fmt::Debug + 'static {
    /// The atomic cell holding one word.
    type Atomic: Send + Sync;
    /// Bits in each of the two fields (key, value).
    const FIELD_BITS: u32;
    /// Size of the word in bytes.
    const BYTES: usize;
    /// A word with every bit set: an EMPTY slot.
    const EMPTY: Self;
    /// A word whose key field marks an erased slot.
    const TOMBSTONE: Self;
    /// Packs a key and a value (both given as zero-extended bits).
    fn pack(key: u64, value: u64) -> Self;
    /// The key field.
    fn key(self) -> u64;
    /// The value field.
    fn value(self) -> u64;
    /// A fresh atomic cell.
    fn new_atomic(w: Self) -> Self::Atomic;
    /// Atomic load (acquire).
    fn load(a: &Self::Atomic) -> Self;
    /// Atomic store (release).
    fn store(a: &Self::Atomic, w: Self);
    /// Atomic compare-and-swap; `Err` holds the word found instead.
    fn cas(a: &Self::Atomic, current: Self, new: Self) -> Result<Self, Self>;

    /// Key field value of an EMPTY slot.
    #[inline(always)]
    fn empty_key_field() -> u64 {
        Self::EMPTY.key()
    }
    /// Key field value of a TOMBSTONE slot.
    #[inline(always)]
    fn tombstone_key_field() -> u64 {
        Self::TOMBSTONE.key()
    }
    /// Slots per 32-byte bucket.
    #[inline(always)]
    fn slots_per_bucket() -> usize {
        BUCKET_BYTES / Self::BYTES
    }
}

impl Word for u64 {
    type Atomic = AtomicU64;
    const FIELD_BITS: u32 = 32;
    const BYTES: usize = 8;
    const EMPTY: Self = u64::MAX;
    const TOMBSTONE: Self = u64::MAX - 1;
    #[inline(always)]
    fn pack(key: u64, value: u64) -> Self {
        (key & 0xffff_ffff) | (value << 32)
    }
    #[inline(always)]
    fn key(self) -> u64 {
        self & 0xffff_ffff
    }
    #[inline(always)]
    fn value(self) -> u64 {
        self >> 32
    }
    fn new_atomic(w: Self) -> AtomicU64 {
        AtomicU64::new(w)
    }
    #[inline(always)]
    fn load(a: &AtomicU64) -> Self {
        a.load(Ordering::Acquire)
    }
    #[inline(always)]
    fn store(a: &AtomicU64, w: Self) {
        a.store(w, Ordering::Release)
    }
    #[inline(always)]
    fn cas(a: &AtomicU64, current: Self, new: Self) -> Result<Self, Self> {
        a.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
    }
}

impl Word for u128 {
    type Atomic = AtomicU128;
    const FIELD_BITS: u32 = 64;
    const BYTES: usize = 16;
    const EMPTY: Self = u128::MAX;
    // Key field all ones minus one; the value field stays all ones.
    const TOMBSTONE: Self = u128::MAX - 1;
    #[inline(always)]
    fn pack(key: u64, value: u64) -> Self {
        key as u128 | ((value as u128) << 64)
    }
    #[inline(always)]
    fn key(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn value(self) -> u64 {
        (self >> 64) as u64
    }
    fn new_atomic(w: Self) -> AtomicU128 {
        AtomicU128::new(w)
    }
    #[inline(always)]
    fn load(a: &AtomicU128) -> Self {
        a.load(Ordering::Acquire)
    }
    #[inline(always)]
    fn store(a: &AtomicU128, w: Self) {
        a.store(w, Ordering::Release)
    }
    #[inline(always)]
    fn cas(a: &AtomicU128, current: Self, new: Self) -> Result<Self, Self> {
        a.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
    }
}

/// What a slot's key field says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Never used since the last clear/rehash: probing stops here.
    Empty,
    /// Erased: probing continues past it; inserts do not reuse it.
    Tombstone,
    /// Holds the given key field.
    Full(u64),
}

/// Decodes a slot word's state.
#[inline(always)]
pub fn slot_state<W: Word>(w: W) -> SlotState {
    let k = w.key();
    if k == W::empty_key_field() {
        SlotState::Empty
    } else if k == W::tombstone_key_field() {
        SlotState::Tombstone
    } else {
        SlotState::Full(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trip() {
        let w = <u64 as Word>::pack(7, 0xdead_beef);
        assert_eq!((w.key(), w.value()), (7, 0xdead_beef));
        let w = <u128 as Word>::pack(u64::MAX - 2, 42);
        assert_eq!((w.key(), w.value()), (u64::MAX - 2, 42));
    }

    #[test]
    fn markers_are_not_keys() {
        assert_eq!(slot_state(<u64 as Word>::EMPTY), SlotState::Empty);
        assert_eq!(slot_state(<u64 as Word>::TOMBSTONE), SlotState::Tombstone);
        assert_eq!(slot_state(<u128 as Word>::TOMBSTONE), SlotState::Tombstone);
        // A u32 key in a 16-byte slot is zero-extended, so it never reads as a marker.
        assert_eq!(slot_state(<u128 as Word>::pack(u32::MAX as u64, 0)), SlotState::Full(u32::MAX as u64));
        assert_eq!(<u64 as Word>::slots_per_bucket(), 4);
        assert_eq!(<u128 as Word>::slots_per_bucket(), 2);
    }
}
