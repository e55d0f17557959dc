//! When bulk inserts take the region build.

/// When a bulk insert may take the region build (see
/// [`Builder::region_build`](crate::Builder::region_build)): the batch is
/// partitioned by region of the table (64 KiB of buckets), then each region
/// is built in shared memory by one thread block, in one coalesced pass over
/// the table, instead of one compare-and-swap in device memory per key.
///
/// Only the CUDA backend's linear and two-level schemes have a region
/// build; everywhere else (the CPU and wgpu backends, the other schemes)
/// every value is accepted and changes nothing. Whichever is chosen, an insert keeps the same
/// contract (what is stored, which value wins, which keys a full table
/// refuses and how they are reported); only its speed and the scratch
/// memory it keeps differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RegionBuild {
    /// The measured choice (the default): batches of at least a sixteenth of
    /// the table's slots (into a two-level table: of a 256th from 75% full,
    /// 85% for u64 pairs; for u32 pairs of a 2048th from 95%), into tables
    /// of two regions or more, that leave the
    /// table at most 96% full; insert-or-apply batches whenever the table is
    /// at most 96% full before. Every other batch takes the plain kernel.
    #[default]
    Auto,
    /// Every batch takes the plain kernel (a thread per key). Pick it to
    /// keep device memory free: a region build keeps its scratch (three
    /// words per key of the largest batch) on the device for later builds
    /// until `gpuhash::backend::cuda::release_scratch` frees it. Also the
    /// baseline when measuring what the region build gains.
    Never,
    /// Every batch large enough for the region build takes it, whatever
    /// load it leaves the table at. Past about 96% full, keys that find no
    /// room in their region are deferred to the plain kernel, so this is
    /// slower than [`RegionBuild::Auto`] there; it exists to test and
    /// measure the region build at every load.
    Always,
    /// As [`RegionBuild::Always`], and the partition sorts the batch in two
    /// passes whenever the table has three regions or more. Only tables of
    /// more than 256 regions (16 MiB of slots) need the second pass; this
    /// reaches it on small tables, for tests. It is never faster.
    TwoPass,
}

impl RegionBuild {
    /// `Some(false)` never, `Some(true)` whenever the batch is large
    /// enough, `None` by the load rules of [`RegionBuild::Auto`].
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // read by the CUDA backend only
    pub(crate) fn forced(self) -> Option<bool> {
        match self {
            RegionBuild::Auto => None,
            RegionBuild::Never => Some(false),
            RegionBuild::Always | RegionBuild::TwoPass => Some(true),
        }
    }

    /// Whether the partition takes two passes for three regions or more.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn two_pass(self) -> bool {
        self == RegionBuild::TwoPass
    }
}
