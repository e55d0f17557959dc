//! The paged table: a table larger than the device, kept as fixed-count
//! pages in host memory, a few of them resident at a time (Starfish).
//!
//! ```text
//!   host memory (every page, authoritative unless resident and dirty)
//!   +--------+--------+--------+--------+--------+--------+
//!   | page 0 | page 1 | page 2 | page 3 | page 4 | page 5 |   Router: key -> page
//!   +--------+--------+--------+--------+--------+--------+
//!        page in |  ^ write back (dirty pages only)
//!                v  |
//!   resident slots (the device budget): [ slot 0: page 4 ] [ slot 1: page 1* ]
//!                                                         (* dirty)
//! ```
//!
//! Each page is an ordinary table of the chosen scheme (every operation and
//! every scheme works inside a page). A bulk operation partitions its batch
//! by page ([`super::Partition`]), works on the pages that are resident
//! first, then brings the others in, in ascending order, each into a free
//! slot or the slot of the page the residency policy evicts
//! ([`Residency::Hot`], the default, which keeps the pages the call has
//! the most keys on; [`Residency::Fifo`], as Starfish; or
//! [`Residency::Lru`]). An evicted page is written back only if it changed
//! while resident.
//!
//! **On CUDA** each host page is a CPU table whose cells are page-locked
//! (registered with the driver), and a resident slot is a CUDA table of the
//! same scheme: a page moves between them as raw bytes, one asynchronous
//! copy on the resident table's stream, so the next operation's kernels
//! follow the upload on that stream while other slots compute or copy. Bulk
//! calls are pipelined by default ([`Paging::pipelined`]): the next page's
//! upload is enqueued before the current page is worked on, and a page the
//! call is done with is written back at once (its download overlaps the
//! next page's upload and kernels) when the rest of the call needs its slot.
//! A host page waits for a download still in flight before any use. A page
//! that cannot be page-locked is an error when the table is built
//! ([`crate::Error::OutOfMemory`] naming pinned host memory).
//!
//! **Sparse pages**: a page a call touches with so few keys that they cost
//! less than the page's bytes on the bus ([`Paging::sparse`],
//! [`Paging::zero_copy`]) is worked on where it lies in host memory, by the
//! host's cores or, for lookups split on the GPU, by the pages' lookup
//! kernels reading their page-locked cells; it is neither brought in nor
//! evicts another, so the pages a skewed workload keeps hot stay resident.
//!
//! **Lookups shared with the host** ([`Paging::host_lookups`]): a lookup
//! split on the GPU hands some of the pages that are not resident (the
//! sparse ones and those it would bring in) to the host's cores, which look
//! them up in host memory on a thread of their own while the GPU works on
//! the others, chosen per group by the GPU's bus bytes against the host's
//! keys at rates measured on earlier groups.
//!
//! **On the CPU** the host pages are CPU tables and a resident slot holds a
//! working copy of its page, also in host memory: the copies, evictions and
//! write-backs are real (a dirty page that were not written back would lose
//! its changes), so the residency logic the CUDA path shares is the one
//! the conformance suite checks on every machine. Should a working copy
//! find no memory (on either device), the operation works on the page where
//! it lies in host memory instead ([`PagingStats::served_in_host`]), so
//! bringing a page in never fails a call.
//!
//! **Growth**: the page count is fixed when the table is built (the initial
//! capacity split evenly), so a key's page never changes. A page that
//! reaches its maximum load is rebuilt larger by itself, through the same
//! growth loop as a single table (`src/growth.rs`); the other pages are
//! not touched. With growth off, each page refuses exactly the keys it has
//! no slot for. Should a page fail to grow (no memory), the paged table
//! writes back and frees its other resident pages and redoes that page's
//! insert alone once; what still fails is reported exactly
//! ([`crate::Error::GrowthFailed`]) and everything else in the batch, and
//! everything stored before, stays stored.

use std::sync::{Arc, Mutex, MutexGuard};

use super::{Access, Router, SubTables};
use crate::backend::cpu::CpuTable;
use crate::backend::{Backend, Config, InsertMode, RawInsert};
use crate::core::keys::{Key, Value};
use crate::core::scheme::Scheme;
use crate::growth::{checked_slots, Policy};
use crate::table::InsertReport;
use crate::{Device, Error, Memory, Result};

/// Which resident page gives its slot to a page brought in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Residency {
    /// A page the current call has not used, else one with fewer than
    /// twice the call's keys of the page coming in (each time the one used
    /// longest ago), else the one with the fewest of its keys. A skewed workload's hot
    /// pages then stay resident while its colder pages take turns in the
    /// other slots; under FIFO and LRU the pages a call brings in last
    /// push out the hot ones it worked on first (resident pages are served
    /// first), and the next call brings them back. On an H200, hot-page
    /// lookups over a table 8x its budget kept 77-80 million of a call's
    /// 134 million keys on resident pages, against 27 million under FIFO;
    /// both ran 1.03-1.07 billion lookups a second there, since the 21
    /// pages the GPU served each call outnumbered its 8 slots
    /// (BENCHMARKS.md).
    #[default]
    Hot,
    /// The page brought in longest ago (Starfish's policy).
    Fifo,
    /// The page used longest ago.
    Lru,
}

