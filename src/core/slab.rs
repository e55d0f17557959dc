//! Slab lists ([`Scheme::SlabList`](super::scheme::Scheme::SlabList)): the
//! geometry shared by every backend.
//!
//! The slot array is cut into slabs of one 32-byte bucket each (the engine's
//! packed slots, markers and bucket size, unchanged). The first quarter of
//! the slabs are the *heads*, one per hash bucket; the rest form the *pool*,
//! from which chains grow:
//!
//! ```text
//! slabs:  | head 0 | head 1 | ... | head H-1 | pool H | pool H+1 | ... | pool N-1 |
//! next:   [  0..N: the slab after slab i, 0 = none  ][ N: slabs handed out ][ N+1: slabs linked ]
//! ```
//!
//! A key's chain starts at head `multiply-shift(hash, H)` and follows the
//! `next` words (kept in the scheme's auxiliary words, never in the slots).
//! Pool slabs have indices of at least `H >= 1`, so 0 can mean "no next
//! slab". Slabs are handed out by one atomic bump counter and never given
//! back until the table is cleared or rebuilt.
//!
//! Why a quarter: a chain wastes on average about half a slab (its last slab
//! is partly empty), and the pool runs out when the slabs in use reach the
//! table's. With Poisson chain lengths, one head per four slabs lets the
//! pool last until a load of about 0.906 (4 slots per slab, 8-byte slots)
//! or 0.937 (2 per slab, 16-byte slots), while a chain at the default
//! maximum load 0.875 is about 3.5 slabs (8-byte) or 4 (16-byte) long.

/// Slabs per head: a quarter of the slabs are chain heads.
pub const SLABS_PER_HEAD: u64 = 4;

/// The slab geometry of a table of `slabs` 32-byte slabs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slabs {
    /// All slabs (heads and pool): the table's buckets.
    pub slabs: u64,
}

impl Slabs {
    /// The geometry of a table of `slabs` buckets.
    pub const fn of(slabs: u64) -> Slabs {
        Slabs { slabs }
    }

    /// Chain heads (hash buckets): a quarter of the slabs, at least one.
    pub const fn heads(self) -> u64 {
        let h = self.slabs / SLABS_PER_HEAD;
        if h == 0 { 1 } else { h }
    }

    /// Slabs in the pool, handed out as chains grow.
    pub const fn pool(self) -> u64 {
        self.slabs - self.heads()
    }

    /// Auxiliary word holding the number of pool slabs handed out.
    pub const fn allocated_word(self) -> u64 {
        self.slabs
    }

    /// Auxiliary word holding the number of pool slabs linked into a chain.
    pub const fn linked_word(self) -> u64 {
        self.slabs + 1
    }

    /// Auxiliary words: one `next` word per slab and the two counters.
    pub const fn words(self) -> u64 {
        self.slabs + 2
    }

    /// The slab index of the `n`th slab handed out of the pool.
    pub const fn pool_slab(self, n: u64) -> u64 {
        self.heads() + n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry() {
        let s = Slabs::of(4096);
        assert_eq!((s.heads(), s.pool(), s.words()), (1024, 3072, 4098));
        assert_eq!(s.pool_slab(0), 1024);
        // The smallest tables: one head, the rest pool; 0 never names a pool slab.
        for n in 1..8 {
            let s = Slabs::of(n);
            assert_eq!(s.heads(), 1.max(n / 4));
            assert!(s.pool_slab(0) >= 1);
        }
    }
}
