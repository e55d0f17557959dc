//! Hashinator's tombstone cleaning on the GPU, for both linear schemes (see
//! [`crate::backend::hashinator`] for the method and why it never loses a key).

use cudarc::driver::PushKernelArg;

use super::{grid, CudaTable};
use crate::backend::hashinator::rebuild_with;
use crate::backend::InsertMode;
use crate::core::keys::{Key, Value};
use crate::Result;

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Hashinator's tombstone cleaning for the linear schemes: one
    /// compaction pass (`gh_clean_extract`) lifts the keys that lookups
    /// would no longer reach into a buffer and empties their slots and every
    /// tombstone; the bulk insert kernel puts the lifted keys back.
    pub(super) fn clean_in_place(&mut self) -> Result<()> {
        // One thread per bucket (see gh::clean_stays for who stays in place).
        let buckets = self.probe.buckets;
        // Lifted keys are live keys in slots: the live count bounds them. A
        // stale count (users' kernels without `resync`) is caught below.
        let cap = self.live.max(1);
        self.fault_check(cap as usize * (size_of::<K>() + size_of::<V>()))?;
        // Safety: entries below the lifted count are written by gh_clean_extract before they are read.
        let mut keys = unsafe { self.stream.alloc::<K>(cap as usize) }.map_err(|e| self.err(e))?;
        // Safety: as above.
        let mut values = unsafe { self.stream.alloc::<V>(cap as usize) }.map_err(|e| self.err(e))?;
        self.zero_counters()?;
        let view = self.kernel_view();
        let mut b = self.stream.launch_builder(&self.kernels.clean_extract);
        b.arg(&view).arg(&buckets).arg(&mut keys).arg(&mut values).arg(&cap);
        // Safety: arguments match gh_clean_extract; both outputs hold `cap`
        // elements and the kernel writes below `cap` only.
        unsafe { b.launch(grid(buckets, self.sms)) }.map_err(|e| self.err(e))?;
        let meta = self.read_meta()?;
        let (seen, overflow) = (meta[0], meta[2]);
        let lifted = meta[3].min(cap);
        // The census of live keys is exact; those lifted are in no slot now.
        self.live = seen - lifted;
        self.tombstones = 0;
        let raw = if lifted == 0 {
            Default::default()
        } else {
            let (k, v) = (keys.slice(0..lifted as usize), values.slice(0..lifted as usize));
            self.insert_raw(&k, &v, InsertMode::IfAbsent)?
        };
        if raw.failed.is_empty() && overflow == 0 {
            return Ok(());
        }
        // Rare: keys the probe limit turned away (in the buffer), or keys left
        // off their sequence because the buffer was too small (in slots).
        let mut all_keys = vec![K::from_u64(0); lifted as usize];
        let mut all_values = vec![V::from_bits(0); lifted as usize];
        if lifted > 0 {
            self.stream.memcpy_dtoh(&keys.slice(0..lifted as usize), &mut all_keys).map_err(|e| self.err(e))?;
            self.stream.memcpy_dtoh(&values.slice(0..lifted as usize), &mut all_values).map_err(|e| self.err(e))?;
            self.stream.synchronize().map_err(|e| self.err(e))?;
        }
        let failed_keys = raw.failed.iter().map(|&i| all_keys[i]).collect();
        let failed_values = raw.failed.iter().map(|&i| all_values[i]).collect();
        rebuild_with::<K, V, Self>(self, failed_keys, failed_values)
    }
}
