//! # gpuhash
//!
//! Hash tables for GPUs that are just as usable from the CPU: one bulk-first
//! API over a CPU backend (all cores, atomic) and GPU backends (CUDA, and
//! WGSL through wgpu for any GPU or a browser) that share its slot layout,
//! hash function and probe order, so results agree bit for bit and the CPU
//! backend doubles as the reference for GPU results.
//!
//! * Keys `u32`/`u64`, values `u32 u64 i32 i64 f32 f64`; **every key value is
//!   legal** (slot markers are handled out of band).
//! * Bulk insert-or-assign, insert-if-absent, insert-or-apply (`Sum`, `Min`,
//!   `Max`), find, contains, erase; growth or exact reporting of the keys a
//!   full table could not store.
//!
//! ```
//! use gpuhash::{Device, HashTable, Reduce};
//!
//! // The fastest device present; falls back to the CPU.
//! let mut counts = HashTable::<u64, u32>::new(Device::best_available(), 1 << 16)?;
//! let kmers: Vec<u64> = vec![7, 7, 42, 0, u64::MAX, 7];
//! counts.insert_or_apply(&kmers, &vec![1; kmers.len()], Reduce::Sum)?;
//! assert_eq!(counts.get(7)?, Some(3));
//! assert_eq!(counts.get(u64::MAX)?, Some(1));
//! # Ok::<(), gpuhash::Error>(())
//! ```
//!
//! Layers, bottom up: [`core`] (layout, hash, probe sequence, capacity math;
//! pure), [`backend`] (the slot work per device), and [`HashTable`].

// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod backend;
pub mod core;
mod device;
mod error;
pub mod fault;
mod growth;
mod memory;
mod region_build;
pub mod routed;
mod table;

/// The cudarc version gpuhash is built with, for device buffers and streams.
#[cfg(feature = "cuda")]
pub use cudarc;
/// The wgpu version gpuhash is built with (adapter information).
#[cfg(feature = "wgpu")]
pub use wgpu;

pub use crate::core::keys::{Key, Reduce, Value, ValueKind};
pub use crate::core::scheme::Scheme;
pub use device::Device;
pub use error::{Error, NotStored, Result};
pub use memory::Memory;
pub use region_build::RegionBuild;
pub use routed::paged::{Paging, PagingStats, Residency};
pub use routed::sharded::Sharding;
pub use table::{Builder, HashTable, InsertReport, Stats};
