//! The table API: argument checks, growth and conveniences over a backend.

use crate::backend::{self, Backend, Config, InsertMode};
use crate::core::capacity;
use crate::core::hash::DEFAULT_SEED;
use crate::core::keys::{Key, Reduce, Value};
use crate::core::layout::Word;
use crate::core::scheme::Scheme;
use crate::growth::{checked_slots, Grower, Policy};
use crate::routed::paged::{PagedTable, Paging};
use crate::routed::sharded::{ShardedTable, Sharding};
use crate::{Device, Error, Memory, RegionBuild, Result};

/// What a bulk insert did.
///
/// `inserted + existing` equals the batch length when every key was stored.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct InsertReport {
    /// Keys that were not in the table before the call (a key repeated in
    /// the batch counts once here).
    pub inserted: u64,
    /// Keys that were already present, or repeated earlier in the batch:
    /// overwritten by insert-or-assign, left alone by insert-if-absent,
    /// combined by insert-or-apply.
    pub existing: u64,
}

impl std::ops::AddAssign for InsertReport {
    fn add_assign(&mut self, o: Self) {
        self.inserted += o.inserted;
        self.existing += o.existing;
    }
}

/// Occupancy and probe statistics of a table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Live keys.
    pub len: u64,
    /// Slots.
    pub slots: u64,
    /// Erased slots not yet reclaimed by a rehash.
    pub tombstones: u64,
    /// Mean buckets probed by a successful lookup (1.0 = always in the home bucket).
    pub mean_probe_buckets: f64,
    /// Most buckets probed by any successful lookup.
    pub max_probe_buckets: u64,
}

/// Builds a [`HashTable`] with non-default settings.
#[derive(Debug, Clone)]
pub struct Builder {
    device: Device,
    capacity: u64,
    max_load: f64,
    growth: bool,
    max_probe_buckets: Option<u64>,
    seed: u64,
    scheme: Scheme,
    memory: Memory,
    region_build: RegionBuild,
    wgpu_portable: bool,
    paging: Option<Paging>,
    sharding: Option<Sharding>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            device: Device::Cpu,
            capacity: 1024,
            max_load: capacity::DEFAULT_MAX_LOAD,
            growth: true,
            max_probe_buckets: None,
            seed: DEFAULT_SEED,
            scheme: Scheme::Linear,
            memory: Memory::Device,
            region_build: RegionBuild::Auto,
            wgpu_portable: false,
            paging: None,
            sharding: None,
        }
    }
}

