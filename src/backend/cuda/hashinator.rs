//! Hashinator's tombstone cleaning on the GPU, for both linear schemes (see
//! [`crate::backend::hashinator`] for the method and why it never loses a key).

use cudarc::driver::{CudaView, PushKernelArg};

use super::{grid, CudaTable};
use crate::backend::hashinator::rebuild_with;
use crate::backend::InsertMode;
use crate::core::keys::{Key, Value};
use crate::{Device, Error, Result};

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Hashinator's tombstone cleaning for the linear schemes: one
    /// compaction pass (`gh_clean_extract`) lifts the keys that lookups
    /// would no longer reach into a buffer and empties their slots and every
    /// tombstone; the bulk insert kernel puts the lifted keys back.
    ///
    /// Fails for want of memory only before the compaction (the buffers and
    /// the insert's failure list are allocated first). Once keys are lifted,
    /// whatever fails while putting them back, the last resort
    /// ([`Self::place_anywhere`]) still puts every one back.
    pub(super) fn clean_in_place(&mut self) -> Result<()> {
        // One thread per bucket (see gh::clean_stays for who stays in place).
        let buckets = self.probe.buckets;
        // Lifted keys are live keys in slots: the live count bounds them. A
        // stale count (users' kernels without `resync`) is caught below.
        let cap = self.live.max(1);
        let device = Device::Cuda(self.ctx.ordinal());
        crate::fault::alloc_point(cap * std::mem::size_of::<K>() as u64, device)?;
        // Safety: entries below the lifted count are written by gh_clean_extract before they are read.
        let mut keys = unsafe { self.stream.alloc::<K>(cap as usize) }.map_err(|e| self.err(e))?;
        crate::fault::alloc_point(cap * std::mem::size_of::<V>() as u64, device)?;
        // Safety: as above.
        let mut values = unsafe { self.stream.alloc::<V>(cap as usize) }.map_err(|e| self.err(e))?;
        // The put-back's failure list (for these schemes the fixed one, kept by the table).
        self.failure_room(cap)?;
        self.zero_counters()?;
        let view = self.kernel_view();
        let mut b = self.stream.launch_builder(&self.kernels.clean_extract);
        b.arg(&view).arg(&buckets).arg(&mut keys).arg(&mut values).arg(&cap);
        // Safety: arguments match gh_clean_extract; both outputs hold `cap`
        // elements and the kernel writes below `cap` only.
        unsafe { b.launch(grid(buckets, self.sms)) }.map_err(|e| self.err(e))?;
        // An error here is the device's own: the lifted count is unknown.
        let meta = self.read_meta()?;
        let (seen, overflow, lifted) = (meta[0], meta[2], meta[3].min(cap));
        // From here on lifted keys are in no slot: no early return.
        // The census of live keys is exact; those lifted are in no slot now.
        self.live = seen - lifted;
        self.tombstones = 0;
        let (k, v) = (keys.slice(0..lifted as usize), values.slice(0..lifted as usize));
        match self.put_back(&k, &v, overflow) {
            Ok(()) => Ok(()),
            Err(_) => self.place_anywhere(&k, &v),
        }
    }

    /// Step 2: inserts the lifted pairs again; the rare keys the probe limit
    /// turns away (or, with `overflow`, keys the compaction had no room to
    /// lift and left off their sequence in slots) go to a rebuild. On error
    /// some lifted keys may still be in no slot.
    fn put_back(&mut self, keys: &CudaView<'_, K>, values: &CudaView<'_, V>, overflow: u64) -> Result<()> {
        let raw = if keys.is_empty() { Default::default() } else { self.insert_raw(keys, values, InsertMode::IfAbsent)? };
        if raw.failed.is_empty() && overflow == 0 {
            return Ok(());
        }
        let mut all_keys = vec![K::from_u64(0); keys.len()];
        let mut all_values = vec![V::from_bits(0); keys.len()];
        if !keys.is_empty() {
            self.stream.memcpy_dtoh(keys, &mut all_keys).map_err(|e| self.err(e))?;
            self.stream.memcpy_dtoh(values, &mut all_values).map_err(|e| self.err(e))?;
            self.stream.synchronize().map_err(|e| self.err(e))?;
        }
        let mut failed_keys: Vec<K> = raw.failed.iter().map(|&i| all_keys[i]).collect();
        let mut failed_values: Vec<V> = raw.failed.iter().map(|&i| all_values[i]).collect();
        rebuild_with::<K, V, Self>(self, &mut failed_keys, &mut failed_values)
    }

    /// The last resort of a cleaning whose put-back failed (in practice: no
    /// memory for the fallback rebuild): makes the probe limit the whole
    /// table until the next rehash and inserts every lifted pair if absent,
    /// so each one still out takes the first EMPTY slot of its sequence.
    /// Lookups stop at the first EMPTY slot, so they find every key. This
    /// needs no memory (the failure list is there), and no slot can be
    /// missing: each lifted key left an EMPTY slot behind. (Keys an overflow
    /// left off their sequence stay unreachable until the next rehash; that
    /// takes a stale live count, see `resync`.)
    fn place_anywhere(&mut self, keys: &CudaView<'_, K>, values: &CudaView<'_, V>) -> Result<()> {
        self.probe.limit = self.probe.buckets;
        if keys.is_empty() {
            return Ok(());
        }
        let out = self.insert_plain(keys, values, InsertMode::IfAbsent)?;
        if !out.failed.is_empty() {
            // Cannot happen (see above).
            return Err(Error::RehashFailed { slots: self.config.slots, unplaced: out.failed.len() as u64 });
        }
        Ok(())
    }
}
