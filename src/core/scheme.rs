//! Placement schemes: where a key may live in the slot array.
//!
//! Every scheme shares the slot layout of [`super::layout`] (packed key/value
//! words, 32-byte buckets, the same EMPTY and TOMBSTONE markers, keys equal to
//! a marker kept out of band) and the hash of [`super::hash`]; they differ in
//! which slots a key may occupy and how an insert finds one:
//!
//! | scheme | from | where a key may live | a lookup reads |
//! | --- | --- | --- | --- |
//! | [`Scheme::Linear`] (default) | | buckets after its home bucket, first free slot | until a bucket with an EMPTY slot |
//! | [`Scheme::Hashinator`] | Hashinator | slots after its Fibonacci-hashed home slot (power-of-two table) | until an EMPTY slot, a team of threads per key on the GPU |
//! | [`Scheme::RobinHood`] | gpurhh | buckets after its home, up to a cap; richer keys give way to poorer ones | until a bucket whose keys all sit closer to their homes than it would |
//! | [`Scheme::Cuckoo`] | BGHT, Starfish | one of 2 (8-byte slots) or 3 (16-byte slots) buckets, or a small stash | those buckets, the stash if not empty |
//! | [`Scheme::TwoLevel`] | HH Hash, Starfish | one region by the first hash, then cuckoo inside it with the region's own seed | that region's candidate buckets |
//! | [`Scheme::SlabList`] | SlabHash, the WebGPU slab list | a chain of 32-byte slabs from its head bucket, slabs taken from a pool | its chain until an EMPTY slot |
//!
//! Scheme-specific state (locks, a stash, per-region seeds) lives in an
//! auxiliary array of zero-initialised 64-bit words whose size the scheme
//! gives ([`Scheme::aux_words`]); both backends allocate it beside the slots.

use std::fmt;
use std::str::FromStr;

use super::capacity::{MAX_SLOTS, MIN_SLOTS};
use super::cuckoo;
use super::slab::Slabs;
use super::layout::BUCKET_BYTES;
use super::probe::DEFAULT_MAX_PROBE_BUCKETS;