impl Builder {
    /// The device (default [`Device::Cpu`]).
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }
    /// Number of slots (default 1024), rounded up to whole 32-byte buckets.
    pub fn capacity(mut self, slots: u64) -> Self {
        self.capacity = slots;
        self
    }
    /// Slots enough to hold `keys` keys at the maximum load factor.
    /// Call after [`Builder::max_load_factor`].
    pub fn capacity_for(mut self, keys: u64) -> Self {
        self.capacity = capacity::slots_for_keys(keys, self.max_load);
        self
    }
    /// Maximum load factor in `(0, 1]` (default 0.875): with growth on, the
    /// table rehashes into more slots before passing it.
    pub fn max_load_factor(mut self, load: f64) -> Self {
        self.max_load = load;
        self
    }
    /// Whether bulk inserts may grow the table (default true). With growth
    /// off, keys that find no slot are returned in [`Error::TableFull`].
    pub fn growth(mut self, on: bool) -> Self {
        self.growth = on;
        self
    }
    /// Most 32-byte buckets one operation may probe past a key's first
    /// candidate (default: the scheme's, see
    /// [`Scheme::default_max_probe_buckets`]). An insert that finds no free
    /// slot within it fails (growth off) or grows the table.
    pub fn max_probe_buckets(mut self, buckets: u64) -> Self {
        self.max_probe_buckets = Some(buckets);
        self
    }
    /// The placement scheme (default [`Scheme::Linear`]); see
    /// [`crate::core::scheme`] for how they differ and when to pick which.
    pub fn scheme(mut self, scheme: Scheme) -> Self {
        self.scheme = scheme;
        self
    }
    /// Hash seed (default fixed, so runs are reproducible).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Where the slots live (default [`Memory::Device`]). [`Memory::Unified`]
    /// puts them in CUDA managed memory, readable by the host through
    /// `CudaTable::host_find`; it needs a CUDA device (else
    /// [`Error::Unsupported`]) and at most the GPU's free memory (else
    /// [`Error::OutOfMemory`], checked before allocating).
    pub fn memory(mut self, memory: Memory) -> Self {
        self.memory = memory;
        self
    }
    /// When bulk inserts take the region build, the CUDA backend's fast
    /// path for large batches of the linear and two-level schemes (default
    /// [`RegionBuild::Auto`], the measured choice): [`RegionBuild::Never`]
    /// keeps its scratch memory off the device, [`RegionBuild::Always`] and
    /// [`RegionBuild::TwoPass`] force it (and its two-pass partition) for
    /// tests. Results follow the same contract whatever the setting; on the
    /// CPU and wgpu backends and the other schemes it changes nothing.
    /// Rehashes, growth and every page or shard keep it.
    ///
    /// ```
    /// use gpuhash::{Device, HashTable, RegionBuild};
    ///
    /// let mut t = HashTable::<u32, u32>::builder()
    ///     .device(Device::best_available())
    ///     .capacity(1 << 16)
    ///     .region_build(RegionBuild::Never) // every insert a thread per key
    ///     .build::<u32, u32>()?;
    /// let keys: Vec<u32> = (0..1 << 14).collect();
    /// t.insert_or_assign(&keys, &keys)?;
    /// assert_eq!(t.find(&[7, 1 << 20])?, vec![Some(7), None]);
    /// # Ok::<(), gpuhash::Error>(())
    /// ```
    pub fn region_build(mut self, region_build: RegionBuild) -> Self {
        self.region_build = region_build;
        self
    }
    /// On wgpu, whether the kernels keep to what browser WebGPU offers
    /// (32-bit atomics) on an adapter that has more. By default (`false`)
    /// a table whose slots are 16 bytes (a 64-bit key or value) claims its
    /// keys with one 64-bit compare-exchange where the adapter offers
    /// 64-bit atomics (Vulkan and DX12 on most GPUs), a single pass per
    /// insert, and every table's insert-or-apply combines repeated keys
    /// with subgroup operations where the adapter has them; `true` takes
    /// the portable path there too (a representative per distinct key
    /// first, then a claim through an occupancy bitmap; one atomic per
    /// reduced value), which is what runs in a browser, so it can be
    /// tested natively.
    /// Results are the same either way; other devices ignore it.
    ///
    /// ```
    /// use gpuhash::{Device, HashTable};
    ///
    /// let mut t = HashTable::<u64, u64>::builder()
    ///     .device(Device::Cpu) // Device::Wgpu where an adapter is present
    ///     .wgpu_portable(true)
    ///     .build::<u64, u64>()?;
    /// t.insert_or_assign(&[1, 2], &[10, 20])?;
    /// assert_eq!(t.find(&[2])?, vec![Some(20)]);
    /// # Ok::<(), gpuhash::Error>(())
    /// ```
    pub fn wgpu_portable(mut self, portable: bool) -> Self {
        self.wgpu_portable = portable;
        self
    }
    /// Splits the table into pages held in host memory, at most
    /// `paging.resident` of them resident at a time (default: one table,
    /// no paging). The capacity is split evenly among `paging.pages`
    /// pages, each an ordinary table of the chosen scheme; a key's page
    /// comes from hash bits independent of its place inside the page, and a
    /// page that fills up grows alone. The `HashTable` API is unchanged;
    /// [`HashTable::paged`] reaches the pages and their paging statistics.
    /// On CUDA the pages live in pinned host memory and stream through
    /// device-resident page slots; on the CPU the slots are working copies
    /// in host memory; other devices return [`Error::Unsupported`]. See
    /// [`crate::routed::paged`].
    ///
    /// ```
    /// use gpuhash::{Device, HashTable, Paging};
    ///
    /// let mut t = HashTable::<u32, u32>::builder()
    ///     .device(Device::Cpu)
    ///     .capacity(1 << 12)
    ///     .paged(Paging::new(4, 1)) // 4 pages of 1024 slots, 1 resident
    ///     .build::<u32, u32>()?;
    /// t.insert_or_assign(&[1, 2, 3], &[10, 20, 30])?;
    /// assert_eq!(t.find(&[3, 1, 9])?, vec![Some(30), Some(10), None]);
    /// assert_eq!(t.capacity(), 1 << 12);
    /// # Ok::<(), gpuhash::Error>(())
    /// ```
    pub fn paged(mut self, paging: Paging) -> Self {
        self.paging = Some(paging);
        self
    }
    /// Spreads the table over shards, one on each of `sharding.devices`
    /// (default: one table on [`Builder::device`], which a sharded table
    /// does not use). The capacity is split evenly among the shards, each
    /// an ordinary table of the chosen scheme on its device; a key's shard
    /// comes from hash bits independent of its place inside the shard, and
    /// a shard that fills up grows alone. Every bulk call splits its batch
    /// into one part per shard, moves each key to its shard through the
    /// exchange, and returns results in the caller's order. The `HashTable`
    /// API is unchanged; [`HashTable::sharded`] reaches the shards. A table
    /// is paged or sharded, not both ([`Error::Unsupported`]). See
    /// [`crate::routed::sharded`].
    ///
    /// ```
    /// use gpuhash::{Device, HashTable, Sharding};
    ///
    /// let mut t = HashTable::<u32, u32>::builder()
    ///     .capacity(3 << 10)
    ///     .sharded(Sharding::new(vec![Device::Cpu; 3])) // 3 shards of 1024 slots
    ///     .build::<u32, u32>()?;
    /// t.insert_or_assign(&[1, 2, 3], &[10, 20, 30])?;
    /// assert_eq!(t.find(&[3, 1, 9])?, vec![Some(30), Some(10), None]);
    /// assert_eq!(t.capacity(), 3 << 10);
    /// # Ok::<(), gpuhash::Error>(())
    /// ```
    pub fn sharded(mut self, sharding: Sharding) -> Self {
        self.sharding = Some(sharding);
        self
    }
    /// Creates the table.
    pub fn build<K: Key, V: Value>(self) -> Result<HashTable<K, V>> {
        if !(self.max_load > 0.0 && self.max_load <= 1.0) {
            return Err(Error::InvalidLoadFactor(self.max_load));
        }
        let max_probe_buckets = self.max_probe_buckets.unwrap_or(self.scheme.default_max_probe_buckets(K::Word::<V>::BYTES));
        if max_probe_buckets == 0 {
            return Err(Error::InvalidProbeLimit);
        }
        self.scheme.validate().map_err(Error::Unsupported)?;
        let slots = checked_slots::<K, V>(self.scheme, self.capacity)?;
        let (seed, scheme, memory, region_build) = (self.seed, self.scheme, self.memory, self.region_build);
        let wgpu_portable = self.wgpu_portable;
        let config = Config { slots, max_probe_buckets, seed, scheme, memory, region_build, wgpu_portable };
        let backend: Box<dyn Backend<K, V>> = match (self.paging, self.sharding) {
            (None, None) => backend::create(self.device, config)?,
            (Some(paging), None) => Box::new(PagedTable::new(self.device, config, self.capacity, paging)?),
            (None, Some(sharding)) => Box::new(ShardedTable::new(config, self.capacity, sharding)?),
            (Some(_), Some(_)) => return Err(Error::Unsupported("a table is paged or sharded, not both".into())),
        };
        Ok(HashTable { backend, max_load: self.max_load, growth: self.growth })
    }
}

