//! The sharded table: one table spread over several devices, one shard per
//! device, each shard an ordinary table of the chosen scheme.
//!
//! ```text
//!   caller's batch   [ rank 0's part | rank 1's part | rank 2's part ]
//!                        |  partition by destination shard (Router)
//!                        v
//!   all-to-all       rank r sends shard d the keys of its part routed to d
//!   (counts, then data; per rank pair buffers)
//!                        v
//!   shard d          runs the plain operation on what it received, in
//!                    rank order (growth per shard)
//!                        v
//!   reverse          each shard returns every rank the results of that
//!   all-to-all       rank's keys, which the rank scatters to the caller's
//!                    positions
//! ```
//!
//! A key's shard comes from hash bits independent of its placement inside
//! the shard ([`super::Router`]), salted apart from the paged table's
//! routing ([`SHARD_SALT`]) so that, were a shard ever paged, its keys
//! would still spread over all of its pages.
//!
//! **Ranks.** A bulk call's host slices are split into one contiguous part
//! per shard, as they would be split across GPUs: rank `r` holds part `r`.
//! Each rank partitions its part by destination shard
//! ([`super::Partition`]), the ranks exchange counts and then the keys (and
//! values) through an [`Exchange`], every shard runs the operation on its
//! keys, and the results go back by the reverse exchange, each to its
//! caller position. Counts (`inserted`, `existing`, hits, keys erased) are
//! sums over shards; refused positions come back as caller positions,
//! ascending, exactly as from a single table.
//!
//! **What runs now.** [`InProcessExchange`] moves the buffers between ranks
//! inside the process (one channel per rank pair, every wait bounded by
//! [`Sharding::timeout`]); the ranks and shards are worked on in order on
//! the calling thread, so results are deterministic. It serves shards on
//! any device: CPU shards, and CUDA shards (`Device::Cuda(i)`), which are
//! then fed from host memory. An NCCL exchange between GPUs (one process
//! driving N GPUs, or one process per GPU) is to come; it implements the
//! same [`Exchange`] trait.
//!
//! **Growth** is per shard: a shard that reaches its maximum load is
//! rebuilt larger by itself, through the same growth loop as a single table
//! (`src/growth.rs`); the shard count never changes, so a key's shard never
//! does. With growth off each shard refuses exactly the keys it has no slot
//! for, reported at the caller's positions ([`crate::Error::TableFull`]).
//!
//! **Failures.** An exchange that fails, or a rank that sends nothing within
//! the timeout, ends the call with [`Error::ShardFailed`] naming the rank
//! (= shard); an error inside a shard's lookup, erase or plain insert ends
//! it with [`Error::ShardFailed`] naming that shard. Keys stored before the
//! call are never lost. When the batch's outward exchange fails, no shard
//! has worked on it and the table is unchanged. When the return exchange
//! fails (only a real transport can, or an injected fault), the shards have
//! done their work: an insert's keys may be stored and an erase's keys
//! removed, but the call cannot say which, so it reports the failure; call
//! again to be sure (inserts and erases may be repeated). Inserts under
//! growth report a shard that cannot grow like any table
//! ([`Error::GrowthFailed`], its cause as the shard returned it).

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::{Partition, Router, SubTables};
use crate::backend::{self, Backend, Config, InsertMode, RawInsert};
use crate::core::keys::{Key, Value};
use crate::core::scheme::Scheme;
use crate::fault::{self, ExchangeFault};
use crate::growth::{checked_slots, Policy};
use crate::table::InsertReport;
use crate::{Device, Error, Result};

/// Salt of the shard routing, XORed into the table's seed before
/// [`Router::new`] (which adds the routing salt of every table of tables):
/// a sharded table's shard of a key and a paged table's page of it come
/// from unrelated hash bits, so tables of tables can nest without keys of
/// one shard crowding into a few pages. ("SHARDING" in ASCII.)
pub const SHARD_SALT: u64 = 0x5348_4152_4449_4e47;