/// How keys are placed. Chosen when a table is built and kept across growth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Scheme {
    /// Linear probing over 32-byte buckets from a multiply-shift home bucket
    /// (any table size). The default.
    #[default]
    Linear,
    /// Hashinator's scheme: Fibonacci hashing onto a power-of-two number of
    /// slots, linear probing over slots; on the GPU a team of `team` threads
    /// (4, 8, 16 or 32) probes `team` slots at once and votes with a ballot.
    ///
    /// Pick it for long probe runs on the GPU (high load, many tombstones),
    /// which a team reads `team` slots per round trip instead of one, and for
    /// tables that churn: [`crate::HashTable::clean_tombstones`] reclaims
    /// tombstones in place, moving only the keys that sit past their home
    /// slot, which is cheaper than a rebuild (the default scheme does the
    /// same per bucket; the others rebuild). Prefer [`Scheme::Linear`] for
    /// short runs (moderate load): one thread per key then wastes no lanes.
    /// Sizes are powers of two, so a capacity may round up to twice the
    /// request. Larger teams suit longer runs; the Hashinator paper found
    /// teams of 8 best on an A100.
    Hashinator {
        /// Threads per key in the GPU's bulk kernels (4, 8, 16 or 32).
        team: u32,
    },
    /// gpurhh's scheme: bucketed Robin Hood hashing with a probe cap. A key
    /// lives in one of the `cap` buckets from its multiply-shift home bucket
    /// (cap = the probe limit, default 32); an insert that meets a full bucket
    /// holding a richer key (fewer buckets past its own home) takes its slot
    /// and carries it on, so displacements stay short and even, and a lookup
    /// of an absent key stops at the first bucket whose keys are all richer
    /// than it would be. The cascade ends at the first bucket with an EMPTY
    /// slot, at most 32 caps from the key's home (1024 buckets by default,
    /// the linear scheme's reach). An insert that cannot place every key it
    /// carries within its cap fails, writes nothing and is reported; erase
    /// leaves tombstones, which inserts never reuse.
    ///
    /// Pick it for short misses at high load (0.9 and above); its inserts are
    /// slower than [`Scheme::Linear`]'s because each one locks the buckets it
    /// walks. Erases lock the buckets of their lookup, so they may run with
    /// inserts; in users' kernels, lookups may not run while other threads
    /// insert (they take no locks, and a key being moved may be missed). The
    /// bulk calls never overlap them.
    RobinHood,
    /// Bucketed cuckoo hashing with a small stash (BGHT, Starfish): a key
    /// lives in one of 2 (8-byte slots) or 3 (16-byte slots) candidate
    /// buckets or in a stash of 32 pairs, so lookups read a bounded number
    /// of buckets at any load (misses also scan the stash while it holds keys). Inserts lock
    /// the buckets they touch and may move residents along an eviction path
    /// (at most the probe limit in steps, 16 by default); they slow down as
    /// the load nears 0.9-0.95, and a key with no path and no stash room
    /// fails (the table grows, with growth on). Erase frees the slot (no
    /// tombstones). Pick it for lookup-heavy work at high load. In your own
    /// kernels, do not look keys up while other threads insert: a key being
    /// moved may be missed for that instant.
    Cuckoo,
    /// Two-level cuckoo (HH Hash, Starfish): the first hash picks a region
    /// (about 16 KiB, or 64 KiB in tables from 32 MiB of slots), each
    /// region an independent cuckoo table with its own seed. A key its
    /// region cannot place goes to an overflow shared by all regions (0.8%
    /// of the slots, linearly probed), which its region word counts; a
    /// table of one region rebuilds it with a new seed (up to 8 tried)
    /// instead. Lookups read one region word and 2 or 3 buckets, and the
    /// overflow only for regions with keys there; no stash. Large tables
    /// refuse no key below a load of 0.97. Inserts lock their region, so
    /// keys of one region insert one at a time; like [`Scheme::Cuckoo`], do
    /// not mix lookups with concurrent inserts in your own kernels. Erase
    /// frees the slot (a tombstone in the overflow).
    TwoLevel,
    /// Chaining over slab lists (SlabHash; the WebGPU seed's slab-list
    /// table): a quarter of the 32-byte buckets are chain heads, one per
    /// hash bucket; the others form a pool of slabs (one bucket each) that
    /// a chain takes from, one at a time, when its last slab is full. A
    /// slab is taken with one atomic bump of a counter and linked with a
    /// compare-and-swap on the chain's last `next` word; a thread that loses
    /// that race links its slab further down the same chain, so no slab is
    /// ever lost. Slots, markers and out-of-band keys are the engine's; the
    /// `next` words and the pool counters live in the scheme words (see
    /// [`crate::core::slab`]).
    ///
    /// `slots()` counts heads and pool alike, so load factors mean what
    /// they mean for the other schemes. A key is refused only when its
    /// chain is full and the pool is used up (the probe limit does not
    /// apply); as a chain's last slab is partly empty, that happens near a
    /// load of 0.9 (8-byte slots) or 0.93 (16-byte slots), and at lower
    /// loads in small tables. Erase leaves tombstones, which inserts do not
    /// reuse; a rebuild (`rehash`, `clean_tombstones`, growth) reclaims them
    /// and the slabs of emptied chains.
    ///
    /// Pick it for SlabHash's layout (a key only ever lives in its own
    /// chain, so heavy load in one bucket never slows another) and for
    /// WebGPU, where it runs on 32-bit atomics. Chains are walked slab by
    /// slab (about 3.5 slabs at load 0.875), so lookups cost more than with
    /// [`Scheme::Linear`]. CPU and wgpu only: CUDA returns
    /// [`crate::Error::Unsupported`].
    SlabList,
}

/// Team size of [`Scheme::Hashinator`] when none is given.
pub const DEFAULT_TEAM: u32 = 8;

impl Scheme {
    /// One of each scheme that runs on the CPU and CUDA alike, with default
    /// parameters (`--scheme all`); [`Scheme::SlabList`] (CPU and wgpu) is
    /// not among them.
    pub const ALL: [Scheme; 5] =
        [Scheme::Linear, Scheme::Hashinator { team: DEFAULT_TEAM }, Scheme::RobinHood, Scheme::Cuckoo, Scheme::TwoLevel];