/// How a paged table splits and holds its slots (see
/// [`Builder::paged`](crate::Builder::paged)).
///
/// ```
/// use gpuhash::{Device, HashTable, Paging, Residency};
///
/// // 8 pages, at most 2 resident at a time, least recently used evicted
/// // (the default keeps the pages each call has the most keys on).
/// let paging = Paging::new(8, 2).residency(Residency::Lru);
/// let mut t = HashTable::<u64, u32>::builder()
///     .device(Device::Cpu)
///     .capacity(1 << 12)
///     .paged(paging)
///     .build()?;
/// let keys: Vec<u64> = (0..10_000).collect();
/// t.insert_or_assign(&keys, &vec![7; keys.len()])?; // pages grow alone
/// assert_eq!(t.get(1234)?, Some(7));
/// let paged = t.paged().unwrap();
/// assert_eq!(paged.pages(), 8);
/// assert!(paged.stats().page_ins >= 8);
/// # Ok::<(), gpuhash::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Paging {
    /// Number of pages (at least 1). The table's initial capacity is split
    /// evenly among them; the count never changes.
    pub pages: u32,
    /// Pages that may be resident at once: the device-memory budget, in
    /// page slots (1 to `pages`).
    pub resident: u32,
    /// Which resident page is evicted to bring another in.
    pub residency: Residency,
    /// Whether bulk calls pipeline their pages (see [`Paging::pipelined`]);
    /// `None`: where copies overlap work, which is on a GPU.
    pub pipeline: Option<bool>,
    /// On CUDA, bulk calls of at least this many keys are split by page on
    /// the device (see [`Paging::device_split`]); `None`: 65,536.
    pub device_split: Option<usize>,
    /// The cost of a key worked on in host memory, in bus bytes, against
    /// which a page a call touches with few keys is not brought in (see
    /// [`Paging::sparse`]); `None`: [`Paging::SPARSE_BYTES_PER_KEY`] on
    /// CUDA, never on the CPU.
    pub sparse: Option<u64>,
    /// The same cost for a key a lookup split on the device reads from a
    /// page in host memory with the GPU (see [`Paging::zero_copy`]);
    /// `None`: [`Paging::ZERO_COPY_BYTES_PER_KEY`].
    pub zero_copy: Option<u64>,
    /// Whether lookups split on the device look the keys of some pages
    /// that are not resident up on the host's cores, beside the GPU's work
    /// on their other pages (see [`Paging::host_lookups`]); `None`: yes.
    pub host_lookups: Option<bool>,
}

impl Paging {
    /// `pages` pages, `resident` of them resident at a time, the busiest
    /// pages kept ([`Residency::Hot`]). The page size is the capacity over
    /// `pages`; on a GPU, pages of 64-128 MiB keep a skewed workload's hot
    /// pages resident and stream bulk calls at the bus's pace (BENCHMARKS.md,
    /// "Paged tables: host pages on huge pages, and the page size").
    pub const fn new(pages: u32, resident: u32) -> Paging {
        Paging {
            pages,
            resident,
            residency: Residency::Hot,
            pipeline: None,
            device_split: None,
            sparse: None,
            zero_copy: None,
            host_lookups: None,
        }
    }
    /// The eviction policy (default [`Residency::Hot`]).
    pub const fn residency(mut self, residency: Residency) -> Paging {
        self.residency = residency;
        self
    }
    /// Pipelining: a bulk call writes each page it changed back as soon as
    /// it is done with it (when the pages it still visits need the slots)
    /// and brings the next page in before working on the current one, so
    /// on a GPU the upload of one page, the kernels on another and the
    /// write-back of a third run at once on different streams. Needs two
    /// resident pages to overlap anything, three for all three at once.
    /// On by default on CUDA; off by default on the CPU, where the copies
    /// take the same cores as the work (turning it on there runs the same
    /// residency decisions, as the tests do).
    pub const fn pipelined(mut self, on: bool) -> Paging {
        self.pipeline = Some(on);
        self
    }
    /// On CUDA, the smallest batch of any bulk operation (inserts with
    /// their growth, lookups, erases) that is split by page on the device:
    /// the keys (and values) go to the GPU once, a kernel groups them by
    /// page, each page's kernels run on its range (inserts grow the page
    /// alone, as on the host), and results come back in batch order, so
    /// the host makes one copy each way instead of partitioning, gathering
    /// and scattering the batch. Smaller batches are split on the host,
    /// where a few passes over them cost less than the launches and
    /// synchronisations. Default 65,536 keys; `usize::MAX` splits every
    /// batch on the host. A batch's device scratch (up to 22 bytes a key
    /// for `u32` keys and values) may reach the resident pages' bytes: the
    /// keys and results of a batch stay on the device while its pages are
    /// worked on in groups that fit the rest, so each page is visited once;
    /// only a batch whose keys and results alone pass three quarters of
    /// that is split in waves, each visiting the pages it touches. A split
    /// that finds no device memory for its scratch runs on the host
    /// instead. No effect on the CPU.
    pub const fn device_split(mut self, min_keys: usize) -> Paging {
        self.device_split = Some(min_keys);
        self
    }
    /// A page a call would bring in costs the bus its bytes (twice when
    /// the call changes it: it goes back). A page the call touches with so
    /// few keys that `keys * bytes_per_key` is less is worked on where it
    /// lies in host memory instead, by the host's cores, and is neither
    /// brought in nor evicts another ([`PagingStats::in_place`]); so a
    /// sparse batch, or the cold tail of a skewed one, leaves the hot
    /// pages resident. The keys of such a page (and the results) cross the
    /// bus when the batch was split on the device. `0` works on every
    /// non-resident page in place; `u64::MAX` brings every page in.
    /// Default: [`Paging::SPARSE_BYTES_PER_KEY`] on CUDA; on the CPU, where
    /// a resident page is itself a copy in host memory, pages are always
    /// brought in unless this is set.
    pub const fn sparse(mut self, bytes_per_key: u64) -> Paging {
        self.sparse = Some(bytes_per_key);
        self
    }
    /// The default of [`Paging::sparse`] on CUDA, from the crossover
    /// measured in BENCHMARKS.md.
    pub const SPARSE_BYTES_PER_KEY: u64 = 1024;
    /// [`Paging::sparse`] for lookups split on the device (CUDA,
    /// [`Paging::device_split`]): a page they touch with few keys is read
    /// where it lies in host memory by the page's own lookup kernel, over
    /// the bus (zero-copy, as NVIDIA's HierarchicalKV reads its values),
    /// so such a lookup moves the buckets it probes instead of the page.
    /// `bytes_per_key` is what a key costs that way, in bus bytes, on a
    /// page of at most [`Paging::ZERO_COPY_REACH`]; on a larger page the
    /// cost grows in proportion to its size.
    /// Default: [`Paging::ZERO_COPY_BYTES_PER_KEY`].
    pub const fn zero_copy(mut self, bytes_per_key: u64) -> Paging {
        self.zero_copy = Some(bytes_per_key);
        self
    }
    /// The default of [`Paging::zero_copy`], from the crossover measured
    /// in BENCHMARKS.md.
    pub const ZERO_COPY_BYTES_PER_KEY: u64 = 256;
    /// The page size past which zero-copy reads slow down. On an H100
    /// (PCIe 5.0), random 32-byte reads of pinned host memory ran at about
    /// 0.35 billion a second spread over 64-256 MiB, 0.21 over 683 MiB,
    /// 0.044 over 2 GiB and 0.031 over 8 GiB, however the memory was
    /// allocated (registered, driver-allocated or mapped in 2 MiB granules),
    /// so a lookup in place on a larger page costs more bus time a key.
    /// The cost a key of a page larger than this is scaled by the page's
    /// size over it: the crossover then stays at 2 million keys, where the
    /// library's own crossover measured 3.5 million on 683 MiB pages and
    /// 2.3 million on 2 GiB ones (BENCHMARKS.md). Pages read in place are
    /// read one at a time.
    pub const ZERO_COPY_REACH: u64 = 512 << 20;
    /// Who serves the pages a lookup split on the device (CUDA) finds not
    /// resident. `true` (the default): the host's cores and the GPU share
    /// them. The host looks its pages up in host memory on a thread of its
    /// own while the GPU works on the call's other pages: the resident
    /// ones, those worth bringing in and those read over the bus
    /// ([`Paging::zero_copy`] chooses). Each group of pages is split by
    /// cost: the GPU's time for a page is its bus bytes (the whole page
    /// for one brought in, a launch and `zero_copy` bytes a key for one
    /// read in place), the host's its keys, both at rates measured on
    /// earlier groups; the host takes the pages that save the GPU the most
    /// for its time as long as that ends the group sooner, so a slow host
    /// takes few pages and a hot page stays on the GPU. The bus carries
    /// only the host's keys and their results, and a page the host takes
    /// is neither brought in nor evicts another. `false`: the GPU brings in
    /// or reads over the bus (zero-copy) every page itself. On an H200
    /// with 16 host cores, bulk lookups over a table 8x its budget ran
    /// 1.18x, hot-page lookups 1.14x, the GPU alone's rate; on an H100
    /// with a slow host, hot pages ran 0.91x (BENCHMARKS.md). No effect on
    /// the CPU.
    pub const fn host_lookups(mut self, on: bool) -> Paging {
        self.host_lookups = Some(on);
        self
    }