/// How a sharded table spreads over devices (see
/// [`Builder::sharded`](crate::Builder::sharded)).
///
/// ```
/// use std::time::Duration;
/// use gpuhash::{Device, HashTable, Sharding};
///
/// // Three shards on the CPU; an exchange wait gives up after 5 s.
/// let sharding = Sharding::cpu(3).timeout(Duration::from_secs(5));
/// let mut t = HashTable::<u64, u32>::builder().capacity(1 << 12).sharded(sharding).build()?;
/// let keys: Vec<u64> = (0..10_000).collect();
/// t.insert_or_assign(&keys, &vec![7; keys.len()])?; // shards grow alone
/// assert_eq!(t.find(&[1234, 20_000])?, vec![Some(7), None]);
/// let s = t.sharded().unwrap();
/// assert_eq!(s.shards(), 3);
/// assert_eq!(s.shard_len().iter().sum::<u64>(), 10_000);
/// # Ok::<(), gpuhash::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sharding {
    /// The device of each shard, one shard per entry (at least one). A
    /// device may appear more than once (several shards on one GPU, or on
    /// the CPU).
    pub devices: Vec<Device>,
    /// The longest any rank waits for another's data in an exchange before
    /// the call fails with [`Error::ShardFailed`] (default
    /// [`Sharding::DEFAULT_TIMEOUT`]; must be more than zero).
    pub timeout: Duration,
}

impl Sharding {
    /// The default exchange timeout: one minute, far beyond any healthy
    /// exchange, short enough that a lost GPU does not hang a job.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// One shard on each of `devices`.
    pub fn new(devices: Vec<Device>) -> Sharding {
        Sharding { devices, timeout: Self::DEFAULT_TIMEOUT }
    }
    /// `shards` shards on the CPU (each uses every core for its own work).
    pub fn cpu(shards: usize) -> Sharding {
        Sharding::new(vec![Device::Cpu; shards])
    }
    /// The exchange timeout.
    pub fn timeout(mut self, timeout: Duration) -> Sharding {
        self.timeout = timeout;
        self
    }
    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.devices.len()
    }
    fn validate(&self) -> Result<()> {
        if self.devices.is_empty() {
            return Err(Error::Unsupported("a sharded table needs at least one device".into()));
        }
        if self.timeout.is_zero() {
            return Err(Error::Unsupported("the exchange timeout must be more than zero".into()));
        }
        Ok(())
    }
}

/// Per rank pair buffers: `bufs[src][dst]` is what rank `src` sends rank
/// `dst` (or, received, what `dst` got from `src` at `[dst][src]`).
pub type RankBuffers = Vec<Vec<Vec<u64>>>;

/// The all-to-all between the ranks of a sharded table, seen from all ranks
/// at once (one process driving every rank). Rank `r` serves shard `r`.
///
/// Contract: a call either delivers every buffer (`recv[dst][src] ==
/// send[src][dst]`) or returns [`Error::ShardFailed`] naming a rank that
/// failed or sent nothing within the timeout; it never waits unbounded.
/// After an error the exchange is usable again (nothing of the failed call
/// is delivered later).
pub trait Exchange: Send + Sync {
    /// Ranks taking part.
    fn ranks(&self) -> usize;
    /// Every rank tells every other how many words it will send:
    /// `counts[src][dst]` in, `recv[dst][src]` out.
    fn all_to_all_counts(&self, counts: &[Vec<usize>]) -> Result<Vec<Vec<usize>>>;
    /// Moves the words: `send[src][dst]` in, `recv[dst][src]` out, each of
    /// the length `recv_counts[dst][src]` announced by
    /// [`Exchange::all_to_all_counts`] (a rank that delivers another length
    /// fails the call).
    fn all_to_all(&self, send: RankBuffers, recv_counts: &[Vec<usize>]) -> Result<RankBuffers>;
}