    /// Code shared with the CUDA sources (`GH_SCHEME_*`).
    pub const fn code(self) -> u32 {
        match self {
            Scheme::Linear => 0,
            Scheme::Hashinator { .. } => 1,
            Scheme::RobinHood => 2,
            Scheme::Cuckoo => 3,
            Scheme::TwoLevel => 4,
            Scheme::SlabList => 5,
        }
    }

    /// The scheme's parameter as passed to kernels (the team size, else 0).
    pub const fn param(self) -> u32 {
        match self {
            Scheme::Hashinator { team } => team,
            _ => 0,
        }
    }

    /// Short name, as parsed by [`FromStr`] and shown in benchmark output.
    pub fn name(self) -> String {
        match self {
            Scheme::Linear => "linear".into(),
            Scheme::Hashinator { team } if team == DEFAULT_TEAM => "hashinator".into(),
            Scheme::Hashinator { team } => format!("hashinator-t{team}"),
            Scheme::RobinHood => "robin-hood".into(),
            Scheme::Cuckoo => "cuckoo".into(),
            Scheme::TwoLevel => "two-level".into(),
            Scheme::SlabList => "slab-list".into(),
        }
    }

    /// Checks the scheme's parameters.
    pub fn validate(self) -> Result<(), String> {
        match self {
            Scheme::Hashinator { team } if ![4, 8, 16, 32].contains(&team) => {
                Err(format!("hashinator team size {team} must be 4, 8, 16 or 32"))
            }
            _ => Ok(()),
        }
    }

    /// Slots a table of this scheme gets when `requested` are asked for:
    /// whole buckets, and a power of two for Hashinator (its Fibonacci hash
    /// maps onto `2^p` slots). `None` if zero or beyond [`MAX_SLOTS`].
    pub fn round_slots(self, requested: u64, slot_bytes: usize) -> Option<u64> {
        if requested == 0 || requested > MAX_SLOTS {
            return None;
        }
        let per_bucket = (BUCKET_BYTES / slot_bytes) as u64;
        let s = requested.max(MIN_SLOTS);
        let s = match self {
            Scheme::Hashinator { .. } => s.next_power_of_two(),
            Scheme::TwoLevel => cuckoo::round_to_regions(s.div_ceil(per_bucket)) * per_bucket,
            _ => s.div_ceil(per_bucket) * per_bucket,
        };
        (s <= MAX_SLOTS).then_some(s)
    }

    /// 64-bit words of scheme state beside a table of `buckets` buckets
    /// (zeroed when the table is created, cleared or rehashed).
    pub fn aux_words(self, buckets: u64) -> u64 {
        let _ = buckets;
        match self {
            Scheme::Linear | Scheme::Hashinator { .. } => 0,
            // One lock bit per bucket.
            Scheme::RobinHood => buckets.div_ceil(64),
            Scheme::Cuckoo => cuckoo::FlatAux { buckets }.words(),
            Scheme::TwoLevel => cuckoo::Regions::of(buckets).words(),
            Scheme::SlabList => Slabs::of(buckets).words(),
        }
    }

    /// Probe limit in 32-byte buckets when the builder sets none, for slots
    /// of `slot_bytes` bytes (8 or 16): how far an operation may look past a
    /// key's first candidate before an insert fails (and the table grows,
    /// with growth on).
    pub const fn default_max_probe_buckets(self, slot_bytes: usize) -> u64 {
        match self {
            // The linear schemes' reach is the same in slots for every pair
            // width (4096 slots): a limit of 1024 buckets, 2048 sixteen-byte
            // slots, refused the first u64 key at load 0.90 of 2^22 slots
            // (batches of 1% of the slots, CPU and CUDA alike), where 8-byte
            // slots reach 0.95.
            Scheme::Linear | Scheme::Hashinator { .. } if slot_bytes > 8 => 2 * DEFAULT_MAX_PROBE_BUCKETS,
            // Robin Hood keeps displacements short and even, so 64 buckets
            // refuse keys only near a full table (at 2^22 slots: load
            // 0.96-0.97 with 8-byte slots, 0.94-0.95 with 16-byte ones; 32
            // buckets refused 16-byte slots from 0.89), and a doomed insert
            // into an overfull table gives up after a few dozen buckets
            // (gpurhh caps at 8 for the same reason). Erase-heavy tables
            // with growth off may want more: tombstones are never reused and
            // push keys further out.
            Scheme::RobinHood => 64,
            Scheme::Cuckoo | Scheme::TwoLevel => cuckoo::DEFAULT_EVICTIONS,
            _ => DEFAULT_MAX_PROBE_BUCKETS,
        }
    }