    fn validate(&self) -> Result<()> {
        if self.pages == 0 || self.resident == 0 || self.resident > self.pages {
            return Err(Error::Unsupported(format!(
                "paging needs at least one page and 1 to {} resident pages, not {} of {}",
                self.pages, self.resident, self.pages
            )));
        }
        Ok(())
    }
}

/// What a paged table's residency manager did, counted since the table was
/// built (the counters only grow).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PagingStats {
    /// Pages copied into a resident slot.
    pub page_ins: u64,
    /// Evicted pages that had changed and were copied back to host memory.
    pub write_backs: u64,
    /// Pages that left their slot (written back or, when clean, dropped).
    pub evictions: u64,
    /// Operations on a page done where it lies in host memory, because no
    /// memory could be had for its working copy.
    pub served_in_host: u64,
    /// Page rebuilds that changed a page's slot count (growth, or a whole
    /// table rehash), one page at a time.
    pub pages_resized: u64,
    /// Non-resident pages a call worked on in host memory instead of
    /// bringing them in: too few keys to pay for the bus (see
    /// [`Paging::sparse`]), or looked up by the host's cores beside the
    /// GPU ([`Paging::host_lookups`]).
    pub in_place: u64,
}

/// A page in a resident slot.
struct Slot<K: Key, V: Value> {
    page: usize,
    table: Box<dyn Backend<K, V>>,
    /// Changed since it was brought in: must be written back on eviction.
    dirty: bool,
    /// Clock value when brought in (FIFO) and when last used (LRU, and
    /// whether the current call used it).
    loaded: u64,
    used: u64,
}

/// Moves pages between host memory and resident slots. The copies are
/// whole pages, byte for byte (the layout is the same on every backend).
trait Transport<K: Key, V: Value>: Send + Sync {
    /// A resident working copy of `host`, made in `spare` (a table that
    /// left its slot) when one is given, so its memory is reused.
    fn page_in(&self, host: &dyn Backend<K, V>, spare: Option<Box<dyn Backend<K, V>>>) -> Result<Box<dyn Backend<K, V>>>;
    /// Copies `resident` back into its host page, which it replaces in
    /// content and size; the resident copy stays valid. The copy may still
    /// be in flight on return: the host page waits for it before any use.
    /// On failure the host page is as it was.
    fn write_back(&self, resident: &dyn Backend<K, V>, host: &mut Arc<dyn Backend<K, V>>) -> Result<()>;
    /// Whether copies run alongside the work on other pages (a GPU's copy
    /// engines), which makes pipelining pay.
    fn overlaps(&self) -> bool;
    /// Whether resident pages live in memory of their own (a GPU's), so an
    /// operation that finds none there can still run on the host page.
    fn device_memory(&self) -> bool {
        self.overlaps()
    }
}