/// Counts, then words: one whole all-to-all.
fn exchange(x: &dyn Exchange, send: RankBuffers) -> Result<RankBuffers> {
    let counts: Vec<Vec<usize>> = send.iter().map(|row| row.iter().map(Vec::len).collect()).collect();
    let recv_counts = x.all_to_all_counts(&counts)?;
    x.all_to_all(send, &recv_counts)
}

/// One direction between two ranks.
struct Link {
    tx: Sender<Vec<u64>>,
    rx: Receiver<Vec<u64>>,
}

/// The exchange inside one process: a channel per rank pair carries each
/// buffer (moved, not shared), every receive waits at most the timeout.
/// Ranks are served in order on the calling thread: all sends of a
/// transfer, then all receives, so a healthy transfer never waits and the
/// results are deterministic.
pub struct InProcessExchange {
    ranks: usize,
    timeout: Duration,
    /// `links[src * ranks + dst]`.
    links: Mutex<Vec<Link>>,
}

impl InProcessExchange {
    /// An exchange between `ranks` ranks whose waits give up after `timeout`.
    pub fn new(ranks: usize, timeout: Duration) -> InProcessExchange {
        let links = (0..ranks * ranks)
            .map(|_| {
                let (tx, rx) = channel();
                Link { tx, rx }
            })
            .collect();
        InProcessExchange { ranks, timeout, links: Mutex::new(links) }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Link>> {
        // The links hold no invariant a panic could break (they are drained
        // after any failed transfer).
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Delivers `send[src][dst]` to `recv[dst][src]`.
    fn transfer(&self, send: RankBuffers) -> Result<RankBuffers> {
        let n = self.ranks;
        if send.len() != n || send.iter().any(|row| row.len() != n) {
            return Err(Error::Unsupported(format!("an exchange of {n} ranks needs {n} x {n} buffers")));
        }
        let injected = fault::exchange_point();
        let links = self.lock();
        let moved = (|| {
            for (src, row) in send.into_iter().enumerate() {
                for (dst, buf) in row.into_iter().enumerate() {
                    match injected {
                        Some((rank, ExchangeFault::Stall)) if rank == src => continue,
                        Some((rank, ExchangeFault::Fail)) if rank == src => {
                            return Err(Error::ShardFailed { shard: src, reason: "exchange send failed (injected)".into() })
                        }
                        _ => {}
                    }
                    // The receiver lives in `links` as long as the sender.
                    links[src * n + dst].tx.send(buf).map_err(|_| Error::ShardFailed {
                        shard: dst,
                        reason: format!("rank {dst}'s link from rank {src} is closed"),
                    })?;
                }
            }
            let mut recv: RankBuffers = (0..n).map(|_| Vec::with_capacity(n)).collect();
            for (dst, row) in recv.iter_mut().enumerate() {
                for src in 0..n {
                    match links[src * n + dst].rx.recv_timeout(self.timeout) {
                        Ok(buf) => row.push(buf),
                        Err(RecvTimeoutError::Timeout) => {
                            return Err(Error::ShardFailed {
                                shard: src,
                                reason: format!("rank {dst} received nothing from rank {src} within {:?}", self.timeout),
                            })
                        }
                        Err(RecvTimeoutError::Disconnected) => {
                            return Err(Error::ShardFailed { shard: src, reason: format!("rank {src}'s link to rank {dst} is closed") })
                        }
                    }
                }
            }
            Ok(recv)
        })();
        if moved.is_err() {
            // Nothing of a failed transfer may be taken for a later one's.
            for l in links.iter() {
                while l.rx.try_recv().is_ok() {}
            }
        }
        moved
    }
}

impl Exchange for InProcessExchange {
    fn ranks(&self) -> usize {
        self.ranks
    }
    fn all_to_all_counts(&self, counts: &[Vec<usize>]) -> Result<Vec<Vec<usize>>> {
        let send = counts.iter().map(|row| row.iter().map(|&c| vec![c as u64]).collect()).collect();
        let recv = self.transfer(send)?;
        Ok(recv.into_iter().map(|row| row.into_iter().map(|b| b.first().map_or(0, |&c| c as usize)).collect()).collect())
    }
    fn all_to_all(&self, send: RankBuffers, recv_counts: &[Vec<usize>]) -> Result<RankBuffers> {
        let recv = self.transfer(send)?;
        for (dst, row) in recv.iter().enumerate() {
            for (src, buf) in row.iter().enumerate() {
                let want = recv_counts.get(dst).and_then(|r| r.get(src)).copied().unwrap_or(0);
                if buf.len() != want {
                    return Err(Error::ShardFailed {
                        shard: src,
                        reason: format!("rank {src} sent rank {dst} {} words after announcing {want}", buf.len()),
                    });
                }
            }
        }
        Ok(recv)
    }
}

/// How a caller's batch is laid out over the ranks: rank `r` holds
/// positions `starts[r]..starts[r + 1]`, split by destination shard.
struct Plan {
    starts: Vec<usize>,
    parts: Vec<Partition>,
}

impl Plan {
    fn new<K: Key>(router: &Router, keys: &[K]) -> Plan {
        let n = router.count();
        let starts: Vec<usize> = (0..=n).map(|r| keys.len() * r / n).collect();
        let parts = (0..n).map(|r| Partition::new(router, &keys[starts[r]..starts[r + 1]])).collect();
        Plan { starts, parts }
    }
    /// The caller positions of what rank `rank` sent shard `shard`, in order.
    fn positions(&self, rank: usize, shard: usize) -> impl Iterator<Item = usize> + '_ {
        self.parts[rank].positions(shard).iter().map(move |&p| self.starts[rank] + p)
    }
}

/// What one shard received: its keys (and values) in rank order, and
/// where each rank's run starts (`from[r]..from[r + 1]`).
struct Local<K, V> {
    keys: Vec<K>,
    values: Vec<V>,
    from: Vec<usize>,
}

impl<K, V> Local<K, V> {
    /// The rank whose run holds local position `j`.
    fn rank_of(&self, j: usize) -> usize {
        self.from.partition_point(|&f| f <= j) - 1
    }
}

/// The slots of each of `n` shards sharing `capacity`: as evenly as the
/// scheme's table sizes allow, together exactly the slots a single table
/// would get, when that leaves the shards within 1/16 of each other (keys
/// are routed evenly, so shards must be about equal). Otherwise (coarse
/// sizes: Hashinator tables are powers of two, TwoLevel tables whole
/// regions) every shard gets an equal share rounded up, and the table holds
/// more slots than asked; a power-of-two shard count avoids that.
fn split_slots<K: Key, V: Value>(scheme: Scheme, capacity: u64, n: usize) -> Result<Vec<u64>> {
    let total = checked_slots::<K, V>(scheme, capacity)?;
    let mut left = total;
    let mut sizes = Vec::with_capacity(n);
    for i in 0..n {
        let s = checked_slots::<K, V>(scheme, (left / (n - i) as u64).max(1))?;
        left = left.saturating_sub(s);
        sizes.push(s);
    }
    let (min, max) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
    if max - min > min / 16 {
        let even = checked_slots::<K, V>(scheme, total.div_ceil(n as u64))?;
        sizes = vec![even; n];
    }
    Ok(sizes)
}

/// The shards of a sharded table.
struct ShardSet<K: Key, V: Value> {
    router: Router,
    shards: Vec<Box<dyn Backend<K, V>>>,
}

impl<K: Key, V: Value> SubTables<K, V> for ShardSet<K, V> {
    fn router(&self) -> Router {
        self.router
    }
    /// Shard order: every shard is where it is worked on.
    fn visit_order(&mut self, subs: Vec<usize>) -> Vec<usize> {
        subs
    }
    fn with_sub<R>(&mut self, i: usize, mut f: impl FnMut(&mut dyn Backend<K, V>) -> Result<(R, bool)>) -> Result<R> {
        Ok(f(&mut *self.shards[i])?.0)
    }
    /// Each shard has its own device; freeing another's memory gains nothing.
    fn make_room(&mut self, _keep: usize) {}
}

fn shard_error(shard: usize, e: Error) -> Error {
    match e {
        e @ Error::ShardFailed { .. } => e,
        e => Error::ShardFailed { shard, reason: e.to_string() },
    }
}

/// A table spread over shards on several devices; built by
/// [`Builder::sharded`](crate::Builder::sharded) and reached through
/// [`HashTable::sharded`](crate::HashTable::sharded). See the [module
/// docs](self) for routing, the exchange, growth and failures.
pub struct ShardedTable<K: Key, V: Value> {
    scheme: Scheme,
    sharding: Sharding,
    set: ShardSet<K, V>,
    exchange: Box<dyn Exchange>,
}

impl<K: Key, V: Value> ShardedTable<K, V> {
    /// `sharding.devices.len()` empty shards sharing `capacity` slots, each
    /// configured as `shard` but for its slot count, created on its device
    /// (an unusable device fails with its [`Error::Unavailable`]).
    pub(crate) fn new(shard: Config, capacity: u64, sharding: Sharding) -> Result<Self> {
        sharding.validate()?;
        checked_slots::<K, V>(shard.scheme, capacity)?;
        let n = sharding.shards();
        let sizes = split_slots::<K, V>(shard.scheme, capacity, n)?;
        let mut shards = Vec::with_capacity(n);
        for (&device, slots) in sharding.devices.iter().zip(sizes) {
            device.check_scheme(shard.scheme)?;
            shards.push(backend::create::<K, V>(device, Config { slots, ..shard })?);
        }
        let exchange = Box::new(InProcessExchange::new(n, sharding.timeout));
        let set = ShardSet { router: Router::new(n, shard.seed ^ SHARD_SALT), shards };
        Ok(ShardedTable { scheme: shard.scheme, sharding, set, exchange })
    }

