//! The CUDA backend (in progress).

use std::marker::PhantomData;

use super::{Backend, Config, InsertMode, RawInsert};
use crate::core::keys::{Key, Value};
use crate::{Device, Error, Result};

/// Whether CUDA device `ordinal` can be used.
pub fn available(ordinal: usize) -> Result<()> {
    Err(Error::Unavailable { device: Device::Cuda(ordinal).to_string(), reason: "CUDA backend not built yet".into() })
}

/// A table in GPU memory.
pub struct CudaTable<K, V>(PhantomData<(K, V)>);

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Creates a table on device `ordinal`.
    pub fn new(ordinal: usize, _config: Config) -> Result<Self> {
        available(ordinal).map(|_| CudaTable(PhantomData))
    }
}

impl<K: Key, V: Value> Backend<K, V> for CudaTable<K, V> {
    fn device(&self) -> Device { unreachable!() }
    fn slots(&self) -> u64 { unreachable!() }
    fn len(&self) -> u64 { unreachable!() }
    fn used(&self) -> u64 { unreachable!() }
    fn tombstones(&self) -> u64 { unreachable!() }
    fn insert(&mut self, _: &[K], _: &[V], _: InsertMode) -> Result<RawInsert> { unreachable!() }
    fn find(&self, _: &[K], _: &mut [V], _: &mut [bool]) -> Result<u64> { unreachable!() }
    fn contains(&self, _: &[K], _: &mut [bool]) -> Result<u64> { unreachable!() }
    fn erase(&mut self, _: &[K]) -> Result<u64> { unreachable!() }
    fn clear(&mut self) -> Result<()> { unreachable!() }
    fn rehash(&mut self, _: u64) -> Result<()> { unreachable!() }
    fn export(&self) -> Result<(Vec<K>, Vec<V>)> { unreachable!() }
    fn displacement(&self) -> Result<(u64, u64)> { unreachable!() }
}
