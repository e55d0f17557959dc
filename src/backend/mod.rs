//! Backends: where a table's slots live and how bulk operations run on them.
//!
//! Every backend implements [`Backend`] with the same layout, hash and probe
//! order (see [`crate::core`]); the table API on top adds argument checks
//! and growth, so backends only do the slot work.

use crate::core::keys::{Key, Reduce, Value};
use crate::core::scheme::Scheme;
use crate::{Device, Error, Memory, RegionBuild, Result};

pub mod cpu;
pub(crate) mod hashinator;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "wgpu")]
pub mod wgpu;

/// How an insert treats a key that is already present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertMode {
    /// Overwrite the stored value.
    Assign,
    /// Leave the stored value alone.
    IfAbsent,
    /// Combine the stored value with the new one.
    Apply(Reduce),
}

/// What one backend insert call did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RawInsert {
    /// Keys that were not present before.
    pub inserted: u64,
    /// Keys that were present (or appeared earlier in the batch).
    pub existing: u64,
    /// Batch positions that found no free slot within the probe limit, ascending.
    pub failed: Vec<usize>,
}

/// Stores one out-of-band key's value (`slot`: the key's host-side cell) as
/// an insert of `mode` would, counting it in `out`. Every backend keeps keys
/// equal to its slot markers on the host and applies them in batch order
/// through this one rule.
pub(crate) fn apply_special<V: Value>(slot: &mut Option<V>, v: V, mode: InsertMode, out: &mut RawInsert) {
    match (*slot, mode) {
        (None, _) => {
            *slot = Some(v);
            out.inserted += 1;
        }
        (Some(_), InsertMode::Assign) => {
            *slot = Some(v);
            out.existing += 1;
        }
        (Some(_), InsertMode::IfAbsent) => out.existing += 1,
        (Some(old), InsertMode::Apply(op)) => {
            *slot = Some(V::reduce(op, old, v));
            out.existing += 1;
        }
    }
}

/// Table configuration fixed at creation (and kept across rehashes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Slots (a multiple of the bucket size).
    pub slots: u64,
    /// Probe limit in buckets (clamped to the bucket count by backends).
    pub max_probe_buckets: u64,
    /// Hash seed.
    pub seed: u64,
    /// Where keys may be placed.
    pub scheme: Scheme,
    /// Where the slots live (kept across rehashes).
    pub memory: Memory,
    /// When bulk inserts take the region build (CUDA linear scheme only).
    pub region_build: RegionBuild,
    /// wgpu: keep to 32-bit atomics even where the adapter has 64-bit ones.
    pub wgpu_portable: bool,
}