    /// The sharding it was built with.
    pub fn sharding(&self) -> &Sharding {
        &self.sharding
    }
    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.set.shards.len()
    }
    /// The shard `key` lives in.
    pub fn shard_of(&self, key: K) -> usize {
        self.set.router.route(key.to_u64())
    }
    /// The device of each shard.
    pub fn shard_devices(&self) -> Vec<Device> {
        self.set.shards.iter().map(|t| t.device()).collect()
    }
    /// Slots of each shard.
    pub fn shard_slots(&self) -> Vec<u64> {
        self.set.shards.iter().map(|t| t.slots()).collect()
    }
    /// Live keys of each shard.
    pub fn shard_len(&self) -> Vec<u64> {
        self.set.shards.iter().map(|t| t.len()).collect()
    }

    fn sum(&self, f: impl Fn(&dyn Backend<K, V>) -> u64) -> u64 {
        self.set.shards.iter().map(|t| f(&**t)).sum()
    }

    /// The outward exchange: every rank sends each shard its keys routed
    /// there (with their values when given), as words.
    fn scatter_batch(&self, keys: &[K], values: Option<&[V]>) -> Result<(Plan, Vec<Local<K, V>>)> {
        let n = self.shards();
        let plan = Plan::new(&self.set.router, keys);
        let width = 1 + values.is_some() as usize;
        let send: RankBuffers = (0..n)
            .map(|r| {
                (0..n)
                    .map(|d| {
                        let mut words = Vec::with_capacity(width * plan.parts[r].positions(d).len());
                        for p in plan.positions(r, d) {
                            words.push(keys[p].to_u64());
                            if let Some(v) = values {
                                words.push(v[p].to_bits());
                            }
                        }
                        words
                    })
                    .collect()
            })
            .collect();
        let recv = exchange(&*self.exchange, send)?;
        let locals = recv
            .into_iter()
            .map(|row| {
                let mut local = Local { keys: Vec::new(), values: Vec::new(), from: vec![0] };
                for words in row {
                    for w in words.chunks_exact(width) {
                        local.keys.push(K::from_u64(w[0]));
                        if width == 2 {
                            local.values.push(V::from_bits(w[1]));
                        }
                    }
                    local.from.push(local.keys.len());
                }
                local
            })
            .collect();
        Ok((plan, locals))
    }

