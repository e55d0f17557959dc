//! Fault injection: makes chosen allocations fail, for testing that a
//! failure loses nothing.
//!
//! Every allocation of table memory or of a call's scratch, in both
//! backends, first passes an *allocation point* here: the CPU backend's
//! cells, scheme words and cleaning buffer; the CUDA backend's slots,
//! scheme words, failure list, uploads of host batches, gather and position
//! lists, lookup outputs, staging buffers, region-build scratch and
//! cleaning buffers. While a [`FailAllocations`] guard is alive, the points
//! its thread passes are counted, and the chosen ones fail with
//! [`Error::OutOfMemory`] as if memory had run out. A test can so walk
//! through every allocation an operation makes (fail the first, then the
//! second, ... until the operation completes without reaching the injected
//! failure) and check each time that the operation either completed another
//! way or failed and left the table as it was.
//!
//! Guards are per thread: a guard counts and fails only the allocation
//! points of the thread that made it, and every allocation point runs on
//! the thread that called the table (none inside the parallel loops), so
//! tests that inject faults may run side by side. With no guard alive
//! anywhere an allocation point costs one relaxed atomic load (allocations
//! happen per call, never per key).
//!
//! ```
//! use gpuhash::{fault, Device, Error, HashTable};
//!
//! let mut t = HashTable::<u32, u32>::new(Device::Cpu, 1024)?;
//! t.insert_or_assign(&[1, 2, 3], &[10, 20, 30])?;
//! // The rehash's first allocation (the new cells) fails: nothing changes.
//! let guard = fault::fail_allocations(0, 1);
//! assert!(matches!(t.rehash(4096), Err(Error::OutOfMemory { .. })));
//! assert_eq!(guard.injected(), 1);
//! drop(guard);
//! assert_eq!((t.len(), t.capacity(), t.get(2)?), (3, 1024, Some(20)));
//! # Ok::<(), gpuhash::Error>(())
//! ```

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Device, Error, Result};

/// Guards alive in the process: allocation points look no further while 0.
static GUARDS: AtomicUsize = AtomicUsize::new(0);

/// A thread's injection plan: points numbered from 0 as they are passed,
/// those in `fail` fail.
#[derive(Clone, Copy)]
struct Plan {
    armed: bool,
    seen: u64,
    fail: (u64, u64),
    injected: u64,
}

const OFF: Plan = Plan { armed: false, seen: 0, fail: (0, 0), injected: 0 };

thread_local! {
    static PLAN: Cell<Plan> = const { Cell::new(OFF) };
}

/// Makes allocation point number `skip` (counting from 0, from now, on this
/// thread) and the `count - 1` after it fail with [`Error::OutOfMemory`],
/// until the returned guard is dropped. `count` 0 fails none and only
/// counts. Guards nest (drop them in reverse order); the newest one decides.
pub fn fail_allocations(skip: u64, count: u64) -> FailAllocations {
    let plan = Plan { armed: true, seen: 0, fail: (skip, skip.saturating_add(count)), injected: 0 };
    let prev = PLAN.with(|p| p.replace(plan));
    GUARDS.fetch_add(1, Ordering::Relaxed);
    FailAllocations { prev, _thread: PhantomData }
}

/// Counts this thread's allocation points without failing any, until the
/// guard is dropped: `fail_allocations(0, 0)`.
pub fn count_allocations() -> FailAllocations {
    fail_allocations(0, 0)
}

/// Allocation points this thread has passed since its newest guard was
/// made (0 with no guard).
pub fn allocations() -> u64 {
    PLAN.with(|p| p.get().seen)
}

/// Injects allocation failures on its thread while alive (see
/// [`fail_allocations`]).
#[must_use = "failures are injected only while the guard is alive"]
pub struct FailAllocations {
    prev: Plan,
    /// Per thread: the guard must be dropped where it was made.
    _thread: PhantomData<*const ()>,
}

impl FailAllocations {
    /// Allocation points passed since this guard was made.
    pub fn allocations(&self) -> u64 {
        allocations()
    }

    /// Failures injected since this guard was made.
    pub fn injected(&self) -> u64 {
        PLAN.with(|p| p.get().injected)
    }
}