fn cpu_table<K: Key, V: Value>(t: &dyn Backend<K, V>) -> Result<&CpuTable<K, V>> {
    t.as_any().downcast_ref::<CpuTable<K, V>>().ok_or_else(|| Error::Unsupported("host pages are CPU tables".into()))
}

/// Copies `from`'s cells, scheme words and counts into `to`, which has as
/// many slots.
fn copy_cpu_page<K: Key, V: Value>(from: &CpuTable<K, V>, to: &mut CpuTable<K, V>) {
    let (src, n) = from.cell_bytes();
    let (dst, m) = to.cell_bytes_mut();
    assert_eq!(n, m, "pages of the same slot count");
    // Safety: two distinct live allocations of `n` bytes; `to` is borrowed
    // mutably, so nothing else reads or writes it meanwhile.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    to.set_aux_words(&from.aux_words());
    to.set_counts(from.counts());
}

/// The CPU's transport: copies within host memory.
struct CpuTransport;

impl<K: Key, V: Value> Transport<K, V> for CpuTransport {
    fn page_in(&self, host: &dyn Backend<K, V>, spare: Option<Box<dyn Backend<K, V>>>) -> Result<Box<dyn Backend<K, V>>> {
        let host = cpu_table(host)?;
        if let Some(mut spare) = spare {
            if let Some(t) = spare.as_any_mut().downcast_mut::<CpuTable<K, V>>() {
                if t.slots() == host.slots() {
                    copy_cpu_page(host, t);
                    return Ok(spare);
                }
            }
        }
        Ok(Box::new(host.try_clone()?))
    }
    fn write_back(&self, resident: &dyn Backend<K, V>, host: &mut Arc<dyn Backend<K, V>>) -> Result<()> {
        let from = cpu_table(resident)?;
        match Arc::get_mut(host).and_then(|h| h.as_any_mut().downcast_mut::<CpuTable<K, V>>()) {
            Some(to) if to.slots() == from.slots() => copy_cpu_page(from, to),
            _ => *host = Arc::new(from.try_clone()?),
        }
        Ok(())
    }
    fn overlaps(&self) -> bool {
        false
    }
}

/// The CUDA transport: host pages in pinned memory, resident pages in
/// device tables, copies on each resident table's stream.
#[cfg(feature = "cuda")]
struct CudaTransport(crate::backend::cuda::paging::CudaPages);

#[cfg(feature = "cuda")]
impl<K: Key, V: Value> Transport<K, V> for CudaTransport {
    fn page_in(&self, host: &dyn Backend<K, V>, spare: Option<Box<dyn Backend<K, V>>>) -> Result<Box<dyn Backend<K, V>>> {
        use crate::backend::cuda::{paging::HostPage, CudaTable};
        let host = host.as_any().downcast_ref::<HostPage<K, V>>().ok_or_else(|| Error::Unsupported("not a pinned page".into()))?;
        if let Some(mut spare) = spare {
            if let Some(t) = spare.as_any_mut().downcast_mut::<CudaTable<K, V>>() {
                t.load_page(host)?;
                return Ok(spare);
            }
        }
        Ok(Box::new(self.0.page_in(host)?))
    }
    fn write_back(&self, resident: &dyn Backend<K, V>, host: &mut Arc<dyn Backend<K, V>>) -> Result<()> {
        use crate::backend::cuda::{paging::HostPage, CudaTable};
        let from = resident.as_any().downcast_ref::<CudaTable<K, V>>().ok_or_else(|| Error::Unsupported("not a CUDA page".into()))?;
        let to = Arc::get_mut(host)
            .and_then(|h| h.as_any_mut().downcast_mut::<HostPage<K, V>>())
            .ok_or_else(|| Error::Unsupported("not a pinned page, or one lent to a lookup".into()))?;
        from.store_page(to)
    }
    fn overlaps(&self) -> bool {
        true
    }
}

/// The pages and the residency manager.
struct PageSet<K: Key, V: Value> {
    router: Router,
    /// Shared only while a lookup reads pages in place on the host beside
    /// its GPU work ([`SubTables::lend`]), which changes none of them.
    host: Vec<Arc<dyn Backend<K, V>>>,
    /// `paging.resident` slots, each empty or holding one page.
    slots: Vec<Option<Slot<K, V>>>,
    /// The slot of each page, if resident.
    slot_of: Vec<Option<usize>>,
    residency: Residency,
    /// Write pages back as soon as a call is done with them and bring the
    /// next page in before working on the current one.
    pipeline: bool,
    /// The pages the current call has yet to visit, in order (pipelining).
    upcoming: std::collections::VecDeque<usize>,
    /// A table that left its slot, kept to receive the next page.
    spare: Option<Box<dyn Backend<K, V>>>,
    /// Bus bytes a key worked on in host memory costs (see [`Paging::sparse`]),
    /// and one a lookup on the GPU reads from host memory ([`Paging::zero_copy`]).
    sparse: u64,
    zero_copy: u64,
    /// Bytes of a slot.
    slot_bytes: u64,
    /// The pages the current call works on in place (not brought in).
    in_place: Vec<bool>,
    /// Lend pages not resident to lookups that read them on the host ([`Paging::host_lookups`]).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    host_lookups: bool,
    clock: u64,
    /// The clock when the current call planned its visits: a page used
    /// since was used by this call ([`Residency::Hot`]).
    call_start: u64,
    /// Keys of the current call on each page it touches ([`Residency::Hot`]).
    call_keys: Vec<usize>,
    stats: PagingStats,
    transport: Box<dyn Transport<K, V>>,
}

impl<K: Key, V: Value> PageSet<K, V> {
    /// The up-to-date copy of page `i`: the resident one if any (clean or
    /// dirty), else the host page. Reading its counts needs no page-in.
    fn current(&self, i: usize) -> &dyn Backend<K, V> {
        match self.slot_of[i] {
            Some(s) => &*self.slots[s].as_ref().expect("slot_of names an occupied slot").table,
            None => &*self.host[i],
        }
    }