/// The slot work of a table. Implemented once per device.
///
/// **A call that returns an error has stored nothing and changed nothing**
/// (`insert`, `erase`, `clear`, `rehash`, `clean_tombstones`): the table's
/// keys, values and counts are as they were, and it stays usable. The table
/// API relies on this to report exactly what a bulk call stored
/// ([`Error::GrowthFailed`]). So every allocation an operation needs is made
/// before its first write (each one passes [`crate::fault`]'s allocation
/// point), and an allocation that comes later has a fallback that still
/// completes the operation (the CUDA region build's scratch, the lists of
/// refused positions, the cleaning's fallback rebuild). Only a failing
/// device (a driver error mid-call) may break this.
#[allow(clippy::len_without_is_empty)] // the table API offers is_empty
pub trait Backend<K: Key, V: Value>: Send + Sync + 'static {
    /// For reaching a backend's own API (device buffers, views).
    fn as_any(&self) -> &dyn std::any::Any;
    /// Mutable form of [`Backend::as_any`].
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
    /// Where the slots live.
    fn device(&self) -> Device;
    /// The placement scheme.
    fn scheme(&self) -> Scheme;
    /// Number of slots.
    fn slots(&self) -> u64;
    /// Live keys, including those stored out of band.
    fn len(&self) -> u64;
    /// What the load limit counts: live keys (out-of-band ones included, so
    /// `len / slots` never passes the maximum load) plus tombstones.
    fn used(&self) -> u64;
    /// Live keys stored out of band (0, 1 or 2).
    fn out_of_band(&self) -> u64;
    /// Erased slots not yet reclaimed.
    fn tombstones(&self) -> u64;
    /// Inserts a batch (`keys.len() == values.len()`, checked by the caller).
    fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert>;
    /// Looks up a batch; writes values (zero bits when absent) and the found
    /// mask, returns how many were found.
    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64>;
    /// Marks which keys are present; returns how many are.
    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64>;
    /// Erases a batch; returns how many keys were removed.
    fn erase(&mut self, keys: &[K]) -> Result<u64>;
    /// Removes everything, keeping the slot count.
    fn clear(&mut self) -> Result<()>;
    /// Rebuilds into `slots` slots (dropping tombstones). On error the table
    /// is unchanged.
    fn rehash(&mut self, slots: u64) -> Result<()>;
    /// Drops every tombstone, keeping the slot count. The default rebuilds
    /// the table (a rehash at the same size); schemes with a cheaper way
    /// (Hashinator's compaction of displaced keys) override it. No key is
    /// ever lost: should a key find no slot within the probe limit again,
    /// the table is rebuilt, at a larger size if it must be; should that
    /// rebuild find no memory, the key goes to the first EMPTY slot of its
    /// sequence however far, and until its next rehash the table probes the
    /// whole table (lookups still stop at an EMPTY slot).
    fn clean_tombstones(&mut self) -> Result<()> {
        self.rehash(self.slots())
    }
    /// Every stored pair, in no particular order.
    fn export(&self) -> Result<(Vec<K>, Vec<V>)>;
    /// Sum of probe displacements of the keys in slots and the largest one,
    /// in buckets (0 = found in its home bucket).
    fn displacement(&self) -> Result<(u64, u64)>;
}

/// Creates the backend for `device`.
pub(crate) fn create<K: Key, V: Value>(device: Device, config: Config) -> Result<Box<dyn Backend<K, V>>> {
    if config.memory == Memory::Unified && !matches!(device, Device::Cuda(_)) {
        return Err(Error::Unsupported(format!("Memory::Unified needs a CUDA device, not {device}")));
    }
    match device {
        Device::Cpu => Ok(Box::new(cpu::CpuTable::<K, V>::new(config)?)),
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => Ok(Box::new(cuda::CudaTable::<K, V>::new(i, config)?)),
        #[cfg(feature = "wgpu")]
        Device::Wgpu | Device::WgpuAdapter(_) => Ok(Box::new(wgpu::WgpuTable::<K, V>::new(device, config)?)),
        // Reached only by devices whose feature is off.
        #[allow(unreachable_patterns)]
        other => Err(unavailable(other)),
    }
}

fn unavailable(device: Device) -> Error {
    match device.check_available() {
        Err(e) => e,
        Ok(()) => Error::Unavailable { device: device.to_string(), reason: "no backend".into() },
    }
}

/// Whether CUDA device `ordinal` can be used.
pub(crate) fn cuda_available(ordinal: usize) -> Result<()> {
    #[cfg(feature = "cuda")]
    {
        cuda::available(ordinal)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(Error::Unavailable {
            device: Device::Cuda(ordinal).to_string(),
            reason: "gpuhash was built without the `cuda` feature".into(),
        })
    }
}

/// Whether the default wgpu adapter (`None`) or adapter `index` can be used.
pub(crate) fn wgpu_available(index: Option<usize>) -> Result<()> {
    #[cfg(feature = "wgpu")]
    {
        wgpu::available(index)
    }
    #[cfg(not(feature = "wgpu"))]
    {
        Err(Error::Unavailable {
            device: index.map_or(Device::Wgpu, Device::WgpuAdapter).to_string(),
            reason: "gpuhash was built without the `wgpu` feature".into(),
        })
    }
}

/// Whether the wgpu backend implements `scheme`.
pub(crate) fn wgpu_scheme(scheme: Scheme) -> Result<()> {
    #[cfg(feature = "wgpu")]
    {
        wgpu::check_scheme(scheme)
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = scheme;
        wgpu_available(None)
    }
}