/// A hash table from `K` (`u32`, `u64`) to `V` (`u32 u64 i32 i64 f32 f64`)
/// on a CPU or GPU, driven in batches.
///
/// * **Every key is legal**, including `0` and `K::MAX`.
/// * **Duplicates in one batch**: insert-or-assign stores one of the batch's
///   values for the key (which one is unspecified on parallel backends);
///   insert-if-absent keeps the stored value, or one of the batch's if none
///   was stored; insert-or-apply combines all of them, exactly for integers.
/// * **Growth**: with growth on (the default) inserts rehash into more slots
///   before the load passes the maximum load factor. With growth off an
///   insert stores what fits and returns [`Error::TableFull`] listing exactly
///   the keys it did not store.
///
/// ```
/// use gpuhash::{Device, HashTable, Reduce};
///
/// let mut t = HashTable::<u32, u64>::new(Device::Cpu, 1 << 10)?;
/// let r = t.insert_or_assign(&[1, 2, u32::MAX], &[10, 20, 30])?;
/// assert_eq!(r.inserted, 3);
/// t.insert_or_apply(&[1, 1, 5], &[1, 2, 7], Reduce::Sum)?;
/// assert_eq!(t.find(&[1, 5, 9])?, vec![Some(13), Some(7), None]);
/// assert_eq!(t.erase(&[2, 9])?, 1);
/// assert_eq!(t.len(), 3);
/// # Ok::<(), gpuhash::Error>(())
/// ```
pub struct HashTable<K: Key, V: Value> {
    backend: Box<dyn Backend<K, V>>,
    max_load: f64,
    growth: bool,
}