    /// Host page `i`, to change it. Pages are lent only within a lookup
    /// (which never changes its pages), so none is shared here.
    fn host_mut(page: &mut Arc<dyn Backend<K, V>>) -> &mut dyn Backend<K, V> {
        Arc::get_mut(page).expect("no host page is lent outside a lookup")
    }

    fn sum(&self, f: impl Fn(&dyn Backend<K, V>) -> u64) -> u64 {
        (0..self.host.len()).map(|i| f(self.current(i))).sum()
    }

    /// Copies slot `s`'s page back if it is dirty; it stays resident, clean.
    /// False if the copy failed (the page stays dirty).
    fn write_back(&mut self, s: usize) -> bool {
        let Some(slot) = self.slots[s].as_mut() else { return true };
        if !slot.dirty {
            return true;
        }
        match self.transport.write_back(&*slot.table, &mut self.host[slot.page]) {
            Ok(()) => {
                slot.dirty = false;
                self.stats.write_backs += 1;
                true
            }
            Err(_) => false,
        }
    }

    /// Empties slot `s`, writing its page back if dirty. False (and the page stays resident) if the write-back
    /// failed.
    fn evict(&mut self, s: usize) -> bool {
        if !self.write_back(s) {
            return false;
        }
        let Some(slot) = self.slots[s].take() else { return true };
        self.slot_of[slot.page] = None;
        self.stats.evictions += 1;
        // Pipelined, the next page comes into this table's memory (on a GPU
        // also onto its stream, behind the write-back just enqueued);
        // otherwise the memory goes back now.
        if self.pipeline {
            self.spare = Some(slot.table);
        }
        true
    }

    /// The slot to bring page `incoming` in: a free one, else the one the
    /// policy evicts among those not holding page `keep`.
    fn free_slot(&mut self, incoming: usize, keep: Option<usize>) -> Option<usize> {
        if let Some(free) = self.slots.iter().position(Option::is_none) {
            return Some(free);
        }
        // Smallest first: (used by this call, its keys if it has at least
        // twice the incoming page's keys of this call, clock). Hot: pages
        // the call has not used, then those not much busier than the
        // incoming one, each the one used longest ago (its write-back, if
        // any, is the likeliest to be done: a streaming call's pages have
        // about the same keys, and take their turns as under LRU), then
        // the one with the fewest keys.
        let busier = self.call_keys[incoming].saturating_mul(2);
        let key = |s: &Slot<K, V>| match self.residency {
            Residency::Fifo => (false, 0, s.loaded),
            Residency::Lru => (false, 0, s.used),
            Residency::Hot => {
                let this_call = s.used > self.call_start;
                let keys = self.call_keys[s.page];
                (this_call, if this_call && keys >= busier { keys } else { 0 }, s.used)
            }
        };
        let victim = (0..self.slots.len())
            .filter(|&s| self.slots[s].as_ref().is_some_and(|slot| Some(slot.page) != keep))
            .min_by_key(|&s| self.slots[s].as_ref().map(key))?;
        self.evict(victim).then_some(victim)
    }

    /// The slot for page `i` (brought in, evicting per the policy, but
    /// never page `keep`), or `None` when it must be worked on in host memory.
    fn bring_in(&mut self, i: usize, keep: Option<usize>) -> Option<usize> {
        let s = self.free_slot(i, keep)?;
        let table = match self.transport.page_in(&*self.host[i], self.spare.take()) {
            Ok(t) => t,
            Err(_) => return None,
        };
        self.clock += 1;
        self.slots[s] = Some(Slot { page: i, table, dirty: false, loaded: self.clock, used: self.clock });
        self.slot_of[i] = Some(s);
        self.stats.page_ins += 1;
        Some(s)
    }

    /// Pipelining: brings in the next page the call will visit while the
    /// current one (`current`) is worked on, if a slot other than its own
    /// can be had. A page that cannot come in now is brought in (or served
    /// in host memory) when its turn comes.
    fn prefetch(&mut self, current: usize) {
        if let Some(&next) = self.upcoming.front() {
            if self.slot_of[next].is_none() {
                self.bring_in(next, Some(current));
            }
        }
    }
}

impl<K: Key, V: Value> PageSet<K, V> {
    /// Evicts page `i` from slot `s` (written back if dirty), frees the
    /// device memory held for pages, and runs `f` on the host page.
    /// Should the write-back itself find no memory (a page that grew on
    /// the device needs a larger host page), the page stays resident and
    /// `cause` is returned: nothing was changed.
    fn serve_in_host<R>(
        &mut self,
        i: usize,
        s: usize,
        cause: Error,
        mut f: impl FnMut(&mut dyn Backend<K, V>) -> Result<(R, bool)>,
    ) -> Result<R> {
        if !self.evict(s) {
            return Err(cause);
        }
        self.spare = None;
        self.stats.served_in_host += 1;
        Ok(f(Self::host_mut(&mut self.host[i]))?.0)
    }
}

/// Whether `keys` keys of a page of `page_bytes` cost fewer bus bytes
/// worked on where the page lies (`per_key` each) than the page brought in
/// (and written back, for a change).
fn cheaper_in_place(keys: u64, per_key: u64, page_bytes: u64, access: Access) -> bool {
    if access == Access::ReadOnDevice {
        return keys.saturating_mul(zero_copy_per_key(per_key, page_bytes)) < page_bytes;
    }
    let bus = if access == Access::Write { page_bytes.saturating_mul(2) } else { page_bytes };
    keys.saturating_mul(per_key) < bus
}

/// The bus bytes a key the GPU reads in place from a page of `page_bytes`
/// costs: `per_key`, grown in proportion to the page past
/// [`Paging::ZERO_COPY_REACH`] (the reads slow down as they spread).
fn zero_copy_per_key(per_key: u64, page_bytes: u64) -> u64 {
    if page_bytes <= Paging::ZERO_COPY_REACH {
        return per_key;
    }
    u64::try_from(per_key as u128 * page_bytes as u128 / Paging::ZERO_COPY_REACH as u128).unwrap_or(u64::MAX)
}

