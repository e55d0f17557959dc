//! Allocation fault injection, for tests that a failed allocation loses
//! nothing.
//!
//! Every allocation of table memory or call scratch that happens before an
//! operation changes the table, on every backend, first asks this module;
//! while a [`FailAllocations`] guard lives, the allocations it names fail
//! with [`Error::OutOfMemory`](crate::Error::OutOfMemory) as if the memory
//! were not there. Allocations are counted process-wide (they happen per
//! call, never per key, so the count costs nothing measurable), so a test
//! enumerates the allocation points of an operation by failing the first,
//! then the second, and so on, until the operation completes:
//!
//! ```
//! use gpuhash::{fault, Device, Error, HashTable};
//!
//! let mut t = HashTable::<u32, u32>::new(Device::Cpu, 64)?;
//! t.insert_or_assign(&[1, 2, 3], &[10, 20, 30])?;
//! for k in 0.. {
//!     let before = fault::allocations();
//!     let guard = fault::FailAllocations::new(k, 1);
//!     let result = t.rehash(4096);
//!     drop(guard);
//!     match result {
//!         Err(Error::OutOfMemory { .. }) => assert_eq!(t.capacity(), 64, "unchanged"),
//!         other => other?,
//!     }
//!     assert_eq!(t.find(&[1, 2, 3])?, vec![Some(10), Some(20), Some(30)]);
//!     if fault::allocations() - before <= k {
//!         break; // the operation made fewer than k + 1 allocations: all were tried
//!     }
//! }
//! # Ok::<(), gpuhash::Error>(())
//! ```
//!
//! The guard is process-wide: a test that uses it must keep other table
//! work in the process from running meanwhile (a lock shared by its tests).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// Allocations asked for since the process started.
static COUNT: AtomicU64 = AtomicU64::new(0);
/// Allocations numbered in `[FAIL_FROM, FAIL_TO)` fail.
static FAIL_FROM: AtomicU64 = AtomicU64::new(u64::MAX);
static FAIL_TO: AtomicU64 = AtomicU64::new(0);
/// Allocations failed on purpose since the process started.
static INJECTED: AtomicU64 = AtomicU64::new(0);

/// Allocations the backends have asked for since the process started.
pub fn allocations() -> u64 {
    COUNT.load(Ordering::SeqCst)
}

/// Allocations failed on purpose since the process started.
pub fn injected() -> u64 {
    INJECTED.load(Ordering::SeqCst)
}

/// While alive, fails `count` allocations after letting `skip` more through.
#[derive(Debug)]
#[must_use = "the failures are armed only while the guard lives"]
pub struct FailAllocations {
    _private: (),
}

impl FailAllocations {
    /// Fails allocations `skip .. skip + count`, counted from now.
    pub fn new(skip: u64, count: u64) -> FailAllocations {
        let now = COUNT.load(Ordering::SeqCst);
        FAIL_TO.store(now.saturating_add(skip).saturating_add(count), Ordering::SeqCst);
        FAIL_FROM.store(now.saturating_add(skip), Ordering::SeqCst);
        FailAllocations { _private: () }
    }
}

impl Drop for FailAllocations {
    fn drop(&mut self) {
        FAIL_FROM.store(u64::MAX, Ordering::SeqCst);
        FAIL_TO.store(0, Ordering::SeqCst);
    }
}

/// Counts one allocation of `bytes` on `device`; fails it if a guard says so.
pub(crate) fn check(bytes: u64, device: impl std::fmt::Display) -> Result<()> {
    let n = COUNT.fetch_add(1, Ordering::SeqCst);
    if n >= FAIL_FROM.load(Ordering::SeqCst) && n < FAIL_TO.load(Ordering::SeqCst) {
        INJECTED.fetch_add(1, Ordering::SeqCst);
        return Err(Error::OutOfMemory { bytes, device: device.to_string() });
    }
    Ok(())
}