    /// The reverse exchange: `replies[shard][rank]` back to every rank, as
    /// `back[rank][shard]`.
    fn return_results(&self, replies: RankBuffers) -> Result<RankBuffers> {
        exchange(&*self.exchange, replies)
    }

    /// Fixed-width results (`width` words per key) back to caller order:
    /// `put(caller position, words)`.
    fn gather_fixed(&self, plan: &Plan, replies: RankBuffers, width: usize, mut put: impl FnMut(usize, &[u64])) -> Result<()> {
        let back = self.return_results(replies)?;
        for (r, row) in back.iter().enumerate() {
            for (d, words) in row.iter().enumerate() {
                if words.len() != width * plan.parts[r].positions(d).len() {
                    return Err(Error::ShardFailed { shard: d, reason: format!("shard {d} returned rank {r} {} words", words.len()) });
                }
                for (p, w) in plan.positions(r, d).zip(words.chunks_exact(width)) {
                    put(p, w);
                }
            }
        }
        Ok(())
    }

    /// Refused local positions of each shard back to caller positions,
    /// ascending: each shard returns every rank the indices (into what that
    /// rank sent it) it did not store.
    fn gather_refused(&self, plan: &Plan, locals: &[Local<K, V>], refused: &[Vec<usize>]) -> Result<Vec<usize>> {
        let n = self.shards();
        let replies: RankBuffers = locals
            .iter()
            .zip(refused)
            .map(|(local, failed)| {
                let mut row = vec![Vec::new(); n];
                for &j in failed {
                    let r = local.rank_of(j);
                    row[r].push((j - local.from[r]) as u64);
                }
                row
            })
            .collect();
        let back = self.return_results(replies)?;
        let mut out = Vec::new();
        for (r, row) in back.iter().enumerate() {
            for (d, idx) in row.iter().enumerate() {
                let pos = plan.parts[r].positions(d);
                for &i in idx {
                    let p = pos.get(i as usize).ok_or_else(|| Error::ShardFailed {
                        shard: d,
                        reason: format!("shard {d} returned rank {r} position {i} of {}", pos.len()),
                    })?;
                    out.push(plan.starts[r] + p);
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Insert under the table's growth policy, each shard growing alone;
    /// the outcomes are those of [`super::insert_with`].
    pub(crate) fn insert_with(&mut self, policy: Policy, keys: &[K], values: &[V], mode: InsertMode) -> Result<InsertReport> {
        if keys.is_empty() {
            return Ok(InsertReport::default());
        }
        let (plan, locals) = self.scatter_batch(keys, Some(values))?;
        let mut report = InsertReport::default();
        let mut refused = Vec::with_capacity(locals.len());
        let mut cause = None;
        for (d, local) in locals.iter().enumerate() {
            if local.keys.is_empty() {
                refused.push(Vec::new());
                continue;
            }
            let out = self.set.with_sub(d, |t| Ok(super::sub_insert(t, policy, &local.keys, &local.values, mode)))?;
            report += out.report;
            refused.push(out.not_stored);
            if cause.is_none() {
                cause = out.cause;
            }
        }
        let not_stored = self.gather_refused(&plan, &locals, &refused)?;
        super::insert_outcome(keys, report, not_stored, cause)
    }

    /// Room for `additional` more keys, each shard for its share (see
    /// [`super::reserve`]).
    pub(crate) fn reserve(&mut self, policy: Policy, additional: u64) -> Result<()> {
        super::reserve(&mut self.set, policy, additional)
    }
    /// Rebuilds every shard into its share of `slots` (see [`super::rehash_with`]).
    pub(crate) fn rehash_with(&mut self, policy: Policy, slots: u64) -> Result<()> {
        super::rehash_with(&mut self.set, self.scheme, policy, slots)
    }
    /// Reclaims every shard's tombstones, one shard at a time.
    pub(crate) fn clean_tombstones_with(&mut self, policy: Policy) -> Result<()> {
        super::clean_tombstones_with(&mut self.set, policy)
    }
}

impl<K: Key, V: Value> Backend<K, V> for ShardedTable<K, V> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    /// The device of shard 0 ([`ShardedTable::shard_devices`] lists them all).
    fn device(&self) -> Device {
        self.set.shards[0].device()
    }
    fn scheme(&self) -> Scheme {
        self.scheme
    }
    fn slots(&self) -> u64 {
        self.sum(|t| t.slots())
    }
    fn len(&self) -> u64 {
        self.sum(|t| t.len())
    }
    fn used(&self) -> u64 {
        self.sum(|t| t.used())
    }
    fn out_of_band(&self) -> u64 {
        self.sum(|t| t.out_of_band())
    }
    fn tombstones(&self) -> u64 {
        self.sum(|t| t.tombstones())
    }
    /// Plain insert without growth: each shard stores what fits.
    fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        if keys.is_empty() {
            return Ok(RawInsert::default());
        }
        let (plan, locals) = self.scatter_batch(keys, Some(values))?;
        let mut out = RawInsert::default();
        let mut refused = Vec::with_capacity(locals.len());
        for (d, local) in locals.iter().enumerate() {
            let r = self.set.shards[d].insert(&local.keys, &local.values, mode).map_err(|e| shard_error(d, e))?;
            out.inserted += r.inserted;
            out.existing += r.existing;
            refused.push(r.failed);
        }
        out.failed = self.gather_refused(&plan, &locals, &refused)?;
        Ok(out)
    }
    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let (plan, locals) = self.scatter_batch(keys, None)?;
        let mut replies = Vec::with_capacity(locals.len());
        for (d, local) in locals.iter().enumerate() {
            let mut v = vec![V::from_bits(0); local.keys.len()];
            let mut f = vec![false; local.keys.len()];
            self.set.shards[d].find(&local.keys, &mut v, &mut f).map_err(|e| shard_error(d, e))?;
            let words = |r: usize| (local.from[r]..local.from[r + 1]).flat_map(|j| [v[j].to_bits(), f[j] as u64]).collect();
            replies.push((0..self.shards()).map(words).collect());
        }
        let mut hits = 0;
        self.gather_fixed(&plan, replies, 2, |p, w| {
            values[p] = V::from_bits(w[0]);
            found[p] = w[1] != 0;
            hits += (w[1] != 0) as u64;
        })?;
        Ok(hits)
    }
    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let (plan, locals) = self.scatter_batch(keys, None)?;
        let mut replies = Vec::with_capacity(locals.len());
        for (d, local) in locals.iter().enumerate() {
            let mut f = vec![false; local.keys.len()];
            self.set.shards[d].contains(&local.keys, &mut f).map_err(|e| shard_error(d, e))?;
            let words = |r: usize| (local.from[r]..local.from[r + 1]).map(|j| f[j] as u64).collect();
            replies.push((0..self.shards()).map(words).collect());
        }
        let mut hits = 0;
        self.gather_fixed(&plan, replies, 1, |p, w| {
            found[p] = w[0] != 0;
            hits += (w[0] != 0) as u64;
        })?;
        Ok(hits)
    }
    /// Erases on every shard; the count is the sum (a key lives in one
    /// shard, so a key repeated in the batch still counts once). Each
    /// shard's count comes back by the reverse exchange, to rank 0.
    fn erase(&mut self, keys: &[K]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let (_plan, locals) = self.scatter_batch(keys, None)?;
        let n = self.shards();
        let mut replies = Vec::with_capacity(n);
        for (d, local) in locals.iter().enumerate() {
            let removed = if local.keys.is_empty() { 0 } else { self.set.shards[d].erase(&local.keys).map_err(|e| shard_error(d, e))? };
            let mut row = vec![Vec::new(); n];
            row[0].push(removed);
            replies.push(row);
        }
        let back = self.return_results(replies)?;
        Ok(back[0].iter().map(|w| w.first().copied().unwrap_or(0)).sum())
    }
    fn clear(&mut self) -> Result<()> {
        for (d, t) in self.set.shards.iter_mut().enumerate() {
            t.clear().map_err(|e| shard_error(d, e))?;
        }
        Ok(())
    }
    /// Rebuilds each shard into its share of `slots` (no smaller than its
    /// keys need); a shard that fails stops the call, shards rebuilt before
    /// keep their size and every key.
    fn rehash(&mut self, slots: u64) -> Result<()> {
        super::rehash_each(&mut self.set, self.scheme, slots)
    }
    fn clean_tombstones(&mut self) -> Result<()> {
        super::clean_each(&mut self.set)
    }
    /// Every shard's pairs, shard after shard.
    fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for t in &self.set.shards {
            let (k, v) = t.export()?;
            keys.extend(k);
            values.extend(v);
        }
        Ok((keys, values))
    }
    fn displacement(&self) -> Result<(u64, u64)> {
        let (mut sum, mut max) = (0, 0);
        for t in &self.set.shards {
            let (s, m) = t.displacement()?;
            sum += s;
            max = max.max(m);
        }
        Ok((sum, max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_process_exchange_delivers_every_buffer_to_its_rank() {
        let x = InProcessExchange::new(3, Duration::from_secs(1));
        let send: RankBuffers = (0..3).map(|s| (0..3).map(|d| vec![(10 * s + d) as u64; s + d]).collect()).collect();
        let recv = exchange(&x, send).unwrap();
        for (d, row) in recv.iter().enumerate() {
            for (s, buf) in row.iter().enumerate() {
                assert_eq!(buf, &vec![(10 * s + d) as u64; s + d], "rank {d} from rank {s}");
            }
        }
    }

    #[test]
    fn a_stalled_rank_times_out_and_the_exchange_recovers() {
        let x = InProcessExchange::new(2, Duration::from_millis(20));
        let send = || -> RankBuffers { vec![vec![vec![1], vec![2]], vec![vec![3], vec![4]]] };
        {
            let _g = fault::fail_exchange(1, 0, ExchangeFault::Stall);
            match x.transfer(send()) {
                Err(Error::ShardFailed { shard: 1, reason }) => assert!(reason.contains("within"), "{reason}"),
                other => panic!("expected rank 1 to time out, got {other:?}"),
            }
        }
        assert_eq!(x.transfer(send()).unwrap(), vec![vec![vec![1], vec![3]], vec![vec![2], vec![4]]]);
    }

    #[test]
    fn shards_share_the_capacity_exactly_where_sizes_allow() {
        let sum = |v: Vec<u64>| v.iter().sum::<u64>();
        for scheme in [Scheme::Linear, Scheme::RobinHood, Scheme::Cuckoo] {
            for cap in [1 << 10, 1 << 14, 3 << 12, 100_000] {
                let whole = checked_slots::<u64, u32>(scheme, cap).unwrap();
                assert_eq!(sum(split_slots::<u64, u32>(scheme, cap, 3).unwrap()), whole, "{scheme} {cap}");
            }
        }
        // Powers of two: 3 equal shards, more slots than asked.
        let h = Scheme::Hashinator { team: 8 };
        assert_eq!(split_slots::<u64, u32>(h, 1 << 14, 3).unwrap(), vec![8192; 3]);
        assert_eq!(split_slots::<u64, u32>(h, 1 << 14, 4).unwrap(), vec![4096; 4]);
    }

    #[test]
    fn shard_routing_is_salted_apart_from_page_routing() {
        let (pages, shards) = (Router::new(4, 7), Router::new(4, 7 ^ SHARD_SALT));
        let same = (0..10_000u64).filter(|&k| pages.route(k) == shards.route(k)).count();
        // Unrelated routings agree on about a quarter of the keys.
        assert!((2000..3000).contains(&same), "{same} of 10000 keys agree");
    }
}