    /// Whether erase leaves a tombstone (counted toward the load limit until
    /// a rehash or a tombstone cleaning) rather than freeing the slot.
    pub const fn erase_leaves_tombstones(self) -> bool {
        !matches!(self, Scheme::Cuckoo | Scheme::TwoLevel)
    }

    /// Whether a key an insert refused stays refused for the rest of that
    /// bulk call, so the call's refused positions are exactly those of the
    /// keys left absent. True for the probing schemes, where slots only fill
    /// during an insert. Cuckoo eviction walks and two-level region rebuilds
    /// may place a key after refusing an earlier copy of it in the same batch,
    /// and Robin Hood's cascades depend on which keys are in the way, so for
    /// those schemes every refused position must be recorded as it happens.
    /// Slab lists refuse a key only once the pool is used up and every
    /// slab handed out is linked, and slots only fill, so theirs are final too.
    pub const fn refusals_are_final(self) -> bool {
        matches!(self, Scheme::Linear | Scheme::Hashinator { .. } | Scheme::SlabList)
    }

    /// Whether an insert may use every slot when its probe limit covers the
    /// whole table (linear schemes); cuckoo tables refuse keys earlier, and
    /// slab lists once the pool is used up (partly empty last slabs).
    pub const fn fills_every_slot(self) -> bool {
        matches!(self, Scheme::Linear | Scheme::Hashinator { .. } | Scheme::RobinHood)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Scheme {
    type Err = String;
    /// Parses `linear`, `hashinator`, `hashinator-tN`, `robin-hood`, `cuckoo`
    /// `two-level` or `slab-list` (`default` means `linear`).
    fn from_str(s: &str) -> Result<Self, String> {
        let scheme = match s {
            "linear" | "default" => Scheme::Linear,
            "hashinator" => Scheme::Hashinator { team: DEFAULT_TEAM },
            "robin-hood" | "robinhood" => Scheme::RobinHood,
            "cuckoo" => Scheme::Cuckoo,
            "two-level" | "twolevel" => Scheme::TwoLevel,
            "slab-list" | "slablist" | "slab" => Scheme::SlabList,
            _ => match s.strip_prefix("hashinator-t").map(str::parse::<u32>) {
                Some(Ok(team)) => Scheme::Hashinator { team },
                _ => {
                    return Err(format!(
                        "unknown scheme '{s}' (expected linear, hashinator, hashinator-tN, robin-hood, cuckoo, two-level or slab-list)"
                    ))
                }
            },
        };
        scheme.validate()?;
        Ok(scheme)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Scheme::ALL.into_iter().chain([Scheme::Hashinator { team: 32 }, Scheme::SlabList]) {
            assert_eq!(s.name().parse::<Scheme>(), Ok(s));
        }
        assert!("hashinator-t3".parse::<Scheme>().is_err());
        assert!("quadratic".parse::<Scheme>().is_err());
    }

    #[test]
    fn hashinator_rounds_to_powers_of_two() {
        let h = Scheme::Hashinator { team: 8 };
        assert_eq!(h.round_slots(1000, 8), Some(1024));
        assert_eq!(h.round_slots(1024, 16), Some(1024));
        assert_eq!(h.round_slots(1, 8), Some(16));
        assert_eq!(Scheme::Linear.round_slots(1000, 16), Some(1000));
        assert_eq!(Scheme::Linear.round_slots(0, 8), None);
    }

    #[test]
    fn linear_probe_reach_is_the_same_in_slots_for_both_widths() {
        for s in [Scheme::Linear, Scheme::Hashinator { team: DEFAULT_TEAM }] {
            let slots = |bytes: usize| s.default_max_probe_buckets(bytes) * (BUCKET_BYTES / bytes) as u64;
            assert_eq!(slots(8), 4096);
            assert_eq!(slots(16), 4096);
        }
        // Bounded schemes keep their caps whatever the width.
        assert_eq!(Scheme::RobinHood.default_max_probe_buckets(16), 64);
        assert_eq!(Scheme::TwoLevel.default_max_probe_buckets(16), cuckoo::DEFAULT_EVICTIONS);
    }
}