fn check_len(op: &'static str, keys: usize, other: usize, what: &'static str) -> Result<()> {
    if keys == other {
        Ok(())
    } else {
        Err(Error::LengthMismatch { op, keys, other, what })
    }
}

impl<K: Key, V: Value> HashTable<K, V> {
    /// A table with `capacity` slots on `device`, default settings.
    pub fn new(device: Device, capacity: u64) -> Result<Self> {
        Builder::default().device(device).capacity(capacity).build()
    }

    /// Settings beyond device and capacity.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Where the table lives.
    pub fn device(&self) -> Device {
        self.backend.device()
    }
    /// Live keys.
    pub fn len(&self) -> u64 {
        self.backend.len()
    }
    /// True if no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.backend.slots()
    }
    /// `len / capacity`.
    pub fn load_factor(&self) -> f64 {
        self.len() as f64 / self.capacity() as f64
    }
    /// The maximum load factor growth keeps to.
    pub fn max_load_factor(&self) -> f64 {
        self.max_load
    }
    /// The placement scheme.
    pub fn scheme(&self) -> Scheme {
        self.backend.scheme()
    }
    /// Whether inserts may grow the table.
    pub fn growth(&self) -> bool {
        self.growth
    }
    /// Turns growth on or off.
    pub fn set_growth(&mut self, on: bool) {
        self.growth = on;
    }
    /// Bytes of table memory per slot (8 when a key and a value fit in 8
    /// bytes, else 16), known from the types alone.
    pub const SLOT_BYTES: usize = K::Word::<V>::BYTES;

    /// Bytes of table memory per slot: [`Self::SLOT_BYTES`].
    pub fn slot_bytes(&self) -> usize {
        Self::SLOT_BYTES
    }

    /// Inserts pairs, overwriting the values of keys already present.
    pub fn insert_or_assign(&mut self, keys: &[K], values: &[V]) -> Result<InsertReport> {
        check_len("insert_or_assign", keys.len(), values.len(), "values")?;
        self.insert_batch(keys, values, InsertMode::Assign)
    }

    /// Inserts pairs whose keys are absent; present keys keep their values.
    pub fn insert_if_absent(&mut self, keys: &[K], values: &[V]) -> Result<InsertReport> {
        check_len("insert_if_absent", keys.len(), values.len(), "values")?;
        self.insert_batch(keys, values, InsertMode::IfAbsent)
    }

    /// Inserts pairs; a key already present gets `op(stored, new)`.
    pub fn insert_or_apply(&mut self, keys: &[K], values: &[V], op: Reduce) -> Result<InsertReport> {
        check_len("insert_or_apply", keys.len(), values.len(), "values")?;
        self.insert_batch(keys, values, InsertMode::Apply(op))
    }

    /// Looks up `keys`: writes each value (zero bits when absent) and whether
    /// it was found. Returns the number found.
    pub fn find_into(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        check_len("find_into", keys.len(), values.len(), "value outputs")?;
        check_len("find_into", keys.len(), found.len(), "found outputs")?;
        self.backend.find(keys, values, found)
    }

    /// Looks up `keys`.
    pub fn find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let mut values = vec![V::from_bits(0); keys.len()];
        let mut found = vec![false; keys.len()];
        self.backend.find(keys, &mut values, &mut found)?;
        Ok(values.into_iter().zip(found).map(|(v, f)| f.then_some(v)).collect())
    }

    /// Marks which keys are present; returns how many are.
    pub fn contains_into(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        check_len("contains_into", keys.len(), found.len(), "outputs")?;
        self.backend.contains(keys, found)
    }

    /// Which keys are present.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        let mut found = vec![false; keys.len()];
        self.backend.contains(keys, &mut found)?;
        Ok(found)
    }

    /// Erases keys; returns how many were present (a key repeated in the
    /// batch counts once). Erased slots become tombstones until a rehash.
    pub fn erase(&mut self, keys: &[K]) -> Result<u64> {
        self.backend.erase(keys)
    }

    /// Removes every key, keeping the capacity.
    pub fn clear(&mut self) -> Result<()> {
        self.backend.clear()
    }

    /// Makes room for `additional` more keys without passing the maximum
    /// load factor (rehashing now if needed, even with growth off).
    ///
    /// What it guarantees, on every scheme: `additional` more distinct keys
    /// leave the table at most at its maximum load factor, so they cause no
    /// growth by load; any rehash happens now. Whether each such key then
    /// finds a slot depends on how far the scheme may place it:
    ///
    /// * [`Scheme::Linear`] and [`Scheme::Hashinator`]: a key is refused only
    ///   if its probe run passes the probe limit (by default 4096 slots: 1024
    ///   buckets of 8-byte pairs, 2048 of 16-byte ones);
    ///   a table whose limit covers every bucket refuses none while a slot
    ///   is free.
    /// * [`Scheme::RobinHood`] (a cap of 64 buckets) and [`Scheme::Cuckoo`]
    ///   (2 or 3 candidate buckets, eviction walks of 16 steps, a stash of
    ///   32 pairs): placement is bounded, so near the maximum load a few
    ///   keys may find no slot.
    /// * [`Scheme::TwoLevel`]: a key its region cannot place (walks of 16,
    ///   then 64 steps; on wgpu, walks within the probe limit and no region
    ///   rebuilds) goes to the table's overflow (0.8% of its slots); keys
    ///   are refused once the overflow is full too, which in tables of
    ///   2^22 slots and more does not happen below a load of 0.97 (on
    ///   wgpu, tables of 2^15 slots held 0.957-0.966 on lavapipe).
    /// * [`Scheme::SlabList`]: a key is refused only when its chain is full
    ///   and the slab pool is used up, which partly empty last slabs make
    ///   happen near a load of 0.9 (earlier in tables of a few chains), so
    ///   above that maximum load some keys may find no slot.
    ///
    /// Such a key grows the table when growth is on; with growth off it is
    /// reported in [`Error::TableFull`], never lost.
    ///
    /// A paged table ([`Builder::paged`]) gives each page room for its
    /// share of `additional` keys routed uniformly (the mean plus four
    /// standard deviations), and the pages together room for all of them;
    /// a sharded table ([`Builder::sharded`]) does the same per shard.
    pub fn reserve(&mut self, additional: u64) -> Result<()> {
        let policy = self.policy();
        if let Some(s) = self.sharded_mut() {
            return s.reserve(policy, additional);
        }
        match self.paged_mut() {
            Some(p) => p.reserve(policy, additional),
            None => self.grower().reserve(additional),
        }
    }

    /// Rebuilds the table into `slots` slots (at least enough for its keys),
    /// which also reclaims tombstones. A paged table rebuilds each page
    /// alone into its share of `slots`.
    pub fn rehash(&mut self, slots: u64) -> Result<()> {
        let policy = self.policy();
        if let Some(s) = self.sharded_mut() {
            return s.rehash_with(policy, slots);
        }
        match self.paged_mut() {
            Some(p) => p.rehash_with(policy, slots),
            None => self.grower().rehash(slots),
        }
    }

    /// Reclaims every tombstone, keeping the capacity. Hashinator and
    /// the default scheme do it in place (Hashinator's tombstone cleaning:
    /// keys displaced from their home are lifted out, tombstones reset to
    /// empty, and the lifted keys inserted again); other schemes rebuild.
    /// No key is lost; the capacity grows only in the rare case that the
    /// keys no longer fit within the probe limit at this size. A paged
    /// table cleans one page at a time.
    pub fn clean_tombstones(&mut self) -> Result<()> {
        let policy = self.policy();
        if let Some(s) = self.sharded_mut() {
            return s.clean_tombstones_with(policy);
        }
        match self.paged_mut() {
            Some(p) => p.clean_tombstones_with(policy),
            None => self.grower().clean_tombstones(),
        }
    }

    /// Every pair, in no particular order.
    pub fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        self.backend.export()
    }

    /// Occupancy and probe statistics (scans the table).
    pub fn stats(&self) -> Result<Stats> {
        let (sum, max) = self.backend.displacement()?;
        let live = self.len() - self.backend.out_of_band();
        Ok(Stats {
            len: self.len(),
            slots: self.capacity(),
            tombstones: self.tombstones(),
            mean_probe_buckets: if live == 0 { 0.0 } else { 1.0 + sum as f64 / live as f64 },
            max_probe_buckets: if live == 0 { 0 } else { max + 1 },
        })
    }

    fn tombstones(&self) -> u64 {
        self.backend.tombstones()
    }

    /// The value of one key.
    pub fn get(&self, key: K) -> Result<Option<V>> {
        Ok(self.find(&[key])?.pop().flatten())
    }

    /// Inserts or overwrites one pair; returns the previous value.
    pub fn insert(&mut self, key: K, value: V) -> Result<Option<V>> {
        let old = self.get(key)?;
        self.insert_or_assign(&[key], &[value])?;
        Ok(old)
    }

    /// Removes one key; returns its value.
    pub fn remove(&mut self, key: K) -> Result<Option<V>> {
        let old = self.get(key)?;
        if old.is_some() {
            self.erase(&[key])?;
        }
        Ok(old)
    }

    /// The CUDA table behind this one, for device-buffer calls and the
    /// kernel view; `None` on other devices.
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Option<&crate::backend::cuda::CudaTable<K, V>> {
        self.backend.as_any().downcast_ref()
    }

    /// Inserts pairs already in device memory of a plain CUDA table's GPU
    /// (a [`CudaView`](cudarc::driver::CudaView), or memory of another
    /// library through [`CudaTable::borrow_device`](crate::backend::cuda::CudaTable::borrow_device)),
    /// without copying the batch to the host, under the table's growth
    /// policy like the host calls: with growth on it grows between parts of
    /// the batch as needed; with growth off keys without a slot come back in
    /// [`Error::TableFull`]. Only the few keys a probe limit turns away are
    /// fetched to the host (and then retried into the grown table).
    #[cfg(feature = "cuda")]
    pub fn insert_device(
        &mut self,
        keys: &cudarc::driver::CudaView<'_, K>,
        values: &cudarc::driver::CudaView<'_, V>,
        mode: InsertMode,
    ) -> Result<InsertReport> {
        check_len("insert_device", keys.len(), values.len(), "values")?;
        if self.cuda().is_none() {
            return Err(Error::Unsupported(format!(
                "insert_device needs a plain CUDA table; this one is {} (paged, sharded or on another device)",
                self.device()
            )));
        }
        let batch = crate::backend::cuda::DeviceBatch { keys, values };
        self.grower().insert_from(&batch, mode)
    }

    /// Mutable form of [`HashTable::cuda`].
    #[cfg(feature = "cuda")]
    pub fn cuda_mut(&mut self) -> Option<&mut crate::backend::cuda::CudaTable<K, V>> {
        self.backend.as_any_mut().downcast_mut()
    }

    /// The wgpu table behind this one, for GPU-buffer calls
    /// ([`WgpuTable::find_buffers`](crate::backend::wgpu::WgpuTable::find_buffers)
    /// and the like); `None` on other devices.
    #[cfg(feature = "wgpu")]
    pub fn wgpu(&self) -> Option<&crate::backend::wgpu::WgpuTable<K, V>> {
        self.backend.as_any().downcast_ref()
    }

    /// Mutable form of [`HashTable::wgpu`].
    #[cfg(feature = "wgpu")]
    pub fn wgpu_mut(&mut self) -> Option<&mut crate::backend::wgpu::WgpuTable<K, V>> {
        self.backend.as_any_mut().downcast_mut()
    }

    /// The paged table behind this one (its pages, residency and paging
    /// statistics); `None` unless built with [`Builder::paged`].
    pub fn paged(&self) -> Option<&PagedTable<K, V>> {
        self.backend.as_any().downcast_ref()
    }

    fn paged_mut(&mut self) -> Option<&mut PagedTable<K, V>> {
        self.backend.as_any_mut().downcast_mut()
    }

    /// The sharded table behind this one (its shards, their devices and
    /// key counts); `None` unless built with [`Builder::sharded`].
    pub fn sharded(&self) -> Option<&ShardedTable<K, V>> {
        self.backend.as_any().downcast_ref()
    }

    fn sharded_mut(&mut self) -> Option<&mut ShardedTable<K, V>> {
        self.backend.as_any_mut().downcast_mut()
    }

    fn policy(&self) -> Policy {
        Policy { max_load: self.max_load, growth: self.growth }
    }

    /// The growth loop over the whole backend (a single table).
    fn grower(&mut self) -> Grower<'_, K, V> {
        Grower { policy: self.policy(), b: &mut *self.backend }
    }

    fn insert_batch(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<InsertReport> {
        let policy = self.policy();
        if let Some(s) = self.sharded_mut() {
            return s.insert_with(policy, keys, values, mode);
        }
        match self.paged_mut() {
            Some(p) => p.insert_with(policy, keys, values, mode),
            None => self.grower().insert(keys, values, mode),
        }
    }
}

impl<K: Key, V: Value> std::fmt::Debug for HashTable<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashTable")
            .field("device", &self.device())
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("max_load_factor", &self.max_load)
            .field("growth", &self.growth)
            .finish()
    }
}
