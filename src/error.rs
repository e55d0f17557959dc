//! The one error type of the crate.

use crate::InsertReport;

/// Everything that can go wrong, for every backend.
///
/// Errors never leave a table half-modified in a way that loses data: a
/// failed bulk call has either changed nothing, or (for [`Error::TableFull`])
/// stored exactly the keys it does not list.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A capacity of zero slots was asked for.
    #[error("capacity must be at least 1 slot")]
    ZeroCapacity,
    /// A capacity beyond what any machine could hold was asked for.
    #[error("capacity of {requested} slots exceeds the maximum of {max} slots")]
    CapacityTooLarge {
        /// Slots asked for.
        requested: u64,
        /// Largest accepted slot count.
        max: u64,
    },
    /// The maximum load factor is not in `(0, 1]`.
    #[error("maximum load factor {0} must be in (0, 1]")]
    InvalidLoadFactor(f64),
    /// The probe limit is zero.
    #[error("the probe limit must be at least one bucket")]
    InvalidProbeLimit,
    /// Two slices of one bulk call differ in length.
    #[error("{op}: {keys} keys but {other} {what}")]
    LengthMismatch {
        /// The operation called.
        op: &'static str,
        /// Number of keys given.
        keys: usize,
        /// Length of the other slice.
        other: usize,
        /// What the other slice holds ("values", "outputs").
        what: &'static str,
    },
    /// Memory for the table or a staging buffer could not be allocated.
    #[error("out of memory: {bytes} bytes could not be allocated on {device}")]
    OutOfMemory {
        /// Size of the failed allocation.
        bytes: u64,
        /// Where (for example "cpu" or "cuda:0").
        device: String,
    },
    /// With growth off, some keys found no free slot within the probe limit
    /// (after the table reclaimed its tombstones, if it had any). Everything
    /// else in the batch was stored.
    #[error(
        "table full: {} of the batch's keys were not stored ({} new, {} existing were)",
        .0.positions.len(), .0.report.inserted, .0.report.existing
    )]
    TableFull(Box<NotStored>),
    /// With growth on, a bulk insert needed to grow the table part-way
    /// through and could not (`cause`, usually [`Error::OutOfMemory`]).
    /// Keys stored before the call stay stored; of the batch, exactly the
    /// positions in `not_stored` were not stored, everything else was. The
    /// table is usable, at its old size. (When the call could store nothing,
    /// it returns `cause` itself and the table is unchanged.) On a paged
    /// table the page that could not grow, even when redone alone, keeps
    /// its size, and what the other pages stored stays stored.
    #[error(
        "the table could not grow ({cause}): {} of the batch's keys were not stored ({} new, {} existing were)",
        not_stored.positions.len(), not_stored.report.inserted, not_stored.report.existing
    )]
    GrowthFailed {
        /// Why growing failed.
        cause: Box<Error>,
        /// What the call stored and which positions it did not.
        not_stored: Box<NotStored>,
    },
    /// A rehash could not place every key within the probe limit; the table
    /// was left as it was.
    #[error("rehash into {slots} slots left {unplaced} keys without a slot within the probe limit")]
    RehashFailed {
        /// Slots of the attempted table.
        slots: u64,
        /// Keys that found no slot.
        unplaced: u64,
    },
    /// The requested device or backend cannot be used here.
    #[error("{device} is unavailable: {reason}")]
    Unavailable {
        /// The device asked for.
        device: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The device reported an error.
    #[error("{device}: {message}")]
    Device {
        /// The device.
        device: String,
        /// What its driver said.
        message: String,
    },
    /// A shard of a sharded table, or the exchange that moves a batch
    /// between shards, failed: the shard (or exchange rank) and why. An
    /// exchange wait that passes the table's timeout reports the rank that
    /// sent nothing. Keys stored before the call stay stored; what the call
    /// itself stored is described where it is returned
    /// ([`crate::routed::sharded`]).
    #[error("shard {shard} failed: {reason}")]
    ShardFailed {
        /// The shard (exchange rank) that failed.
        shard: usize,
        /// What went wrong.
        reason: String,
    },
    /// The operation is not supported by this backend or scheme.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Error {
    /// The keys a bulk insert did not store, for [`Error::TableFull`] and
    /// [`Error::GrowthFailed`]; `None` for every other error.
    pub fn not_stored(&self) -> Option<&NotStored> {
        match self {
            Error::TableFull(n) => Some(n),
            Error::GrowthFailed { not_stored, .. } => Some(not_stored),
            _ => None,
        }
    }
}

/// The keys a bulk insert could not store (a full table with growth off, or
/// a table that could not grow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStored {
    /// What the call did store.
    pub report: InsertReport,
    /// Positions in the batch of the keys not stored, ascending.
    pub positions: Vec<usize>,
    /// Those keys, widened to `u64`, in the same order.
    pub keys: Vec<u64>,
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