impl Drop for FailAllocations {
    fn drop(&mut self) {
        PLAN.with(|p| p.set(self.prev));
        GUARDS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The allocation point every allocation of table memory or call scratch
/// passes first: `bytes` about to be allocated on `device`. Fails only when
/// a guard on this thread says so.
#[inline]
pub(crate) fn alloc_point(bytes: u64, device: Device) -> Result<()> {
    // Relaxed suffices: a guard only acts on its own thread, which sees its own increment.
    if GUARDS.load(Ordering::Relaxed) == 0 {
        return Ok(());
    }
    injected(bytes, device)
}

#[cold]
fn injected(bytes: u64, device: Device) -> Result<()> {
    PLAN.with(|p| {
        let mut plan = p.get();
        if !plan.armed {
            return Ok(());
        }
        let n = plan.seen;
        plan.seen += 1;
        let fail = (plan.fail.0..plan.fail.1).contains(&n);
        plan.injected += fail as u64;
        p.set(plan);
        if fail {
            Err(Error::OutOfMemory { bytes, device: device.to_string() })
        } else {
            Ok(())
        }
    })
}

/// How an injected exchange fault acts on the rank it is aimed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeFault {
    /// The rank's sends fail at once ([`Error::ShardFailed`] naming it).
    Fail,
    /// The rank sends nothing, as a stalled GPU would: the ranks waiting
    /// for it give up after the table's exchange timeout and report it.
    Stall,
}

/// A thread's exchange injection plan: transfers numbered from 0 as they
/// start; transfer `call` meets `how` at `rank`.
#[derive(Clone, Copy)]
struct ExchangePlan {
    armed: bool,
    seen: u64,
    call: u64,
    rank: usize,
    how: ExchangeFault,
    injected: u64,
}

const EXCHANGE_OFF: ExchangePlan =
    ExchangePlan { armed: false, seen: 0, call: 0, rank: 0, how: ExchangeFault::Fail, injected: 0 };

thread_local! {
    static EXCHANGE: Cell<ExchangePlan> = const { Cell::new(EXCHANGE_OFF) };
}

/// Makes `rank` fail or stall (`how`) in transfer number `call` (counting
/// from 0, from now, on this thread) of a sharded table's exchange, until
/// the returned guard is dropped. Each all-to-all is two transfers (the
/// counts, then the data), and a bulk call makes two all-to-alls (the
/// batch out to the shards, the results back), so transfers 0 and 1 fail
/// a call before any shard has worked on it. Guards nest; the newest one
/// decides. Like [`fail_allocations`], per thread.
pub fn fail_exchange(rank: usize, call: u64, how: ExchangeFault) -> FailExchange {
    let plan = ExchangePlan { armed: true, seen: 0, call, rank, how, injected: 0 };
    let prev = EXCHANGE.with(|p| p.replace(plan));
    GUARDS.fetch_add(1, Ordering::Relaxed);
    FailExchange { prev, _thread: PhantomData }
}

/// Injects an exchange fault on its thread while alive (see [`fail_exchange`]).
#[must_use = "faults are injected only while the guard is alive"]
pub struct FailExchange {
    prev: ExchangePlan,
    _thread: PhantomData<*const ()>,
}

impl FailExchange {
    /// Transfers started since this guard was made.
    pub fn transfers(&self) -> u64 {
        EXCHANGE.with(|p| p.get().seen)
    }
    /// Faults injected since this guard was made (0 or 1).
    pub fn injected(&self) -> u64 {
        EXCHANGE.with(|p| p.get().injected)
    }
}

impl Drop for FailExchange {
    fn drop(&mut self) {
        EXCHANGE.with(|p| p.set(self.prev));
        GUARDS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The point every exchange transfer passes as it starts: the rank and
/// fault to inject in this transfer, if a guard on this thread says so.
#[inline]
pub(crate) fn exchange_point() -> Option<(usize, ExchangeFault)> {
    if GUARDS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    EXCHANGE.with(|p| {
        let mut plan = p.get();
        if !plan.armed {
            return None;
        }
        let hit = plan.seen == plan.call;
        plan.seen += 1;
        plan.injected += hit as u64;
        p.set(plan);
        hit.then_some((plan.rank, plan.how))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chosen_points_fail_and_guards_restore_the_outer_plan() {
        assert!(alloc_point(8, Device::Cpu).is_ok(), "no guard: nothing fails");
        let outer = fail_allocations(1, 2);
        assert!(alloc_point(8, Device::Cpu).is_ok());
        assert!(matches!(alloc_point(8, Device::Cpu), Err(Error::OutOfMemory { bytes: 8, .. })));
        {
            let inner = count_allocations();
            assert!(alloc_point(8, Device::Cpu).is_ok());
            assert_eq!((inner.allocations(), inner.injected()), (1, 0));
        }
        assert!(alloc_point(8, Device::Cpu).is_err(), "the outer plan goes on where it was");
        assert!(alloc_point(8, Device::Cpu).is_ok());
        assert_eq!((outer.allocations(), outer.injected()), (4, 2));
        // Other threads are not affected.
        std::thread::spawn(|| assert!(alloc_point(8, Device::Cpu).is_ok())).join().unwrap();
        drop(outer);
        assert_eq!(allocations(), 0);
        assert!(alloc_point(8, Device::Cpu).is_ok());
    }
}