/// The GPU's cost of a lookup in a resident page, in bus bytes: resident
/// lookups split on an H100 ran at about 5 billion a second, some 10 bytes
/// of a 55 GB/s bus each.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const RESIDENT_BYTES_PER_KEY: u64 = 8;
/// The GPU's cost of reading a page in place beside its keys' bytes: a
/// launch and a wait (some 20 microseconds of bus time).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const LAUNCH_BYTES: u64 = 1 << 20;

impl<K: Key, V: Value> SubTables<K, V> for PageSet<K, V> {
    fn router(&self) -> Router {
        self.router
    }

    /// Resident pages first (ascending), then the others (ascending).
    fn visit_order(&mut self, subs: Vec<usize>) -> Vec<usize> {
        self.visit_sized(subs, &|_| usize::MAX, Access::Read)
    }

    /// As `visit_order`, then the pages worked on in place (ascending):
    /// those not resident whose keys cost less in host memory than the
    /// page's bytes on the bus. They are not prefetched. A new call.
    fn visit_sized(&mut self, subs: Vec<usize>, keys: &dyn Fn(usize) -> usize, access: Access) -> Vec<usize> {
        self.call_start = self.clock;
        for &p in &subs {
            self.call_keys[p] = keys(p);
        }
        self.visit_group(subs, keys, access)
    }

    /// As `visit_sized`, within the current call.
    fn visit_group(&mut self, subs: Vec<usize>, keys: &dyn Fn(usize) -> usize, access: Access) -> Vec<usize> {
        let per_key = if access == Access::ReadOnDevice { self.zero_copy } else { self.sparse };
        self.in_place.iter_mut().for_each(|x| *x = false);
        let (mut order, rest): (Vec<usize>, Vec<usize>) = subs.into_iter().partition(|&i| self.slot_of[i].is_some());
        for i in rest {
            let bytes = self.host[i].slots().saturating_mul(self.slot_bytes);
            self.in_place[i] = cheaper_in_place(keys(i) as u64, per_key, bytes, access);
            if !self.in_place[i] {
                order.push(i);
            }
        }
        if self.pipeline {
            self.upcoming = order.iter().copied().collect();
        }
        order.extend((0..self.in_place.len()).filter(|&i| self.in_place[i]));
        order
    }

    fn with_sub<R>(&mut self, i: usize, mut f: impl FnMut(&mut dyn Backend<K, V>) -> Result<(R, bool)>) -> Result<R> {
        if self.in_place[i] && self.slot_of[i].is_none() {
            // Too few keys to bring it in: the host page is the page.
            self.stats.in_place += 1;
            let t = Self::host_mut(&mut self.host[i]);
            let slots_before = t.slots();
            let r = f(t)?.0;
            self.stats.pages_resized += (t.slots() != slots_before) as u64;
            return Ok(r);
        }
        if self.upcoming.front() == Some(&i) {
            self.upcoming.pop_front();
        }
        let slot = match self.slot_of[i] {
            Some(s) => Some(s),
            None => self.bring_in(i, None),
        };
        if self.pipeline && slot.is_some() {
            self.prefetch(i);
        }
        let (table, dirty): (&mut dyn Backend<K, V>, Option<&mut bool>) = match slot {
            Some(s) => {
                self.clock += 1;
                let slot = self.slots[s].as_mut().expect("a resident page's slot is occupied");
                slot.used = self.clock;
                (&mut *slot.table, Some(&mut slot.dirty))
            }
            None => {
                self.stats.served_in_host += 1;
                (Self::host_mut(&mut self.host[i]), None)
            }
        };
        let slots_before = table.slots();
        let (r, changed) = match f(table) {
            // Device memory ran out inside the operation, which changed
            // nothing: the page goes back to host memory and the operation
            // runs there.
            Err(e @ Error::OutOfMemory { .. }) if slot.is_some() && self.transport.device_memory() => {
                return self.serve_in_host(i, slot.expect("resident"), e, f);
            }
            r => r?,
        };
        let resized = table.slots() != slots_before;
        if let (Some(d), true) = (dirty, changed) {
            *d = true;
        }
        self.stats.pages_resized += resized as u64;
        // Pipelining: a page this call is done with goes back now, while
        // the next is worked on, unless every page this call still visits
        // fits beside it (then it may stay resident, dirty, for the next call).
        if let (true, Some(s)) = (self.pipeline, slot) {
            let waiting = self.upcoming.iter().filter(|&&p| self.slot_of[p].is_none()).count();
            let free = self.slots.iter().filter(|x| x.is_none()).count();
            if waiting > free {
                self.write_back(s);
            }
        }
        Ok(r)
    }

    /// Any page not resident: one the lookup would read in place, and one
    /// it would bring in, which the host's cores may look up in about the
    /// time the page takes to cross the bus.
    fn lendable(&self, i: usize) -> bool {
        self.host_lookups && self.slot_of[i].is_none()
    }

    /// A resident page costs its keys; one read in place, a launch and its
    /// keys' zero-copy bytes; one brought in, its bytes.
    fn device_cost(&self, i: usize, keys: usize) -> u64 {
        let keys = keys as u64;
        if self.slot_of[i].is_some() {
            return keys.saturating_mul(RESIDENT_BYTES_PER_KEY);
        }
        let bytes = self.host[i].slots().saturating_mul(self.slot_bytes);
        if self.in_place[i] {
            LAUNCH_BYTES.saturating_add(keys.saturating_mul(zero_copy_per_key(self.zero_copy, bytes)))
        } else {
            bytes.saturating_add(keys.saturating_mul(RESIDENT_BYTES_PER_KEY))
        }
    }

    fn lend(&mut self, i: usize) -> Option<Arc<dyn Backend<K, V>>> {
        if !self.lendable(i) {
            return None;
        }
        // Lent, it is neither brought in nor prefetched.
        self.upcoming.retain(|&p| p != i);
        self.stats.in_place += 1;
        Some(self.host[i].clone())
    }

    fn make_room(&mut self, keep: usize) {
        for s in 0..self.slots.len() {
            if self.slots[s].as_ref().is_some_and(|slot| slot.page != keep) {
                self.evict(s);
            }
        }
        self.spare = None;
    }
}

/// A table split into pages in host memory with a budget of resident pages;
/// built by [`Builder::paged`](crate::Builder::paged) and reached through
/// [`HashTable::paged`](crate::HashTable::paged). See the [module
/// docs](self) for how pages are routed, brought in and grown.
pub struct PagedTable<K: Key, V: Value> {
    device: Device,
    scheme: Scheme,
    paging: Paging,
    set: Mutex<PageSet<K, V>>,
    /// On CUDA: splits large batches by page on the device.
    #[cfg(feature = "cuda")]
    batcher: Option<crate::backend::cuda::batcher::Batcher>,
}

impl<K: Key, V: Value> PagedTable<K, V> {
    /// `paging.pages` empty pages sharing `capacity` slots on `device`
    /// (the CPU or a CUDA device), each configured as `page` but for its slot count.
    pub(crate) fn new(device: Device, page: Config, capacity: u64, paging: Paging) -> Result<Self> {
        paging.validate()?;
        checked_slots::<K, V>(page.scheme, capacity)?;
        if page.memory != Memory::Device {
            return Err(Error::Unsupported("paged tables keep their pages in host memory, not unified memory".into()));
        }
        let pages = paging.pages as usize;
        let slots = checked_slots::<K, V>(page.scheme, capacity.div_ceil(pages as u64))?;
        let config = Config { slots, ..page };
        let mut host: Vec<Arc<dyn Backend<K, V>>> = Vec::with_capacity(pages);
        #[cfg(feature = "cuda")]
        let mut batcher = None;
        let transport: Box<dyn Transport<K, V>> = match device {
            Device::Cpu => {
                for _ in 0..pages {
                    host.push(Arc::new(CpuTable::<K, V>::new(config)?));
                }
                Box::new(CpuTransport)
            }
            #[cfg(feature = "cuda")]
            Device::Cuda(ordinal) => {
                device.check_scheme(page.scheme)?;
                let cuda = crate::backend::cuda::paging::CudaPages::new(ordinal)?;
                for _ in 0..pages {
                    host.push(Arc::new(cuda.host_page::<K, V>(config)?));
                }
                // A batch's scratch may take as much device memory as the
                // resident pages do.
                let budget = slots.saturating_mul(<K::Word<V> as crate::core::layout::Word>::BYTES as u64).saturating_mul(paging.resident as u64);
                batcher = Some(cuda.batcher(page.scheme, budget.min(usize::MAX as u64) as usize)?);
                Box::new(CudaTransport(cuda))
            }
            other => {
                return Err(Error::Unsupported(format!("paged tables run on the CPU and on CUDA, not on {other}")));
            }
        };
        let set = PageSet {
            router: Router::new(pages, page.seed),
            host,
            slots: (0..paging.resident).map(|_| None).collect(),
            slot_of: vec![None; pages],
            residency: paging.residency,
            pipeline: paging.pipeline.unwrap_or_else(|| transport.overlaps()),
            upcoming: Default::default(),
            spare: None,
            sparse: paging.sparse.unwrap_or(if transport.overlaps() { Paging::SPARSE_BYTES_PER_KEY } else { u64::MAX }),
            zero_copy: paging.zero_copy.unwrap_or(Paging::ZERO_COPY_BYTES_PER_KEY),
            slot_bytes: <K::Word<V> as crate::core::layout::Word>::BYTES as u64,
            in_place: vec![false; pages],
            host_lookups: paging.host_lookups.unwrap_or(true),
            clock: 0,
            call_start: 0,
            call_keys: vec![0; pages],
            stats: PagingStats::default(),
            transport,
        };
        Ok(PagedTable {
            device,
            scheme: page.scheme,
            paging,
            set: Mutex::new(set),
            #[cfg(feature = "cuda")]
            batcher,
        })
    }

    fn lock(&self) -> MutexGuard<'_, PageSet<K, V>> {
        // A panic inside an operation leaves the pages consistent (each
        // operation's contract), so a poisoned lock is still usable.
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The batcher, for a batch large enough that splitting it on the
    /// device beats the host (below that, the launches and small copies
    /// cost more than the host's passes over the batch).
    #[cfg(feature = "cuda")]
    fn batcher_for(&self, n: usize) -> Option<&crate::backend::cuda::batcher::Batcher> {
        let min = self.paging.device_split.unwrap_or(crate::backend::cuda::batcher::MIN_KEYS);
        self.batcher.as_ref().filter(|_| n >= min.max(1))
    }

    fn set_mut(&mut self) -> &mut PageSet<K, V> {
        self.set.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// The paging it was built with.
    pub fn paging(&self) -> Paging {
        self.paging
    }
    /// Number of pages.
    pub fn pages(&self) -> usize {
        self.paging.pages as usize
    }
    /// The page `key` lives in.
    pub fn page_of(&self, key: K) -> usize {
        self.lock().router.route(key.to_u64())
    }
    /// Slots of each page.
    pub fn page_slots(&self) -> Vec<u64> {
        let s = self.lock();
        (0..s.host.len()).map(|i| s.current(i).slots()).collect()
    }
    /// Live keys of each page.
    pub fn page_len(&self) -> Vec<u64> {
        let s = self.lock();
        (0..s.host.len()).map(|i| s.current(i).len()).collect()
    }
    /// The pages resident now, by slot (`None`: a free slot).
    pub fn resident(&self) -> Vec<Option<usize>> {
        self.lock().slots.iter().map(|s| s.as_ref().map(|s| s.page)).collect()
    }
    /// What the residency manager has done so far.
    pub fn stats(&self) -> PagingStats {
        self.lock().stats
    }

    /// Insert under the table's growth policy, each page growing alone
    /// (see [`super::insert_with`] for the outcomes).
    pub(crate) fn insert_with(&mut self, policy: Policy, keys: &[K], values: &[V], mode: InsertMode) -> Result<InsertReport> {
        #[cfg(feature = "cuda")]
        if let Some(b) = self.batcher_for(keys.len()) {
            return super::device::insert_with(b, &mut *self.lock(), policy, keys, values, mode);
        }
        super::insert_with(self.set_mut(), policy, keys, values, mode)
    }

    /// Room for `additional` more keys, each page for its share (see
    /// [`super::reserve`]).
    pub(crate) fn reserve(&mut self, policy: Policy, additional: u64) -> Result<()> {
        super::reserve(self.set_mut(), policy, additional)
    }

    /// Rebuilds every page (one at a time) into its share of `slots` (see
    /// [`super::rehash_with`]).
    pub(crate) fn rehash_with(&mut self, policy: Policy, slots: u64) -> Result<()> {
        let scheme = self.scheme;
        super::rehash_with(self.set_mut(), scheme, policy, slots)
    }

    /// Reclaims every page's tombstones, one page at a time.
    pub(crate) fn clean_tombstones_with(&mut self, policy: Policy) -> Result<()> {
        super::clean_tombstones_with(self.set_mut(), policy)
    }
}

impl<K: Key, V: Value> Backend<K, V> for PagedTable<K, V> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn device(&self) -> Device {
        self.device
    }
    fn scheme(&self) -> Scheme {
        self.scheme
    }
    fn slots(&self) -> u64 {
        self.lock().sum(|t| t.slots())
    }
    fn len(&self) -> u64 {
        self.lock().sum(|t| t.len())
    }
    fn used(&self) -> u64 {
        self.lock().sum(|t| t.used())
    }
    fn out_of_band(&self) -> u64 {
        self.lock().sum(|t| t.out_of_band())
    }
    fn tombstones(&self) -> u64 {
        self.lock().sum(|t| t.tombstones())
    }
    /// Plain insert without growth: each page stores what fits.
    fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        super::insert_raw(self.set_mut(), keys, values, mode)
    }
    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        #[cfg(feature = "cuda")]
        if let Some(b) = self.batcher_for(keys.len()) {
            return super::device::find(b, &mut *self.lock(), keys, values, found);
        }
        super::find(&mut *self.lock(), keys, values, found)
    }
    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        #[cfg(feature = "cuda")]
        if let Some(b) = self.batcher_for(keys.len()) {
            return super::device::contains(b, &mut *self.lock(), keys, found);
        }
        super::contains(&mut *self.lock(), keys, found)
    }
    fn erase(&mut self, keys: &[K]) -> Result<u64> {
        #[cfg(feature = "cuda")]
        if let Some(b) = self.batcher_for(keys.len()) {
            return super::device::erase(b, &mut *self.lock(), keys);
        }
        super::erase(self.set_mut(), keys)
    }
    /// Clears every page where it lies: host pages in host memory (no page
    /// is brought in for it), resident copies in their slots, which are
    /// then clean.
    fn clear(&mut self) -> Result<()> {
        let set = self.set_mut();
        for t in &mut set.host {
            PageSet::host_mut(t).clear()?;
        }
        for slot in set.slots.iter_mut().flatten() {
            slot.table.clear()?;
            slot.dirty = false;
        }
        Ok(())
    }
    /// Rebuilds each page into its share of `slots` (no smaller than its
    /// keys need); a page that fails stops the call, pages rebuilt before
    /// keep their size and every key.
    fn rehash(&mut self, slots: u64) -> Result<()> {
        let scheme = self.scheme;
        super::rehash_each(self.set_mut(), scheme, slots)
    }
    fn clean_tombstones(&mut self) -> Result<()> {
        super::clean_each(self.set_mut())
    }
    fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        super::export_all(&mut *self.lock())
    }
    fn displacement(&self) -> Result<(u64, u64)> {
        super::displacement_all(&mut *self.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn in_place_when_the_keys_cost_less_than_the_page() {
        // 256 MiB at 256 bus bytes a key: the crossover is 1 Mi keys.
        let page = 256 * MIB;
        assert!(cheaper_in_place(MIB - 1, 256, page, Access::ReadOnDevice));
        assert!(!cheaper_in_place(MIB, 256, page, Access::ReadOnDevice));
        // A change also writes the page back: twice the bytes.
        assert!(cheaper_in_place(2 * MIB - 1, 256, page, Access::Write));
        assert!(!cheaper_in_place(2 * MIB, 256, page, Access::Write));
        assert!(!cheaper_in_place(0, 0, 0, Access::Read));
        assert!(!cheaper_in_place(u64::MAX, u64::MAX, page, Access::Read));
    }

    #[test]
    fn zero_copy_past_the_reach_costs_more_a_key() {
        // Four times the reach: the device's crossover stays at the
        // reach's, the host's grows with the page.
        let page = 4 * Paging::ZERO_COPY_REACH;
        let at_reach = Paging::ZERO_COPY_REACH / 256;
        assert!(cheaper_in_place(at_reach - 1, 256, page, Access::ReadOnDevice));
        assert!(!cheaper_in_place(at_reach + 1, 256, page, Access::ReadOnDevice));
        assert!(cheaper_in_place(4 * at_reach - 1, 256, page, Access::Read));
        assert!(!cheaper_in_place(4 * at_reach, 256, page, Access::Read));
    }
}
